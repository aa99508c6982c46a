#!/usr/bin/env bash
# One part of the test suite (scripts/test.sh runs parts 1 and 2 in turn, after the install):
# `scripts/test_part.sh PART [pytest arguments]`. The part's modules go to two pytest-xdist
# workers, a module to a worker (its module fixtures set up once), in the order tests/conftest.py
# gives them (the modules that load a model first), each worker on its own half of
# the cores (tests/conftest.py; `-n 0` among the arguments runs the part in one process on every
# core). A hung test fails after pytest-timeout's 300 s (pyproject.toml) by ending its worker. A
# worker that dies (that, a test ending its process, the OOM killer) costs the test it was
# running, reported failed; the rest of its module runs on a new worker and the summary lists
# the deaths (tests/xdist_crashes.py); a second death can leave the part's other tests unrun
# until the wall limit (pytest-xdist 3.8's loadfile scheduler, tests/test_test_parts.py). Each part has a wall limit (on 2
# idle cores, 2026-12-02, the parts take about 24 and 2 minutes): past it the part is
# interrupted as by Ctrl-C (`--foreground`: a Ctrl-C at the terminal still reaches pytest),
# prints the failures it has seen, and exits 124. CTXEVAL_TEST_WALL sets one limit for every part
# instead (`CTXEVAL_TEST_WALL=0`: none; e.g. for `-n 0` on a slow machine).
set -euo pipefail
cd "$(dirname "$0")/.."
part=$1
shift
limits=([1]=35m [2]=15m)
CTXEVAL_TEST_PART=$part exec timeout --foreground --signal=INT --kill-after=60 "${CTXEVAL_TEST_WALL:-${limits[$part]}}" \
  .venv/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --max-worker-restart 8 -p tests.xdist_crashes "$@"
