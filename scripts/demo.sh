#!/usr/bin/env bash
# The main job on a fresh machine: install, then the embedded Gemma 3 270M's effective context
# length: the same 8 spans of 16 targets scored with every length 32..1024, beside a truncation
# control that sees only the last 128 tokens (its L* must come out at 128). Its L* lines, with
# their intervals, are the demo's answer, so they come first on stdout. Then a
# rank-based-perplexity sweep over context lengths 32..1024 on the bundled Chesterton excerpt,
# with 5 seeded starts per length so that every point of scores_vs_length.png carries a 95 %
# interval over starts (one start per length is mostly noise): its thesis tables follow. approx
# context mode scores a start's 30 targets in one pass (contexts L..L+29); the thesis's exact
# mode (one pass per target, --context-mode exact or both) costs about 30 times as much. Ends by
# writing runs/demo/report.html with both runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# one document: spans are the bootstrap units (--unit span), so L* gets an interval
.venv/bin/ctxeval effective-length demo --lengths 32,64,128,256,512,1024 --starts 8 --targets 16 --unit span \
    --model gemma-3-270m --model 'gemma-3-270m?max_context=128' --out runs/demo-effective-length
.venv/bin/ctxeval sweep demo --lengths 32,64,128,256,512,1024 --context-mode approx --repeats 5 --out runs/demo "$@"
# the offline HTML report with the per-token explorer and the effective-length curves (open it in any browser)
exec .venv/bin/ctxeval report runs/demo runs/demo-effective-length --out runs/demo/report.html
