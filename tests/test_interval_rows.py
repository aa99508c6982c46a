"""One row form for every interval: Interval and Verdict rows, their flat columns and JSON
objects, a ruler run's files holding nothing else, and run folders of earlier versions opening
with `summary` and `report`."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ctxeval import api
from ctxeval.render import intervals
from ctxeval.results.base import result_class
from ctxeval.results.rows import flat, frame, json_rows, nested
from ctxeval.stats.interval import ROW_KEYS, Interval
from ctxeval.stats.verdict import VERDICT_KEYS, Verdict, verdict
from tests.conftest import FIXTURES, run_cli
from tests.test_ruler import _ruler_folder

EARLIER = FIXTURES / "runs_v3"  # ruler (version 3), trends and agreement (version 1) folders as ctxeval wrote them before (tests/fixtures/runs_v3/make.py)
OTHER_SPELLINGS = re.compile(r"(_low|_high|_lo|_hi|_ci|^ci_\w+|^ci)$")


def test_an_interval_row_holds_every_key_with_nan_as_null_and_reads_back():
    interval = Interval(-1.2, -2.4, -0.1, 0.5, 100, 0.975, "BCa")
    row = interval.to_row()
    assert row == {"estimate": -1.2, "low": -2.4, "high": -0.1, "se": 0.5, "n": 100, "confidence": 0.975, "method": "BCa", "reason": ""}
    assert Interval.from_row(row) == interval and Interval.from_row(json.loads(json.dumps(row))) == interval
    bare = Interval(3.0, n=1, method="pseudo-labels (Agresti-Coull, t)", reason="one sample")
    assert bare.to_row()["low"] is None and bare.to_row()["se"] is None and json.dumps(bare.to_row())  # valid JSON: no NaN
    back = Interval.from_row(bare.to_row())
    assert math.isnan(back.low) and math.isnan(back.high) and back.reason == "one sample" and back.confidence == 0.95
    columns = interval.columns("score")
    assert list(columns) == ["score", "score.low", "score.high", "score.se", "score.n", "score.confidence", "score.method", "score.reason"]
    assert Interval.from_columns(columns, "score") == interval


def test_a_verdict_row_is_its_intervals_row_with_outcome_delta_margin_and_samples_needed():
    decided = verdict(Interval(-1.25, -2.4, -0.1, 0.6, 80, 0.95, "Tango score"), 5.0, worse="lower")
    row = decided.to_row()
    assert list(row) == [*ROW_KEYS, *VERDICT_KEYS]
    assert row["margin"] == 2.4 and row["delta"] == 5.0 and row["method"] == "Tango score" and row["confidence"] == 0.95
    assert (decided.estimate, decided.low, decided.high, decided.n) == (-1.25, -2.4, -0.1, 80)  # read through its interval
    assert Verdict.from_row(json.loads(json.dumps(row))) == decided
    assert Verdict.from_columns(decided.columns("score_diff"), "score_diff") == decided
    open_ = verdict(Interval(-2.5, -8.0, 3.0, 2.8, 12, 0.95, "Tango score"), 5.0, worse="lower")
    assert open_.to_row()["margin"] == 8.0 and open_.to_row()["samples_needed"] > 12
    assert math.isnan(verdict(Interval(1.0, n=1), 5.0).margin) and verdict(Interval(1.0, n=1), 5.0).to_row()["margin"] is None


def test_a_table_writes_each_interval_as_one_json_object_and_reads_it_back():
    rows = pd.DataFrame([{"model": "a", **Interval(50.0, 40.0, 60.0, 2.0, 16, 0.95, "PPI++").columns("score"), "samples": 16},
                         {"model": "b", **Interval(math.nan, n=0, reason="no samples").columns("score"), "samples": 0}])
    written = json_rows(rows)
    assert written[0] == {"model": "a", "score": {"estimate": 50.0, "low": 40.0, "high": 60.0, "se": 2.0, "n": 16, "confidence": 0.95,
                                                  "method": "PPI++", "reason": ""}, "samples": 16}
    assert written[1]["score"]["estimate"] is None and written[1]["score"]["low"] is None
    again = frame(json.loads(json.dumps(written)))
    assert list(again.columns) == list(rows.columns)
    assert again["score.low"].iloc[0] == 40.0 and math.isnan(again["score.low"].iloc[1]) and again["score.reason"].iloc[1] == "no samples"
    assert flat(nested({"x": 1.0, "x.low": 0.5, "y": 2})) == {"x": 1.0, "x.low": 0.5, "y": 2}


def test_the_page_writes_an_interval_and_its_level_from_the_rows():
    assert intervals.level(0.95) == "95 %" and intervals.level(0.975) == "97.5 %" and intervals.level(1 - 0.05 / 3) == "98.33 %"
    assert intervals.numbers(Interval(1.2, -0.3, 2.4), 1, signed=True) == "+1.2 [-0.3, +2.4]"
    assert intervals.numbers(Interval(1.2), 1) == "1.2 (no interval)" and intervals.numbers(Interval(math.nan), 1) == "unknown"
    table = pd.DataFrame([Interval(1.0, 0.0, 2.0, confidence=0.975, method="betting confidence sequence").columns("diff"),
                          Interval(1.0, 0.0, 2.0, confidence=0.95, method="Tango score").columns("diff")])
    assert intervals.table_header(table, "diff") == "97.5 % betting confidence sequence; 95 % Tango score"
    assert intervals.table_header(table, "diff", with_method=False) == "97.5 %/95 %"


def _intervals_of(value, where: str = ""):
    """Every (path, key, object) of a JSON value: each dict that holds a bound, and every key."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield where, key, value
            yield from _intervals_of(inner, f"{where}/{key}")
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _intervals_of(inner, f"{where}[{i}]")


