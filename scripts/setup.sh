#!/usr/bin/env bash
# Create .venv (if missing) and install ctxeval with the given extras into it.
# llama-cpp-python is built from source on first install (about 10 minutes on 2 cores); pip
# caches the wheel afterwards. That step says so before it starts and shows pip's own progress;
# the rest installs quietly, then names every package whose installed version it changed
# (e.g. the kvpress extra, through kvpress 0.5.5, puts pandas 2.x in place of a pandas 3).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
llama=$(grep -o '"llama-cpp-python==[^"]*"' pyproject.toml | head -1 | tr -d '"')
if ! .venv/bin/python -c "import sys; from importlib import metadata; sys.exit(metadata.version('llama-cpp-python') != sys.argv[1])" "${llama#*==}" 2>/dev/null; then
  echo "setup.sh: installing $llama: pip builds it from source the first time, about 10 minutes on 2 cores" \
       "(it caches the wheel: later installs take seconds); pip's progress follows" >&2
  .venv/bin/python -m pip install "$llama"
fi
before=$(.venv/bin/python -m pip list --format=freeze)
.venv/bin/python -m pip install --quiet -e ".${extras:+[$extras]}"
after=$(.venv/bin/python -m pip list --format=freeze)
.venv/bin/python - "$before" "$after" <<'PY'
import sys
before, after = (dict(line.split("==", 1) for line in text.splitlines() if "==" in line) for text in sys.argv[1:])
for name, version in sorted(after.items()):
    if before.get(name, version) != version:
        print(f"setup.sh: pip replaced {name} {before[name]} with {version} (a dependency of the extras pins it)", file=sys.stderr)
PY
