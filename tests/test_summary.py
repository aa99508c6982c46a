"""Summaries recomputed from hand-made token records."""

import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ctxeval import api
from ctxeval.metrics.config import MetricConfig
from ctxeval.report.summary import approx_vs_exact, summarize
from ctxeval.render.tables import appendix, markdown_tables
from tests.conftest import run_cli
from tests.synthetic_runs import write_run


def records(rows):
    base = {"model": "m", "text_id": "t", "method": "sweep", "context_mode": "exact", "repeat": 0, "n_bytes": 2}
    df = pd.DataFrame([base | r for r in rows])
    df["char_start"], df["char_end"] = df["target_pos"], df["target_pos"] + 1  # required record columns
    df["topk_logprobs"] = [np.array([-0.5, -1.0, -2.0])] * len(df)
    return df


def test_group_values_and_sd_over_windows():
    df = records(
        [
            {"nominal_len": 8, "window_id": "w0", "target_pos": 10, "logprob": math.log(0.5), "rank": 1},
            {"nominal_len": 8, "window_id": "w0", "target_pos": 11, "logprob": math.log(0.25), "rank": 2},
            {"nominal_len": 8, "window_id": "w1", "target_pos": 20, "logprob": math.log(0.125), "rank": 5, "repeat": 1},
            {"nominal_len": 8, "window_id": "w1", "target_pos": 21, "logprob": math.log(0.5), "rank": 1, "repeat": 1},
        ]
    )
    metrics = MetricConfig(cutoff=3, alphas=(0.1,), approx_k=3, penalty=3.0)
    out = summarize(df, metrics, {"m": 100}, (1.0,))
    row = out.iloc[0]
    assert row["n"] == 4 and row["n_windows"] == 2
    assert row["ppl"] == pytest.approx(math.exp((math.log(2) + math.log(4) + math.log(8) + math.log(2)) / 4))
    assert row["bpb"] == pytest.approx((1 + 2 + 3 + 1) / 8)
    # cutoff 3: rank 5 scores 0
    assert row["lin"] == pytest.approx((1 + 2 / 3 + 0 + 1) / 4)
    assert row["rp"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert row["top1"] == 0.5
    # approx: rank 5 > k=3 -> -2.0 - 3
    approx = [math.log(0.5), math.log(0.25), -5.0, math.log(0.5)]
    assert row["approx_ppl"] == pytest.approx(math.exp(-np.mean(approx)))
    w0 = (1 + 0.5) / 2
    w1 = (0 + 1) / 2
    assert row["rp_sd"] == pytest.approx(np.std([w0, w1], ddof=1))


def test_single_window_has_no_sd():
    df = records([{"nominal_len": 4, "window_id": "w", "target_pos": 1, "logprob": -1.0, "rank": 1}])
    out = summarize(df, MetricConfig(approx_k=3), {"m": 10}, (1.0,))
    assert math.isnan(out.iloc[0]["ppl_sd"])


def test_approx_vs_exact_pairs_the_same_targets():
    rows = []
    for mode, lps in (("exact", [-1.0, -2.0]), ("approx", [-1.5, -1.0])):
        for pos, lp in zip((5, 6), lps):
            rows.append({"context_mode": mode, "nominal_len": 4, "window_id": mode, "target_pos": pos, "logprob": lp, "rank": 1 if pos == 5 else 2})
    out = approx_vs_exact(records(rows))
    assert out.iloc[0]["n"] == 2
    assert out.iloc[0]["mean_abs_delta_logprob"] == pytest.approx(0.75)
    assert out.iloc[0]["max_abs_delta_logprob"] == pytest.approx(1.0)


def test_tables_have_thesis_shapes():
    df = records(
        [{"nominal_len": L, "window_id": f"w{L}", "target_pos": L, "logprob": -1.0, "rank": 2} for L in (32, 64)]
    )
    metrics = MetricConfig(approx_k=3)
    md = markdown_tables(summarize(df, metrics, {"m": 10}, (1.0,)), metrics, pd.DataFrame())
    assert "thesis Table 1" in md and "thesis Table 2" in md and "Appendix A" in md
    assert "| LIN " in md or "LIN" in md


def test_plotted_intervals_over_repeats_are_t_intervals_of_window_nll():
    rows = []
    for w, lps in enumerate(([-1.0, -2.0], [-0.5, -0.7], [-3.0, -1.0])):
        rows += [{"nominal_len": 8, "window_id": f"w{w}", "repeat": w, "target_pos": 10 * w + i, "logprob": lp, "rank": 1 + i} for i, lp in enumerate(lps)]
    row = summarize(records(rows), MetricConfig(cutoff=3, alphas=(0.1,), approx_k=3), {"m": 100}, (1.0,)).iloc[0]
    nll = np.array([1.5, 0.6, 2.0])  # mean NLL of each window
    half = stats.t.ppf(0.975, 2) * nll.std(ddof=1) / math.sqrt(3)
    assert (row["ppl.low"], row["ppl.high"]) == pytest.approx((math.exp(nll.mean() - half), math.exp(nll.mean() + half)))
    assert row["ppl.low"] < row["ppl"] < row["ppl.high"] and row["ppl"] == pytest.approx(math.exp(nll.mean()), rel=1e-12)
    assert (row["ppl.n"], row["ppl.confidence"], row["ppl.method"], math.isnan(row["ppl.se"])) == (3, 0.95, "t over 3 windows", True)
    rp = np.array([0.75, 0.75, 0.75])  # ranks 1 and 2 in every window: rp constant, interval collapses
    assert row["rp.low"] == pytest.approx(rp.mean()) and row["rp.high"] == pytest.approx(rp.mean()) and row["rp.se"] == pytest.approx(0.0)


def _two_targets():
    """Rank 1 (p = 0.5) and rank 5 (p = 0.125), k = 3, penalty 3: exact PPL = exp((ln 2 + ln 8) / 2)
    = 4; the thesis's PPL (approximate) = exp((ln 2 + 2.0 + 3) / 2) = 17.2286 (rank 5 > k gets
    log p_l - 3 = -2.0 - 3); LIN (cutoff 3) = (1 + 0) / 2 = 0.5."""
    df = records([
        {"nominal_len": 8, "window_id": "w0", "target_pos": 10, "logprob": math.log(0.5), "rank": 1},
        {"nominal_len": 8, "window_id": "w0", "target_pos": 11, "logprob": math.log(0.125), "rank": 5},
    ])
    metrics = MetricConfig(cutoff=3, alphas=(0.1,), approx_k=3, penalty=3.0)
    return summarize(df, metrics, {"m": 100}, (1.0,)), metrics


def test_exact_and_approximate_ppl_are_labelled_apart():
    """The thesis's Appendix A row "PPL" is its approximate perplexity: ctxeval labels both."""
    summary, metrics = _two_targets()
    full = appendix(summary, metrics)[("t", "sweep (exact)")]["m"]
    assert full[(8, "PPL (exact)")] == pytest.approx(4.0)
    assert full[(8, "approx PPL (thesis, top-3, penalty 3)")] == pytest.approx(math.exp((math.log(2) + 5.0) / 2))
    assert full[(8, "LIN")] == pytest.approx(0.5)
    md = markdown_tables(summary, metrics, pd.DataFrame())
    assert "| PPL (exact) " in md and "Approximate perplexity (thesis Table 2): approx PPL (thesis, top-3, penalty 3)" in md
    assert not re.search(r"\| PPL +\|", md)  # no bare "PPL" row that could be either


def test_thesis_tables_have_only_the_thesis_rows():
    summary, metrics = _two_targets()
    thesis = appendix(summary, metrics, thesis=True)[("t", "sweep (exact)")]["m"]
    assert [m for _, m in thesis.index] == ["approx PPL (thesis, top-3, penalty 3)", "LIN", "RP", "A0.1", "AVG"]
    assert thesis.iloc[0] == pytest.approx(17.2286, abs=1e-4)
    md = markdown_tables(summary, metrics, pd.DataFrame(), thesis=True)
    assert "PPL (exact)" not in md.split("\n\n", 2)[2] and "TOP1" not in md and "17.229" in md


def test_summary_thesis_option_prints_the_thesis_tables(tmp_path):
    run = write_run(tmp_path / "run", "m", lengths=[8, 16], n_compare=6)
    plain = run_cli("summary", str(run))
    thesis = run_cli("summary", str(run), "--thesis")
    assert plain.returncode == 0 and thesis.returncode == 0, plain.stderr + thesis.stderr
    label = "approx PPL (thesis, top-5, penalty 3)"
    assert label in plain.stdout and "| PPL (exact) " in plain.stdout and "TOP1" in plain.stdout
    assert label in thesis.stdout and "| PPL (exact) " not in thesis.stdout and "TOP1" not in thesis.stdout
    # the numbers are the run's own: the approximate PPL of each length as in the full summary
    for value in api.summary(run).summary["approx_ppl"]:
        assert f"{value:.3f}" in thesis.stdout
