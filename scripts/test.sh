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
# Three pytest processes, so that no process holds every model the suite loads (tests/conftest.py,
# CTXEVAL_TEST_PART): every test module but the few that load the largest models, then
# test_hf.py (whose hf Gemma lives for its whole session), then test_serve_lmeval.py and
# test_smollm2_model.py. The arguments go to each. The run fails if a part fails; a part that
# selects no test (exit code 5, e.g. `scripts/test.sh tests/test_cli.py`) fails it only if no
# part selects any. Each part runs its test modules on two pytest-xdist workers, a module to a
# worker (its module fixtures set up once), each worker on its own half of the cores
# (tests/conftest.py); `-n 0` after the command runs each part in one process on every core.
# A hung test fails after pytest-timeout's 300 s (pyproject.toml) by ending its worker; a
# module whose worker ended is given to a new worker once (`--max-worker-restart 1`: xdist would
# otherwise run the hung test again on each of up to eight replacements). Each part has a wall
# limit (on 2 idle cores, 2026-11-28, the parts take about 13, 1 and 3 minutes): past it the part
# is interrupted as by Ctrl-C (`--foreground`: a Ctrl-C at the terminal still reaches pytest),
# prints the failures it has seen, and fails the run (exit code 124). CTXEVAL_TEST_WALL sets one
# limit for every part instead (`CTXEVAL_TEST_WALL=0`: none; e.g. for `-n 0` on a slow machine).
limits=([1]=35m [2]=10m [3]=15m)
statuses=()
for part in 1 2 3; do
  status=0
  CTXEVAL_TEST_PART=$part timeout --foreground --signal=INT --kill-after=60 "${CTXEVAL_TEST_WALL:-${limits[$part]}}" \
    .venv/bin/python -m pytest -n 2 --dist loadfile --max-worker-restart 1 "$@" || status=$?
  if [ "$status" = 2 ]; then exit 2; fi  # interrupted (Ctrl-C): no further part
  statuses+=("$status")
done
case " ${statuses[*]} " in
  " 5 5 5 ") exit 5 ;;
esac
for status in "${statuses[@]}"; do
  if [ "$status" != 0 ] && [ "$status" != 5 ]; then exit "$status"; fi
done
