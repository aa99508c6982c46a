"""The scoring result writes each plotted metric's interval as its row (level and method beside
the bounds), its readers print both from the rows, and a sweep of version 1
(tests/fixtures/scoring_v1/make.py) still opens, read as this version's rows."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ctxeval import api
from ctxeval.explorer.render import _lm_charts
from ctxeval.render.figures import _interval_caption
from ctxeval.render.views import lm_view
from ctxeval.results.scoring import RunResult
from ctxeval.scoring.finish import scoring_result
from tests.conftest import FIXTURES
from tests.synthetic_runs import write_run
from tests.test_interval_rows import _check_json_files, opened_earlier

EARLIER = FIXTURES / "scoring_v1" / "sweep"  # a three-document sweep as ctxeval 83ad2d9 wrote it (version 1)
PLOTTED = ("avg", "rp", "ppl", "approx_ppl")
ROW = ("low", "high", "se", "n", "confidence", "method", "reason")


def test_summary_json_writes_every_plotted_metrics_interval_as_a_row_around_the_summarys_value(tmp_path):
    run = write_run(tmp_path / "run", "tiny", [8, 16], 4, repeats=3)
    groups = json.loads((run / "summary.json").read_text())["groups"]
    assert _check_json_files(run) == len(groups) * len(PLOTTED)
    assert not [key for row in groups for key in row if key.endswith(("_lo", "_hi")) or key == "interval"]
    records = api.read_result(run).records
    for row in groups:
        part = records[records["nominal_len"] == row["nominal_len"]]
        nll = -part["logprob"].to_numpy()
        means = part.assign(nll=nll).groupby("window_id")["nll"].mean().to_numpy()
        se = means.std(ddof=1) / math.sqrt(3)
        half = stats.t.ppf(0.975, 2) * se
        ppl = row["ppl"]
        assert ppl["estimate"] == pytest.approx(math.exp(nll.mean()), rel=1e-12)  # the summary's value: exp of the mean NLL
        assert (ppl["low"], ppl["high"]) == (pytest.approx(math.exp(nll.mean() - half), rel=1e-9), pytest.approx(math.exp(nll.mean() + half), rel=1e-9))
        assert (ppl["se"], ppl["n"], ppl["confidence"], ppl["method"], ppl["reason"]) == (None, 3, 0.95, "t over 3 windows", "")
        assert row["rp"]["se"] is not None and row["rp"]["n"] == 3
    table = pd.read_csv(run / "summary.csv")
    assert {f"ppl.{key}" for key in ROW} <= set(table.columns) and "interval" not in table and "ppl_lo" not in table
    assert list(table.columns).index("ppl.low") == list(table.columns).index("ppl") + 1


def test_a_scoring_run_of_version_1_reads_as_the_rows_this_version_computes_from_its_records():
    assert json.loads((EARLIER / "result.json").read_text())["version"] == 1 < RunResult.VERSION
    stored = json.loads((EARLIER / "summary.json").read_text())["groups"]
    stored_corpus = json.loads((EARLIER / "corpus_summary.json").read_text())["corpus"]
    old = api.read_result(EARLIER)
    new = scoring_result(EARLIER, old.manifest, old.metrics)
    # the stored bounds and kind, as rows
    for (_, row), kept in zip(old.summary.iterrows(), stored, strict=True):
        for name in PLOTTED:
            assert (row[f"{name}.low"], row[f"{name}.high"], row[f"{name}.method"]) == (kept[f"{name}_lo"], kept[f"{name}_hi"], kept["interval"])
            assert (row[f"{name}.n"], row[f"{name}.confidence"]) == ({"t over 2 windows": 2, "bootstrap over 4 targets": 4}[kept["interval"]], 0.95)
    assert [r["interval"] for r in stored] == ["t over 2 windows"] * 4 + ["bootstrap over 4 targets"] * 2
    assert set(old.corpus["ppl.method"]) == {"cluster percentile bootstrap"} and set(old.corpus["ppl.n"]) == {3}
    assert old.corpus["avg.low"].tolist() == [r["avg_lo"] for r in stored_corpus]
    # and equal to what this version computes from the same records: every key, every number
    for was, now, bootstrapped in ((old.summary, new.summary, [4, 5]), (old.corpus, new.corpus, [])):
        assert list(was.columns) == list(now.columns)
        for name in was.columns:
            a, b = was[name].tolist(), now[name].tolist()
            if name in ("rp.se", "avg.se") and bootstrapped:  # a bootstrap's standard error: version 1 kept no replicates
                assert was[name].iloc[bootstrapped].isna().all() and now[name].iloc[bootstrapped].notna().all()
                a, b = a[:bootstrapped[0]], b[:bootstrapped[0]]
            if was[name].dtype.kind == "f":
                assert np.allclose(a, b, rtol=1e-12, atol=0, equal_nan=True), name
            else:
                assert a == b, name


def test_a_scoring_run_of_version_1_opens_with_summary_and_report_and_rewrites_as_rows(tmp_path):
    printed, html, run = opened_earlier(EARLIER, tmp_path)
    assert "## Average rank-based score AVG (thesis Table 1) — doc2, sweep (exact)" in printed and "|        8 |  0.750 |" in printed
    row = json.loads((EARLIER / "summary.json").read_text())["groups"][0]
    assert f"[{row['avg_lo']:.4f}, {row['avg_hi']:.4f}] 95 % t over 2 windows" in html
    assert "AVG rank score vs context length (95 % t over 2 windows; 95 % bootstrap over 4 targets)" in html
    assert _check_json_files(run) == (6 + 2) * len(PLOTTED)  # six summary rows, two corpus rows


def test_the_page_and_the_figure_name_the_level_and_method_the_rows_hold():
    result = api.read_result(EARLIER)
    result = replace(result, summary=result.summary.assign(**{f"{name}.confidence": 0.9 for name in PLOTTED}))
    view, _ = lm_view(result, "run", 0)
    first = result.summary.iloc[0]
    assert view.headline[1] == {"label": "AVG tiny · doc0 · sweep exact L=8", "value": f"{first['avg']:.4f}",
                                "interval": f"[{first['avg.low']:.4f}, {first['avg.high']:.4f}] 90 % t over 2 windows"}
    titles = [str(chart) for chart in _lm_charts([view])]
    assert len(titles) == 2 and all("(90 % t over 2 windows; 90 % bootstrap over 4 targets)" in t for t in titles)
    assert not any("95 %" in t for t in titles)
    caption = _interval_caption([(0.95, "t over 2 windows"), (0.9, "bootstrap over 4 targets"), (0.95, "t over 2 windows")])
    assert caption == "90 % bootstrap over 4 targets; 95 % t over 2 windows (one start per length: the bars omit start-to-start noise; use --repeats)"
    none = result.summary.iloc[:1].assign(**{"ppl.low": math.nan, "ppl.high": math.nan, "ppl.reason": "a value is not finite"})
    assert lm_view(replace(result, summary=none), "run", 0)[0].headline[0]["interval"] == "no interval: a value is not finite"
