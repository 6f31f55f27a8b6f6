#!/usr/bin/env bash
# `npm run test:fuzz`: schemathesis against the API document of a running instance. It makes (once) and reuses a
# Python virtual environment with schemathesis (the version pinned below) under .tools/schemathesis-4, migrates the test database, starts
# one instance (gateway and worker) on a free port with the token gate enforcing on the ingress and the admin API,
# mints an operator token (tenant `ops`, every scope: the operator-only routes take no other), and runs every operation
# of /openapi.json with every check, FUZZ_MAX_EXAMPLES generated cases per operation (default 25). It prints the
# counts and exits non-zero on any failure. FUZZ_TIMEOUT (seconds, default 900) bounds schemathesis' run;
# FUZZ_SEED (default 31) fixes the generated cases, so a run repeats the last one.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
started=$SECONDS

# The version the document's checks were last made green with; a new one is a change of its own.
SCHEMATHESIS_VERSION=4.32.5
venv=.tools/schemathesis-4
bash scripts/python-venv.sh "$venv" "schemathesis==$SCHEMATHESIS_VERSION"
# `--venv-only`: make the virtual environment and stop (npm test makes it while the end-to-end tier runs).
if [[ ${1:-} == --venv-only ]]; then exit 0; fi

bash scripts/prepare.sh

work=$(mktemp -d)
pid=
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The test database and Temporal namespace (as the test tiers use them), the dev token key of this run only.
export EVENTMESH_POSTGRES_DATABASE=${EVENTMESH_TEST_POSTGRES_DATABASE:-eventmesh_test}
export EVENTMESH_TEMPORAL_NAMESPACE=${EVENTMESH_TEST_TEMPORAL_NAMESPACE:-eventmesh-test}
bash scripts/infra.sh start all >/dev/null
node dist/scripts/migrate.js
mint() { node dist/scripts/mint-token.js --dir "$work/keys" --ttl 3600 "$@" 2>/dev/null; }
operator=$(mint --tenant ops --sub fuzz-operator --scopes publish,subscribe,admin)

EVENTMESH_HTTP_PORT=0 EVENTMESH_HTTP_HOST=127.0.0.1 EVENTMESH_LOG_LEVEL=error \
  EVENTMESH_INSTANCE_ID="fuzz-$$" \
  EVENTMESH_SECURITY_SECRETS_KEYS="fuzz:$(openssl rand -base64 32)" \
  EVENTMESH_SECURITY_GATE_FILTERS=token EVENTMESH_SECURITY_GATE_FAIL_CLOSED=true \
  EVENTMESH_ADMIN_SECURITY_FILTERS=token EVENTMESH_ADMIN_SECURITY_FAIL_CLOSED=true \
  EVENTMESH_ADMIN_SECURITY_OPERATOR_TENANT=ops \
  EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE="$work/keys/jwks.json" \
  EVENTMESH_SECURITY_GATE_TOKEN_ISSUER=eventmesh-dev EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE=eventmesh \
  node dist/apps/instance/src/main.js >"$work/instance.log" 2>&1 &
pid=$!
# The instance's log, when the run failed, for the answers' causes.
trap 'status=$?; ((status == 0)) || { echo "[fuzz] instance log (last 40 lines):"; tail -40 "$work/instance.log"; }; cleanup' EXIT
deadline=$((SECONDS + 60))
until url=$(grep -om1 'listening on http://[^ ]*' "$work/instance.log" 2>/dev/null | cut -d' ' -f3) && [[ -n $url ]]; do
  if ! kill -0 "$pid" 2>/dev/null || ((SECONDS >= deadline)); then
    echo "[fuzz] the instance did not start:"; cat "$work/instance.log"; exit 1
  fi
  sleep 0.3
done
echo "[fuzz] instance at $url (booted in $((SECONDS - started))s)"

