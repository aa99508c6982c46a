"""Restrict a diff to key tokens: the tokens a context-gain run's evaluator found to need
distant context (LongPPL's rule, metrics/keytokens.py), taken by character span, so the
evaluator's tokenizer need not be REF's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ctxeval.errors import FieldError, UserError
from ctxeval.metrics.keytokens import tokens_within
from ctxeval.results.base import read_result
from ctxeval.results.context_gain import ContextGainResult


def check_gain_run(gain_run: Path) -> ContextGainResult:
    """The result of `gain_run` if it is a finished context-gain run, else one line naming
    what it is (checked before a diff starts, so a wrong key-token run costs no model work),
    naming the option as the caller spells it."""
    try:
        return read_result(gain_run, reader="{name}", kinds=(ContextGainResult,))
    except UserError as refusal:
        raise FieldError("key_tokens", str(refusal)) from None


def key_token_mask(records: pd.DataFrame, texts: list[dict], gain_run: Path) -> tuple[np.ndarray, dict]:
    """True for each diff record that is a key token of the finished context-gain run
    `gain_run` (texts matched by content hash), and what picked them."""
    gain_run = Path(gain_run)
    gain = check_gain_run(gain_run)
    rule = gain.key_tokens
    gain_ids = {t["sha256"]: t["text_id"] for t in gain.manifest.texts or [] if "skipped" not in t}
    mask = np.zeros(len(records), dtype=bool)
    for text in texts:
        if text["sha256"] not in gain_ids:
            raise FieldError("key_tokens", f"{gain_run} did not score text {text['text_id']}")
        spans = gain.key_spans[gain_ids[text["sha256"]]]
        rows = (records["text_id"] == text["text_id"]).to_numpy()
        mask[rows] = tokens_within(records["char_start"].to_numpy()[rows], records["char_end"].to_numpy()[rows], spans)
    return mask, {"run": str(gain_run), "evaluator": rule["evaluator"], "alpha": rule["alpha"], "beta": rule["beta"], "tokens": int(mask.sum())}
