"""The diff result writes every interval as its row (level and method beside the bounds), and a
diff run of version 1 (tests/fixtures/diff_v1/make.py) still opens, read as this version's rows."""

from __future__ import annotations

import json

import pytest

from ctxeval import api
from ctxeval.modeldiff.summary import Bootstrap, summarize
from ctxeval.render.diff import render_markdown
from ctxeval.results.diff import DiffResult
from tests.conftest import FIXTURES
from tests.test_diff import _records
from tests.test_interval_rows import _check_json_files, opened_earlier

EARLIER = FIXTURES / "diff_v1" / "diff"  # a diff run as ctxeval 83ad2d9 wrote it (version 1)
ROW = ("estimate", "low", "high", "se", "n", "confidence", "method", "reason")


def _cells(summary: dict) -> list[dict]:
    return [c for c in (summary["all"], *summary["buckets"]) if c.get("tokens")]


def test_every_interval_of_a_diff_summary_is_a_row_and_the_markdown_reads_its_level_from_them(tmp_path):
    s = summarize(_records(), [0, 16, 64], Bootstrap(replicates=200, confidence=0.9))
    (tmp_path / "diff.json").write_text(json.dumps({"summary": s}))
    # per cell: KL, same top-1, Δp, reverse KL, and the perplexity ratio on both scales
    assert _check_json_files(tmp_path) == 6 * 3
    report = {"ref": {"name": "a"}, "cand": {"name": "b"}, "summary": s, "gates": {"profile": "dev", "max_kl": None, "min_same_top": None, "failures": []},
              "settings": {"window": 64, "stride": 64, "confidence": 0.9, "replicates": 200, "seed": 0}}
    md = render_markdown(report)
    assert "| quantity | value | 90 % BCa-cluster interval |" in md and "intervals: 90 % BCa-cluster, 200 replicates" in md and "95 % BCa" not in md


def test_a_diff_run_of_version_1_reads_as_this_versions_rows():
    stored = json.loads((EARLIER / "diff.json").read_text())
    assert json.loads((EARLIER / "result.json").read_text())["version"] == 1 < DiffResult.VERSION
    report = api.read_result(EARLIER).report
    for old, new in zip(_cells(stored["summary"]), _cells(report["summary"]), strict=True):
        units = old["resampling_units"]
        for name, point in (("kl", "mean"), ("same_top1", "percent"), ("delta_p", "mean")):
            bounds = old[name]["ci"] or [None, None]
            assert {k: new[name][k] for k in ROW} == {"estimate": old[name][point], "low": bounds[0], "high": bounds[1], "se": None, "n": units,
                                                      "confidence": 0.95, "method": "BCa", "reason": old[name]["reason"]}
            assert (new[name]["interval"], new[name]["degenerate"]) == (old[name]["interval"], old[name]["degenerate"])
        ratio, log = new["ppl_ratio"]["ratio"], new["ppl_ratio"]["delta_log_nll"]
        assert (ratio["estimate"], [ratio["low"], ratio["high"]]) == (old["ppl_ratio"]["ratio"], old["ppl_ratio"]["display_ci"] or [None, None])
        assert (log["estimate"], [log["low"], log["high"]]) == (old["ppl_ratio"]["delta_log_nll"], old["ppl_ratio"]["ci"] or [None, None])
        spread = old["ppl_ratio"]["unit_sd"]
        assert log["se"] == (None if spread is None else pytest.approx(spread / units ** 0.5, rel=1e-12))
        assert ratio["confidence"] == log["confidence"] == 0.95
        assert new["kl"]["p99"] == old["kl"]["p99"] and new["ppl_ratio"]["ppl_ref"] == old["ppl_ratio"]["ppl_ref"]
    verdict = report["verdict"]
    assert (verdict["outcome"], verdict["low"], verdict["confidence"], verdict["method"]) == ("gains", stored["verdict"]["low"], 0.95, "BCa")
    assert verdict["margin"] == abs(stored["verdict"]["low"]) and verdict["se"] == report["summary"]["all"]["ppl_ratio"]["delta_log_nll"]["se"]
    # the markdown it renders is the one version 1 wrote, but for the verdict's wording (the field's order since)
    rendered = render_markdown(report).splitlines()
    written = (EARLIER / "diff.md").read_text().splitlines()
    assert [i for i, (a, b) in enumerate(zip(rendered, written, strict=True)) if a != b] == [6] and written[6].startswith("| verdict")


def test_a_diff_run_of_version_1_opens_with_summary_and_report_and_rewrites_as_rows(tmp_path):
    printed, html, run = opened_earlier(EARLIER, tmp_path)
    assert "| all | 96 | 5.32370 | [5.16153, 5.40141] |" in printed and "| quantity | value | 95 % BCa interval |" in printed
    assert "95 % BCa interval" in html and "[5.16153, 5.40141]" in html and "[0.6836, 0.9480]" in html
    assert _check_json_files(run) == 5 * 3 + 1  # three cells without reverse KL, and the verdict
