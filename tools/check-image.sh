#!/usr/bin/env bash
# The image's steps without Docker (Docker cannot run in CI): what the Dockerfile's two stages do,
# through the same sample-app/image/steps.sh, in a temporary folder outside the repository:
#   build stage    steps.sh build: build + pack the library, compile the app against the package
#   runtime stage  steps.sh install: production dependencies only, from the tarball
# then checks no dev toolchain came along, starts `node dist/main.js` (the image's CMD) against a
# redis-server of its own, waits for `node healthcheck.js` (the image's HEALTHCHECK) to pass,
# places an order, and stops the app with SIGTERM within the compose stop_grace_period.
# Env: KEEP_IMAGE_DIR=1 keeps the folder.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/nrl-image.XXXXXX")"
APP="$WORK/app"
app_pid=""
redis_pidfile="$WORK/redis.pid"
STEP="setup"

cleanup() {
  local status=$?
  [[ $status -ne 0 ]] && echo "image: FAILED during ${STEP} (exit ${status})" >&2
  if [[ -n "$app_pid" ]] && kill -0 "$app_pid" 2>/dev/null; then
    kill -KILL "$app_pid" 2>/dev/null || true
  fi
  # Only the redis-server this script started, by its pid.
  [[ -s "$redis_pidfile" ]] && kill "$(cat "$redis_pidfile")" 2>/dev/null || true
  if [[ $status -ne 0 && -f "$WORK/app.log" ]]; then tail -n 40 "$WORK/app.log" >&2; fi
  if [[ "${KEEP_IMAGE_DIR:-}" == "1" ]]; then echo "image: kept $WORK" >&2; else rm -rf -- "$WORK"; fi
  exit "$status"
}
trap cleanup EXIT

free_port() {
  node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

STEP="build stage (steps.sh build)"
t0=$SECONDS
(cd "$ROOT" && sh sample-app/image/steps.sh build "$APP")

STEP="runtime stage (steps.sh install)"
(cd "$APP" && NODE_ENV=production sh steps.sh install)
for dev in typescript jest ts-jest eslint @nestjs/testing; do
  if [[ -e "$APP/node_modules/$dev" ]]; then
    echo "image: the runtime stage installed a dev dependency: $dev" >&2
    exit 1
  fi
done
echo "image: built in $((SECONDS - t0))s; $(ls "$APP/node_modules" | wc -l | tr -d ' ') top-level packages, no dev toolchain"

STEP="redis-server"
redis_port="$(free_port)"
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
  --daemonize yes --pidfile "$redis_pidfile" --logfile "$WORK/redis.log"

STEP="start the app (CMD node dist/main.js)"
port="$(free_port)"
(
  cd "$APP"
  exec env NODE_ENV=production PORT="$port" REDIS_URL="redis://127.0.0.1:$redis_port" \
    SEED_VOUCHERS=flash-sale:10 node dist/main.js
) >"$WORK/app.log" 2>&1 &
app_pid=$!

STEP="HEALTHCHECK (node healthcheck.js)"
healthy=""
for _ in $(seq 1 120); do
  if (cd "$APP" && PORT="$port" node healthcheck.js); then healthy=1 && break; fi
  kill -0 "$app_pid" 2>/dev/null || { echo "image: the app exited before it was healthy" >&2; exit 1; }
  sleep 0.5
done
[[ -n "$healthy" ]] || { echo "image: /health not 200 within 60 s" >&2; exit 1; }
echo "image: healthy (GET /health 200)"

STEP="an order"
order="$(curl --silent --show-error --fail-with-body --max-time 10 -X POST \
  "http://127.0.0.1:$port/vouchers/flash-sale/orders" -H 'content-type: application/json' \
  -d '{"userId":"image-check"}')"
grep -q '"voucherId":"flash-sale"' <<<"$order" || { echo "image: order answered $order" >&2; exit 1; }
echo "image: order placed"

STEP="SIGTERM"
# docker-compose.yml's stop_grace_period: the app must be gone before it (else SIGKILL).
grace="$(node -e 'const y=require("yaml");const c=y.parse(require("fs").readFileSync(process.argv[1],"utf8"),{merge:true});console.log(parseInt(c.services["shop-1"].stop_grace_period))' "$ROOT/docker-compose.yml")"
kill -TERM "$app_pid"
t0=$SECONDS
for _ in $(seq 1 $((grace * 10))); do
  kill -0 "$app_pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$app_pid" 2>/dev/null; then
  echo "image: the app did not exit within stop_grace_period (${grace}s) of SIGTERM" >&2
  exit 1
fi
app_pid=""
echo "image: stopped on SIGTERM in $((SECONDS - t0))s (stop_grace_period ${grace}s)"
echo "image: passed"
