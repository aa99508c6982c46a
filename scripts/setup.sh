#!/usr/bin/env bash
# Create .venv (if missing) and install ctxeval with the given extras into it.
# llama-cpp-python is built from source on first install (about 10 minutes on 2 cores);
# pip caches the wheel afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
if [ -n "$extras" ]; then
  .venv/bin/python -m pip install --quiet -e ".[$extras]"
else
  .venv/bin/python -m pip install --quiet -e .
fi
