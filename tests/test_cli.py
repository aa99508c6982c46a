"""The command line end to end on the embedded model: outputs, resume, and bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from ctxeval.pieces import PIECES_FILE, read_pieces
from ctxeval.results.records import STOP_AFTER_PASSES_ENV

from .conftest import FIXTURES, run_cli

REQUIRED_COLUMNS = {
    "model", "text_id", "window_id", "context_len", "target_pos", "char_start", "char_end",
    "target_id", "target_text", "logprob", "rank", "greedy_id", "topk_ids", "topk_logprobs",
    "topk_returned",
}


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "run"
    result = run_cli("sweep", "--lengths", "16,32", "--n-compare", "6", "--repeats", "2", "--context-mode", "both", "--temperatures", "0.5,1.5", "--out", str(out))
    assert result.returncode == 0, result.stderr
    return out, result


@pytest.mark.model
def test_sweep_writes_records_summary_tables_and_plot(sweep_run):
    out, result = sweep_run
    for name in ("manifest.json", "records.parquet", "summary.json", "summary.csv", "tables.md", "scores_vs_length.png"):
        assert (out / name).is_file(), name
    assert not (out / "parts").exists()
    records = pq.read_table(out / "records.parquet").to_pandas()
    assert REQUIRED_COLUMNS <= set(records.columns)
    assert {"logprob_t0.5", "logprob_t1.5"} <= set(records.columns)
    # 2 lengths x 2 repeats x 6 targets x 2 modes
    assert len(records) == 48
    exact = records[records.context_mode == "exact"]
    assert (exact.context_len == exact.nominal_len).all()
    approx = records[records.context_mode == "approx"]
    for _, window in approx.groupby("window_id"):
        assert window.context_len.tolist() == list(range(window.nominal_len.iloc[0], window.nominal_len.iloc[0] + 6))
    # the same targets in both modes
    keys = ["nominal_len", "repeat", "target_pos"]
    assert sorted(map(tuple, exact[keys].values.tolist())) == sorted(map(tuple, approx[keys].values.tolist()))
    assert (records.topk_ids.map(len) == 20).all()
    assert (records["rank"] >= 1).all()
    # temperatures change log-probabilities, ranks are the same records
    assert (records["logprob_t0.5"] != records["logprob"]).any()


@pytest.mark.model
def test_run_keeps_the_piece_of_every_id_in_its_records(sweep_run, gemma, tmp_path):
    """pieces.parquet: the text of every target, greedy and top-k id, as the tokenizer gives it;
    re-running the command on a complete run without the file (an older run) adds it."""
    out, _ = sweep_run
    records = pq.read_table(out / "records.parquet").to_pandas()
    model = records["model"].iloc[0]
    ids = set(records["target_id"]) | set(records["greedy_id"]) | {int(i) for row in records["topk_ids"] for i in row}
    pieces = read_pieces(out, model)
    assert set(pieces) == ids and len(ids) > records["target_id"].nunique()  # alternatives beyond the text's tokens
    assert all(pieces[i] == gemma.token_bytes(i).decode("utf-8", errors="replace") for i in ids)
    assert all(pieces[t] == text for t, text in zip(records["target_id"], records["target_text"]))
    old = tmp_path / "old"
    shutil.copytree(out, old)
    (old / PIECES_FILE).unlink()
    rerun = run_cli("sweep", "--lengths", "16,32", "--n-compare", "6", "--repeats", "2", "--context-mode", "both", "--temperatures", "0.5,1.5", "--out", str(old))
    assert rerun.returncode == 0, rerun.stderr
    assert read_pieces(old, model) == pieces
    assert pq.read_table(old / "records.parquet").equals(pq.read_table(out / "records.parquet"))


@pytest.mark.model
def test_manifest_records_model_identity_and_conventions(sweep_run):
    out, _ = sweep_run
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    model = manifest["models"][0]
    assert model["sha256"] == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert model["vocab_size"] == 262144 and model["n_ctx_train"] == 32768
    assert model["backend"] == "llamacpp" and model["details"]["llama_cpp_python"]
    assert "BOS" in manifest["bos"] and "newline" in manifest["text_handling"]
    assert set(manifest["plan"]["start_chars"]["demo"]) == {"L16-r0", "L16-r1", "L32-r0", "L32-r1"}


@pytest.mark.model
def test_summary_has_every_metric_and_approx_vs_exact(sweep_run):
    out, result = sweep_run
    summary = json.loads((out / "summary.json").read_text())
    group = summary["groups"][0]
    for key in ("n", "nll", "ppl", "bpb", "lin", "rp", "a0.1", "a0.3", "avg", "approx_ppl", "top1", "ppl_t0.5", "ppl_t1.5", "avg_sd", "ppl_sd"):
        assert key in group, key
    assert len(summary["groups"]) == 4  # 2 lengths x 2 modes
    assert group["n_windows"] == 2 and group["avg_sd"] is not None
    delta = summary["approx_vs_exact"]
    assert len(delta) == 2 and all(d["n"] == 12 for d in delta)
    assert "thesis Table 1" in result.stdout and "approx vs exact" in result.stdout


@pytest.mark.model
def test_summary_command_recomputes_with_other_settings(sweep_run):
    out, _ = sweep_run
    default = run_cli("summary", str(out))
    assert default.returncode == 0, default.stderr
    full = run_cli("summary", str(out), "--cutoff", "full", "--alphas", "0.5")
    assert full.returncode == 0, full.stderr
    assert "A0.5" in full.stdout and "A0.5" not in default.stdout


@pytest.mark.model
def test_score_chunked_and_sliding_equal_when_stride_is_window(tmp_path):
    a = run_cli("score", str(FIXTURES / "wikitext2-test-head.txt"), "--method", "chunked", "--window", "200", "--max-tokens", "450", "--quiet", "--out", str(tmp_path / "a"))
    b = run_cli("score", str(FIXTURES / "wikitext2-test-head.txt"), "--method", "sliding", "--window", "200", "--stride", "200", "--max-tokens", "450", "--quiet", "--out", str(tmp_path / "b"))
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    ra = pq.read_table(tmp_path / "a" / "records.parquet").to_pandas()
    rb = pq.read_table(tmp_path / "b" / "records.parquet").to_pandas()
    assert ra.target_pos.tolist() == list(range(450))
    assert ra.context_len.tolist() == rb.context_len.tolist()
    assert ra.logprob.tolist() == rb.logprob.tolist()
    assert ra["rank"].tolist() == rb["rank"].tolist()


@pytest.mark.model
def test_fixed_method_with_head_skip_gives_every_target_exactly_w_tokens(tmp_path):
    r = run_cli("score", "demo", "--method", "fixed", "--head", "skip", "--window", "8", "--max-tokens", "40", "--quiet", "--out", str(tmp_path / "f"))
    assert r.returncode == 0, r.stderr
    rec = pq.read_table(tmp_path / "f" / "records.parquet").to_pandas()
    assert rec.target_pos.tolist() == list(range(8, 40))
    assert (rec.context_len == 8).all()


@pytest.mark.model
def test_score_takes_several_texts_as_sweep_does(tmp_path):
    """`score A B` scores each text as `score B` alone would: one document per text, same records."""
    head = (FIXTURES / "wikitext2-test-head.txt").read_text(encoding="utf-8")
    (tmp_path / "a.txt").write_text(head[:2500], encoding="utf-8")
    (tmp_path / "b.txt").write_text(head[2500:], encoding="utf-8")
    args = ("--method", "chunked", "--window", "32", "--max-tokens", "64", "--quiet")
    both = run_cli("score", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), *args, "--out", str(tmp_path / "both"))
    alone = run_cli("score", str(tmp_path / "b.txt"), *args, "--out", str(tmp_path / "b"))
    assert both.returncode == 0 and alone.returncode == 0, both.stderr + alone.stderr
    records = pq.read_table(tmp_path / "both" / "records.parquet").to_pandas()
    assert list(dict.fromkeys(records.text_id)) == ["a", "b"] and records.groupby("text_id").size().tolist() == [64, 64]
    ours = records[records.text_id == "b"].reset_index(drop=True)
    single = pq.read_table(tmp_path / "b" / "records.parquet").to_pandas()
    assert ours.target_pos.tolist() == single.target_pos.tolist() and ours.target_id.tolist() == single.target_id.tolist()
    assert ours.logprob.tolist() == single.logprob.tolist()  # the same window shapes: one kernel path (docs/numerics.md)
    assert ours["rank"].tolist() == single["rank"].tolist()
    assert (tmp_path / "both" / "corpus_summary.json").is_file()  # several documents: the corpus-level summary, as for sweep


def _kill_midway(args: list[str], out: Path, first_run: list[int], after_passes: int = 3) -> None:
    """Run and let it SIGTERM itself once `after_passes` passes are on disk (deterministic: the
    executor's test hook raises the signal, so a fast machine cannot finish first): those of
    `first_run`, the plan's pass indices that run first."""
    env = dict(os.environ, **{STOP_AFTER_PASSES_ENV: str(after_passes)})
    proc = subprocess.run([sys.executable, "-m", "ctxeval.cli", *args], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 130, proc.stderr
    assert not (out / "records.parquet").exists()
    assert json.loads((out / "manifest.json").read_text())["status"] == "incomplete"  # interrupted: not finished, resumable
    on_disk = pq.read_table(out / "parts", columns=["pass_index"]).column(0).unique().to_pylist()
    assert sorted(on_disk) == first_run[:after_passes]


@pytest.mark.model
def test_interrupted_run_resumes_to_identical_results(tmp_path):
    args = ["sweep", "--lengths", "64,128", "--n-compare", "12", "--quiet"]
    # passes 0-11 score length 64, 12-23 length 128: a sweep runs its longest length first
    _kill_midway(args + ["--out", str(tmp_path / "killed")], tmp_path / "killed", first_run=[12, 13, 14])
    parts_before = {p.name for p in (tmp_path / "killed" / "parts").glob("part-*.parquet")}
    assert parts_before
    resumed = run_cli(*args, "--out", str(tmp_path / "killed"))
    assert resumed.returncode == 0, resumed.stderr
    clean = run_cli(*args, "--out", str(tmp_path / "clean"))
    assert clean.returncode == 0, clean.stderr
    a = pq.read_table(tmp_path / "killed" / "records.parquet").to_pandas()
    b = pq.read_table(tmp_path / "clean" / "records.parquet").to_pandas()
    pd.testing.assert_frame_equal(a, b)
    assert pq.read_table(tmp_path / "killed" / PIECES_FILE).equals(pq.read_table(tmp_path / "clean" / PIECES_FILE))
    sa = json.loads((tmp_path / "killed" / "summary.json").read_text())
    sb = json.loads((tmp_path / "clean" / "summary.json").read_text())
    assert sa == sb
    killed_manifest = json.loads((tmp_path / "killed" / "manifest.json").read_text())
    assert killed_manifest["timing"]["resumed"] is True
    # the fingerprint of the resumed run equals the uninterrupted one's (records hashed in plan order)
    clean_manifest = json.loads((tmp_path / "clean" / "manifest.json").read_text())
    assert killed_manifest["fingerprints"] == clean_manifest["fingerprints"] and killed_manifest["fingerprints"][0]["tokens"] == len(a)


@pytest.mark.model
def test_a_different_configuration_is_not_mixed_into_a_run(tmp_path):
    out = tmp_path / "r"
    assert run_cli("sweep", "--lengths", "16", "--n-compare", "2", "--quiet", "--out", str(out)).returncode == 0
    other = run_cli("sweep", "--lengths", "16", "--n-compare", "3", "--quiet", "--out", str(out))
    assert other.returncode == 2 and "different configuration" in other.stderr


def test_models_lists_the_embedded_default():
    r = run_cli("models")
    assert r.returncode == 0 and "gemma-3-270m" in r.stdout and "available" in r.stdout


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (d / "empty.txt").write_bytes(b"")
    (d / "short.txt").write_text("Only a few words here.")
    os.chmod(d / "short.txt", 0o644)
    return d


@pytest.mark.parametrize(
    "args,message",
    [
        (["sweep", "{d}/missing.txt"], "not found"),
        (["sweep", "{d}"], "directory"),
        (["sweep", "{d}/latin1.txt"], "not valid UTF-8"),
        (["sweep", "{d}/empty.txt"], "empty"),
        pytest.param(["sweep", "{d}/short.txt", "--lengths", "32"], "needs at least", marks=pytest.mark.model),
        pytest.param(["sweep", "--lengths", "40000"], "training context", marks=pytest.mark.model),
        (["sweep", "--model", "no-such-model"], "unknown model"),
        (["sweep", "--model", "{d}/missing.gguf"], "not found"),
        (["sweep", "--lengths", "32,abc"], "comma-separated integers"),
        (["sweep", "--lengths", "0"], "positive"),
        (["sweep", "--n-compare", "0"], "positive"),
        (["sweep", "--context-mode", "fast"], "context-mode"),
        (["sweep", "--temperatures", "0"], "positive"),
        (["sweep", "--cutoff", "many"], "--cutoff"),
        (["sweep", "--top-k", "5"], "--approx-k"),
        (["sweep", "--repeats", "x"], "repeats"),
        (["score", "demo", "--method", "rolling"], "unknown --method"),
        pytest.param(["score", "demo", "--method", "sliding", "--window", "64"], "needs --stride", marks=pytest.mark.model),
        pytest.param(["score", "demo", "--method", "sliding", "--window", "64", "--stride", "65"], "must not exceed", marks=pytest.mark.model),
        (["score", "demo", "--head", "skip"], "only to --method fixed"),
        (["score", "demo", "{d}/missing.txt"], "not found"),  # every text is read, as sweep reads them
        (["score", "demo", "--method", "fixed", "--head", "partial"], "unknown --head"),
        (["summary", "{d}"], "not a ctxeval output folder"),
        (["pplqa", "--tau", "c"], "unknown --tau 'c'; choose one of a, b"),
        (["pplqa", "--model", "openai:gpt-4o"], "cannot use openai:gpt-4o: it needs the log-probability of an answer's first token"),
        (["meta-eval", "--dataset", "llmbar:MT-Bench", "--model", "openai:gpt-4o"], "use a local model"),
        (["retrieval", "--model", "openai:gpt-4o"], "retrieval cannot use openai:gpt-4o"),
        (["context-gain", "demo", "--model", "gemma-3-270m", "--evaluator", "openai:gpt-4o"], "context-gain cannot use openai:gpt-4o"),
        (["sweep", "--no-such-flag"], "no-such-flag"),
    ],
)
def test_bad_input_gives_one_line_and_exit_code_2(bad_files, tmp_path, args, message):
    args = [a.format(d=bad_files) for a in args]
    if args[0] in ("sweep", "score"):
        args += ["--quiet", "--out", str(tmp_path / "out")]
    r = run_cli(*args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("ctxeval: error:") and message in lines[0], lines[0]
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "records.parquet").exists()


def test_refusals_name_the_kind_of_run_found(tmp_path):
    """`diff --out` at a meta-eval run names the meta-eval run (not "a diff with a different
    configuration"), and `--key-tokens` at a retrieval run names the retrieval run (not "not a
    finished context-gain run"); both before any model loads: one line, exit 2."""
    from .synthetic_runs import write_answer_quality_run, write_retrieval_run

    meta = write_answer_quality_run(tmp_path / "meta", "meta-eval")
    retrieval = write_retrieval_run(tmp_path / "ret", "m")
    cases = [
        (["--out", str(meta)], f"{meta} holds a meta-eval run, not a diff run; choose another --out or remove it"),
        (["--key-tokens", str(retrieval), "--out", str(tmp_path / "d")], f"{retrieval} holds a retrieval result (from `ctxeval retrieval`); --key-tokens reads context-gain results"),
    ]
    for args, message in cases:
        r = run_cli("diff", "gemma-3-270m", "gemma-3-270m", "demo", *args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
    assert not (tmp_path / "d").exists()
