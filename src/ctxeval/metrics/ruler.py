"""RULER's scoring (NVIDIA/RULER commit c3f5e3b, `scripts/eval/synthetic/constants.py` and
`scripts/eval/evaluate.py`): a prediction is cleaned of control characters, then each
reference counts if it occurs in it, case-insensitively. `string_match_all` (every synthetic
task) averages the share of references found; `string_match_part` (the QA tasks) counts a
sample when any reference is found. Both return percent rounded to 2 decimals, as RULER's do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_CONTROL = re.compile(r"[\x00-\x1f]")


def postprocess_pred(prediction: str) -> str:
    """RULER's `postprocess_pred`: strip, control characters to newlines, strip again."""
    return _CONTROL.sub("\n", prediction.strip()).strip()


def score_decided(prediction: str, references: Sequence[str], part: bool = False) -> bool:
    """Whether no text appended to a raw prediction can change its score, so generation may stop:
    every reference (any, with `part`: string_match_part) is already found. Exact because the
    cleaned text of a longer prediction starts with this one's (`postprocess_pred` strips the ends
    and maps characters one for one) and lowercasing is per character, but for a trailing capital
    sigma, which Python lowercases by what follows: such a text waits for the next token."""
    text = postprocess_pred(prediction)
    lowered = text.lower()
    if not (text + "a").lower().startswith(lowered):
        return False
    found = [r.lower() in lowered for r in references]
    return any(found) if part else all(found)


def match_all(prediction: str, references: Sequence[str]) -> float:
    """One sample's `string_match_all` score in [0, 1]: the share of references in the prediction."""
    text = prediction.lower()
    return sum(1.0 if r.lower() in text else 0.0 for r in references) / len(references)


def string_match_all(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> float:
    """RULER's `string_match_all`: mean over samples of the share of references found, in percent."""
    return round(sum(match_all(p, r) for p, r in zip(predictions, references)) / len(predictions) * 100, 2)


def string_match_part(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> float:
    """RULER's `string_match_part`: share of samples where any reference is found, in percent."""
    return round(sum(max(1.0 if r.lower() in p.lower() else 0.0 for r in refs) for p, refs in zip(predictions, references)) / len(predictions) * 100, 2)
