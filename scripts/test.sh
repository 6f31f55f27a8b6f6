#!/usr/bin/env bash
# `npm test`: the whole suite, the way CI runs it. Installs npm dependencies and provisions and starts the local
# servers when they are missing, builds (which bundles the workflows: a forbidden import fails here), type-checks,
# lints, then runs unit, integration and end-to-end tests serially against the real Postgres, Kafka and Temporal.
# Extra arguments go to jest (for example `npm test -- --selectProjects unit`).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
started=$SECONDS

bash scripts/prepare.sh
EVENTMESH_POSTGRES_DATABASE=${EVENTMESH_TEST_POSTGRES_DATABASE:-eventmesh_test} bash scripts/infra.sh start all
echo "[test] type-check and lint"
npm run --silent typecheck
npm run --silent lint
echo "[test] compose file"
npm run --silent docker:check

report=$(mktemp)
trap 'rm -f "$report"' EXIT
status=0
npx jest --runInBand --ci --json --outputFile="$report" "$@" || status=$?
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const failed = r.numFailedTests + r.numRuntimeErrorTestSuites;
  console.log(`\njest: ${r.numPassedTests} passed, ${failed} failed, ${r.numPendingTests} skipped`);
' "$report" || true
echo "[test] done in $((SECONDS - started))s"
exit $status
