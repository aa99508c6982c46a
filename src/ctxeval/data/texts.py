"""Reading texts exactly as they are on disk.

Text is bytes first (DESIGN.md): files are decoded as UTF-8 without newline translation, so
character offsets and bits-per-byte refer to the exact text that is tokenized. A WikiText file
with CRLF line ends keeps its CRs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from ctxeval.errors import UserError

DEMO_TEXT_NAME = "demo"
_DEMO_FILE = "thursday-ch1-4.txt"
RULER_HAYSTACK_NAME = "gutenberg"
_RULER_HAYSTACK_FILE = "haystack.txt"


@dataclass(frozen=True)
class Text:
    """A text to score: its id (used in records), its source and its exact content."""

    text_id: str
    source: str
    content: str
    sha256: str

    @property
    def n_bytes(self) -> int:
        return len(self.content.encode("utf-8"))


def demo_text_path() -> Path:
    """The bundled public-domain excerpt (Chesterton, *The Man Who Was Thursday*, ch. I-IV)."""
    return Path(str(files("ctxeval.data").joinpath("demo", _DEMO_FILE)))


def ruler_haystack_path() -> Path:
    """The bundled RULER essay haystack: Chesterton's *The Man Who Was Thursday*, then Melville's
    *Moby-Dick*, each sentence once (src/ctxeval/data/ruler/README.md), 128K tokens without a repeat."""
    return Path(str(files("ctxeval.data").joinpath("ruler", _RULER_HAYSTACK_FILE)))


def load_text(spec: str | Path) -> Text:
    """Load a UTF-8 file byte-exactly; `demo` names the bundled text, `gutenberg` the bundled
    RULER haystack.

    Raises UserError for a missing, unreadable, non-UTF-8 or empty file.
    """
    spec_str = str(spec)
    bundled = {DEMO_TEXT_NAME: demo_text_path, RULER_HAYSTACK_NAME: ruler_haystack_path}
    path = bundled[spec_str]() if spec_str in bundled else Path(spec_str)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"text file not found: {spec_str}") from None
    except IsADirectoryError:
        raise UserError(f"text path is a directory, not a file: {spec_str}") from None
    except OSError as exc:
        raise UserError(f"cannot read text file {spec_str}: {exc.strerror}") from None
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"text file is not valid UTF-8: {spec_str} (byte {exc.start}); convert it to UTF-8 first"
        ) from None
    if not content.strip():
        raise UserError(f"text file is empty: {spec_str}")
    text_id = spec_str if spec_str in bundled else path.stem
    return Text(
        text_id=text_id,
        source=str(path),
        content=content,
        sha256=hashlib.sha256(raw).hexdigest(),
    )
