#!/usr/bin/env bash
# Proves the published shape of nestjs-redis-lock against NestJS 12 (ESM-only, loaded through
# Node's require(esm)) and ioredis 6, outside jest, from a CommonJS and from an ESM consumer:
#   build -> npm pack -> fresh install of compat/package.json + the tarball in a temp dir
#   -> check.js (CommonJS) -> tsc + esm/dist/check.js (a "type": "module" NestJS 12 app, compat/esm/)
#   -> health-check.js (the health entry on @nestjs/terminus 12)
#   -> install-lines.js (every docs install line, npm install --dry-run beside NestJS 10, 11, 12)
#   -> the README's quick start on the tarball, on NestJS 12, 11 and 10 (tools/check-quickstart.js)
# The temp dir lives outside the repo, so nothing can fall back to the root node_modules (NestJS 11,
# ioredis 5). Env: REDIS_URL (default redis://127.0.0.1:6379), KEEP_COMPAT_DIR=1 keeps the temp dir.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COMPAT="$ROOT/compat"
STEP="setup"
WORK=""

cleanup() {
  local status=$?
  if [[ $status -ne 0 ]]; then
    echo "compat: FAILED during ${STEP} (exit ${status})" >&2
  fi
  if [[ -n "$WORK" && -d "$WORK" ]]; then
    if [[ "${KEEP_COMPAT_DIR:-}" == "1" ]]; then
      echo "compat: kept ${WORK}" >&2
    else
      rm -rf -- "$WORK"
    fi
  fi
  exit "$status"
}
trap cleanup EXIT

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }

# require(esm) is on by default from Node 20.19 / 22.12.
STEP="node version check"
node -e '
  const [major, minor] = process.versions.node.split(".").map(Number);
  const ok = major > 22 || (major === 22 && minor >= 12) || (major === 20 && minor >= 19);
  if (!ok) { console.error(`compat: Node ${process.versions.node} cannot require() ESM (need >= 20.19 or >= 22.12)`); process.exit(1); }
'

WORK="$(mktemp -d "${TMPDIR:-/tmp}/nrl-compat.XXXXXX")"
mkdir -p "$WORK/pack" "$WORK/app"

STEP="build"
t0="$(now)"
(cd "$ROOT" && npm run build --silent)
t_build="$(since "$t0")"

STEP="npm pack"
t0="$(now)"
TARBALL_NAME="$(cd "$ROOT" && npm pack --pack-destination "$WORK/pack" --json --silent |
  node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s)[0].filename));')"
TARBALL="$WORK/pack/$TARBALL_NAME"
[[ -f "$TARBALL" ]] || { echo "compat: npm pack produced no $TARBALL" >&2; exit 1; }
echo "compat: packed $TARBALL_NAME ($(tar -tzf "$TARBALL" | wc -l | tr -d ' ') files)"
t_pack="$(since "$t0")"

STEP="npm install"
t0="$(now)"
cp "$COMPAT/package.json" "$COMPAT/check.js" "$WORK/app/"
(
  cd "$WORK/app"
  npm pkg set "dependencies.nestjs-redis-lock=file:$TARBALL"
  npm install --no-audit --no-fund --loglevel=error
)
t_install="$(since "$t0")"

STEP="check.js"
t0="$(now)"
# `timeout`: the check must exit by itself; a leaked socket or timer shows up as a failure here.
(cd "$WORK/app" && timeout 90 node check.js) | tee "$WORK/check.log"
t_check="$(since "$t0")"

# The ESM app sits inside the install, so its imports resolve from the same node_modules; its own
# package.json only says "type": "module". tsc checks it, and the packed declarations it imports,
# under module/moduleResolution nodenext, as an ESM user's build would. ioredis 6.1's declarations
# import `redis-errors` without shipping its types: under `strict` without `skipLibCheck`, a user
# needs `@types/redis-errors`, as this app does (package.json).
STEP="esm tsc"
t0="$(now)"
mkdir -p "$WORK/app/esm"
cp -R "$COMPAT/esm/package.json" "$COMPAT/esm/tsconfig.json" "$COMPAT/esm/src" "$WORK/app/esm/"
(cd "$WORK/app/esm" && ../node_modules/.bin/tsc -p tsconfig.json)
t_esm_tsc="$(since "$t0")"

STEP="esm check"
t0="$(now)"
(cd "$WORK/app/esm" && timeout 90 node dist/check.js) | tee "$WORK/esm-check.log"
t_esm_check="$(since "$t0")"

# The health entry on NestJS 12 with @nestjs/terminus 12 (check.js above needs terminus absent).
STEP="health on terminus 12"
t0="$(now)"
cp "$COMPAT/health-check.js" "$WORK/app/"
(cd "$WORK/app" && npm install --no-audit --no-fund --loglevel=error @nestjs/terminus@12 &&
  timeout 90 node health-check.js) | tee "$WORK/health.log"
t_health="$(since "$t0")"

# Every npm install line of README.md and docs/ resolves beside each NestJS major it is for
# (npm install --dry-run against the registry, nothing installed): compat/install-lines.js.
STEP="install lines"
t0="$(now)"
(cd "$ROOT" && node compat/install-lines.js "$TARBALL") | tee "$WORK/install-lines.log"
t_install_lines="$(since "$t0")"

# The README's quick start, extracted from the README and run on the same tarball in empty
# folders, on each NestJS major the README claims (tools/check-quickstart.js).
STEP="quick start"
t0="$(now)"
(cd "$ROOT" && node tools/check-quickstart.js "$TARBALL") | tee "$WORK/quickstart.log"
t_quickstart="$(since "$t0")"

STEP="summary"
echo "compat: timings: build ${t_build}, pack ${t_pack}, install ${t_install}, check ${t_check}," \
  "esm tsc ${t_esm_tsc}, esm check ${t_esm_check}, health ${t_health}," \
  "install lines ${t_install_lines}, quick start ${t_quickstart}"
grep -E '^compat: NestJS .* passed, .* failed$' "$WORK/check.log" | tail -n 1
grep -E '^compat esm: NestJS .* passed, .* failed$' "$WORK/esm-check.log" | tail -n 1
grep -E '^compat health: .* passed, .* failed$' "$WORK/health.log" | tail -n 1
grep -E '^install-lines: .* passed, .* failed$' "$WORK/install-lines.log" | tail -n 1
grep -E '^quickstart: Nest .*: ok' "$WORK/quickstart.log" | tail -n 1
