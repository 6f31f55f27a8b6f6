#!/usr/bin/env bash
# Local infrastructure for development and tests: Postgres, a single-node KRaft Kafka broker, and the Temporal
# dev server with its Web UI. Provisions what is missing (binaries and jars under .tools/, state and logs under
# .data/), starts each server idempotently and waits for readiness with a deadline.
#
#   scripts/infra.sh start|stop|status|logs [postgres|kafka|temporal|all]
#   scripts/infra.sh provision [postgres|kafka|temporal|all]
#   scripts/infra.sh reset temporal   (stops the dev server, deletes its database: every workflow's history, then
#                                      starts it afresh; its SQLite file grows with every run and slows the server)
#
# Addresses come from the same environment variables the runtime reads (see docs/configuration.md):
#   EVENTMESH_POSTGRES_HOST/PORT/USER/PASSWORD/DATABASE, EVENTMESH_KAFKA_BROKERS (first entry),
#   EVENTMESH_TEMPORAL_ADDRESS, EVENTMESH_TEMPORAL_UI_URL.
# A server that already answers at its configured address is used as it is and not started, unless another
# checkout of this project started it: then `start` stops with a message naming that checkout.
# EVENTMESH_KAFKA_JAVA_OPTS: extra JVM options for the broker and its storage tool (npm test gives its second and
# third sets of servers `-XX:TieredStopAtLevel=1`: about half the CPU of a broker's start, measured 3.1 against
# 6.1 s, for brokers that live minutes under a light load).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=${EVENTMESH_INFRA_TOOLS_DIR:-$ROOT/.tools}
DATA=${EVENTMESH_INFRA_DATA_DIR:-$ROOT/.data}
LOGS=$DATA/logs
READY_TIMEOUT=${EVENTMESH_INFRA_READY_TIMEOUT_SECONDS:-180}

PG_HOST=${EVENTMESH_POSTGRES_HOST:-127.0.0.1}
PG_PORT=${EVENTMESH_POSTGRES_PORT:-5432}
PG_USER=${EVENTMESH_POSTGRES_USER:-eventmesh}
PG_PASSWORD=${EVENTMESH_POSTGRES_PASSWORD:-eventmesh}
PG_DATABASE=${EVENTMESH_POSTGRES_DATABASE:-eventmesh}

