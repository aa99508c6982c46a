"""The context-gain, retrieval and probe-report results: written once by their `Result`, read
back equal through `read_result`, and refused in one line where another kind or no header is
found."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from ctxeval import api
from ctxeval.errors import FieldError, UserError
from ctxeval.modeldiff.keytokens import check_gain_run
from ctxeval.render.kinds import RENDERING
from ctxeval.results.base import RESULT_FILE, read_result
from ctxeval.results.context_gain import ContextGainResult
from ctxeval.results.probe_report import ProbeReport
from ctxeval.results.retrieval import RetrievalResult
from ctxeval.results.scoring import RunResult
from ctxeval.stats.interval import Interval

from .synthetic_runs import write_gain_run, write_retrieval_run, write_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("probes")
    return {
        "sweep": write_run(root / "sweep", "tiny", [8, 16], 6, repeats=2),
        "context-gain": write_gain_run(root / "gain", "tiny", summarise=True),
        "retrieval": write_retrieval_run(root / "retrieval", "tiny"),
    }


def test_a_context_gain_result_reads_back_equal(runs):
    from ctxeval.probes.gain_report import KeyTokenSettings
    from ctxeval.probes.gain_report import context_gain_result

    path = runs["context-gain"]
    again = read_result(path, reader="report", kinds=(ContextGainResult,))
    result = RENDERING.texts(context_gain_result(path, again.manifest, KeyTokenSettings("tiny", 2.0, -2.0, 16, 200, 0)))
    assert again.summary == json.loads(json.dumps(result.summary)) and again.markdown == result.markdown
    assert again.manifest.to_json() == result.manifest.to_json()
    pd.testing.assert_frame_equal(again.records, result.records)
    pd.testing.assert_frame_equal(again.by_distance, result.by_distance)
    assert again.tables.keys() == result.tables.keys() and again.key_spans.keys() == result.key_spans.keys()
    for key in result.tables:
        pd.testing.assert_frame_equal(again.tables[key], result.tables[key])
    for text in result.key_spans:
        np.testing.assert_array_equal(again.key_spans[text], result.key_spans[text])
    assert result.tables["tiny", "synthetic"]["key"].sum() == result.summary["texts"]["synthetic"]["n_key"]
    assert json.loads((path / RESULT_FILE).read_text())["files"] == ["summary.json", "gain_by_distance.csv", "context_gain.md", "context_gain.png"]


def test_a_retrieval_result_reads_back_equal(runs):
    from ctxeval.probes.retrieval_report import retrieval_result

    path = runs["retrieval"]
    again = read_result(path, kinds=(RetrievalResult,))
    result = RENDERING.texts(retrieval_result(path, again.manifest))
    pd.testing.assert_frame_equal(again.cells, result.cells, check_dtype=False)
    pd.testing.assert_frame_equal(again.cases, result.cases)
    assert (again.variant, again.markdown, again.models) == (result.variant, result.markdown, result.models)
    assert again.to_json() == result.to_json()
    assert json.loads((path / RESULT_FILE).read_text())["files"] == ["results.json", "results.md", "retrieval_heatmap.png"]


def test_a_probe_report_reads_back_equal(runs, tmp_path):
    result = api.probe_report([runs[k] for k in ("sweep", "context-gain", "retrieval")], out=tmp_path / "p")
    assert isinstance(result, ProbeReport) and result.markdown == (tmp_path / "p" / "probe_report.md").read_text()
    again = read_result(tmp_path / "p", kinds=(ProbeReport,))
    assert again.to_json() == result.to_json() and again.markdown == result.markdown
    assert {k: len(v) for k, v in again.sections.items()} == {k: len(v) for k, v in result.sections.items()}
    assert set(again.at_a_glance["model"]) == {"tiny"}


@pytest.mark.parametrize("kind", [ContextGainResult, RetrievalResult, ProbeReport])
def test_another_kind_is_refused_in_one_line(runs, kind):
    with pytest.raises(UserError, match=f"holds a scoring result .*; report reads {kind.KIND} results") as error:
        read_result(runs["sweep"], reader="report", kinds=(kind,))
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("kind", ["context-gain", "retrieval"])
def test_a_folder_without_a_header_is_refused_in_one_line(runs, tmp_path, kind):
    old = tmp_path / "old"
    shutil.copytree(runs[kind], old)
    (old / RESULT_FILE).unlink()  # as a ctxeval before output headers left it
    with pytest.raises(UserError, match="has no result.json") as error:
        read_result(old, reader="probe-report", kinds=(RunResult, ContextGainResult, RetrievalResult))
    assert "\n" not in str(error.value)


def test_key_tokens_read_a_context_gain_result_and_refuse_another_kind(runs):
    assert check_gain_run(runs["context-gain"]).key_tokens["evaluator"] == "tiny"
    with pytest.raises(FieldError, match="holds a retrieval result \\(from `ctxeval retrieval`\\); key_tokens reads context-gain results") as refusal:
        check_gain_run(runs["retrieval"])
    assert refusal.value.field == "key_tokens"  # a command spells it as its caller does (--key-tokens, key_tokens=)


EARLIER = Path(__file__).parent / "fixtures" / "runs_v3"  # folders of earlier versions (tests/fixtures/runs_v3/make_answers.py)


def test_an_earlier_context_gain_reads_its_bounds_as_interval_rows(runs):
    old = json.loads((EARLIER / "context_gain" / "summary.json").read_text())["texts"]["synthetic"]["by_model"]["tiny"]
    assert json.loads((EARLIER / "context_gain" / RESULT_FILE).read_text())["version"] == 1 < ContextGainResult.VERSION
    result = read_result(EARLIER / "context_gain", kinds=(ContextGainResult,))
    entry = result.summary["texts"]["synthetic"]
    for s in (entry, entry["by_model"]["tiny"]):
        assert not {"ci", "mean_gain_ci", "ppl_ratio_ci"} & set(s)
        gain, ratio = s["mean_gain"], s["ppl_ratio_long_over_short"]
        assert [gain[k] for k in ("estimate", "low", "high", "n", "confidence", "method")] == [old["ci"]["estimate"], *old["mean_gain_ci"], old["ci"]["units"], 0.95, "BCa"]
        assert (gain["replicates"], gain["z0"], gain["unit"]) == (old["ci"]["replicates"], old["ci"]["z0"], old["ci"]["unit"])
        assert [ratio["low"], ratio["high"]] == pytest.approx(old["ppl_ratio_ci"], rel=1e-12)
        assert ratio["estimate"] == pytest.approx(old["ppl_ratio_long_over_short"], rel=1e-12) and (ratio["confidence"], ratio["method"]) == (0.95, "BCa")
    # a distance bin's SEM, which version 1's figure drew at 95 %, as that normal interval
    bins, z = pd.read_csv(EARLIER / "context_gain" / "gain_by_distance.csv"), scipy.stats.norm.ppf(0.975)
    assert list(result.by_distance.columns) == list(pd.read_csv(runs["context-gain"] / "gain_by_distance.csv").columns)  # as this version writes it
    np.testing.assert_allclose(result.by_distance["mean_gain.low"], bins["mean_gain"] - z * bins["sem"], rtol=1e-12)
    np.testing.assert_allclose(result.by_distance["mean_gain.se"], bins["sem"], rtol=1e-12)
    assert set(result.by_distance["mean_gain.confidence"]) == {0.95} and result.summary["gain_by_distance"][1]["mean_gain"]["low"] == result.by_distance["mean_gain.low"][1]
    row = result.probe_rows(Path("run"))["context_gain"].iloc[0]
    assert (row["mean_gain.low"], row["mean_gain.high"], row["mean_gain.confidence"]) == (*old["mean_gain_ci"], 0.95)
    assert "[95 % BCa]" in RENDERING.texts(result).markdown


def test_an_earlier_probe_report_reads_its_gain_bounds_as_interval_columns():
    old = json.loads((EARLIER / "probe_report" / "probe_report.json").read_text())["context_gain"][0]
    assert json.loads((EARLIER / "probe_report" / RESULT_FILE).read_text())["version"] == 2 < ProbeReport.VERSION
    gain = read_result(EARLIER / "probe_report", kinds=(ProbeReport,)).sections["context_gain"]
    assert "gain_ci_low" not in gain
    assert gain.loc[0, ["mean_gain", "mean_gain.low", "mean_gain.high", "mean_gain.confidence", "mean_gain.method"]].tolist() == [
        old["mean_gain"], old["gain_ci_low"], old["gain_ci_high"], 0.95, "BCa"]


def test_a_probe_reports_json_holds_the_gain_as_one_interval_object(runs, tmp_path):
    api.probe_report([runs["context-gain"]], out=tmp_path / "p")
    (row,) = json.loads((tmp_path / "p" / "probe_report.json").read_text())["context_gain"]
    summary = Interval.from_row(read_result(runs["context-gain"], kinds=(ContextGainResult,)).summary["texts"]["synthetic"]["mean_gain"]).to_row()
    assert row["mean_gain"] == {key: pytest.approx(value, rel=1e-9) if isinstance(value, float) else value for key, value in summary.items()}
    assert re.search(r"\| mean_gain \[95 % BCa\] +\|", (tmp_path / "p" / "probe_report.md").read_text())
