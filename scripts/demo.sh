#!/usr/bin/env bash
# The main job on a fresh machine: install, then a rank-based-perplexity sweep of the embedded
# Gemma 3 270M over context lengths 32..2048 on the bundled Chesterton excerpt.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/ctxeval sweep demo --lengths 32,64,128,256,512,1024,2048 --out runs/demo "$@"
