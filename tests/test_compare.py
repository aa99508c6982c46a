"""Window pairing and the compare command, from pure tables to two real runs."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxeval.errors import UserError
from ctxeval.pairing import overlap_fraction, pair_windows
from ctxeval.report.compare import build_report
from ctxeval.render.compare import render_markdown
from ctxeval.stats.gates import gate, resolve_minima
from ctxeval.stats.paired import paired_bca

from .conftest import run_cli


def windows(spans, loss=2.0, tokens=10, sha="s"):
    return pd.DataFrame(
        [{"text_sha256": sha, "nominal_len": 8, "repeat": 0, "span_start": a, "span_end": b, "window_id": f"w{a}", "tokens": tokens, "loss": loss} for a, b in spans]
    )


def test_overlap_fraction_is_measured_from_spans():
    assert overlap_fraction(windows([(0, 10), (10, 20), (20, 30)])) == 0.0
    assert overlap_fraction(windows([(0, 10), (5, 15), (20, 30)])) == pytest.approx(2 / 3)
    assert overlap_fraction(windows([(0, 100), (10, 20), (30, 40)])) == 1.0
    # different texts never overlap
    two_texts = pd.concat([windows([(0, 10)], sha="a"), windows([(0, 10)], sha="b")])
    assert overlap_fraction(two_texts) == 0.0


def test_mismatched_window_sets_report_partial_pairing():
    a = windows([(0, 10), (10, 20), (20, 30)])
    b = windows([(10, 20), (20, 30), (30, 40)], tokens=10)
    p = pair_windows(a, b)
    assert len(p.paired) == 2 and p.match_fraction == pytest.approx(2 / 4)


def test_token_count_mismatch_is_counted():
    p = pair_windows(windows([(0, 10)], tokens=10), windows([(0, 10)], tokens=9))
    assert p.token_mismatches == 1


def scored(n, losses, tokens=200):
    """n disjoint windows of one text, in run order, with the given losses and an `avg` score."""
    table = windows([(100 * i, 100 * i + 99) for i in range(n)], tokens=tokens)
    return table.assign(loss=losses, avg=0.5)


def naive_ratio(loss_a, loss_b, tokens):
    """exp(sum t (l_B - l_A) / sum t), by a plain loop."""
    num = den = 0.0
    for a, b, t in zip(loss_a, loss_b, tokens):
        num += t * (b - a)
        den += t
    return math.exp(num / den)


def release_report(a, b, nan_windows="exclude"):
    report = build_report(pair_windows(a, b), ("A", "B"), 500, 0, False, ["avg"], nan_windows, minima=resolve_minima("release", None, None))
    return report, gate(report, "release", None)


def test_an_odd_perfectly_paired_set_passes_release_and_the_halves_show_drift():
    rng = np.random.default_rng(1)
    loss_a = rng.normal(3.0, 0.3, 101)
    loss_b = loss_a + rng.normal(0.02, 0.05, 101)
    report, failures = release_report(scored(101, loss_a), scored(101, loss_b))
    assert failures == []  # 101 windows x 200 tokens in each arm
    drift = report["primary_metric"]["drift"]
    assert (drift["first_half"]["windows"], drift["second_half"]["windows"]) == (50, 51)
    assert drift["first_half"]["ratio"]["estimate"] == pytest.approx(naive_ratio(loss_a[:50], loss_b[:50], [200] * 50))
    assert drift["second_half"]["ratio"]["estimate"] == pytest.approx(naive_ratio(loss_a[50:], loss_b[50:], [200] * 51))
    assert (drift["first_half"]["ratio"]["n"], drift["first_half"]["ratio"]["method"], drift["first_half"]["delta_log_nll"]["confidence"]) == (50, "BCa", 0.95)


def test_preview_and_final_are_the_two_arms():
    # paper 001: "two arms A and B (e.g., preview/final ...)". Hand case: A has 4 windows, B the
    # same 4 and one more; tokens 10, 20, 30, 40 (and 50 for B's extra window)
    tokens = [10, 20, 30, 40]
    a = windows([(0, 9), (10, 19), (20, 29), (30, 39)]).assign(tokens=tokens, loss=[2.0, 2.5, 3.0, 1.0], avg=0.5)
    b = windows([(0, 9), (10, 19), (20, 29), (30, 39), (40, 49)]).assign(tokens=tokens + [50], loss=[2.5, 2.0, 3.5, 1.5, 9.0], avg=0.5)
    report = build_report(pair_windows(a, b), ("A", "B"), 500, 0, None, ["avg"], minima=(4, 100))
    pm = report["primary_metric"]
    # sum t * loss_A = 10*2 + 20*2.5 + 30*3 + 40*1 = 200 over 100 tokens; B: 25 + 40 + 105 + 60 = 230
    assert pm["preview"] == pytest.approx(math.exp(2.0), rel=1e-12)
    assert pm["final"] == pytest.approx(math.exp(2.3), rel=1e-12)
    assert pm["ratio"]["estimate"] == pytest.approx(math.exp(0.3), rel=1e-12) == pytest.approx(pm["final"] / pm["preview"])
    assert pm["delta_log_nll"]["estimate"] == pytest.approx(0.3, rel=1e-12)
    cov = report["dataset"]["windows"]["stats"]["coverage"]
    assert cov["preview"] == {"windows": 4, "tokens": 100, "compared_windows": 4, "compared_tokens": 100, "min_windows": 4, "min_tokens": 100, "minima_met": True}
    assert cov["final"] == {"windows": 5, "tokens": 150, "compared_windows": 4, "compared_tokens": 100, "min_windows": 4, "min_tokens": 100, "minima_met": True}
    failures = gate(report, "ci", None)
    assert "preview/final window counts differ: A has 4 windows, B has 5" in failures
    strict = build_report(pair_windows(a, b), ("A", "B"), 500, 0, None, ["avg"], minima=(5, 100))
    assert strict["dataset"]["windows"]["stats"]["coverage"]["final"]["minima_met"] is False
    assert "final (B): 4 windows / 100 tokens compared, below the minimum of 5 / 100" in gate(strict, "ci", None)
    md = render_markdown(report)
    assert "| A (preview) | 4 | 100 | 4 | 100 | 7.389 | 4 / 100: met |" in md
    assert "| B (final) | 5 | 150 | 4 | 100 | 9.974 | 4 / 100: met |" in md


def test_release_fails_when_a_and_b_hold_different_window_counts():
    loss = np.full(101, 3.0)
    report, failures = release_report(scored(101, loss), scored(100, loss[:100]))
    assert any(f.startswith("pairing is") for f in failures)
    assert "preview/final window counts differ: A has 101 windows, B has 100" in failures
    assert report["dataset"]["windows"]["stats"]["coverage"]["final"]["windows"] == 100


def test_contract_violations_are_reported_in_every_profile():
    # paper 001's runtime contract: match fraction 1.0 and overlap fraction 0.0
    a = windows([(0, 10), (5, 15), (20, 30), (40, 50)]).assign(loss=[2.0, 2.2, 2.1, 2.4], avg=0.5)
    b = windows([(0, 10), (5, 15), (20, 30)]).assign(loss=[2.1, 2.2, 2.3], avg=0.5)
    report = build_report(pair_windows(a, b), ("A", "B"), 500, 0, None, ["avg"])
    assert report["invariants"] == {
        "holds": False,
        "violations": [
            "window_match_fraction is 0.7500, not 1.0 (3 of 4 / 3 windows paired)",
            "window_overlap_fraction is 0.6667, not 0.0 (paired windows share scored text)",
        ],
    }
    assert gate(report, "dev", None) == []  # dev reports, ci/release also fail
    assert "**Contract violations** (paper 001: match fraction 1.0, overlap fraction 0.0): window_match_fraction is 0.7500" in render_markdown(report)
    clean = build_report(pair_windows(a.iloc[2:3], b.iloc[2:3]), ("A", "B"), 500, 0, None, ["avg"])
    assert clean["invariants"] == {"holds": True, "violations": []}
    assert "Contract (paper 001): match fraction 1.0, overlap fraction 0.0: holds." in render_markdown(clean)


def test_degenerate_is_all_differences_equal_and_collapses_to_their_mean():
    a = scored(6, np.array([2.0, 2.5, 3.0, 1.0, 1.5, 2.0]))
    same = build_report(pair_windows(a, a.assign(loss=a["loss"] + 0.25)), ("A", "B"), 500, 0, None, ["avg"])
    summary = same["dataset"]["windows"]["stats"]["paired_delta_summary"]
    log, ratio = same["primary_metric"]["delta_log_nll"], same["primary_metric"]["ratio"]
    assert summary["degenerate"] is True and [log["low"], log["high"]] == [summary["mean"], summary["mean"]] == [0.25, 0.25]
    assert [ratio["low"], ratio["high"]] == [math.exp(0.25)] * 2
    assert log["interval"] == summary["interval"] == "degenerate" and log["degenerate"] is True
    assert "Degenerate: all paired differences are equal; the interval is collapsed to the point." in render_markdown(same)
    # one document forced into a cluster bootstrap: no interval, but the differences vary
    single = build_report(pair_windows(a, a.assign(loss=a["loss"] + [0.1, 0.2, 0.1, 0.2, 0.1, 0.3])), ("A", "B"), 500, 0, True, ["avg"])
    summary = single["dataset"]["windows"]["stats"]["paired_delta_summary"]
    log, ratio = single["primary_metric"]["delta_log_nll"], single["primary_metric"]["ratio"]
    assert (summary["degenerate"], summary["interval"], log["interval"], log["low"], log["high"], ratio["low"], ratio["high"]) == (False, "none", "none", None, None, None, None)
    assert (log["n"], log["method"], ratio["reason"]) == (1, "BCa-cluster", summary["reason"])
    assert "\nno interval (one document): a single resampling unit has no spread to resample.\n" in render_markdown(single)


def test_differences_equal_within_rounding_are_degenerate_without_tripping_the_contract():
    # exactly 0.7 in 3 windows, whose mean is 0.6999999999999998; and loss + 0.7 - loss, which
    # is 0.7 to within a rounding step in each window
    exact = scored(3, np.zeros(3))
    shifted = scored(5, np.array([2.1, 3.3, 1.7, 2.9, 0.4]))
    for a, b in ((exact, exact.assign(loss=0.7)), (shifted, shifted.assign(loss=shifted["loss"] + 0.7))):
        pairing = pair_windows(a, b)
        delta = pairing.paired["loss_b"].to_numpy() - pairing.paired["loss_a"].to_numpy()
        assert np.mean(delta) != 0.7 or np.ptp(delta) > 0
        report = build_report(pairing, ("A", "B"), 500, 0, None, ["avg"])
        pm, summary = report["primary_metric"], report["dataset"]["windows"]["stats"]["paired_delta_summary"]
        log = pm["delta_log_nll"]
        assert (log["interval"], summary["degenerate"], report["invariants"]["holds"]) == ("degenerate", True, True)
        assert log["low"] == log["high"] == log["estimate"] == pytest.approx(0.7, rel=1e-12)
        assert "Degenerate: all paired differences are equal; the interval is collapsed to the point." in render_markdown(report)


def test_one_window_has_no_interval_and_the_report_says_so():
    a = scored(1, np.array([2.0]))
    report = build_report(pair_windows(a, a.assign(loss=2.47289)), ("A", "B"), 500, 0, None, ["avg"])
    pm, summary = report["primary_metric"], report["dataset"]["windows"]["stats"]["paired_delta_summary"]
    log, ratio = pm["delta_log_nll"], pm["ratio"]
    assert (log["interval"], log["low"], log["high"], ratio["low"], ratio["high"], summary["degenerate"]) == ("none", None, None, None, None, False)
    avg = report["secondary_metrics"]["avg"]["difference"]
    assert avg["low"] is None and avg["interval"] == "none" and avg["estimate"] == pytest.approx(0.0)
    md = render_markdown(report)
    assert f"**Perplexity ratio B/A = {math.exp(0.47289):.4f}**, no interval (PPL A" in md and "Δ log-NLL +0.47289 (no interval))" in md
    assert "\nno interval (one window): a single resampling unit has no spread to resample.\n" in md and "[1.6047, 1.6047]" not in md
    assert gate(report, "dev", 2.0) == ["--max-ratio 2 cannot be checked: no interval (one window): a single resampling unit has no spread to resample"]


def two_texts(delta_second=0.1, n=8):
    """The thesis's two-text setup by hand: deltas 0 in 8 windows of one text, 0.1 in 8 of the other."""
    a = pd.concat([scored(n, np.full(n, 2.0)).assign(text_sha256=sha) for sha in ("t1", "t2")], ignore_index=True)
    b = a.assign(loss=np.r_[np.full(n, 2.0), np.full(n, 2.0 + delta_second)])
    return pair_windows(a, b)


