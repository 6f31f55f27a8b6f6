#!/usr/bin/env bash
# Saves the history of one workflow run as JSON for the replay test (test/replay/*.replay.spec.ts):
#   scripts/record-workflow-history.sh WORKFLOW_ID RUN_ID NAME   ->  test/replay/histories/NAME.json
# Keep recorded histories when workflows change: replaying them is what proves a change is deterministic.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ $# == 3 ]] || { sed -n '2,4p' "$0"; exit 2; }
out=$ROOT/test/replay/histories/$3.json
"$ROOT/.tools/bin/temporal" workflow show --address "${EVENTMESH_TEMPORAL_ADDRESS:-127.0.0.1:7233}" \
  --namespace "${EVENTMESH_TEMPORAL_NAMESPACE:-default}" --workflow-id "$1" --run-id "$2" --output json >"$out"
echo "recorded $out"
