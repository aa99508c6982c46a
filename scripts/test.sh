#!/usr/bin/env bash
# The test suite on a fresh machine: install with test extras, then run pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# The HTML report's browser tests (tests/test_report_html.py) drive Debian's chromium, never a
# downloaded browser: as root, or through sudo, apt-get installs it (with the packages Debian's
# chromium depends on) after saying so; without either they skip, and this says which.
if ! command -v chromium >/dev/null 2>&1; then
  why="the HTML report's browser tests (tests/test_report_html.py) need Debian's chromium"
  skipped="the HTML report's browser tests (tests/test_report_html.py) will be skipped"
  if [ "$(id -u)" = 0 ]; then
    echo "test.sh: $why: installing it as root with apt-get (apt-get install chromium, and the packages it depends on)" >&2
    { apt-get update -qq && apt-get install -y -qq chromium; } || echo "test.sh: WARNING: apt-get could not install chromium; $skipped" >&2
  elif command -v sudo >/dev/null 2>&1; then
    echo "test.sh: $why: installing it with sudo apt-get (apt-get install chromium, and the packages it depends on)" >&2
    { sudo apt-get update -qq && sudo apt-get install -y -qq chromium; } || echo "test.sh: WARNING: apt-get could not install chromium; $skipped" >&2
  else
    echo "test.sh: WARNING: chromium is missing and cannot be installed without root; $skipped" >&2
  fi
fi
bash scripts/setup.sh test,hf
# Two pytest processes, so that no process holds every model the suite loads (tests/conftest.py,
# CTXEVAL_TEST_PART): every test module but two, then test_serve_lmeval.py and
# test_smollm2_model.py (lm-eval's and SmolLM2's hf models), each part run by
# scripts/test_part.sh (two workers, a worker's death costs only its test, a wall limit per
# part). The arguments go to each. The run fails if a part fails; a part that selects no test
# (exit code 5, e.g. `scripts/test.sh tests/test_cli.py`) fails it only if no part selects any.
statuses=()
for part in 1 2; do
  status=0
  bash scripts/test_part.sh "$part" "$@" || status=$?
  if [ "$status" = 2 ]; then exit 2; fi  # interrupted (Ctrl-C): no further part
  statuses+=("$status")
done
case " ${statuses[*]} " in
  " 5 5 ") exit 5 ;;
esac
for status in "${statuses[@]}"; do
  if [ "$status" != 0 ] && [ "$status" != 5 ]; then exit "$status"; fi
done