def test_two_texts_fall_back_to_resampling_windows_with_the_reason():
    report = build_report(two_texts(), ("A", "B"), 2000, 0, None, ["avg"])
    bs = report["dataset"]["windows"]["stats"]["bootstrap"]
    assert (bs["resampling_unit"], bs["resampling_units"], bs["method"]) == ("window", 16, "BCa")
    log = report["primary_metric"]["delta_log_nll"]
    assert [log["low"], log["high"]] == [pytest.approx(0.025, abs=1e-9), pytest.approx(0.075, abs=1e-9)]
    assert (log["n"], log["method"], log["confidence"]) == (16, "BCa", 0.95)
    # --max-ratio reads the ratio's upper bound, exp(0.075) = 1.0779, not the log scale's 0.075
    assert report["primary_metric"]["ratio"]["high"] == pytest.approx(math.exp(0.075), abs=1e-9)
    assert gate(report, "dev", 1.07) == ["upper CI bound of the perplexity ratio 1.0779 exceeds --max-ratio 1.07"]
    assert gate(report, "dev", 1.08) == []
    assert "only 2 documents are compared, fewer than the 3 a cluster bootstrap needs" in bs["unit_reason"]
    assert "too narrow" in bs["warning"]
    md = render_markdown(report)
    assert "Bootstrap: BCa over 16 windows" in md and "Resampling unit: only 2 documents" in md and "**Warning:**" in md
    forced = build_report(two_texts(), ("A", "B"), 2000, 0, True, ["avg"])
    bs = forced["dataset"]["windows"]["stats"]["bootstrap"]
    assert (bs["resampling_unit"], bs["resampling_units"], bs["method"]) == ("text", 2, "BCa-cluster")
    log = forced["primary_metric"]["delta_log_nll"]
    assert [log["low"], log["high"]] == [pytest.approx(0.0, abs=1e-9), pytest.approx(0.1, abs=1e-9)]  # the two document means
    assert (log["n"], log["method"]) == (2, "BCa-cluster") and "| rank score | B − A | 95 % BCa-cluster interval |" in render_markdown(forced)
    assert "covered less than 85 %" in bs["warning"]