def opened_earlier(folder: Path, tmp_path: Path) -> tuple[str, str, Path]:
    """A folder of an earlier result version opened as a user would: `ctxeval summary` (its
    stdout), `ctxeval report` (the page), and a copy rewritten in this version by `summary
    --write` (its folder); each command succeeds and the copy's header names this version."""
    printed = run_cli("summary", str(folder))
    assert printed.returncode == 0, printed.stderr
    page = run_cli("report", str(folder), "--out", str(tmp_path / "report.html"))
    assert page.returncode == 0, page.stderr
    run = tmp_path / "run"
    shutil.copytree(folder, run)
    assert run_cli("summary", str(run), "--write").returncode == 0
    header = json.loads((run / "result.json").read_text())
    assert header["version"] == result_class(header["kind"]).VERSION
    return printed.stdout, (tmp_path / "report.html").read_text(), run


def _check_json_files(run: Path) -> int:
    """Every interval of every JSON file of `run` carries its confidence and method beside its
    bounds, under no other spelling; the count of intervals seen."""
    seen = set()
    for path in sorted(run.rglob("*.json")):
        for where, key, holder in _intervals_of(json.loads(path.read_text())):
            assert not OTHER_SPELLINGS.search(key), f"{path.name}{where}: {key}"
            if key in ("low", "high"):
                assert set(ROW_KEYS) <= set(holder), f"{path.name}{where}: {sorted(holder)}"
                assert 0 < holder["confidence"] < 1 and holder["method"], f"{path.name}{where}"
                seen.add((path.name, where))
    return len(seen)


def test_every_interval_of_a_ruler_runs_json_files_carries_its_confidence_and_method(tmp_path):
    rng = np.random.default_rng(4)
    logp = rng.normal(-1.0, 0.3, 12)
    scores = {"full": ([1.0] * 12, [1.0] * 12, list(logp)), "pressed": ([1.0] * 4 + [0.0] * 8, [0.0] * 12, list(logp - 0.5)),
              "quantised": ([1.0] * 11 + [0.5], [1.0] * 12, list(logp - 0.01))}
    run = _ruler_folder(tmp_path / "ruler", scores, replicates=200)
    data = json.loads((run / "results.json").read_text())
    assert {"score_diff", "logp_diff"} <= set(data["paired"][0]) and data["paired"][0]["score_diff"]["outcome"] == "hurts"
    assert data["ranking"][0]["to_best"]["method"].startswith("Tango's score interval, Bonferroni over 3 pairs")
    assert _check_json_files(run) == len(data["scores"]) + 2 * len(data["paired"]) + 2 * len(data["ranking"]) + len(data["ranking_pairs"])
    # a prediction-powered run's ppi.json too: the earlier version's folder, rewritten in this one by `summary --write`
    ppi_run = tmp_path / "ruler_ppi"
    shutil.copytree(EARLIER / "ruler_ppi", ppi_run)
    assert run_cli("summary", str(ppi_run), "--write").returncode == 0
    assert json.loads((ppi_run / "result.json").read_text())["version"] == 4
    assert _check_json_files(ppi_run) >= len(json.loads((ppi_run / "ppi.json").read_text())["scores"])


@pytest.mark.parametrize("name", sorted(p.name for p in EARLIER.iterdir() if p.is_dir()))
def test_a_run_folder_of_an_earlier_version_opens_with_summary_and_report(tmp_path, name):
    run = EARLIER / name
    header = json.loads((run / "result.json").read_text())
    assert header["version"] < result_class(header["kind"]).VERSION  # an older version: read through its kind's migration
    printed = run_cli("summary", str(run))
    assert printed.returncode == 0, printed.stderr
    assert "|---" in printed.stdout and "95 %" in printed.stdout and not printed.stderr
    page = run_cli("report", str(run), "--out", str(tmp_path / "report.html"))
    assert page.returncode == 0, page.stderr
    assert (tmp_path / "report.html").stat().st_size > 0


