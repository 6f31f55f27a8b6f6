#!/usr/bin/env bash
# `npm test`: the whole suite, the way CI runs it. Installs npm dependencies and builds when needed (the build
# bundles the workflows: a forbidden import fails there), then runs two lanes side by side, each against its own
# real Postgres, Kafka and Temporal (scripts/infra.sh provisions and starts what is missing):
#
#   servers lane: the integration and end-to-end tiers, serially, against the servers `npm start` uses (the test
#                 database and Temporal namespace of their own);
#   checks lane:  type-check, lint and the compose check, the unit tier (no servers), then the fault tier,
#                 serially, against a second set of servers in .data/lanes/faults (ports: Postgres +1, Kafka +100,
#                 Temporal +100), started while the unit tier runs and stopped at the end. The fault tier kills
#                 and restarts servers, so it never shares them with another tier.
#
# Each lane prints with its name in front. At the end: per tier the spec files, cases and seconds, the totals, the
# case names in .data/test-report/cases.txt, and the time of each lane and of the whole run.
# Extra arguments run one jest, serially, against the servers `npm start` uses, with those arguments (for example
# `npm test -- --selectProjects integration --testPathPattern ingress`).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
started=$SECONDS

bash scripts/prepare.sh
export EVENTMESH_POSTGRES_DATABASE=${EVENTMESH_TEST_POSTGRES_DATABASE:-eventmesh_test}

if (($#)); then
  bash scripts/infra.sh start all
  npx jest --runInBand --ci "$@"
  exit
fi

reports=$ROOT/.data/test-report
rm -rf "$reports"
mkdir -p "$reports"

# The fault lane's servers: the main settings' ports moved by a fixed offset, state under .data/lanes/faults.
pg_port=${EVENTMESH_POSTGRES_PORT:-5432}
kafka=${EVENTMESH_KAFKA_BROKERS:-127.0.0.1:9092}; kafka=${kafka%%,*}
temporal=${EVENTMESH_TEMPORAL_ADDRESS:-127.0.0.1:7233}
fault_env=(
  EVENTMESH_INFRA_DATA_DIR="$ROOT/.data/lanes/faults"
  EVENTMESH_POSTGRES_PORT=$((pg_port + 1))
  EVENTMESH_KAFKA_BROKERS="${kafka%:*}:$((${kafka##*:} + 100))"
  EVENTMESH_TEMPORAL_ADDRESS="${temporal%:*}:$((${temporal##*:} + 100))"
  EVENTMESH_TEMPORAL_UI_URL="http://${temporal%:*}:$((${temporal##*:} + 1100))"
)

# step NAME CMD...: runs CMD, says how long it took, and records a failure without ending the lane.
step() {
  local name=$1 t0=$SECONDS; shift
  if "$@"; then echo "[test] $name: ok in $((SECONDS - t0))s"
  else echo "[test] $name: FAILED (exit $?) after $((SECONDS - t0))s"; echo "$name" >>"$reports/failed-steps"; fi
}

servers_lane() {
  step "servers (main)" bash scripts/infra.sh start all
  step "integration and e2e tiers" npx jest --runInBand --ci --selectProjects integration e2e --json --outputFile="$reports/integration-e2e.json"
}

checks_lane() {
  local servers_log=$reports/fault-servers.log
  env "${fault_env[@]}" bash scripts/infra.sh start all >"$servers_log" 2>&1 &
  local servers=$!
  step "type-check" npm run --silent typecheck
  step "lint" npm run --silent lint
  step "compose file" npm run --silent docker:check
  step "unit tier" npx jest --runInBand --ci --selectProjects unit --json --outputFile="$reports/unit.json"
  if wait "$servers"; then echo "[test] fault lane servers: ready ($(grep -c 'ready at\|already running' "$servers_log") of 3)"
  else echo "[test] fault lane servers: FAILED to start:"; cat "$servers_log"; echo "fault lane servers" >>"$reports/failed-steps"; return 0; fi
  step "fault tier" env "${fault_env[@]}" npx jest --runInBand --ci --selectProjects faults --json --outputFile="$reports/faults.json"
  env "${fault_env[@]}" bash scripts/infra.sh stop all >>"$servers_log" 2>&1 || true
}

# lane NAME FUNCTION: the lane's output, each line with the lane's name in front; its time at the end.
lane() {
  local name=$1 t0=$SECONDS
  "$2" 2>&1 | sed -u "s/^/[$name] /"
  echo "[$name] lane done in $((SECONDS - t0))s"
}

lane servers servers_lane &
servers_pid=$!
lane checks checks_lane &
checks_pid=$!
wait "$servers_pid" "$checks_pid"

status=0
if [[ -f $reports/failed-steps ]]; then
  status=1
  echo "[test] failed steps: $(paste -sd, "$reports/failed-steps")"
fi
node dist/scripts/test-report.js "$reports" "$reports/unit.json" "$reports/integration-e2e.json" "$reports/faults.json" || status=1
echo "[test] done in $((SECONDS - started))s"
exit $status
