"""Tokenize a text and map every token to its exact byte and character span.

Offsets are built from the tokens' own byte pieces; the pieces must concatenate to the text's
UTF-8 bytes exactly, otherwise spans would be wrong and the text is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctxeval.backends.base import Scorer
from ctxeval.data.texts import Text
from ctxeval.errors import UserError


@dataclass(frozen=True)
class TokenizedText:
    """A text under one tokenizer: ids and, per token, its byte and character spans."""

    text: Text
    ids: np.ndarray  # int32 [n]
    byte_starts: np.ndarray  # int64 [n]
    byte_ends: np.ndarray
    char_starts: np.ndarray  # character index of the token's first byte
    char_ends: np.ndarray  # one past the character of the token's last byte

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def n_bytes(self) -> np.ndarray:
        return self.byte_ends - self.byte_starts


def tokenize(scorer: Scorer, text: Text) -> TokenizedText:
    """Tokenize `text` with the scorer's tokenizer and compute exact spans."""
    ids = scorer.tokenize(text.content)
    if not ids:
        raise UserError(f"text {text.text_id} has no tokens")
    pieces = [scorer.token_bytes(t) for t in ids]
    return tokenized_from_pieces(text, np.asarray(ids, dtype=np.int32), pieces)


def tokenized_from_pieces(text: Text, ids: np.ndarray, pieces: list[bytes]) -> TokenizedText:
    """Spans from byte pieces; a token that splits a multi-byte character covers that character."""
    raw = text.content.encode("utf-8")
    lengths = np.fromiter((len(p) for p in pieces), dtype=np.int64, count=len(pieces))
    byte_ends = np.cumsum(lengths)
    byte_starts = byte_ends - lengths
    if int(byte_ends[-1]) != len(raw) or b"".join(pieces) != raw:
        raise UserError(
            f"the tokenizer does not reproduce text {text.text_id} byte for byte "
            "(it normalises the text), so character offsets would be wrong"
        )
    # char_of_byte[b] = index of the character that byte b belongs to
    is_char_start = (np.frombuffer(raw, dtype=np.uint8) & 0xC0) != 0x80
    char_of_byte = np.cumsum(is_char_start) - 1
    char_starts = char_of_byte[byte_starts]
    char_ends = np.where(lengths > 0, char_of_byte[np.maximum(byte_ends - 1, 0)] + 1, char_starts)
    return TokenizedText(text, ids, byte_starts, byte_ends, char_starts, char_ends)