# What a schema cannot state is the state a request meets or relations between values: those operations also take, as valid input's
# answer, the status that refusal has (each named below). The WebSocket route answers plain HTTP (all schemathesis
# sends) 426. An entry names its operations by one regular expression on their label, `METHOD /path/{param}`:
# schemathesis ORs an entry's separate include- keys (`include-method` with `include-path-regex` would select every
# GET, whatever its path), so the method and the path are one regex.
entry() { # entry LABEL-REGEX POSITIVE-STATUSES [NEGATIVE-STATUSES]
  printf "[[operations]]\ninclude-name-regex = '%s'\n" "$1"
  printf '[operations.checks.positive_data_acceptance]\nexpected-statuses = [%s]\n' "$2"
  [[ -z ${3:-} ]] || printf '[operations.checks.negative_data_rejection]\nexpected-statuses = [%s]\n' "$3"
}
ok='"2xx", "3xx", "401", "403", "404", "409", "429"'
{
  # Long enough for a long-poll's longest wait (60 s); an SSE stream is open as long as its client stays: read
  # for a second, its first event at most (a subscription's stream sends none when nothing is published: at 5 s
  # its cases took half of the run's time).
  echo 'request-timeout = 70.0'
  printf "[[operations]]\ninclude-name-regex = '%s'\nrequest-timeout = 1.0\nmax-stream-events = 1\n" '^GET /(subscriptions/\{id\}/events|sessions/sse)$'
  # The credential, as the document's `bearer` scheme (so that schemathesis sends no `x-api-key` beside it: the
  # gate refuses a request with both). Per-operation auth takes basic only: the operator's token on every route.
  printf '[auth.openapi.bearer]\nbearer = "%s"\n' "$operator"
  # A sink or an agent's URL must resolve to an address sinks may reach (400 SINK_NOT_ALLOWED) and answer the
  # webhook handshake; a replace keeps the stored subscription's protocol and topic.
  entry '^POST /subscriptions$' "$ok, \"400\""
  entry '^POST /events/subscribe$' "$ok, \"400\""
  entry '^PUT /subscriptions/\{id\}$' "$ok, \"400\""
  # An ensure by name is a create or a replace (as above), and a body that names a name names the path's.
  entry '^PUT /subscriptions/by-name/\{name\}$' "$ok, \"400\""
  # A tenant topic's partitions are capped by EVENTMESH_KAFKA_TENANT_TOPIC_MAX_PARTITIONS, a setting of the instance
  # (400 naming the cap), not of the document; a change never lowers them below the topic's (400, its state).
  entry '^(POST /topics|PATCH /topics/\{name\})$' "$ok, \"400\""
  entry '^PUT /a2a/agents/\{name\}$' "$ok, \"400\""
  # A seek's offsets must lie in the partition's log (400 OFFSET_OUT_OF_RANGE).
  entry '^POST /subscriptions/\{id\}/offsets/seek$' "$ok, \"400\""
  # Dead letters: `to` after `from`; a purge's `confirm` repeats the subscription id; a cursor names a stored letter.
  entry '^[A-Z]+ /subscriptions/\{id\}/dead-letters(/replays)?$' "$ok, \"400\""
  entry '^GET /a2a/push-dead-letters$' "$ok, \"400\""
  # A client's own filter must parse as CESQL (400 naming the position), a grammar no JSON Schema states.
  entry '^GET /subscriptions/\{id\}/(events|poll)$' "$ok, \"400\""
  # A request nobody replies to is answered 408 after its timeout. The wait is a parameter of the run, not of the
  # case: `timeoutMs` (up to 300000) and a long-poll's `waitMs` (up to 60000) are sent small, else each case would
  # wait out the value drawn (the http-contract spec holds the routes to their documented ranges).
  entry '^POST /events/request$' "$ok, \"408\""
  printf "[[operations]]\ninclude-name-regex = '%s'\nparameters = { \"query.timeoutMs\" = 200 }\n" '^POST /events/request$'
  printf "[[operations]]\ninclude-name-regex = '%s'\nparameters = { \"query.waitMs\" = 200 }\n" '^GET /subscriptions/\{id\}/poll$'
  # A2A's JSON-RPC endpoints answer a body that is no JSON-RPC request as the protocol says: HTTP 200 and the
  # error in the body (-32700 not JSON, -32600 no request).
  entry '^POST /a2a/(agents/\{name\}/)?rpc$' "$ok" '"200", "400", "401", "403", "404", "413", "429"'
  entry '^GET /subscriptions/\{id\}/ws$' '"426"' '"400", "426"'
  entry '^GET /sessions/ws$' '"426"' '"400", "426"'
} >"$work/schemathesis.toml"

# The internal stream channel is left out: a WebSocket between the runtime's own instances, with a cluster token
# (no tenant has one). The timeout bounds the run, whatever schemathesis meets. Run from the run's own folder:
# schemathesis keeps its example database (.schemathesis/) where it runs.
cd "$work"
t0=$SECONDS
status=0
timeout --signal=INT "${FUZZ_TIMEOUT:-900}" "$ROOT/$venv/bin/schemathesis" --config-file "$work/schemathesis.toml" run "$url/openapi.json" \
  --exclude-path-regex '^/internal/' --checks all --max-examples "${FUZZ_MAX_EXAMPLES:-25}" --seed "${FUZZ_SEED:-31}" \
  --max-response-time 65 --no-color --report junit --report-dir "$work/report" "$@" || status=$?
echo "[fuzz] schemathesis: exit $status in $((SECONDS - t0))s; whole step $((SECONDS - started))s"
exit $status
