"""The comparison and trends results: written once by their `Result`, read back equal through
`read_result`, and refused in one line where another kind or no header is found."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ctxeval import api
from ctxeval.errors import UserError
from ctxeval.results.base import RESULT_FILE, read_result
from ctxeval.results.comparison import Comparison
from ctxeval.results.scoring import RunResult
from ctxeval.results.trends import Trends

from .synthetic_runs import write_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return write_run(root / "a", "tiny", [8, 16], 6, repeats=3), write_run(root / "b", "tiny", [8, 16], 6, repeats=3, shift=0.2)


def test_a_comparison_reads_back_equal(runs, tmp_path):
    result = api.compare(*runs, out=tmp_path / "cmp", replicates=200)
    again = read_result(tmp_path / "cmp", reader="report", kinds=(Comparison,))
    assert again.report == json.loads(json.dumps(result.report, default=float))
    assert (again.out, again.failures, again.markdown) == (result.out, result.failures, result.markdown)
    assert json.loads((tmp_path / "cmp" / RESULT_FILE).read_text())["files"] == ["compare.json", "compare.md"]


def test_trends_read_back_equal(runs, tmp_path):
    result = api.trends(runs[0], out=tmp_path / "t")
    assert isinstance(result, Trends) and result.markdown == (tmp_path / "t" / "trends.md").read_text()
    again = read_result(tmp_path / "t", kinds=(Trends,))
    pd.testing.assert_frame_equal(again.trends, result.trends)
    pd.testing.assert_frame_equal(again.variance, result.variance)
    assert (again.outlier_rule, again.out, again.markdown) == (result.outlier_rule, result.out, result.markdown)


def test_trends_default_to_the_runs_trends_folder(runs):
    assert api.trends(runs[1]).out == runs[1] / "trends"


@pytest.mark.parametrize("kind", [Comparison, Trends])
def test_another_kind_is_refused_in_one_line(runs, kind):
    with pytest.raises(UserError, match=f"holds a scoring result .*; report reads {kind.KIND} results") as error:
        read_result(runs[0], reader="report", kinds=(kind,))
    assert "\n" not in str(error.value)


def test_a_comparison_is_not_a_scoring_run(runs, tmp_path):
    api.compare(*runs, out=tmp_path / "cmp", replicates=200)
    with pytest.raises(UserError, match="holds a comparison result \\(from `ctxeval compare`\\); probe-report reads scoring results"):
        read_result(tmp_path / "cmp", reader="probe-report", kinds=(RunResult,))


@pytest.mark.parametrize("kind", [Comparison, Trends])
def test_a_folder_without_a_header_is_refused_in_one_line(runs, tmp_path, kind):
    api.compare(*runs, out=tmp_path / "cmp", replicates=200)
    (tmp_path / "cmp" / RESULT_FILE).unlink()  # as a ctxeval before output headers left it
    with pytest.raises(UserError, match="has no result.json") as error:
        read_result(tmp_path / "cmp", reader="report", kinds=(kind,))
    assert "\n" not in str(error.value)