def test_enough_texts_resample_documents_and_report_how_many():
    a = pd.concat([scored(4, np.full(4, 2.0)).assign(text_sha256=f"t{i}") for i in range(9)], ignore_index=True)
    b = a.assign(loss=2.0 + np.repeat(np.linspace(0, 0.2, 9), 4) + np.tile([0.0, 0.01, 0.02, 0.03], 9))
    report = build_report(pair_windows(a, b), ("A", "B"), 500, 0, None, ["avg"])
    bs = report["dataset"]["windows"]["stats"]["bootstrap"]
    assert (bs["resampling_unit"], bs["resampling_units"], bs["min_clusters"], bs["warning"]) == ("text", 9, 3, None)
    assert bs["unit_reason"] == "9 documents are compared (at least 3): whole documents are resampled"
    assert "Bootstrap: BCa-cluster over 9 documents" in render_markdown(report)


def test_compare_records_the_resampling_scheme():
    rng = np.random.default_rng(5)
    a = scored(30, rng.normal(3.0, 0.3, 30)).assign(tokens=rng.integers(20, 400, 30))
    b = a.assign(loss=a["loss"] + rng.normal(0.05, 0.1, 30))
    by_tokens = build_report(pair_windows(a, b), ("A", "B"), 1000, 3, None, ["avg"], resample="tokens")
    by_windows = build_report(pair_windows(a, b), ("A", "B"), 1000, 3, None, ["avg"])
    delta, tokens = (b["loss"] - a["loss"]).to_numpy(), a["tokens"].to_numpy(dtype=float)
    expected = paired_bca(delta, tokens, 1000, 3, resample="tokens")
    assert by_tokens["dataset"]["windows"]["stats"]["bootstrap"]["resample"] == "tokens"
    assert by_windows["dataset"]["windows"]["stats"]["bootstrap"]["resample"] == "windows"
    log, other = by_tokens["primary_metric"]["delta_log_nll"], by_windows["primary_metric"]["delta_log_nll"]
    assert [log["low"], log["high"]] == [expected.low, expected.high]
    assert by_tokens["primary_metric"]["ratio"]["estimate"] == by_windows["primary_metric"]["ratio"]["estimate"]  # same point estimate
    assert [log["low"], log["high"]] != [other["low"], other["high"]]


