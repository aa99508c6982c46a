#!/usr/bin/env bash
# The test suite on a fresh machine: install with test extras, then run pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test,hf
exec .venv/bin/python -m pytest "$@"
