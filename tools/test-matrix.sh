#!/usr/bin/env bash
# Version matrix: runs a subset of the e2e suites against each server version the library claims
# beside the system Redis 7.0 (which `npm test` covers): Redis 6.2.16, 7.4.1 and 8.0.6, Valkey 8.0.1
# and 9.1.2.
# For each version it starts that `redis-server` on a free port as the shared Redis (REDIS_URL) and
# points the harness at the same binary (REDIS_SERVER_BIN), so every server a test starts — faults,
# Cluster — is that version too. Prints a line per version and a final table; exits non-zero if
# any version fails.
#
# Env:
#   REDIS_VERSIONS_DIR  folder of <version>/redis-server binaries (default ../shared/redis-versions
#                       beside the repo, where CI puts them; a user's clone usually has none)
#   MATRIX_VERSIONS     space-separated subset of the versions below (default: all)
#   REQUIRE_MATRIX      1: a missing binary fails the run; 0: it is SKIPPED with a banner and exit 0.
#                       Default 1 when CI=true (a CI run that quietly proves nothing must not pass),
#                       else 0.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VERSIONS_DIR="${REDIS_VERSIONS_DIR:-$ROOT/../shared/redis-versions}"
ALL_VERSIONS=(redis-6.2.16 redis-7.4.1 redis-8.0.6 valkey-8.0.1 valkey-9.1.2)
read -r -a VERSIONS <<<"${MATRIX_VERSIONS:-${ALL_VERSIONS[*]}}"
if [[ -z "${REQUIRE_MATRIX:-}" ]]; then
  if [[ "${CI:-}" == "true" ]]; then REQUIRE_MATRIX=1; else REQUIRE_MATRIX=0; fi
fi

# What each version runs, the parts whose Lua scripts, pub/sub and server restarts could differ
# between versions: the engine (waiting, leases, watchdog, fair mode, reentrancy, the engine
# contract, the Redis replies the in-memory backend must match), @Locked over HTTP, RPC and
# WebSocket, fault scenarios 1–6, the other kinds (read-write, semaphores, multi-key, inspection of
# each), an iovalkey and a node-redis client (the engine contract runs on node-redis too), and a
# Cluster. The rest (Sentinel, Redlock, fuzzers, scale and load faults,
# the other decorator files) runs on 7.0 only, in `npm test` (the whole suite: 4–5 min a version).
SUBSET=(
  test/waiting.e2e-spec.ts
  test/lease-lifecycle.e2e-spec.ts
  test/watchdog.e2e-spec.ts
  test/fair.e2e-spec.ts
  test/fair-adopt.e2e-spec.ts
  test/reentrancy.e2e-spec.ts
  test/contract/engine-contract.e2e-spec.ts
  test/memory-backend-contract.e2e-spec.ts
  test/decorator/http-routes.e2e-spec.ts
  test/decorator/key-sources.e2e-spec.ts
  test/decorator/rpc-transport.e2e-spec.ts
  test/decorator/ws-gateway.e2e-spec.ts
  test/fault/01-client-pause.e2e-spec.ts
  test/fault/02-partition.e2e-spec.ts
  test/fault/03-ambiguous-replies.e2e-spec.ts
  test/fault/04-redis-restart.e2e-spec.ts
  test/fault/05-lost-notification.e2e-spec.ts
  test/fault/06-cancellation.e2e-spec.ts
  test/read-write/read-write.e2e-spec.ts
  test/semaphore/semaphore.e2e-spec.ts
  test/semaphore/semaphore-fair.e2e-spec.ts
  test/multi-key/multi-key.e2e-spec.ts
  test/inspect-kinds.e2e-spec.ts
  test/iovalkey-client.e2e-spec.ts
  test/node-redis-client.e2e-spec.ts
)
# A Cluster on every version: classic pub/sub on 6.2, sharded from 7.0 on.
CLUSTER=(test/topology/cluster.e2e-spec.ts)
# Run once, on the shared Redis (REDIS_URL), with the 6.2 binary for the servers they start.
MATRIX_ONLY=(test/topology/redis62.e2e-spec.ts)