def test_nan_losses_are_excluded_and_listed_or_refused():
    rng = np.random.default_rng(2)
    loss_a, loss_b = rng.normal(3.0, 0.3, 120), rng.normal(3.1, 0.3, 120)
    loss_b[[7, 90]] = np.nan
    loss_a[90] = np.nan
    report, failures = release_report(scored(120, loss_a), scored(120, loss_b))
    stats = report["dataset"]["windows"]["stats"]
    assert stats["excluded_windows"]["count"] == 2
    assert stats["excluded_windows"]["windows"] == [{"a": "w700", "b": "w700", "nan_in": "B"}, {"a": "w9000", "b": "w9000", "nan_in": "A and B"}]
    assert stats["paired_windows"] == 120 and stats["compared_windows"] == 118
    keep = np.isfinite(loss_a) & np.isfinite(loss_b)
    assert report["primary_metric"]["ratio"]["estimate"] == pytest.approx(naive_ratio(loss_a[keep], loss_b[keep], [200] * 118))
    assert "2 paired windows were excluded for a NaN loss" in failures
    with pytest.raises(UserError, match=r"^2 paired windows have a NaN loss \(w700, w9000\)"):
        release_report(scored(120, loss_a), scored(120, loss_b), nan_windows="error")


def test_unknown_resample_scheme_is_one_line_and_exit_2(tmp_path):
    r = run_cli("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--resample", "bytes", "--out", str(tmp_path / "c"))
    assert r.returncode == 2 and r.stderr.strip() == "ctxeval: error: unknown --resample 'bytes'; choose one of windows, tokens"


