#!/usr/bin/env bash
# `npm run chaos -- --minutes N` and `npm run soak -- --minutes M`: builds when sources changed, starts the servers,
# migrates the database of fault runs (EVENTMESH_POSTGRES_DATABASE, default eventmesh_faults), and runs the entry.
# Both run instance processes and chaos kills and restarts the shared servers: run them under the shared lock,
# e.g. `flock /tmp/eventmesh-tests.lock npm run chaos -- --minutes 1`.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
entry=$1; shift
case $entry in chaos|soak) ;; *) echo "usage: scripts/faults.sh chaos|soak [--minutes N] ..." >&2; exit 64 ;; esac
export EVENTMESH_POSTGRES_DATABASE=${EVENTMESH_POSTGRES_DATABASE:-eventmesh_faults}
bash scripts/prepare.sh
# The fault harness lives under test/faults (compiled through scripts/chaos.ts and scripts/soak.ts); rebuild when
# it changed since the last build, which scripts/prepare.sh does not look at.
if [[ -n $(find test/faults test/support -newer dist/.build-stamp -type f -print -quit) ]]; then
  echo "[faults] building (test/faults changed)"
  npm run --silent build
  touch dist/.build-stamp
fi
bash scripts/infra.sh start all >/dev/null
npm run --silent migrate
exec node "dist/scripts/$entry.js" "$@"
