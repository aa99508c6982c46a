"""Window pairing and the compare command, from pure tables to two real runs."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from ctxeval.pairing import overlap_fraction, pair_windows

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
