"""Context gain, retrieval and the probe report end to end on the embedded model."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from ctxeval import api
from ctxeval.probes.retrieval import extract_value, score_case
from ctxeval.probes.retrieval_data import make_case
from ctxeval.results.records import STOP_AFTER_PASSES_ENV, read_records

from .conftest import FIXTURES, SHARED_DATA, needs_shared, run_cli

pytestmark = pytest.mark.model

# one batched pass vs one-token decodes (bench/bench_numeric_paths.py, 256 targets after a
# 384-token prompt, AMD EPYC AVX2): max |Δ logprob| 0.43, mean 0.05-0.07; docs/numerics.md.
# An off-by-one alignment would give several nats per token.
STEPWISE_VS_BATCH_MAX = 1.0
STEPWISE_VS_BATCH_MEAN = 0.15

WIKI = FIXTURES / "wikitext2-test-head.txt"
BOOK = SHARED_DATA / "gutenberg" / "austen-emma.txt"


def test_short_context_covering_the_window_gives_zero_gain(tmp_path):
    result = api.context_gain([str(WIKI)], window=64, short=64, max_tokens=192, out=tmp_path / "cg", replicates=200)
    s = result.summary["texts"]["wikitext2-test-head"]
    assert s["n_tokens"] == 192 and s["n_distant"] == 0
    assert s["mean_gain"]["estimate"] == 0.0 and s["ppl_long"] == s["ppl_short"]
    assert s["n_key"] == 0 and s["longppl"] is None
    assert set(read_records(tmp_path / "cg")["method"]) == {"chunked"}


def test_truncated_scores_equal_fixed_window_scores_bit_for_bit(tmp_path):
    """Stride 1 gives every far target exactly k tokens: the same numbers as `score --method fixed`.

    `fixed` scores every target (the first k with all their predecessors, paper 002's P2); the
    truncated targets are a subset, each with exactly k tokens in both runs, so they compare
    bit for bit."""
    k = 16
    api.context_gain([str(WIKI)], window=64, short=k, short_stride=1, max_tokens=128, out=tmp_path / "cg", replicates=200)
    fixed = api.score(str(WIKI), method="fixed", window=k, max_tokens=128, out=tmp_path / "fixed").records.set_index("target_pos")
    short = read_records(tmp_path / "cg")
    short = short[short["method"] == "truncated"].set_index("target_pos")
    assert len(short) == 2 * (64 - k - 1)
    assert (short["context_len"] == k).all()
    assert (fixed.loc[short.index, "context_len"] == k).all()
    np.testing.assert_array_equal(short["logprob"].to_numpy(), fixed.loc[short.index, "logprob"].to_numpy())
    np.testing.assert_array_equal(short["rank"].to_numpy(), fixed.loc[short.index, "rank"].to_numpy())


@needs_shared(BOOK)
def test_distant_context_helps_on_a_real_book(tmp_path):
    proc = run_cli("context-gain", str(BOOK), "--window", "512", "--short", "32", "--max-tokens", "1024", "--quiet", "--out", str(tmp_path / "cg"))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "cg" / "summary.json").read_text())
    s = summary["texts"]["austen-emma"]
    # measured: PPL 32.18 (long) vs 44.68 (short), mean gain +0.328 nats (PPL ratio 0.720 [0.648, 0.834]),
    # 2.15 % key tokens, LongPPL 1.95
    assert s["mean_gain"]["estimate"] > 0.1 and s["mean_gain"]["low"] > 0 and s["mean_gain"]["method"] == "BCa"
    assert s["ppl_long"] < s["ppl_short"]
    assert 0 < s["key_fraction"] < 0.2 and s["longppl"] < s["ppl_long"]
    by_distance = summary["gain_by_distance"]
    assert by_distance[0]["context_to"] == 32 and by_distance[0]["mean_gain"]["estimate"] == 0.0
    for name in ("context_gain.md", "context_gain.png", "gain_by_distance.csv", "manifest.json", "records.parquet"):
        assert (tmp_path / "cg" / name).is_file()


def test_retrieval_accuracy_equals_real_generation_on_every_case(gemma):
    """Accuracy is what greedy generation produces, case by case, on whatever CPU runs this:
    the generation-path chain is taken only where generation provably follows it."""
    methods = set()
    for variant in ("cat", "register"):
        for lines in (6, 12):
            for depth in (0.0, 0.5, 1.0):
                for sample in (0, 1):
                    case = make_case(variant, lines, depth, sample)
                    result = score_case(gemma, case)
                    answer_ids = gemma.tokenize(case.answer)
                    prompt = np.asarray([gemma.info.bos_id] + gemma.tokenize(case.prompt), dtype=np.int32)
                    generated = gemma.generate(prompt, len(answer_ids) + 4)
                    text = b"".join(gemma.token_bytes(t) for t in generated).decode("utf-8", errors="replace")
                    assert result.correct == (extract_value(variant, text) == case.value), (variant, lines, depth, sample, text)
                    if result.accuracy_method == "generation path":
                        assert generated[: len(answer_ids)] == answer_ids
                    assert result.min_margin >= 0
                    methods.add(result.accuracy_method)
    assert methods == {"generation path", "greedy generation"}  # both branches exercised


def test_stepwise_scores_match_batched_scores_within_the_measured_tolerance(gemma):
    """Generation's path (one-token decodes) and one batched pass differ only in the last
    digits: docs/numerics.md records the measured differences and this bound."""
    case = make_case("cat", 12, 0.5, 0)
    prompt = np.asarray([gemma.info.bos_id] + gemma.tokenize(case.prompt), dtype=np.int32)
    answer = np.asarray(gemma.tokenize(case.answer), dtype=np.int32)
    stepwise = gemma.score_stepwise(prompt, answer, top_k=5, temperatures=(1.0,))
    batched = gemma.score(np.concatenate([prompt, answer[:-1]]), np.arange(len(prompt) - 1, len(prompt) - 1 + len(answer)), answer, top_k=5, temperatures=(1.0,))
    diff = np.abs(stepwise.logprob - batched.logprob)
    assert diff.max() < STEPWISE_VS_BATCH_MAX and diff.mean() < STEPWISE_VS_BATCH_MEAN, diff


def test_retrieval_end_to_end_and_probe_report(tmp_path):
    proc = run_cli("retrieval", "--lines", "6,12", "--depths", "0,1", "--samples", "1", "--quiet", "--out", str(tmp_path / "rt"))
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "rt" / "results.json").read_text())
    cells = results["cells"]
    assert [(c["lines"], c["depth"]) for c in cells] == [(6, 0.0), (6, 1.0), (12, 0.0), (12, 1.0)]
    for c in cells:
        assert c["n"] == 1 and 0.0 <= c["accuracy"] <= 1.0 and c["mean_rank"] >= 1
    assert sum(c["accuracy"] for c in cells) >= 2  # measured: 3 of 4 right at these sizes
    assert (tmp_path / "rt" / "retrieval_heatmap.png").is_file()
    again = run_cli("retrieval", "--lines", "6,12", "--depths", "0,1", "--samples", "1", "--quiet", "--out", str(tmp_path / "rt"))
    assert again.returncode == 0 and json.loads((tmp_path / "rt" / "results.json").read_text()) == results
    assert pq.read_table(tmp_path / "rt" / "cases.parquet").column("case_index").to_pylist() == [0, 1, 2, 3]

    cg = run_cli("context-gain", str(WIKI), "--window", "128", "--short", "32", "--max-tokens", "256", "--quiet", "--out", str(tmp_path / "cg"))
    assert cg.returncode == 0, cg.stderr
    report = run_cli("probe-report", str(tmp_path / "cg"), str(tmp_path / "rt"), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    payload = json.loads((tmp_path / "report" / "probe_report.json").read_text())
    glance = payload["at_a_glance"][0]
    assert glance["model"] == "gemma-3-270m"
    assert glance["retrieval_accuracy"] == pytest.approx(np.mean([c["accuracy"] for c in cells]))
    cg_summary = json.loads((tmp_path / "cg" / "summary.json").read_text())["texts"]["wikitext2-test-head"]
    assert glance["mean_gain"] == pytest.approx(cg_summary["mean_gain"]["estimate"]) and glance["ppl_long"] == pytest.approx(cg_summary["ppl_long"])
    markdown = (tmp_path / "report" / "probe_report.md").read_text()
    assert "## Context gain and LongPPL" in markdown and "## Line retrieval" in markdown


def test_retrieval_sized_in_tokens(gemma, tmp_path):
    proc = run_cli("retrieval", "--tokens", "300,600", "--depths", "0.5", "--samples", "1", "--quiet", "--out", str(tmp_path / "rt"))
    assert proc.returncode == 0, proc.stderr
    cells = json.loads((tmp_path / "rt" / "results.json").read_text())["cells"]
    assert [c["tokens_target"] for c in cells] == [300, 600]
    chosen = json.loads((tmp_path / "rt" / "manifest.json").read_text())["lines_for_tokens"]["gemma-3-270m"]
    for c in cells:
        lines = chosen[str(c["tokens_target"])]
        assert c["lines"] == lines and c["mean_prompt_tokens"] <= c["tokens_target"]
        one_more = 1 + len(gemma.tokenize(make_case("cat", lines + 1, 0.5, 0).prompt))
        assert one_more > c["tokens_target"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["retrieval", "--depths", "0,1.5"], "--depths must be numbers between 0 and 1"),
        (["retrieval", "--lines", "2"], "--lines must be integers of at least 4"),
        (["retrieval", "--variant", "dog"], "unknown --variant"),
        (["retrieval", "--tokens", "50"], "--tokens 50 is too small"),
        (["context-gain", "demo", "--short", "0"], "--short must be a positive integer"),
        (["context-gain", "demo", "--window", "40000"], "training context"),
        (["probe-report", "."], "is not a ctxeval output folder"),
    ],
)
def test_probe_commands_reject_bad_input_with_one_line(args, message, tmp_path):
    proc = run_cli(*args, "--out", str(tmp_path / "x"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr


def test_a_killed_retrieval_resumes_to_the_uninterrupted_cases(tmp_path):
    args = ("retrieval", "--lines", "6,12", "--depths", "0,1", "--samples", "1", "--quiet", "--threads", "1")
    whole = run_cli(*args, "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    killed = run_cli(*args, "--out", str(tmp_path / "killed"), env={STOP_AFTER_PASSES_ENV: "2"})
    assert killed.returncode == 130, killed.stderr
    assert pq.read_table(tmp_path / "killed" / "parts").num_rows == 2 and not (tmp_path / "killed" / "cases.parquet").exists()
    resumed = run_cli(*args, "--out", str(tmp_path / "killed"))
    assert resumed.returncode == 0, resumed.stderr
    assert pq.read_table(tmp_path / "killed" / "cases.parquet").equals(pq.read_table(tmp_path / "whole" / "cases.parquet"))
    assert (tmp_path / "killed" / "results.json").read_text() == (tmp_path / "whole" / "results.json").read_text()
