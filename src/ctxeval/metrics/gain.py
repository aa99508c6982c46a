"""The per-target context gain of a context-gain run's records, and its key tokens.

Every target is scored with its long context (`chunked`) and a short one (`truncated`); the
gain g = log p_long - log p_short is a token-level quantity like a log-probability, and the key
tokens (LongPPL's rule, metrics/keytokens.py) are picked from it by an evaluator model.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from ctxeval.metrics.keytokens import key_token_mask, merge_spans, tokens_within
from ctxeval.stats.interval import Interval, quantile

LONG_METHOD = "chunked"
BIN_METHOD = "normal (mean ± z·SEM)"  # a gain-by-distance bin's interval
SHORT_METHOD = "truncated"


def gain_table(records: pd.DataFrame, model: str, text_id: str) -> pd.DataFrame:
    """One row per target of (model, text): long and short log-probabilities, contexts and gain.

    Targets whose context was already short keep their long score as short score (g = 0).
    """
    rows = records[(records["model"] == model) & (records["text_id"] == text_id)]
    long_ = rows[rows["method"] == LONG_METHOD].set_index("target_pos").sort_index()
    short = rows[rows["method"] == SHORT_METHOD].set_index("target_pos")
    if long_.index.has_duplicates or short.index.has_duplicates:
        raise ValueError(f"{model}/{text_id}: a target was scored twice with the same context kind")
    table = pd.DataFrame(
        {
            "char_start": long_["char_start"],
            "char_end": long_["char_end"],
            "n_bytes": long_["n_bytes"],
            "context_long": long_["context_len"],
            "logprob_long": long_["logprob"],
            "rank_long": long_["rank"],
        }
    )
    table["context_short"] = short["context_len"].reindex(table.index).fillna(table["context_long"]).astype(np.int64)
    table["logprob_short"] = short["logprob"].reindex(table.index).fillna(table["logprob_long"])
    table["rank_short"] = short["rank"].reindex(table.index).fillna(table["rank_long"]).astype(np.int64)
    table["gain"] = table["logprob_long"] - table["logprob_short"]
    table["distant"] = table["context_short"] < table["context_long"]
    return table.reset_index()


def key_spans(evaluator_table: pd.DataFrame, alpha: float, beta: float) -> np.ndarray:
    """Character spans of the evaluator's key tokens, merged."""
    mask = key_token_mask(evaluator_table["logprob_long"].to_numpy(), evaluator_table["logprob_short"].to_numpy(), alpha, beta)
    return merge_spans(evaluator_table["char_start"].to_numpy()[mask], evaluator_table["char_end"].to_numpy()[mask])


def key_tables(records: pd.DataFrame, models: list[str], texts: list[str], evaluator: str, alpha: float, beta: float) -> tuple[dict[tuple[str, str], pd.DataFrame], dict[str, np.ndarray]]:
    """Per (model, text), in model order, the gain table with a `key` column (inside one of the
    evaluator's key spans); and per text, those spans."""
    tables = {(model, text_id): gain_table(records, model, text_id) for model in models for text_id in texts}
    spans = {text_id: key_spans(tables[evaluator, text_id], alpha, beta) for text_id in texts}
    for (model, text_id), table in tables.items():
        table["key"] = tokens_within(table["char_start"].to_numpy(), table["char_end"].to_numpy(), spans[text_id])
    return tables, spans


def ppl_ratio(gain: Interval) -> Interval:
    """The perplexity ratio long/short, exp(-g), of a mean gain g with its interval: the bounds
    swap, as exp(-g) falls as g rises; no standard error of its own."""
    return replace(gain, estimate=math.exp(-gain.estimate), low=math.exp(-gain.high), high=math.exp(-gain.low), se=math.nan)


def bin_gain(gains: np.ndarray, confidence: float) -> Interval:
    """The mean gain of one distance bin's targets with its normal interval (mean ± z·SEM, the
    targets taken as independent); none for a single target."""
    n, mean = len(gains), float(np.mean(gains))
    if n < 2:
        return Interval(mean, n=n, confidence=confidence, method=BIN_METHOD, reason="no interval: one target in the bin")
    se = float(np.std(gains, ddof=1) / math.sqrt(n))
    z = quantile(confidence)
    return Interval(mean, mean - z * se, mean + z * se, se, n, confidence, BIN_METHOD)
