#!/usr/bin/env bash
# Pins the Nest internals lib/nest-internals.ts names (metadata keys, parameter numbers, injector
# records, the factory patch) on NestJS 10 and 12, as lib/nest-internals.spec.ts does on 11 in
# the unit suite: for each major, a fresh install of that major's packages in a temp dir outside
# the repo (so nothing falls back to the root node_modules), the built dist/nest-internals.js and
# compat/nest-internals-checks.js copied beside it, and the checks run there.
# Env: KEEP_COMPAT_DIR=1 keeps the temp dirs; NEST_MAJORS="10 12" (default) picks the majors.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIRS=()
cleanup() {
  if [[ "${KEEP_COMPAT_DIR:-}" == "1" ]]; then
    ((${#DIRS[@]})) && echo "nest-internals: kept ${DIRS[*]}" >&2
  else
    for dir in "${DIRS[@]}"; do rm -rf -- "$dir"; done
  fi
}
trap cleanup EXIT

# The packages whose decorators write what we read, per Nest major (@nestjs/graphql and
# @nestjs/schedule version apart from Nest's own).
packages_for() {
  case "$1" in
    10) echo "@nestjs/common@^10 @nestjs/core@^10 @nestjs/platform-express@^10 @nestjs/microservices@^10 @nestjs/websockets@^10 @nestjs/graphql@^12 @nestjs/schedule@^4" ;;
    11) echo "@nestjs/common@^11 @nestjs/core@^11 @nestjs/platform-express@^11 @nestjs/microservices@^11 @nestjs/websockets@^11 @nestjs/graphql@^13 @nestjs/schedule@^6" ;;
    12) echo "@nestjs/common@^12 @nestjs/core@^12 @nestjs/platform-express@^12 @nestjs/microservices@^12 @nestjs/websockets@^12 @nestjs/graphql@^14 @nestjs/schedule@^12" ;;
    *) echo "nest-internals: no package list for Nest $1" >&2; return 1 ;;
  esac
}

(cd "$ROOT" && npm run build --silent)
failed=0
for major in ${NEST_MAJORS:-10 12}; do
  work="$(mktemp -d "${TMPDIR:-/tmp}/nrl-nest-internals-$major.XXXXXX")"
  DIRS+=("$work")
  cp "$ROOT/dist/nest-internals.js" "$ROOT/compat/nest-internals-checks.js" "$work/"
  echo '{ "private": true, "name": "nest-internals-check" }' >"$work/package.json"
  # shellcheck disable=SC2046 # one word per package
  (cd "$work" && npm install --silent --no-audit --no-fund --legacy-peer-deps \
    $(packages_for "$major") graphql@^16 reflect-metadata@^0.2 rxjs@^7)
  echo "nest-internals: Nest $(cd "$work" && node -p 'require("@nestjs/core/package.json").version')"
  if ! (cd "$work" && node -e '
    const { checkNestInternals } = require("./nest-internals-checks.js");
    checkNestInternals(require("./nest-internals.js"), require).then((results) => {
      for (const r of results) console.log(`  ${r.ok ? "ok  " : "FAIL"} ${r.name}${r.ok ? "" : `\n       ${r.detail}`}`);
      const failures = results.filter((r) => !r.ok).length;
      console.log(`${results.length - failures} passed, ${failures} failed`);
      process.exit(failures === 0 && results.length > 0 ? 0 : 1);
    }, (error) => { console.error(error); process.exit(1); });
  '); then
    failed=1
  fi
done
exit "$failed"
