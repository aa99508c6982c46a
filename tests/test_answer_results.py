"""The answer-quality result kinds (leval, correlations, pplqa, meta-eval): each reads back
what it wrote, and a folder of another kind or without a header is refused in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from ctxeval.errors import UserError
from ctxeval.leval.corr import correlations_result, metric_tables
from ctxeval.leval.report import leval_result
from ctxeval.leval.score import LevalScores, TaskScore
from ctxeval.results.base import read_result
from ctxeval.pipeline.engine import save_result
from ctxeval.render.kinds import RENDERING
from ctxeval.results.correlations import Correlation, Correlations
from ctxeval.explorer.data import load_runs
from ctxeval.results.leval import LevalResult
from ctxeval.results.meta_eval import MetaEvalResult
from ctxeval.results.pplqa import PplqaResult

from .synthetic_runs import answer_quality_result, write_answer_quality_run


def _leval(out: Path) -> LevalResult:
    scores = LevalScores({"m1": {"qa": TaskScore(3, {"f1": 41.5}, 2.0, skipped=1)}, "m2": {"exam": TaskScore(2, {"exact_match": 50.0}, None)}}, "leval", "unicode")
    return leval_result(scores, out)


def test_leval_round_trip(tmp_path):
    written = save_result(tmp_path, _leval(tmp_path), "leval", RENDERING)
    assert read_result(tmp_path, kinds=(LevalResult,)) == written
    assert written.notes == ("m1/qa: 1 rows skipped (evaluation kind not scored with the others)",)


def test_correlations_round_trip(tmp_path):
    built = correlations_result({"a": 1.0, "b": 2.0}, [Correlation("f1", 1.0, 0.5, ("a", "b"), 2), Correlation("judge:m", math.nan, math.nan, ("a", "b"), None)])
    written = save_result(tmp_path, built, "leval-corr", RENDERING)
    read = read_result(tmp_path, kinds=(Correlations,))
    assert read.human == written.human and read.markdown == written.markdown
    assert [(c.metric, c.models, c.tasks) for c in read.correlations] == [(c.metric, c.models, c.tasks) for c in written.correlations]
    assert read.correlations[0].tau == 1.0 and math.isnan(read.correlations[1].tau)


def test_leval_corr_reads_a_leval_result_and_refuses_other_folders(tmp_path):
    leval = tmp_path / "leval"
    save_result(leval, _leval(leval), "leval", RENDERING)
    assert metric_tables(f"x={leval}", ["m1"]) == metric_tables(f"x={leval / 'scores.json'}", ["m1"]) == {"x:f1": ({"m1": 41.5}, 1)}
    corr = tmp_path / "corr"
    save_result(corr, correlations_result({"a": 1.0, "b": 2.0}, [Correlation("f1", 1.0, 0.5, ("a", "b"), 2)]), "leval-corr", RENDERING)
    with pytest.raises(UserError, match="holds a correlations result .*leval-corr reads leval results") as refused:
        metric_tables(str(corr), ["a", "b"])
    assert "\n" not in str(refused.value)
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "scores.json").write_text(json.dumps({"m1": {"qa": {"n": 1, "f1": 1.0}}}))
    with pytest.raises(UserError, match="no result.json") as refused:
        metric_tables(str(bare), ["m1"])
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("command", ["pplqa", "meta-eval"])
def test_answer_quality_round_trip(tmp_path, command):
    written = read_result(write_answer_quality_run(tmp_path / command, command))
    kind = PplqaResult if command == "pplqa" else MetaEvalResult
    built = RENDERING.texts(answer_quality_result(command, written.manifest, written.out))
    assert isinstance(written, kind) and written.KIND == command
    table = "scores" if command == "pplqa" else "items"
    pd.testing.assert_frame_equal(getattr(written, table), getattr(built, table))
    assert (written.report, written.markdown, written.manifest, written.out) == (built.report, built.markdown, built.manifest, built.out)


@pytest.mark.parametrize("command", ["pplqa", "meta-eval"])
def test_explorer_refuses_an_answer_quality_folder_without_a_header(tmp_path, command):
    run = write_answer_quality_run(tmp_path / command, command)
    (run / "result.json").unlink()
    with pytest.raises(UserError, match="has no result.json") as refused:
        load_runs([run])
    assert "\n" not in str(refused.value)


def test_a_result_of_another_kind_is_refused(tmp_path):
    leval = tmp_path / "leval"
    save_result(leval, _leval(leval), "leval", RENDERING)
    with pytest.raises(UserError, match="holds a leval result .*report reads pplqa/meta-eval results") as refused:
        read_result(leval, reader="report", kinds=(PplqaResult, MetaEvalResult))
    assert "\n" not in str(refused.value)


EARLIER = Path(__file__).parent / "fixtures" / "runs_v3"  # folders of earlier versions (tests/fixtures/runs_v3/make_answers.py)


def test_an_earlier_meta_eval_reads_its_bounds_as_interval_rows_at_its_bootstrap_level():
    old = json.loads((EARLIER / "meta_eval" / "meta_eval.json").read_text())
    assert json.loads((EARLIER / "meta_eval" / "result.json").read_text())["version"] == 1 < MetaEvalResult.VERSION
    result = read_result(EARLIER / "meta_eval", kinds=(MetaEvalResult,))
    entry, stored = result.report["methods"]["pplqa"], old["methods"]["pplqa"]
    assert "ci95" not in entry and entry["intervals"].keys() == stored["ci95"].keys()
    for key, (low, high) in stored["ci95"].items():
        assert entry["intervals"][key] == {"estimate": stored["metrics"][key], "low": low, "high": high, "se": None, "n": 2,
                                           "confidence": old["bootstrap"]["confidence"], "method": "percentile bootstrap over items", "reason": ""}
    # written again, it holds what this version writes for the same picks (their bootstrap as that run drew it)
    again = RENDERING.texts(answer_quality_result("meta-eval", result.manifest, EARLIER / "meta_eval"))
    assert again.report["methods"]["pplqa"]["intervals"] == entry["intervals"]
    assert RENDERING.texts(result).markdown == again.markdown
    assert "Values with their intervals (95 % percentile bootstrap over items)." in again.markdown