banner() {
  local line="=================================================================================="
  printf '\n%s\n' "$line"
  while [[ $# -gt 0 ]]; do
    printf '  %s\n' "$1"
    shift
  done
  printf '%s\n\n' "$line"
}

missing=()
for version in "${VERSIONS[@]}"; do
  [[ -x "$VERSIONS_DIR/$version/redis-server" ]] || missing+=("$version")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  verdict=SKIPPED
  [[ "$REQUIRE_MATRIX" == "1" ]] && verdict=FAILED
  banner "$verdict: version matrix — server binaries not found" \
    "missing: ${missing[*]}" \
    "looked for <version>/redis-server at: $VERSIONS_DIR" \
    "set REDIS_VERSIONS_DIR to the folder that holds them (see CONTRIBUTING.md)." \
    "Only Redis 7.0 (npm test) was tested here; not run: ${MATRIX_ONLY[*]}."
  if [[ "$REQUIRE_MATRIX" == "1" ]]; then
    echo "test:matrix: FAILED — REQUIRE_MATRIX=1 (the default when CI=true) and binaries are missing" >&2
    exit 1
  fi
  exit 0
fi

WORK="$(mktemp -d /tmp/test-matrix-XXXXXX)"
pidfile=""

stop_server() {
  # Only the redis-server this script started, by its pid.
  if [[ -n "$pidfile" && -s "$pidfile" ]]; then
    local pid
    pid="$(cat "$pidfile")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  pidfile=""
}
cleanup() {
  local status=$?
  stop_server
  rm -rf -- "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# Counts from jest's --json report: "passed failed total".
counts() {
  node -e '
    try {
      const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
      console.log(r.numPassedTests, r.numFailedTests + r.numRuntimeErrorTestSuites, r.numTotalTests);
    } catch { console.log("0 ? 0"); }' "$1"
}

rows=()
failed=0
started=$SECONDS
for version in "${VERSIONS[@]}"; do
  bin="$VERSIONS_DIR/$version/redis-server"
  port="$(free_port)"
  pidfile="$WORK/$version.pid"
  echo "--- test:matrix: $version ($("$bin" --version | grep -o 'v=[^ ]*')) on 127.0.0.1:$port"
  "$bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
    --daemonize yes --pidfile "$pidfile" --logfile "$WORK/$version.log"
  for _ in $(seq 1 100); do
    redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break
    sleep 0.1
  done
  if ! redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
    echo "test:matrix: $version did not answer on port $port" >&2
    cat "$WORK/$version.log" >&2 || true
    rows+=("$(printf '%-14s %-6s did not start' "$version" FAILED)")
    failed=1
    stop_server
    continue
  fi
  files=("${SUBSET[@]}" "${CLUSTER[@]}")

  t0=$SECONDS
  status=0
  # --forceExit: a suite that leaves a handle open must not hang the whole matrix (the result
  # stands either way; `npm test` runs them in workers that are ended for it).
  REDIS_URL="redis://127.0.0.1:$port" REDIS_SERVER_BIN="$bin" \
    npx jest --runInBand --forceExit --selectProjects e2e --json --outputFile "$WORK/$version.json" \
    --runTestsByPath "${files[@]}" || status=$?
  secs=$((SECONDS - t0))
  stop_server

  read -r passed failures total <<<"$(counts "$WORK/$version.json")"
  if [[ $status -eq 0 ]]; then result=ok; else result=FAILED; failed=1; fi
  line="$(printf '%-14s %-6s %4s passed %4s failed %4s total %4ss  (%d files)' \
    "$version" "$result" "$passed" "$failures" "$total" "$secs" "${#files[@]}")"
  echo "test:matrix: $line"
  rows+=("$line")
done

if [[ " ${VERSIONS[*]} " == *" redis-6.2.16 "* ]]; then
  echo "--- test:matrix: ${MATRIX_ONLY[*]} (Redis 6.2.16 on every topology, shared Redis at ${REDIS_URL:-redis://127.0.0.1:6379})"
  t0=$SECONDS
  status=0
  TEST_MATRIX=1 REDIS_62_SERVER_BIN="$VERSIONS_DIR/redis-6.2.16/redis-server" \
    npx jest --runInBand --selectProjects e2e --json --outputFile "$WORK/matrix-only.json" \
    --runTestsByPath "${MATRIX_ONLY[@]}" || status=$?
  secs=$((SECONDS - t0))
  read -r passed failures total <<<"$(counts "$WORK/matrix-only.json")"
  if [[ $status -eq 0 ]]; then result=ok; else result=FAILED; failed=1; fi
  line="$(printf '%-14s %-6s %4s passed %4s failed %4s total %4ss  (%s)' \
    "6.2 topology" "$result" "$passed" "$failures" "$total" "$secs" "${MATRIX_ONLY[*]}")"
  echo "test:matrix: $line"
  rows+=("$line")
fi

banner "Version matrix (Redis 7.0 runs in npm test)" "${rows[@]}" \
  "total $((SECONDS - started))s"
exit "$failed"
