#!/usr/bin/env bash
# Installs npm dependencies when they are missing or older than the lock file, and builds when any source is
# newer than the last build (TypeScript to dist/, and the Temporal workflow bundle).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  echo "[prepare] installing npm dependencies (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error
fi
stamp=dist/.build-stamp
if [[ ! -f $stamp ]] || [[ -n $(find apps libs workflows activities scripts bench packages/*/src packages/*/package.json package.json tsconfig*.json -newer "$stamp" -type f -print -quit) ]]; then
  echo "[prepare] building"
  npm run --silent build
  touch "$stamp"
fi