KAFKA_BOOTSTRAP=${EVENTMESH_KAFKA_BROKERS:-127.0.0.1:9092}
KAFKA_BOOTSTRAP=${KAFKA_BOOTSTRAP%%,*}
KAFKA_HOST=${KAFKA_BOOTSTRAP%:*}
KAFKA_PORT=${KAFKA_BOOTSTRAP##*:}
KAFKA_CONTROLLER_PORT=${EVENTMESH_INFRA_KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}
# A second listener for fault tests (test/faults): the broker listens on KAFKA_FAULTS_PORT and tells clients to
# connect to KAFKA_FAULTS_ADVERTISED_PORT, where a test's fault proxy listens and forwards to it. A client that
# bootstraps through the proxy then sends every request through it, so a test can delay, cut or reset the link
# between one instance and the broker. Nothing listens on the advertised port unless a fault test runs.
KAFKA_FAULTS_PORT=${EVENTMESH_INFRA_KAFKA_FAULTS_PORT:-$((KAFKA_PORT + 2))}
KAFKA_FAULTS_ADVERTISED_PORT=${EVENTMESH_INFRA_KAFKA_FAULTS_ADVERTISED_PORT:-$((KAFKA_PORT + 3))}
KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$ROOT/scripts/infra/kafka-pom.xml")

TEMPORAL_ADDRESS=${EVENTMESH_TEMPORAL_ADDRESS:-127.0.0.1:7233}
TEMPORAL_HOST=${TEMPORAL_ADDRESS%:*}
TEMPORAL_PORT=${TEMPORAL_ADDRESS##*:}
TEMPORAL_UI_URL=${EVENTMESH_TEMPORAL_UI_URL:-http://127.0.0.1:8233}
TEMPORAL_UI_PORT=$(printf '%s' "$TEMPORAL_UI_URL" | sed -nE 's#^https?://[^/:]+:([0-9]+).*#\1#p')
TEMPORAL_UI_PORT=${TEMPORAL_UI_PORT:-8233}
TEMPORAL_NAMESPACE=${EVENTMESH_TEMPORAL_NAMESPACE:-default}
# The test suite runs in a namespace of its own, so the runs of test instances stay out of the default one.
TEMPORAL_TEST_NAMESPACE=eventmesh-test
TEMPORAL_CLI_VERSION=v1.5.1
TEMPORAL_BIN=$TOOLS/bin/temporal
# Custom search attributes used by the partition workflows (docs/topologies.md).
TEMPORAL_SEARCH_ATTRIBUTES=(EventMeshTopic=Keyword EventMeshPartition=Int EventMeshOwner=Keyword EventMeshEpoch=Int
  EventMeshAgent=Keyword EventMeshTaskState=Keyword EventMeshTenant=Keyword
  EventMeshConnectorKind=Keyword EventMeshJobState=Keyword)
# The dev server's store and dynamic configuration (docs/a2a.md#the-model):
# - SQLite in write-ahead-log mode, synced at checkpoints: in its default rollback-journal mode every commit of the
#   server waits for fsyncs of the journal and the database. A killed server loses nothing either way; a host that
#   loses power may lose the last commits (a local server for development and tests; production runs Temporal on
#   Postgres, docker/compose.yaml).
# - Eager workflow start and eager activity execution: a workflow's first task is answered to a starter that runs
#   a worker on the same connection, and an activity scheduled on the worker's own task queue is handed to it
#   with its workflow task's completion, neither through a task queue.
# - Tasks written to one partition of each task queue (the server's default writes to 4): with a few pollers, a
#   task written to a partition no poller was on waited about 2 s for one (a bare workflow, 4 in flight: the slow
#   ones 1,855-2,045 ms, p95 148-209 ms; with one write partition p95 63-64 ms; docs/benchmarks.md). Pollers still
#   read all 4 partitions, so no task already written to another is left unread when this changes.
TEMPORAL_SERVER_OPTIONS=(--sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=normal
  --dynamic-config-value system.enableEagerWorkflowStart=true --dynamic-config-value system.enableActivityEagerExecution=true
  --dynamic-config-value matching.numTaskqueueWritePartitions=1)

say() { printf '[infra] %s\n' "$*"; }
die() { printf '[infra] ERROR: %s\n' "$*" >&2; exit 1; }

# port_open HOST PORT: true when a TCP connection succeeds within a second.
port_open() { timeout 1 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

# foreign_checkout PATTERN: the root of another checkout of this project whose server (a process whose command
# line matches PATTERN and names a file under that checkout's .data) is running; fails when there is none. A
# server another checkout started must not be taken for this one's: its stop, and the fault tests that kill and
# restart servers, act on this checkout's files (.tools, .data) and would miss it.
# A server of this checkout keeps its state under this checkout's .data, whichever folder there (EVENTMESH_INFRA_DATA_DIR
# may name one: scripts/test.sh runs the fault tier against a second set of servers in .data/lanes/faults).
foreign_checkout() {
  local own pid cmd data
  own=$(realpath -m "$ROOT/.data")
  for pid in $(pgrep -f -- "$1" 2>/dev/null); do
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || continue
    data=$(grep -oE '/[^ ]*/\.data/' <<<"$cmd" | head -1) || continue
    [[ -n $data && $(realpath -m "$data") != "$own" ]] || continue
    printf '%s\n' "${data%/.data/}"; return 0
  done
  return 1
}

# refuse_foreign NAME PATTERN ADDRESS: stops the start when ADDRESS is served by another checkout's server.
refuse_foreign() {
  local other
  other=$(foreign_checkout "$2") || return 0
  die "$1: $3 is served by the $1 another checkout of this project started ($other); stop it there (cd $other && bash scripts/infra.sh stop $1), or give this checkout other addresses (docs/configuration.md)"
}

# wait_until NAME LOG CMD...: run CMD until it succeeds or READY_TIMEOUT passes.
wait_until() {
  local name=$1 log=$2; shift 2
  local deadline=$((SECONDS + READY_TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      die "$name did not become ready within ${READY_TIMEOUT}s; see its log: $log"
    fi
    sleep 0.5
  done
}

# wait_started NAME PIDFILE LOG CMD...: a server just launched in the background is ready when CMD succeeds; it
# fails at once if the process exits, and after READY_TIMEOUT if it never gets ready.
wait_started() {
  local name=$1 pidfile=$2 log=$3; shift 3
  local deadline=$((SECONDS + READY_TIMEOUT))
  # The process was just started from this script, so it is ours: ask only whether it lives. (pid_alive also
  # matches its command line, which right after the fork is still this script's, before the server's exec.)
  local pid; pid=$(cat "$pidfile")
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || die "$name: the server exited during start; see its log: $log"
    ((SECONDS < deadline)) || die "$name did not become ready within ${READY_TIMEOUT}s; see its log: $log"
    sleep 0.5
  done
}

# pid_alive PIDFILE: the process the file names is alive and is one of ours (a PID reused after a reboot is not).
pid_alive() {
  [[ -f $1 ]] || return 1
  local pid; pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qE 'kafka\.Kafka|temporal server start-dev'
}

stop_pid() {
  local name=$1 pidfile=$2
  if ! pid_alive "$pidfile"; then say "$name: not running (not started by this project)"; rm -f "$pidfile"; return 0; fi
  local pid; pid=$(cat "$pidfile")
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then say "$name: did not stop within 30s, killing"; kill -KILL "$pid" 2>/dev/null || true; fi
    sleep 0.3
  done
  rm -f "$pidfile"
  say "$name: stopped"
}

# ---------------------------------------------------------------- Postgres

pg_bindir() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [[ -x $d/initdb && -x $d/postgres ]] && { echo "$d"; return 0; }
  done
  return 1
}

as_postgres() { if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# The cluster lives in .data/postgres. Postgres refuses to run as root, so as root the server runs as the
# `postgres` user, which must be able to reach that folder; when a parent folder shuts it out, the cluster goes
# to /var/tmp/eventmesh-postgres-<hash of this checkout, or of EVENTMESH_INFRA_DATA_DIR when set> instead (said once, at start).
pg_dir() {
  if [[ $(id -u) != 0 ]] || runuser -u postgres -- test -x "$DATA" 2>/dev/null || ! id postgres >/dev/null 2>&1; then
    echo "$DATA/postgres"
  else
    local key=$ROOT; [[ $(realpath -m "$DATA") == $(realpath -m "$ROOT/.data") ]] || key=$DATA
    echo "/var/tmp/eventmesh-postgres-$(printf '%s' "$key" | md5sum | cut -c1-8)"
  fi
}

provision_postgres() {
  if pg_bindir >/dev/null; then return 0; fi
  say "postgres: installing the Debian package (apt-get)"
  [[ $(id -u) == 0 ]] || die "postgres: server binaries missing and not root; install the 'postgresql' package"
  local log=$LOGS/postgres-install.log
  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql; } >"$log" 2>&1 \
    || die "postgres: apt-get install failed; see $log"
  # The package creates (and may start) a default cluster on 5432; this project runs a private one under
  # .data/, so the fresh, empty default cluster is dropped rather than left to start at the next boot.
  if command -v pg_lsclusters >/dev/null; then
    pg_lsclusters --no-header 2>/dev/null | while read -r ver name _ status _; do
      pg_dropcluster --stop "$ver" "$name" >>"$log" 2>&1 || true
    done
  fi
  pg_bindir >/dev/null || die "postgres: installed, but no server binaries under /usr/lib/postgresql/*/bin"
}

pg_ready() { PGPASSWORD=$PG_PASSWORD psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres -Atqc 'select 1' ; }

# ensure_pg_database: creates the configured database when it is missing; returns non-zero if it cannot.
ensure_pg_database() {
  local exists
  exists=$(PGPASSWORD=$PG_PASSWORD psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres -Atqc \
    "select 1 from pg_database where datname = '$PG_DATABASE'" 2>&1) || { say "postgres: cannot list databases as $PG_USER: $exists"; return 1; }
  if [[ $exists != 1 ]]; then
    PGPASSWORD=$PG_PASSWORD psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres -qc "create database \"$PG_DATABASE\"" >/dev/null || return 1
    say "postgres: created database $PG_DATABASE"
  fi
}

start_postgres() {
  local dir log
  dir=$(pg_dir); log=$dir/postgres.log
  if [[ ! -f $dir/pgdata/postmaster.pid ]] && port_open "$PG_HOST" "$PG_PORT"; then
    refuse_foreign postgres 'postgres -D' "$PG_HOST:$PG_PORT"
    say "postgres: already reachable at $PG_HOST:$PG_PORT, using it"
    ensure_pg_database || say "postgres: WARNING: could not make sure database $PG_DATABASE exists; the runtime will say if it cannot connect"
    return 0
  fi
  provision_postgres
  dir=$(pg_dir); log=$dir/postgres.log
  [[ $dir == "$DATA/postgres" ]] || say "postgres: the postgres user cannot reach $DATA; the cluster lives in $dir"
  local bin; bin=$(pg_bindir)
  mkdir -p "$dir" "$LOGS"
  touch "$log"
  if [[ $(id -u) == 0 ]]; then chown postgres "$dir" "$log"; fi
  ln -sf "$log" "$LOGS/postgres.log"
  if [[ ! -f $dir/pgdata/PG_VERSION ]]; then
    local pwfile; pwfile=$(mktemp); printf '%s\n' "$PG_PASSWORD" >"$pwfile"
    if [[ $(id -u) == 0 ]]; then chown postgres "$pwfile"; fi
    as_postgres "$bin/initdb" -D "$dir/pgdata" -U "$PG_USER" --pwfile="$pwfile" -E UTF8 --locale=C \
      --auth-host=scram-sha-256 --auth-local=trust >>"$log" 2>&1 || { rm -f "$pwfile"; die "postgres: initdb failed; see $log"; }
    rm -f "$pwfile"
    say "postgres: initialised a cluster in $dir/pgdata"
  fi
  if ! as_postgres "$bin/pg_ctl" -D "$dir/pgdata" status >/dev/null 2>&1; then
    as_postgres "$bin/pg_ctl" -D "$dir/pgdata" -l "$log" -w -t "$READY_TIMEOUT" \
      -o "-c listen_addresses=$PG_HOST -p $PG_PORT -c unix_socket_directories='' -c max_connections=200" start >/dev/null \
      || die "postgres: did not start on $PG_HOST:$PG_PORT; see its log: $log"
  fi
  wait_until postgres "$log" pg_ready
  ensure_pg_database || die "postgres: cannot create database $PG_DATABASE; see $log"
  say "postgres: ready at $PG_HOST:$PG_PORT (database $PG_DATABASE, log $log)"
}

stop_postgres() {
  local dir bin
  dir=$(pg_dir)
  bin=$(pg_bindir) || { say "postgres: not installed"; return 0; }
  if [[ -f $dir/pgdata/postmaster.pid ]]; then
    as_postgres "$bin/pg_ctl" -D "$dir/pgdata" -m fast -w stop >/dev/null && say "postgres: stopped"
  else
    say "postgres: not running (not started by this project)"
  fi
}

status_postgres() {
  local dir; dir=$(pg_dir)
  if [[ -f $dir/pgdata/postmaster.pid ]] && port_open "$PG_HOST" "$PG_PORT"; then
    echo "postgres  running  $PG_HOST:$PG_PORT  (pid $(head -1 "$dir/pgdata/postmaster.pid"), log $dir/postgres.log)"
  elif port_open "$PG_HOST" "$PG_PORT"; then echo "postgres  external $PG_HOST:$PG_PORT  (not managed by this project)"
  else echo "postgres  down     $PG_HOST:$PG_PORT"; fi
}

# ---------------------------------------------------------------- Kafka

provision_kafka() {
  local libs=$TOOLS/kafka/$KAFKA_VERSION/libs log=$LOGS/kafka-provision.log
  [[ -f $libs/.complete ]] && return 0
  command -v java >/dev/null || die "kafka: java not found (Java 17 or later is required)"
  command -v mvn >/dev/null || die "kafka: mvn not found (Maven is required to fetch the broker jars)"
  say "kafka: fetching the $KAFKA_VERSION broker jars from Maven Central"
  mkdir -p "$libs" "$LOGS"
  mvn -B -q -f "$ROOT/scripts/infra/kafka-pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$libs" >"$log" 2>&1 || die "kafka: fetching jars failed; see $log"
  touch "$libs/.complete"
}

# shellcheck disable=SC2086 # the options are words
kafka_java() { java -Xms256m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true ${EVENTMESH_KAFKA_JAVA_OPTS:-} "$@"; }

start_kafka() {
  local dir=$DATA/kafka log=$LOGS/kafka.log pidfile=$DATA/kafka/kafka.pid
  if pid_alive "$pidfile" && ! grep -q "FAULTS://$KAFKA_HOST:$KAFKA_FAULTS_PORT" "$dir/server.properties" 2>/dev/null; then
    say "kafka: restarting a broker started without the fault-test listener"
    stop_kafka
  fi
  if pid_alive "$pidfile"; then
    wait_until kafka "$log" port_open "$KAFKA_HOST" "$KAFKA_PORT"
    say "kafka: already running at $KAFKA_HOST:$KAFKA_PORT"; return 0
  fi
  if port_open "$KAFKA_HOST" "$KAFKA_PORT"; then
    refuse_foreign kafka 'kafka\.Kafka' "$KAFKA_HOST:$KAFKA_PORT"
    say "kafka: already reachable at $KAFKA_HOST:$KAFKA_PORT, using it"; return 0; fi
  provision_kafka
  local libs=$TOOLS/kafka/$KAFKA_VERSION/libs
  mkdir -p "$dir/logs" "$LOGS"
  cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$KAFKA_HOST:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://$KAFKA_HOST:$KAFKA_PORT,CONTROLLER://$KAFKA_HOST:$KAFKA_CONTROLLER_PORT,FAULTS://$KAFKA_HOST:$KAFKA_FAULTS_PORT
advertised.listeners=PLAINTEXT://$KAFKA_HOST:$KAFKA_PORT,FAULTS://$KAFKA_HOST:$KAFKA_FAULTS_ADVERTISED_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,FAULTS:PLAINTEXT
log.dirs=$dir/logs
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
  cat >"$dir/log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = warn
logger.org.name = org.apache.kafka
logger.org.level = warn
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = info
EOF
  if [[ ! -f $dir/logs/meta.properties ]]; then
    local cluster_id
    cluster_id=$(kafka_java -cp "$libs/*" kafka.tools.StorageTool random-uuid 2>>"$log" | tail -1)
    kafka_java -cp "$libs/*" -Dlog4j2.configurationFile="$dir/log4j2.properties" kafka.tools.StorageTool format \
      -t "$cluster_id" -c "$dir/server.properties" --ignore-formatted >>"$log" 2>&1 \
      || die "kafka: formatting the storage failed; see $log"
  fi
  # shellcheck disable=SC2086 # the options are words
  setsid nohup java -Xms256m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true ${EVENTMESH_KAFKA_JAVA_OPTS:-} \
    -Dlog4j2.configurationFile="$dir/log4j2.properties" -cp "$libs/*" kafka.Kafka "$dir/server.properties" \
    >>"$log" 2>&1 </dev/null &
  echo $! >"$pidfile"
  wait_started kafka "$pidfile" "$log" port_open "$KAFKA_HOST" "$KAFKA_PORT"
  say "kafka: ready at $KAFKA_HOST:$KAFKA_PORT (Kafka $KAFKA_VERSION, log $log)"
}

stop_kafka() { stop_pid kafka "$DATA/kafka/kafka.pid"; }

status_kafka() {
  if pid_alive "$DATA/kafka/kafka.pid"; then echo "kafka     running  $KAFKA_HOST:$KAFKA_PORT  (pid $(cat "$DATA/kafka/kafka.pid"), log $LOGS/kafka.log)"
  elif port_open "$KAFKA_HOST" "$KAFKA_PORT"; then echo "kafka     external $KAFKA_HOST:$KAFKA_PORT  (not managed by this project)"
  else echo "kafka     down     $KAFKA_HOST:$KAFKA_PORT"; fi
}

# ---------------------------------------------------------------- Temporal

provision_temporal() {
  [[ -x $TEMPORAL_BIN ]] && return 0
  command -v go >/dev/null || die "temporal: go not found (Go 1.25 or later builds the Temporal CLI)"
  local log=$LOGS/temporal-provision.log
  mkdir -p "$TOOLS/bin" "$LOGS"
  say "temporal: building the Temporal CLI $TEMPORAL_CLI_VERSION from the Go module proxy (minutes on first run)"
  GOBIN=$TOOLS/bin CGO_ENABLED=0 go install "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_VERSION" >"$log" 2>&1 \
    || die "temporal: building the CLI failed; see $log"
}

temporal_ready() {
  "$TEMPORAL_BIN" operator cluster health --address "$TEMPORAL_ADDRESS" 2>/dev/null | grep -q SERVING \
    && port_open "$TEMPORAL_HOST" "$TEMPORAL_UI_PORT"
}

# temporal_settings: the store and dynamic-config settings (the values of --sqlite-pragma and --dynamic-config-value)
# among the arguments on stdin, one per line, sorted.
temporal_settings() { awk 'take { print; take = 0; next } $0 == "--sqlite-pragma" || $0 == "--dynamic-config-value" { take = 1 }' | sort; }

# temporal_has_options PID: whether the server PID runs with exactly the settings of TEMPORAL_SERVER_OPTIONS (none
# missing, none more).
temporal_has_options() {
  local running wanted
  running=$(tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | temporal_settings) || return 1
  wanted=$(printf '%s\n' "${TEMPORAL_SERVER_OPTIONS[@]}" | temporal_settings)
  [[ $running == "$wanted" ]]
}

start_temporal() {
  local dir=$DATA/temporal log=$LOGS/temporal.log pidfile=$DATA/temporal/temporal.pid
  if pid_alive "$pidfile" && ! temporal_has_options "$(cat "$pidfile")"; then
    say "temporal: restarting a server started with other options than TEMPORAL_SERVER_OPTIONS"
    stop_temporal
  fi
  if pid_alive "$pidfile"; then
    wait_until temporal "$log" temporal_ready
    ensure_temporal_search_attributes
    say "temporal: already running at $TEMPORAL_ADDRESS (UI $TEMPORAL_UI_URL)"; return 0
  fi
  if port_open "$TEMPORAL_HOST" "$TEMPORAL_PORT"; then
    refuse_foreign temporal 'temporal server start-dev' "$TEMPORAL_ADDRESS"
    say "temporal: already reachable at $TEMPORAL_ADDRESS, using it"
    ensure_temporal_namespaces
    ensure_temporal_search_attributes
    return 0
  fi
  provision_temporal
  mkdir -p "$dir" "$LOGS"
  local args=(server start-dev --ip "$TEMPORAL_HOST" --port "$TEMPORAL_PORT" --ui-port "$TEMPORAL_UI_PORT"
    --db-filename "$dir/temporal.db" --namespace "$TEMPORAL_NAMESPACE" --namespace "$TEMPORAL_TEST_NAMESPACE"
    --log-level warn "${TEMPORAL_SERVER_OPTIONS[@]}")
  local sa; for sa in "${TEMPORAL_SEARCH_ATTRIBUTES[@]}"; do args+=(--search-attribute "$sa"); done
  setsid nohup "$TEMPORAL_BIN" "${args[@]}" >>"$log" 2>&1 </dev/null &
  echo $! >"$pidfile"
  wait_started temporal "$pidfile" "$log" temporal_ready
  say "temporal: ready at $TEMPORAL_ADDRESS, Web UI $TEMPORAL_UI_URL (log $log)"
}

# ensure_temporal_namespaces: on a Temporal server this script did not start, registers the runtime's and the
# tests' namespaces when they are missing (needs the CLI; without it, says so).
ensure_temporal_namespaces() {
  [[ -x $TEMPORAL_BIN ]] || { say "temporal: no CLI at $TEMPORAL_BIN to check namespaces ($TEMPORAL_NAMESPACE, $TEMPORAL_TEST_NAMESPACE)"; return 0; }
  local ns
  for ns in "$TEMPORAL_NAMESPACE" "$TEMPORAL_TEST_NAMESPACE"; do
    "$TEMPORAL_BIN" operator namespace describe --address "$TEMPORAL_ADDRESS" -n "$ns" >/dev/null 2>&1 && continue
    "$TEMPORAL_BIN" operator namespace create --address "$TEMPORAL_ADDRESS" -n "$ns" >/dev/null 2>&1 \
      && say "temporal: created namespace $ns" || say "temporal: WARNING: could not create namespace $ns"
  done
}

# ensure_temporal_search_attributes: registers the runtime's search attributes that a running server lacks (one
# started before an attribute was added to TEMPORAL_SEARCH_ATTRIBUTES, or not by this script), in both namespaces.
ensure_temporal_search_attributes() {
  [[ -x $TEMPORAL_BIN ]] || return 0
  local ns sa known
  for ns in "$TEMPORAL_NAMESPACE" "$TEMPORAL_TEST_NAMESPACE"; do
    known=$("$TEMPORAL_BIN" operator search-attribute list --address "$TEMPORAL_ADDRESS" -n "$ns" 2>/dev/null) || continue
    for sa in "${TEMPORAL_SEARCH_ATTRIBUTES[@]}"; do
      grep -qw "${sa%%=*}" <<<"$known" && continue
      "$TEMPORAL_BIN" operator search-attribute create --address "$TEMPORAL_ADDRESS" -n "$ns" --name "${sa%%=*}" --type "${sa#*=}" >/dev/null 2>&1 \
        && say "temporal: registered search attribute ${sa%%=*} in $ns" || say "temporal: WARNING: could not register search attribute ${sa%%=*} in $ns"
    done
  done
}

stop_temporal() { stop_pid temporal "$DATA/temporal/temporal.pid"; }

status_temporal() {
  if pid_alive "$DATA/temporal/temporal.pid"; then echo "temporal  running  $TEMPORAL_ADDRESS  UI $TEMPORAL_UI_URL  (pid $(cat "$DATA/temporal/temporal.pid"), log $LOGS/temporal.log)"
  elif port_open "$TEMPORAL_HOST" "$TEMPORAL_PORT"; then echo "temporal  external $TEMPORAL_ADDRESS  (not managed by this project)"
  else echo "temporal  down     $TEMPORAL_ADDRESS"; fi
}

# ---------------------------------------------------------------- dispatch

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

action=${1:-}; target=${2:-all}
case $target in postgres|kafka|temporal) servers=("$target") ;; all) servers=(postgres kafka temporal) ;; *) usage ;; esac
mkdir -p "$LOGS"
case $action in
  provision) for s in "${servers[@]}"; do "provision_$s"; done ;;
  start)
    for s in "${servers[@]}"; do
      t0=$SECONDS; "start_$s"; say "$s: start took $((SECONDS - t0))s"
    done ;;
  stop) for s in "${servers[@]}"; do "stop_$s"; done ;;
  status) for s in "${servers[@]}"; do "status_$s"; done ;;
  logs) for s in "${servers[@]}"; do echo "$LOGS/$s.log"; done ;;
  reset)
    [[ $target == temporal ]] || { say "reset: only the Temporal dev server's state can be reset (reset temporal); legal values: temporal"; exit 2; }
    stop_temporal
    rm -f "$DATA/temporal/temporal.db" "$DATA/temporal/temporal.db-wal" "$DATA/temporal/temporal.db-shm"
    say "temporal: database deleted"
    start_temporal ;;
  *) usage ;;
esac
