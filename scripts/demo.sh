#!/usr/bin/env bash
# The main job on a fresh machine: install, then a rank-based-perplexity sweep of the embedded
# Gemma 3 270M over context lengths 32..1024 on the bundled Chesterton excerpt, with 5 seeded
# starts per length so that every point of scores_vs_length.png carries a 95 % interval over
# starts (one start per length is mostly noise). approx context mode scores a start's 30 targets
# in one pass (contexts L..L+29); the thesis's exact mode (one pass per target,
# --context-mode exact or both) costs about 30 times as much. Ends by writing runs/demo/report.html.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ctxeval sweep demo --lengths 32,64,128,256,512,1024 --context-mode approx --repeats 5 --out runs/demo "$@"
# the offline HTML report with the per-token explorer (open it in any browser)
exec .venv/bin/ctxeval report runs/demo --out runs/demo/report.html