@pytest.fixture(scope="module")
def both_modes_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cmp") / "run"
    r = run_cli("sweep", "--lengths", "16,32", "--n-compare", "8", "--repeats", "6", "--context-mode", "both", "--quiet", "--out", str(out))
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.model
def test_compare_exact_vs_approx_context_from_the_cli(both_modes_run, tmp_path):
    out = tmp_path / "cmp"
    r = run_cli("compare", str(both_modes_run), str(both_modes_run), "--context-mode-a", "exact", "--context-mode-b", "approx", "--replicates", "2000", "--out", str(out))
    assert r.returncode == 0, r.stderr
    report = json.loads((out / "compare.json").read_text())
    pm = report["primary_metric"]
    stats = report["dataset"]["windows"]["stats"]
    assert stats["paired_windows"] == 12 and stats["window_match_fraction"] == 1.0
    assert stats["window_ids_equal_fraction"] == 0.0  # E16-r0 pairs with A16-r0 by span
    log, ratio = pm["delta_log_nll"], pm["ratio"]
    assert [ratio["low"], ratio["high"]] == pytest.approx([math.exp(log["low"]), math.exp(log["high"])])
    assert log["low"] <= log["estimate"] <= log["high"]
    assert ratio["estimate"] == pytest.approx(pm["final"] / pm["preview"])
    assert pm["drift"]["first_half"]["windows"] == pm["drift"]["second_half"]["windows"] == 6
    assert set(report["secondary_metrics"]) == {"lin", "rp", "a0.1", "a0.3", "avg"}
    assert (out / "compare.md").read_text().startswith("# ctxeval paired comparison")
    assert "Perplexity ratio B/A" in r.stdout
    tokens = run_cli("compare", str(both_modes_run), str(both_modes_run), "--context-mode-a", "exact", "--context-mode-b", "approx", "--resample", "tokens", "--out", str(tmp_path / "t"))
    assert tokens.returncode == 0, tokens.stderr
    by_tokens = json.loads((tmp_path / "t" / "compare.json").read_text())
    assert by_tokens["dataset"]["windows"]["stats"]["bootstrap"]["resample"] == "tokens" and stats["bootstrap"]["resample"] == "windows"
    assert by_tokens["primary_metric"]["ratio"]["estimate"] == pm["ratio"]["estimate"]


