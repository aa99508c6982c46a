"""An effective-length run of version 2 (tests/fixtures/effective_length_v2/make.py: L* and the
share kept without their level and method) opens, read with both taken from its estimator's
settings, and `summary --write` rewrites it as this version."""

from __future__ import annotations

import json

from ctxeval import api
from ctxeval.results.effective_length import EffectiveLengthResult
from ctxeval.results.probe_report import ProbeReport
from ctxeval.stats.interval import ROW_KEYS
from tests.conftest import FIXTURES
from tests.test_interval_rows import opened_earlier

EARLIER = FIXTURES / "effective_length_v2" / "run"  # a tiny hf model and its truncation control, as ctxeval 17bc193 wrote them


def test_an_effective_length_run_of_version_2_reads_l_star_and_the_share_kept_with_their_level_and_method():
    assert json.loads((EARLIER / "result.json").read_text())["version"] == 2 < EffectiveLengthResult.VERSION
    stored = json.loads((EARLIER / "summary.json").read_text())
    assert "method" not in next(iter(stored["models"].values()))["effective_length"]
    summary = api.read_result(EARLIER).summary
    for model, s in summary["models"].items():
        kept = stored["models"][model]["effective_length"]
        star = s["effective_length"]
        assert {key: star[key] for key in kept} == kept  # nothing stored changes
        assert (star["confidence"], star["method"]) == (stored["estimator"]["confidence"], "percentile bootstrap over spans")
    (comparison,) = summary["comparisons"]
    share = comparison["share_kept"]
    assert set(ROW_KEYS) <= set(share) and share["se"] is None and share["n"] == share["units"] == stored["spans"]
    assert (share["estimate"], share["low"], share["high"]) == tuple(stored["comparisons"][0]["share_kept"][k] for k in ("estimate", "low", "high"))


def test_an_effective_length_run_of_version_2_opens_with_summary_and_report_and_rewrites_as_this_version(tmp_path):
    printed, html, run = opened_earlier(EARLIER, tmp_path)
    assert "interval: 95 % percentile bootstrap over spans" in printed and "interval: 95 % percentile bootstrap over spans" in html
    written = json.loads((run / "summary.json").read_text())
    assert all(s["effective_length"]["method"] == "percentile bootstrap over spans" for s in written["models"].values())
    assert set(ROW_KEYS) <= set(written["comparisons"][0]["share_kept"])


def test_a_probe_report_of_version_3_reads_l_stars_level_and_method_and_this_version_writes_them(tmp_path):
    folder = EARLIER.parent / "probe_report"
    assert json.loads((folder / "result.json").read_text())["version"] == 3 < ProbeReport.VERSION
    stored = json.loads((folder / "probe_report.json").read_text())["effective_length"]
    assert stored and "confidence" not in stored[0]
    migrated = api.read_result(folder).sections["effective_length"]
    assert migrated["value"].tolist() == [row["value"] for row in stored]
    assert set(migrated["confidence"]) == {0.95} and set(migrated["method"]) == {"percentile bootstrap over spans"}
    fresh = api.probe_report([EARLIER], out=tmp_path / "p").sections["effective_length"]  # this version, from the same run
    assert fresh[["value", "low", "high", "confidence", "method"]].equals(migrated[["value", "low", "high", "confidence", "method"]])
