#!/usr/bin/env bash
# `A2A_TCK_DIR=/path/to/a2a-tck bash scripts/a2a-tck.sh [run_tck.py options]`: the A2A TCK's mandatory category
# against the mesh's own JSON-RPC endpoint (docs/a2a.md, "The A2A TCK"). Not a step of `npm test`.
# The kit (github a2aproject/a2a-tck, run last at commit 410ba92) is not on PyPI, so it is read from a local checkout
# of it (A2A_TCK_DIR). It is installed (with its pinned-by-checkout dependencies, from PyPI) into a Python virtual
# environment made once and reused (A2A_TCK_VENV, default .tools/a2a-tck), made again when the checkout's
# pyproject.toml changes.
# Needs the servers running (scripts/infra.sh start all). Migrates the test database, starts one instance (open
# gate, tenant `default`) and the echo agent (npm run agent:echo) on free loopback ports, registers the agent, runs
# `run_tck.py --category mandatory` against `<instance>/a2a/rpc` and prints the kit's counts; exits with the kit's
# status (non-zero when a test failed).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
kit=${A2A_TCK_DIR:?A2A_TCK_DIR must name a local checkout of github.com/a2aproject/a2a-tck}
kit=$(cd "$kit" && pwd)
[[ -f $kit/run_tck.py && -f $kit/pyproject.toml ]] || { echo "[tck] $kit is not a checkout of a2a-tck (no run_tck.py)"; exit 2; }

venv=${A2A_TCK_VENV:-$ROOT/.tools/a2a-tck}
bash scripts/python-venv.sh "$venv" "$kit" "$(sha256sum "$kit/pyproject.toml" | cut -c1-16)"

bash scripts/prepare.sh
export EVENTMESH_POSTGRES_DATABASE=${EVENTMESH_TEST_POSTGRES_DATABASE:-eventmesh_test}
export EVENTMESH_TEMPORAL_NAMESPACE=${EVENTMESH_TEST_TEMPORAL_NAMESPACE:-eventmesh-test}
node dist/scripts/migrate.js

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

EVENTMESH_HTTP_PORT=0 EVENTMESH_HTTP_HOST=127.0.0.1 EVENTMESH_LOG_LEVEL=error EVENTMESH_INSTANCE_ID="tck-$$" \
  EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES=loopback EVENTMESH_SECURITY_SECRETS_KEYS="tck:$(openssl rand -base64 32)" \
  node dist/apps/instance/src/main.js >"$work/instance.log" 2>&1 &
pids+=($!)
node dist/scripts/echo-agent.js --port 0 >"$work/agent.log" 2>&1 &
pids+=($!)
# The first line matching $2 in log $1, waited for up to 60 s (the process having exited is a failure at once).
await_line() {
  local deadline=$((SECONDS + 60)) line
  until line=$(grep -om1 "$2" "$1" 2>/dev/null | head -1) && [[ -n $line ]]; do
    if ! kill -0 "$3" 2>/dev/null || ((SECONDS >= deadline)); then
      echo "[tck] $1 did not start:" >&2; cat "$1" >&2; return 1
    fi
    sleep 0.3
  done
  echo "$line"
}
url=$(await_line "$work/instance.log" 'listening on http://[^ ]*' "${pids[0]}" | cut -d' ' -f3)
agent=$(await_line "$work/agent.log" 'http://127.0.0.1:[0-9]*/' "${pids[1]}")
echo "[tck] mesh $url, echo agent $agent"

curl -sSf -XPUT "$url/a2a/agents/echo" -H 'content-type: application/json' -o /dev/null -d '{"name":"echo",
  "description":"echoes","version":"1.0.0","capabilities":{},"defaultInputModes":["text/plain"],
  "defaultOutputModes":["text/plain"],"skills":[{"id":"echo","name":"echo","description":"echoes","tags":["echo"]}],
  "supportedInterfaces":[{"url":"'"$agent"'","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}'

# The kit runs from its checkout (it imports its tests from there) and reads the card at the URL's host root.
cd "$kit"
log=$(mktemp /tmp/a2a-tck.XXXXXX.log)
status=0
"$venv/bin/python" run_tck.py --sut-url "$url/a2a/rpc" --category mandatory "$@" >"$log" 2>&1 || status=$?
grep -E '^(FAILED|ERROR) ' "$log" || true
echo "[tck] $(grep -E '[0-9]+ (passed|failed).* in [0-9.]+s' "$log" | tail -1 | tr -d '=' | xargs) (exit $status; the kit's output: $log)"
exit $status