@pytest.mark.model
def test_compare_gates_of_the_ci_profile(both_modes_run, tmp_path):
    # sweep windows at different lengths overlap in text and 12 windows are below the ci minimum
    r = run_cli("compare", str(both_modes_run), str(both_modes_run), "--context-mode-a", "exact", "--context-mode-b", "approx", "--profile", "ci", "--replicates", "500", "--out", str(tmp_path / "c"))
    assert r.returncode == 1
    assert "ci gate failed" in r.stderr
    gates = json.loads((tmp_path / "c" / "compare.json").read_text())["gates"]
    assert not gates["passed"] and gates["failures"]
    ok = run_cli("compare", str(both_modes_run), str(both_modes_run), "--context-mode-a", "exact", "--context-mode-b", "exact", "--max-ratio", "1.0", "--replicates", "500", "--out", str(tmp_path / "d"))
    assert ok.returncode == 0, ok.stderr  # identical arms: degenerate, ratio exactly 1
    report = json.loads((tmp_path / "d" / "compare.json").read_text())
    assert report["dataset"]["windows"]["stats"]["paired_delta_summary"]["degenerate"] is True
    assert report["primary_metric"]["delta_log_nll"]["low"] == report["primary_metric"]["delta_log_nll"]["high"]


@pytest.mark.model
def test_compare_needs_a_context_mode_when_a_run_has_both(both_modes_run, tmp_path):
    r = run_cli("compare", str(both_modes_run), str(both_modes_run), "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "--context-mode-a" in r.stderr


@pytest.mark.model
def test_trends_from_the_cli(both_modes_run, tmp_path):
    r = run_cli("trends", str(both_modes_run), "--out", str(tmp_path / "t"))
    assert r.returncode == 0, r.stderr
    payload = json.loads((tmp_path / "t" / "trends.json").read_text())
    assert any(row["metric"] == "avg" and row["x"] == "log2_length" and row["slope"]["n"] == 12 and row["slope"]["confidence"] == 0.95 for row in payload["trends"])
    spread = [row for row in payload["variance"] if row["metric"] == "avg"]
    assert all(row["windows"] == 6 for row in spread)


def window_losses(records: pd.DataFrame, mode: str) -> pd.DataFrame:
    """Per (length, repeat) window of one context mode: tokens and mean NLL, from raw records."""
    part = records[records["context_mode"] == mode]
    return part.groupby(["nominal_len", "repeat"]).agg(window_id=("window_id", "first"), t=("logprob", "size"), loss=("logprob", lambda x: -x.mean()))


@pytest.mark.model
def test_compare_nan_windows_from_the_cli(both_modes_run, tmp_path):
    run_b = tmp_path / "b"
    shutil.copytree(both_modes_run, run_b)
    table = pq.read_table(run_b / "records.parquet")
    records = table.to_pandas()
    nan_window = records[records["context_mode"] == "approx"]["window_id"].unique()[3]
    records.loc[records.index[records["window_id"] == nan_window][0], "logprob"] = np.nan  # one target without a logprob
    pq.write_table(pa.Table.from_pandas(records, schema=table.schema, preserve_index=False), run_b / "records.parquet")

    args = ("compare", str(both_modes_run), str(run_b), "--context-mode-a", "exact", "--context-mode-b", "approx", "--replicates", "500")
    refused = run_cli(*args, "--nan-windows", "error", "--out", str(tmp_path / "e"))
    assert refused.returncode == 2
    assert refused.stderr.strip().count("\n") == 0 and nan_window in refused.stderr and "Traceback" not in refused.stderr

    r = run_cli(*args, "--out", str(tmp_path / "x"))
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "x" / "compare.json").read_text())
    excluded = report["dataset"]["windows"]["stats"]["excluded_windows"]
    assert excluded["count"] == 1 and excluded["windows"][0]["b"] == nan_window and excluded["windows"][0]["nan_in"] == "B"
    assert "Excluded: 1 paired windows" in (tmp_path / "x" / "compare.md").read_text()
    a, b = window_losses(pq.read_table(both_modes_run / "records.parquet").to_pandas(), "exact"), window_losses(records, "approx")
    keep = b["window_id"] != nan_window
    assert report["primary_metric"]["ratio"]["estimate"] == pytest.approx(naive_ratio(a["loss"][keep], b["loss"][keep], a["t"][keep]), rel=1e-9)
    bad = run_cli(*args, "--nan-windows", "skip", "--out", str(tmp_path / "y"))
    assert bad.returncode == 2 and "--nan-windows" in bad.stderr
