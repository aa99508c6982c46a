"""The context-gain, retrieval and probe-report results: written once by their `Result`, read
back equal through `read_result`, and refused in one line where another kind or no header is
found."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from ctxeval import api
from ctxeval.errors import FieldError, UserError
from ctxeval.modeldiff.keytokens import check_gain_run
from ctxeval.render.kinds import RENDERING
from ctxeval.results.base import RESULT_FILE, read_result
from ctxeval.results.context_gain import ContextGainResult
from ctxeval.results.probe_report import ProbeReport
from ctxeval.results.retrieval import RetrievalResult
from ctxeval.results.scoring import RunResult

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
