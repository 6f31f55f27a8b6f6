#!/usr/bin/env bash
# `npm test`: the whole suite, the way CI runs it. Installs npm dependencies and builds when needed (the build
# bundles the workflows: a forbidden import fails there), provisions the servers' tools, then runs type-check,
# lint, the compose file and every tier serially against the real Postgres, Kafka and Temporal `npm start` uses.
# With EVENTMESH_TEST_LANES=2 it runs two lanes side by side instead, each serially against servers of its own:
#
#   lane 0: the integration tier, then the end-to-end tier, on the servers `npm start` uses (a test database and
#           Temporal namespace of their own);
#   lane 1: type-check, lint, the compose file and the unit tier (no servers) while its servers start, then the
#           fault tier.
#
# Lane 1 runs on a second set of servers, under .data/lanes/1, on the main settings' ports moved by 1 (Postgres) or
# 100 (Kafka, Temporal), stopped when the lane ends: the fault tier kills and restarts servers, so it has a set to
# itself. (A third lane, e2e and half the fault tier on a third set, was tried: 575 s, but under its load the
# integration tier's waits failed in 2 of 4 clean clones.) Each lane prints with its number in front. At the end:
# per tier the spec files, cases and seconds, the totals, every case's name in .data/test-report/cases.txt, and the
# time of each lane and the run.
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

# What the servers run from (.tools: the Temporal CLI, the Kafka jars; the Postgres package), once, before the
# lanes: two lanes provisioning at once would build and fetch into the same folders together.
bash scripts/infra.sh provision all

reports=$ROOT/.data/test-report
rm -rf "$reports"
mkdir -p "$reports"

# lane_env N: the settings of the Nth second set of servers: the main settings' ports moved (Postgres +N, Kafka and
# Temporal +100N, the Temporal UI with them), state under .data/lanes/N.
lane_env() {
  local n=$1 pg_port=${EVENTMESH_POSTGRES_PORT:-5432} kafka=${EVENTMESH_KAFKA_BROKERS:-127.0.0.1:9092}
  local temporal=${EVENTMESH_TEMPORAL_ADDRESS:-127.0.0.1:7233}
  kafka=${kafka%%,*}
  printf '%s\n' EVENTMESH_INFRA_DATA_DIR="$ROOT/.data/lanes/$n" EVENTMESH_POSTGRES_PORT=$((pg_port + n)) \
    EVENTMESH_KAFKA_BROKERS="${kafka%:*}:$((${kafka##*:} + 100 * n))" \
    EVENTMESH_TEMPORAL_ADDRESS="${temporal%:*}:$((${temporal##*:} + 100 * n))" \
    EVENTMESH_TEMPORAL_UI_URL="http://${temporal%:*}:$((${temporal##*:} + 100 * n + 1000))"
}
mapfile -t lane1_env < <(lane_env 1)

# step NAME CMD...: runs CMD, says how long it took, and records a failure without ending the lane.
step() {
  local name=$1 t0=$SECONDS; shift
  if "$@"; then echo "[test] $name: ok in $((SECONDS - t0))s"
  else echo "[test] $name: FAILED (exit $?) after $((SECONDS - t0))s"; echo "$name" >>"$reports/failed-steps"; fi
}

# own_servers N: starts lane N's servers in the background; `servers_ready N` waits for them.
own_servers() { env "${@:2}" bash scripts/infra.sh start all >"$reports/lane-$1-servers.log" 2>&1 & echo $! >"$reports/lane-$1-servers.pid"; }
servers_ready() {
  if wait "$(cat "$reports/lane-$1-servers.pid")"; then echo "[test] lane $1 servers: ready"; return 0; fi
  echo "[test] lane $1 servers: FAILED to start:"; cat "$reports/lane-$1-servers.log"; echo "lane $1 servers" >>"$reports/failed-steps"; return 1
}
stop_servers() { env "${@:2}" bash scripts/infra.sh stop all >>"$reports/lane-$1-servers.log" 2>&1 || true; }

jest_lane() { local out=$1; shift; npx jest --runInBand --ci --json --outputFile="$reports/$out.json" "$@"; }
# with_env ARRAY CMD...: CMD (a function too) with the settings ARRAY names exported.
with_env() { local -n settings=$1; shift; ( export "${settings[@]}"; "$@" ); }

# Lane 0, the servers `npm start` uses: the integration tier, then the end-to-end tier.
lane0() {
  step "servers" bash scripts/infra.sh start all
  step "integration tier" jest_lane integration --selectProjects integration
  step "e2e tier" jest_lane e2e --selectProjects e2e
}

# Lane 1: type-check, lint, the compose file and the unit tier (no servers) while its servers start; then the fault
# tier.
lane1() {
  own_servers 1 "${lane1_env[@]}"
  step "type-check" npm run --silent typecheck
  step "lint" npm run --silent lint
  step "compose file" npm run --silent docker:check
  step "unit tier" jest_lane unit --selectProjects unit
  servers_ready 1 || return 0
  step "fault tier" with_env lane1_env jest_lane faults --selectProjects faults
  stop_servers 1 "${lane1_env[@]}"
}

# lane N: the lane's output, each line with its number in front; its time at the end.
lane() {
  local t0=$SECONDS
  "lane$1" 2>&1 | sed -u "s/^/[lane $1] /"
  echo "[lane $1] done in $((SECONDS - t0))s"
}

# One lane, serially, unless EVENTMESH_TEST_LANES=2: under the second lane's load, cases of the integration tier
# still fail that pass serially (docs/operations.md#the-test-suite), so the lanes are not the default yet.
serial() {
  step "servers" bash scripts/infra.sh start all
  step "type-check" npm run --silent typecheck
  step "lint" npm run --silent lint
  step "compose file" npm run --silent docker:check
  step "all tiers" jest_lane all
}

if [[ ${EVENTMESH_TEST_LANES:-1} == 2 ]]; then
  pids=()
  for n in 0 1; do lane "$n" & pids+=($!); done
  wait "${pids[@]}"
else
  serial
fi

status=0
if [[ -f $reports/failed-steps ]]; then
  status=1
  echo "[test] failed steps: $(paste -sd, "$reports/failed-steps")"
fi
if [[ ${EVENTMESH_TEST_LANES:-1} == 2 ]]; then lane_reports=("$reports"/{unit,integration,e2e,faults}.json); else lane_reports=("$reports/all.json"); fi
node dist/scripts/test-report.js "$reports" "${lane_reports[@]}" || status=1
echo "[test] done in $((SECONDS - started))s"
exit $status
