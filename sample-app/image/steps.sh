#!/bin/sh
# The steps of the sample app's image, in one place: the Dockerfile runs them, and CI runs the
# same ones without Docker (tools/check-image.sh).
#   sh sample-app/image/steps.sh build <out>   in the repository, dev dependencies installed:
#       builds and packs the library, compiles the app against the package's declarations, and
#       writes the app folder: dist/ (the app), package.json, nestjs-redis-lock.tgz, healthcheck.js
#   sh steps.sh install                         in that folder: production dependencies only
set -eu

case "${1:-}" in
  build)
    out="${2:?usage: steps.sh build <out>}"
    npm run build --silent
    mkdir -p "$out"
    tarball="$(npm pack --pack-destination "$out" --silent)"
    mv "$out/$tarball" "$out/nestjs-redis-lock.tgz"
    npx tsc -p sample-app/image/tsconfig.json --outDir "$out/dist"
    cp sample-app/image/package.json sample-app/image/healthcheck.js sample-app/image/steps.sh "$out/"
    ;;
  install)
    npm install --omit=dev --no-audit --no-fund --loglevel=error
    ;;
  *)
    echo "usage: steps.sh build <out> | steps.sh install" >&2
    exit 2
    ;;
esac
