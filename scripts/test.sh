#!/usr/bin/env bash
# The test suite on a fresh machine: install with test extras, then run pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# The report's browser tests drive Debian's chromium (never a downloaded browser).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq chromium || echo "test.sh: WARNING: apt-get could not install chromium; the HTML report's browser tests will be skipped" >&2
  elif command -v sudo >/dev/null 2>&1; then
    sudo apt-get update -qq && sudo apt-get install -y -qq chromium || echo "test.sh: WARNING: apt-get could not install chromium; the HTML report's browser tests will be skipped" >&2
  else
    echo "test.sh: WARNING: chromium is missing and cannot be installed without root; the HTML report's browser tests will be skipped" >&2
  fi
fi
bash scripts/setup.sh test,hf
exec .venv/bin/python -m pytest "$@"
