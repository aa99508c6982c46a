#!/usr/bin/env bash
# The main job on a fresh machine: install, then a rank-based-perplexity sweep of the embedded
# Gemma 3 270M over context lengths 32..1024 on the bundled Chesterton excerpt, in both context
# modes (exact: every target sees exactly L tokens; approx: one pass per start), so the tables
# also show how far approx is from exact.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/ctxeval sweep demo --lengths 32,64,128,256,512,1024 --context-mode both --out runs/demo "$@"
