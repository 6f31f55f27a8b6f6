#!/usr/bin/env bash
# The official Python A2A client (a2a-sdk from PyPI), pinned (a new version is a change of its own), in a virtual
# environment made once (scripts/python-venv.sh); prints the environment's folder. `npm test` makes it beside the
# install and the build; test/integration/a2a-python-client.spec.ts runs it again (nothing to do then) for its path.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
venv=.tools/a2a-sdk-1
bash scripts/python-venv.sh "$venv" 'a2a-sdk==1.3.0' >&2
echo "$venv"
