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
from importlib import metadata
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name
from pip._vendor.packaging.version import Version

before, after = (dict(line.split("==", 1) for line in text.splitlines() if "==" in line) for text in sys.argv[1:])


def needs(name: str, old: str) -> list[str]:
    """The installed packages whose requirements rule out version `old` of `name`."""
    out = []
    for dist in metadata.distributions():
        for requirement in map(Requirement, dist.requires or []):
            if canonicalize_name(requirement.name) == canonicalize_name(name) and not requirement.specifier.contains(old, prereleases=True) \
                    and (requirement.marker is None or requirement.marker.evaluate({"extra": ""})):
                out.append(f"{dist.metadata['Name']} {dist.version} needs {requirement.name}{requirement.specifier}")
    return out


for name, version in sorted(after.items()):
    old = before.get(name, version)
    if Version(version) < Version(old):
        print(f"setup.sh: pip replaced {name} {old} with the older {version}: {'; '.join(needs(name, old)) or 'a package of the extras needs it'}", file=sys.stderr)
    elif version != old:
        print(f"setup.sh: pip upgraded {name} {old} to {version}", file=sys.stderr)
PY
