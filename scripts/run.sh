#!/usr/bin/env bash
# `npm start`: one runtime instance with everything it needs. On first run it installs the npm dependencies and
# provisions the local servers (Postgres, Kafka, Temporal with its Web UI); then it builds, migrates, starts the
# instance (gateway on EVENTMESH_HTTP_PORT, default 8080, and its Temporal worker) and prints the URLs.
# Ctrl-C stops the instance; the servers keep running (`npm run infra -- stop` stops them).
# Secrets at rest need a key (EVENTMESH_SECURITY_SECRETS_KEYS): unless it is set, the first run creates a local one
# in .data/secrets/keys (mode 0600) and every run uses it. A development key: set your own in production.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
started=$SECONDS

bash scripts/prepare.sh
bash scripts/infra.sh start all
npm run --silent migrate

if [[ -z ${EVENTMESH_SECURITY_SECRETS_KEYS:-} ]]; then
  keys=.data/secrets/keys
  if [[ ! -s $keys ]]; then
    mkdir -p "$(dirname "$keys")"
    (umask 077 && printf 'dev:%s\n' "$(openssl rand -base64 32)" >"$keys.new" && mv "$keys.new" "$keys")
    echo "eventmesh: created a local secrets key in $keys (EVENTMESH_SECURITY_SECRETS_KEYS)"
  fi
  chmod 600 "$keys"
  EVENTMESH_SECURITY_SECRETS_KEYS=$(<"$keys")
  export EVENTMESH_SECURITY_SECRETS_KEYS
fi

node dist/apps/instance/src/main.js &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid; exit $?' INT TERM

port=${EVENTMESH_HTTP_PORT:-8080}
host=${EVENTMESH_HTTP_HOST:-127.0.0.1}
[[ $host == 0.0.0.0 ]] && host=127.0.0.1
ui=${EVENTMESH_TEMPORAL_UI_URL:-http://127.0.0.1:8233}
ns=${EVENTMESH_TEMPORAL_NAMESPACE:-default}
deadline=$((SECONDS + 60))
until curl -fsS "http://$host:$port/health" >/dev/null 2>&1; do
  if ! kill -0 $pid 2>/dev/null; then wait $pid; exit $?; fi
  if ((SECONDS >= deadline)); then echo "eventmesh: /health did not answer 200 within 60s" >&2; kill $pid; exit 1; fi
  sleep 0.3
done
cat <<MSG

  eventmesh is running ($((SECONDS - started))s)
    API          http://$host:$port          (POST /events/publish, /subscriptions)
    Health       http://$host:$port/health
    Temporal UI  ${ui%/}/namespaces/$ns/workflows
$(if [[ ${EVENTMESH_DELIVERY_TOPOLOGY:-} == PARTITION_OWNED_PULL ]]; then
  echo "    Partitions   http://$host:$port/admin/partitions   (Temporal UI filter: EventMeshOwner = '${EVENTMESH_INSTANCE_ID:-$(hostname)}')"
fi)
  Ctrl-C stops the instance; \`npm run infra -- status|stop\` for the servers.

MSG
wait $pid
