"""The comparison result writes every interval as its row (level and method beside the bounds),
and a comparison of version 1 (tests/fixtures/compare_v1/make.py) still opens, read as this
version's rows."""

from __future__ import annotations

import json
import math

import pytest

from ctxeval import api
from ctxeval.results.comparison import Comparison
from tests.conftest import FIXTURES, run_cli
from tests.synthetic_runs import write_run
from tests.test_interval_rows import _check_json_files, opened_earlier

EARLIER = FIXTURES / "compare_v1" / "compare"  # a comparison as ctxeval 83ad2d9 wrote it (version 1)
LENGTHS, N_COMPARE, REPEATS = [8, 16, 32], 6, 4  # the runs make.py compared


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The two runs make.py compared, written again (the same seeds: the same records)."""
    root = tmp_path_factory.mktemp("runs")
    return (write_run(root / "a", "tiny", LENGTHS, N_COMPARE, repeats=REPEATS),
            write_run(root / "b", "tiny", LENGTHS, N_COMPARE, repeats=REPEATS, shift=0.2))


@pytest.fixture(scope="module")
def written(runs, tmp_path_factory):
    """The comparison this version writes of those runs."""
    return api.compare(*runs, out=tmp_path_factory.mktemp("cmp") / "compare", replicates=200)


def test_every_interval_of_a_comparison_is_a_row_with_its_confidence_and_method(written):
    report = written.report
    # the perplexity ratio on both scales, overall, in each half and at each length; each rank score's difference
    assert _check_json_files(written.out) == 2 + 2 * 2 + 2 * len(LENGTHS) + len(report["secondary_metrics"])
    assert "display_ci" not in json.dumps(report) and '"ci"' not in json.dumps(report)
    ratio, log = report["primary_metric"]["ratio"], report["primary_metric"]["delta_log_nll"]
    assert (ratio["confidence"], ratio["method"], ratio["n"]) == (log["confidence"], log["method"], log["n"]) == (0.95, "BCa", 12)
    assert [ratio["estimate"], ratio["low"], ratio["high"]] == pytest.approx([math.exp(log[k]) for k in ("estimate", "low", "high")], rel=1e-12)
    assert ratio["se"] is None and log["se"] > 0 and log["interval"] == "bca"
    assert [r["delta_log_nll"]["n"] for r in report["by_length"]] == [r["windows"] for r in report["by_length"]] == [REPEATS] * len(LENGTHS)
    assert "| rank score | B − A | 95 % BCa interval |" in written.markdown
    assert f"**Perplexity ratio B/A = {ratio['estimate']:.4f}**, 95 % BCa interval [{ratio['low']:.4f}, {ratio['high']:.4f}]" in written.markdown


def _same(migrated, new, where: str = "") -> None:
    """`migrated` equals `new` but for the standard errors version 1 did not keep (null) and the
    last bits of a logarithm taken again."""
    if isinstance(new, dict):
        assert set(migrated) == set(new), where
        for key in new:
            if key == "se":
                assert migrated[key] is None, where
            else:
                _same(migrated[key], new[key], f"{where}/{key}")
    elif isinstance(new, list):
        assert len(migrated) == len(new), where
        for i, (a, b) in enumerate(zip(migrated, new)):
            _same(a, b, f"{where}[{i}]")
    elif isinstance(new, float):
        assert migrated == pytest.approx(new, rel=1e-12, abs=1e-15), where
    else:
        assert migrated == new, where


def test_a_comparison_of_version_1_reads_as_the_rows_this_version_writes(written):
    assert json.loads((EARLIER / "result.json").read_text())["version"] == 1 < Comparison.VERSION
    stored = json.loads((EARLIER / "compare.json").read_text())
    migrated = api.read_result(EARLIER).report
    new = json.loads(json.dumps(written.report, default=float))
    for key in ("primary_metric", "secondary_metrics", "by_length", "dataset", "invariants", "paired_windows", "gates"):
        _same(migrated[key], new[key], key)
    # the stored numbers themselves, not recomputed: the overall ratio and a half exactly as version 1 wrote them
    old, pm = stored["primary_metric"], migrated["primary_metric"]
    assert (pm["ratio"]["estimate"], [pm["ratio"]["low"], pm["ratio"]["high"]]) == (old["ratio"], old["display_ci"])
    assert (pm["delta_log_nll"]["estimate"], [pm["delta_log_nll"]["low"], pm["delta_log_nll"]["high"]]) == (old["delta_log_nll"], old["ci"])
    half = pm["drift"]["second_half"]
    assert ([half["ratio"]["low"], half["ratio"]["high"]], [half["delta_log_nll"]["low"], half["delta_log_nll"]["high"]]) == \
        (old["drift"]["second_half"]["display_ci"], old["drift"]["second_half"]["ci"])
    assert [r["ratio"]["high"] for r in migrated["by_length"]] == [r["display_ci"][1] for r in stored["by_length"]]
    assert migrated["secondary_metrics"]["avg"]["difference"]["low"] == stored["secondary_metrics"]["avg"]["ci"][0]


def test_a_comparison_of_version_1_opens_with_summary_and_report_and_rewrites_as_rows(tmp_path):
    printed, html, run = opened_earlier(EARLIER, tmp_path)
    assert "**Perplexity ratio B/A = 1.1370**, 95 % BCa interval [0.1765, 3.3726]" in printed
    assert "| first half | 6 | 0.5345 | [0.0929, 3.1224] |" in printed and "| avg | -0.0318 | [-0.2071, +0.1567] |" in printed
    # the Markdown it renders is the one version 1 wrote, but for where the level and method now stand
    rendered = printed.splitlines()
    written = (EARLIER / "compare.md").read_text().splitlines()
    assert [i for i, (a, b) in enumerate(zip(rendered, written)) if a != b] == [5, 12, 17]
    assert written[12] == "| drift: half of A's run order | windows | ratio B/A | CI |" and rendered[12] == written[12].replace("| CI |", "| 95 % BCa interval |")
    assert "<th>95 % BCa interval</th>" in html and "[0.1765, 3.3726]" in html and "[-0.2071, +0.1567]" in html
    assert _check_json_files(run) == 2 + 2 * 2 + 2 * len(LENGTHS) + 5


def test_the_report_page_of_two_runs_heads_its_comparison_by_the_rows_level(runs, tmp_path):
    page = run_cli("report", str(runs[0]), str(runs[1]), "--out", str(tmp_path / "report.html"))
    assert page.returncode == 0, page.stderr
    html = (tmp_path / "report.html").read_text()
    assert "<th>PPL ratio B/A</th><th>95 % BCa interval</th>" in html and "PPL ratio B/A per context length (95 % BCa interval)" in html


def test_a_comparison_of_per_sample_runs_of_version_1_reads_as_written():
    """Per-sample comparisons (other tools' runs) wrote interval rows in version 1 already."""
    found = {"report": {"kind": "samples", "measures": [{"against": [{"difference": {"estimate": 1.0, "low": 0.5, "high": 1.5}}]}]}}
    assert Comparison.migrate(json.loads(json.dumps(found)), 1, EARLIER) == found
