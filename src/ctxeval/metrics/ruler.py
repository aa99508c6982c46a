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
