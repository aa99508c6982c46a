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
from ctxeval.report.compare import build_report, gate

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
    report = build_report(pair_windows(a, b), ("A", "B"), 500, 0, False, ["avg"], nan_windows)
    return report, gate(report, "release", None, None, None)


def test_an_odd_perfectly_paired_set_passes_release_and_halves_show_drift():
    rng = np.random.default_rng(1)
    loss_a = rng.normal(3.0, 0.3, 101)
    loss_b = loss_a + rng.normal(0.02, 0.05, 101)
    report, failures = release_report(scored(101, loss_a), scored(101, loss_b))
    assert failures == []  # 101 windows x 200 tokens: 50 preview + 51 final windows
    cov = report["dataset"]["windows"]["stats"]["coverage"]
    assert cov == {
        "preview": {"windows": 50, "tokens": 10000, "windows_a": 50, "windows_b": 50},
        "final": {"windows": 51, "tokens": 10200, "windows_a": 51, "windows_b": 51},
    }
    pm = report["primary_metric"]
    assert pm["preview"]["ratio"] == pytest.approx(naive_ratio(loss_a[:50], loss_b[:50], [200] * 50))
    assert pm["final"]["ratio"] == pytest.approx(naive_ratio(loss_a[50:], loss_b[50:], [200] * 51))


def test_release_fails_when_a_and_b_hold_different_window_counts():
    loss = np.full(101, 3.0)
    report, failures = release_report(scored(101, loss), scored(100, loss[:100]))
    assert any(f.startswith("pairing is") for f in failures)
    assert "final half: A has 51 windows, B has 50" in failures
    assert report["dataset"]["windows"]["stats"]["coverage"]["preview"]["windows_b"] == 50


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
    assert report["primary_metric"]["ratio"] == pytest.approx(naive_ratio(loss_a[keep], loss_b[keep], [200] * 118))
    assert "2 paired windows were excluded for a NaN loss" in failures
    with pytest.raises(UserError, match=r"^2 paired windows have a NaN loss \(w700, w9000\)"):
        release_report(scored(120, loss_a), scored(120, loss_b), nan_windows="error")


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
    assert pm["display_ci"] == pytest.approx([math.exp(c) for c in pm["ci"]])
    assert pm["ci"][0] <= pm["delta_log_nll"] <= pm["ci"][1]
    assert pm["ratio"] == pytest.approx(pm["ppl_b"] / pm["ppl_a"])
    assert pm["preview"]["windows"] == pm["final"]["windows"] == 6
    assert set(report["secondary_metrics"]) == {"lin", "rp", "a0.1", "a0.3", "avg"}
    assert (out / "compare.md").read_text().startswith("# ctxeval paired comparison")
    assert "Perplexity ratio B/A" in r.stdout


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
    assert report["primary_metric"]["ci"][0] == report["primary_metric"]["ci"][1]


@pytest.mark.model
def test_compare_needs_a_context_mode_when_a_run_has_both(both_modes_run, tmp_path):
    r = run_cli("compare", str(both_modes_run), str(both_modes_run), "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "--context-mode-a" in r.stderr


@pytest.mark.model
def test_trends_from_the_cli(both_modes_run, tmp_path):
    r = run_cli("trends", str(both_modes_run), "--out", str(tmp_path / "t"))
    assert r.returncode == 0, r.stderr
    payload = json.loads((tmp_path / "t" / "trends.json").read_text())
    assert any(row["metric"] == "avg" and row["x"] == "log2_length" and row["n"] == 12 for row in payload["trends"])
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
    assert report["primary_metric"]["ratio"] == pytest.approx(naive_ratio(a["loss"][keep], b["loss"][keep], a["t"][keep]), rel=1e-9)
    bad = run_cli(*args, "--nan-windows", "skip", "--out", str(tmp_path / "y"))
    assert bad.returncode == 2 and "--nan-windows" in bad.stderr