def test_an_earlier_ruler_result_reads_as_this_versions_rows():
    old = api.read_result(EARLIER / "ruler")
    stored = {r["model"]: r for r in json.loads((EARLIER / "ruler" / "results.json").read_text())["paired"]}
    pressed = old.paired.set_index("model").loc["full?press=S"]
    assert (pressed["score_diff.low"], pressed["score_diff.high"]) == (stored["full?press=S"]["score_low"], stored["full?press=S"]["score_high"])
    assert pressed["score_diff.outcome"] == "hurts" and pressed["score_diff.confidence"] == 0.95 and pressed["score_diff.delta"] == 5.0
    assert pressed["score_diff.margin"] == max(abs(pressed["score_diff.low"]), abs(pressed["score_diff.high"]))
    assert set(old.table["score.method"]) == {"pseudo-labels (Agresti-Coull, t)", "MOVER"}
    ranked = old.ranking.set_index("model")
    assert ranked.loc["full?press=S", "rank.low"] == 3 and ranked.loc["full?press=S", "to_best.confidence"] == pytest.approx(1 - 0.05 / 3)
    printed = run_cli("summary", str(EARLIER / "ruler")).stdout
    assert f"{pressed['score_diff']:+.1f} [{pressed['score_diff.low']:+.1f}, {pressed['score_diff.high']:+.1f}] | hurts" in printed


def test_summary_of_another_kind_refuses_the_scoring_options_in_one_line():
    refused = run_cli("summary", str(EARLIER / "ruler"), "--thesis")
    assert refused.returncode == 2 and refused.stderr.strip().count("\n") == 0
    assert "--thesis applies to sweep/score runs" in refused.stderr and "holds a ruler result" in refused.stderr


def test_an_older_until_runs_ppi_rows_read_at_the_level_each_look_held():
    """A share-1 --until run before version 4: a cell stopped early read the 97.5 % sequence, one at
    the budget full generation's 95 % interval, a mean over tasks at 95 % (pooled where every task
    reached the budget)."""
    from ctxeval.results.ruler import MOVER, SEQUENCE_METHOD, _ppi_level

    table = pd.DataFrame({"model": ["a"] * 3 + ["b"] * 3, "length": [1024] * 6, "task": ["vt", "niah", "mean"] * 2,
                          "samples": [8, 40, 2, 40, 40, 2]})
    until = {"looks": "sequence", "max_samples": 40, "confidence": 0.95, "early_confidence": 0.975}
    level = _ppi_level(table, until, MOVER)
    assert level["confidence"] == [0.975, 0.95, 0.95, 0.95, 0.95, 0.95]
    assert level["method"] == [SEQUENCE_METHOD, "pseudo-labels (Agresti-Coull, t)", SEQUENCE_METHOD, "pseudo-labels (Agresti-Coull, t)",
                               "pseudo-labels (Agresti-Coull, t)", MOVER]
    assert _ppi_level(table, {"confidence": 0.9875, "looks": "rounds"}, MOVER) == {"confidence": 0.9875, "method": "PPI++ stratified (t)"}


def test_older_trends_and_agreement_results_read_as_this_versions_rows():
    trends = api.read_result(EARLIER / "trends").trends
    stored = json.loads((EARLIER / "trends" / "trends.json").read_text())["trends"]
    assert trends["slope.low"].tolist() == pytest.approx([r["ci_low"] for r in stored], nan_ok=True)
    assert trends["slope.se"].tolist() == pytest.approx([r["stderr"] for r in stored], nan_ok=True)
    assert set(trends["slope.confidence"]) == {0.95} and set(trends["slope.method"]) == {"least squares, t with n − 2 df"}
    correlations = api.read_result(EARLIER / "agreement").correlations
    assert (correlations["spearman.n"] == correlations["models"]).all() and set(correlations["kendall.confidence"]) == {0.95}
    assert "spearman_low" not in correlations and correlations["spearman.low"].isna().all()  # three models: no interval


def test_an_earlier_versions_verdict_inside_delta_reads_within_delta_in_the_fields_order():
    """Versions 1-3 decided 'hurts' on an interval that excludes 0 even inside ±δ; read again, it
    is 'within δ'; one beyond δ stays 'hurts', an undecided one stays undecided."""
    import pandas as pd

    from ctxeval.results.ruler import _in_the_fields_order

    table = pd.DataFrame({"d.low": [-2.4, -8.0, -8.0, 1.0], "d.high": [-0.1, -2.0, 3.0, 4.0], "d.delta": [5.0] * 4,
                          "d.outcome": ["hurts", "hurts", "too few samples to tell", "gains"]})
    _in_the_fields_order(table, "d")
    assert list(table["d.outcome"]) == ["within δ", "hurts", "too few samples to tell", "within δ"]
