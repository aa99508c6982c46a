"""The diff and judge results: written once by their `Result`, read back equal through
`read_result`, and refused in one line where another kind or no header is found."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ctxeval.errors import UserError
from ctxeval.explorer.data import arm_payload, load_runs
from ctxeval.judge import Verdict, judge_result
from ctxeval.modeldiff.summary import Bootstrap, summarize
from ctxeval.results.manifest import Manifest, write_manifest
from ctxeval.results.base import RESULT_FILE, read_result
from ctxeval.pipeline.engine import save_result
from ctxeval.render.kinds import RENDERING
from ctxeval.results.diff import RECORDS_FILE, DiffResult
from ctxeval.results.judge import JudgeResult
from tests.test_diff import _records as diff_records


def _diff(tmp_path) -> DiffResult:
    out = tmp_path / "d"
    out.mkdir()
    manifest = Manifest(command="diff", run_id="0123abcd", config={"window": 8}, models=[{"name": "ref"}, {"name": "cand"}], status="complete")
    write_manifest(out, manifest)
    summary = summarize(diff_records(windows=3, per_window=8), [0, 8], Bootstrap(replicates=200))
    report = {"ref": {"name": "ref"}, "cand": {"name": "cand"}, "summary": summary, "settings": {"window": 8, "stride": 8, "confidence": 0.95, "replicates": 200, "seed": 0},
              "gates": {"profile": "dev", "max_kl": 0.1, "min_same_top": None, "failures": ["upper CI bound of the mean KL 0.500000 exceeds --max-kl 0.1"]}}
    result = DiffResult(out, manifest, report, "# ctxeval diff\n", "<html>é</html>\n", list(report["gates"]["failures"]))
    return save_result(out, result, "diff", RENDERING)


def _judge(tmp_path) -> JudgeResult:
    verdicts = [Verdict("q1", "model_first", "win", "[[A]]"), Verdict("q1", "base_first", "tie", "[[C]] — égal"), Verdict("q2", "model_first", "error", "none")]
    result = judge_result(tmp_path / "j", "m", "b", "openai:judge", "gpt4", verdicts, 0)
    (tmp_path / "j").mkdir()
    return save_result(tmp_path / "j", result, "judge", RENDERING)


def test_a_diff_reads_back_equal(tmp_path):
    result = _diff(tmp_path)
    again = read_result(result.run_dir, reader="report", kinds=(DiffResult,))
    assert (again.run_dir, again.report, again.markdown, again.html, again.failures) == (result.run_dir, result.report, result.markdown, result.html, result.failures)
    assert again.manifest.to_json() == result.manifest.to_json()
    assert json.loads((result.run_dir / RESULT_FILE).read_text())["files"] == ["diff.json", "diff.md", "report.html"]
    assert {p.name for p in result.paths().values()} == set(DiffResult.file_names())


def test_a_judge_result_reads_back_equal(tmp_path):
    result = _judge(tmp_path)
    assert result.report["totals"]["win_rate"] == pytest.approx(0.75) and "| both orders | 3 | 1 | 0 | 1 | 1 | 0.7500 |" in result.markdown
    again = read_result(tmp_path / "j", kinds=(JudgeResult,))
    assert again == result
    assert [p.read_text() for p in again.paths()] == [json.dumps(result.report, indent=2, ensure_ascii=False), result.markdown]


def test_another_kind_is_refused_in_one_line(tmp_path):
    _diff(tmp_path)
    _judge(tmp_path)
    with pytest.raises(UserError, match="holds a diff result \\(from `ctxeval diff`\\); leval-corr reads judge results") as error:
        read_result(tmp_path / "d", reader="leval-corr", kinds=(JudgeResult,))
    assert "\n" not in str(error.value)
    with pytest.raises(UserError, match="holds a judge result \\(from `ctxeval judge`\\); report reads diff results"):
        read_result(tmp_path / "j", reader="report", kinds=(DiffResult,))


@pytest.mark.parametrize("kind", [DiffResult, JudgeResult])
def test_a_folder_without_a_header_is_refused_in_one_line(tmp_path, kind):
    folder = _diff(tmp_path).run_dir if kind is DiffResult else _judge(tmp_path).out
    (folder / RESULT_FILE).unlink()  # as a ctxeval before output headers left it
    if kind is JudgeResult:
        write_manifest(folder, Manifest(command="judge", run_id="x", config={}, models=[], status="complete"))
    with pytest.raises(UserError, match="has no result.json") as error:
        read_result(folder, reader="report", kinds=(kind,))
    assert "\n" not in str(error.value)


def test_the_report_reads_a_diff_through_its_result(tmp_path):
    """Its answer and manifest, and its records as two arms of the explorer: REF's numbers and
    CAND's of every scored token (the records of this fixture have no top-k: none shown)."""
    result = _diff(tmp_path)
    records = diff_records(windows=3, per_window=8)
    n = len(records)
    records = records.assign(window_id=[f"C8-{i}" for i in records["pass_index"]], target_pos=np.arange(n), char_start=np.arange(n), char_end=np.arange(n) + 1,
                             target_id=np.arange(n) % 7, ref_rank=np.arange(n) % 5 + 1, cand_rank=np.arange(n) % 3 + 1, ref_top1=1, cand_top1=2)
    records.to_parquet(result.run_dir / RECORDS_FILE)
    (view,), (ref, cand) = load_runs([result.run_dir])
    assert (view.kind, view.manifest) == ("diff", result.manifest.to_json())
    assert (ref.model, cand.model, ref.pieces_of, cand.pieces_of) == ("ref", "cand", "ref", "ref")
    for arm, side in ((ref, "ref"), (cand, "cand")):
        assert arm.records["logprob"].tolist() == records[f"{side}_logprob"].tolist() and arm.records["rank"].tolist() == records[f"{side}_rank"].tolist()
        assert (arm.records["nominal_len"] == 8).all() and arm.records["window_id"].tolist() == records["window_id"].tolist()
        assert arm_payload(arm, 5)["k"] == 0
    assert [row[0] for row in view.answer.rows] == ["mean KL(P_ref ‖ P_cand), nats/token", "perplexity ratio CAND/REF", "same top-1 token"]
    assert view.answer.notes == ("Gates (dev) failed: upper CI bound of the mean KL 0.500000 exceeds --max-kl 0.1.",)
    (result.run_dir / RESULT_FILE).unlink()
    with pytest.raises(UserError, match="has no result.json") as error:
        load_runs([result.run_dir])
    assert "\n" not in str(error.value)
