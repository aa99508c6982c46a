"""Which variants are tied, from the PPI++ estimates: at share 1 the pairs' differences are full
generation's paired intervals at 1 − α/m, the groups their letter display, and the rendered
section leads with them; with too few generated samples, one line says why not yet."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("ppi_py")

from ctxeval.render.ruler_ppi import ppi_markdown  # noqa: E402
from ctxeval.ruler.ppi import GENERATED, PREDICTED, SETTLED, drawn, ppi_tables  # noqa: E402
from ctxeval.stats.pseudo_labels import pseudo_label_interval  # noqa: E402


def _records(share: float, samples: int = 60) -> pd.DataFrame:
    """Three variants on one task: 'full' and 'tova' answer alike, 'stream' loses most answers."""
    rng = np.random.default_rng(1)
    truth = {"full": rng.random(samples) < 0.9}
    truth["tova"] = truth["full"].copy()
    truth["tova"][:2] = ~truth["tova"][:2]
    truth["stream"] = truth["full"] & (rng.random(samples) < 0.3)
    rows = []
    for model, right in truth.items():
        for k in range(samples):
            logp = float(rng.normal(0.5 if right[k] else -2, 1))
            settled = bool(right[k]) and logp > 1.0
            method = SETTLED if settled else GENERATED if drawn(42, "vt", 1024, k, share) else PREDICTED
            rows.append({"model": model, "task": "vt", "length": 1024, "sample": k, "prompt_sha256": f"vt/{k}", "method": method,
                         "generation_score": np.nan if method == PREDICTED else float(right[k]), "mean_logprob": logp,
                         "first_rank": 1, "likelihood_score": float(settled)})
    return pd.DataFrame(rows), truth


def test_at_share_1_the_pairs_are_full_generations_intervals_at_the_bonferroni_level():
    records, truth = _records(1.0)
    scores, _ = ppi_tables(records, 42)
    ranked = scores.sort_values("order").set_index("model")
    assert list(ranked.index) == ["full", "tova", "stream"] and ranked["pairs"].iloc[0] == 3
    level = 1 - 0.05 / 3
    assert ranked["simultaneous_confidence"].iloc[0] == pytest.approx(level)
    # stream − full: every pair labelled, so full generation's interval on the 60 differences, at 1 − 0.05/3
    d = pseudo_label_interval(truth["stream"].astype(float) - truth["full"].astype(float), level, (-1.0, 1.0))
    row = ranked.loc["stream"]
    assert (row["to_top"], row["to_top.low"], row["to_top.high"]) == pytest.approx((100 * d.estimate, 100 * d.low, 100 * d.high), abs=1e-9)
    assert row["to_top.high"] < 0
    # full and tova (2 flips of 60) share a letter; stream is told apart from both
    assert ranked.loc["full", "groups"] == ranked.loc["tova", "groups"] == "a" and ranked.loc["stream", "groups"] == "b"
    text = "\n".join(ppi_markdown(scores, pd.DataFrame(), delta=5.0))
    first = text.split("\n\n")[1]
    assert first.startswith("**RULER, prediction-powered: which variants are tied**") and "simultaneous 95 %" in first


def test_too_few_generated_says_in_one_line_why_it_cannot_tell_yet():
    records, _ = _records(0.05, samples=40)
    scores, _ = ppi_tables(records, 42)
    ranked = scores[scores["order"].notna()]
    assert len(ranked) == 3 and (ranked["groups"] == "").all()
    reason = ranked["tied_reason"].iloc[0]
    assert "has no interval yet" in reason
    text = "\n".join(ppi_markdown(scores, pd.DataFrame(), delta=5.0))
    assert f"1024: cannot tell yet: {reason}." in text


def test_two_models_get_no_tie_table():
    records, _ = _records(1.0)
    scores, _ = ppi_tables(records[records["model"] != "stream"], 42)
    assert "order" not in scores and not math.isnan(scores["score"].iloc[0])
