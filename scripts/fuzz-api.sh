#!/usr/bin/env bash
# `npm run test:fuzz`: schemathesis against the API document of a running instance. It makes (once) and reuses a
# Python virtual environment with schemathesis 4 under .tools/schemathesis-4, migrates the test database, starts
# one instance (gateway and worker) on a free port with the token gate enforcing on the ingress and the admin API,
# mints an operator token (tenant `ops`, admin routes) and a tenant token (other routes), and runs every operation
# of /openapi.json with every check, FUZZ_MAX_EXAMPLES generated cases per operation (default 25). It prints the
# counts and exits non-zero on any failure. FUZZ_TIMEOUT (seconds, default 900) bounds schemathesis' run;
# FUZZ_SEED (default 31) fixes the generated cases, so a run repeats the last one.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
started=$SECONDS

bash scripts/prepare.sh

venv=.tools/schemathesis-4
if [[ ! -f $venv/.installed ]]; then
  echo "[fuzz] making $venv (pip install schemathesis==4.*)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'schemathesis==4.*'
  touch "$venv/.installed"
fi

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
tenant=$(mint --tenant fuzz --sub fuzz-service --scopes publish,subscribe,admin)

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
deadline=$((SECONDS + 60))
until url=$(grep -om1 'listening on http://[^ ]*' "$work/instance.log" 2>/dev/null | cut -d' ' -f3) && [[ -n $url ]]; do
  if ! kill -0 "$pid" 2>/dev/null || ((SECONDS >= deadline)); then
    echo "[fuzz] the instance did not start:"; cat "$work/instance.log"; exit 1
  fi
  sleep 0.3
done
echo "[fuzz] instance at $url (booted in $((SECONDS - started))s)"

# Per operation, its credential: the operator's on the admin API, the tenant's elsewhere. The WebSocket routes
# answer a plain HTTP request (all schemathesis sends) 426 UPGRADE_REQUIRED, whatever else it holds.
cat >"$work/schemathesis.toml" <<TOML
[[operations]]
include-path-regex = "^/admin/"
headers = { Authorization = "Bearer $operator" }

[[operations]]
exclude-path-regex = "^/admin/"
headers = { Authorization = "Bearer $tenant" }

[[operations]]
include-path-regex = "/ws\$"
[operations.checks.positive_data_acceptance]
expected-statuses = ["426"]
[operations.checks.negative_data_rejection]
expected-statuses = ["400", "426"]
TOML

t0=$SECONDS
status=0
# The internal stream channel is left out: a WebSocket between the runtime's own instances, with a cluster token
# (no tenant has one). The timeout bounds the run, whatever schemathesis meets. Run from the run's own folder:
# schemathesis keeps its example database (.schemathesis/) where it runs.
cd "$work"
timeout --signal=INT "${FUZZ_TIMEOUT:-900}" "$ROOT/$venv/bin/schemathesis" --config-file "$work/schemathesis.toml" run "$url/openapi.json" \
  --exclude-path-regex '^/internal/' --checks all --max-examples "${FUZZ_MAX_EXAMPLES:-25}" --seed "${FUZZ_SEED:-31}" \
  --request-timeout 70 --no-color --report junit --report-dir "$work/report" "$@" || status=$?
echo "[fuzz] schemathesis: exit $status in $((SECONDS - t0))s; whole step $((SECONDS - started))s"
exit $status
