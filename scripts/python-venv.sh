#!/usr/bin/env bash
# `python-venv.sh DIR REQUIREMENT [KEY]`: makes (once) and reuses a Python virtual environment at DIR with one pinned
# requirement (`name==version`) installed from PyPI; a changed requirement makes it again. The test tools written in
# Python run from such environments (.tools/, never committed): schemathesis (scripts/fuzz-api.sh), the official
# A2A client a2a-sdk (test/integration/a2a-python-client.spec.ts).
set -euo pipefail
venv=$1 requirement=$2
# A third argument keys the environment instead of the version (a requirement that is a local path: its content's hash).
stamp="$venv/.installed-${3:-${requirement#*==}}"
if [[ ! -f $stamp ]]; then
  echo "[venv] making $venv (pip install $requirement)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$requirement"
  touch "$stamp"
fi
