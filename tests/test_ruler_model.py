"""RULER on the real embedded models: generation and likelihood agree where the likelihood pass
decides the greedy answer, the one-prefill generation path equals `generate`, a killed run
resumes to identical records, and a length beyond the model's context is refused in one line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from ctxeval import api
from ctxeval.data.texts import demo_text_path
from ctxeval.metrics.ruler import match_all
from ctxeval.results.records import STOP_AFTER_PASSES_ENV
from ctxeval.probes.ruler import reference_text
from ctxeval.probes.ruler_samples import SampleSpec, build_sample, fit_size, vt_worked_example
from ctxeval.probes.ruler_tasks import TASKS

from .conftest import run_cli

pytestmark = pytest.mark.model


def test_score_then_generate_equals_scoring_then_generating(gemma):
    """The continued generation is token for token `generate`'s, the scores `score_stepwise`'s."""
    essay = demo_text_path().read_text()
    count = lambda text: len(gemma.tokenize(text))  # noqa: E731
    example = vt_worked_example(count, 42, TASKS["vt"].args)
    left = 0
    for name, length in (("niah_multivalue", 1024), ("vt", 1024), ("fwe", 1024), ("niah_single_1", 400)):
        extra = example if name == "vt" else ""
        size = fit_size(name, length, 42, essay, count, "gemma", extra)
        sample, _ = build_sample(SampleSpec(name, length, 0, size, extra), 42, essay, count)
        prompt = np.asarray([gemma.info.bos_id, *gemma.tokenize(sample.prompt)], dtype=np.int32)
        reference = np.asarray(gemma.tokenize(reference_text(TASKS[name].family, sample.answers)), dtype=np.int32)
        scores, generated = gemma.score_then_generate(prompt, reference, TASKS[name].tokens_to_generate, 2, (1.0,))
        stepwise = gemma.score_stepwise(prompt, reference, 2, (1.0,))
        assert np.array_equal(scores.logprob, stepwise.logprob) and np.array_equal(scores.rank, stepwise.rank)
        if generated is None:
            assert np.array_equal(stepwise.greedy_id, reference)
        else:
            left += 1
            assert generated == gemma.generate(prompt, TASKS[name].tokens_to_generate)
    assert left >= 2  # the check covered generations that left the reference


def test_generation_and_likelihood_agree_where_the_likelihood_pass_decides(tmp_path, gemma):
    result = api.ruler(tasks=("niah_single_1", "niah_multivalue", "vt"), lengths=(1024,), samples=2, models=("gemma-3-270m", "gemma-3-270m?max_context=128"),
                       out=tmp_path / "run")
    s = result.samples
    assert len(s) == 2 * 3 * 2 and s["generation_score"].notna().all()
    decided = s["likelihood_score"] == 1.0
    assert decided.any() and (s.loc[decided, "generation_score"] == 1.0).all()
    # an answer inside the greedy prefix is produced by generation: generation never scores below likelihood
    assert (s["generation_score"] >= s["likelihood_score"] - 1e-12).all()
    assert result.agreement["likelihood_above_generation"] == 0.0
    control = s[s["model"] == "gemma-3-270m?max_context=128"]
    assert control["prompt_tokens"].max() == 129  # BOS and the prompt's last 128 tokens
    full = result.table[(result.table["task"] == "mean") & (result.table["model"] == "gemma-3-270m")]["score"].iloc[0]
    assert full > result.table[(result.table["task"] == "mean") & (result.table["model"] == "gemma-3-270m?max_context=128")]["score"].iloc[0]
    # what the generation path claims without generating, real generation confirms
    row = s[(s["method"] == "generation path") & (s["model"] == "gemma-3-270m") & (s["task"] != "vt")].iloc[0]
    count = lambda text: len(gemma.tokenize(text))  # noqa: E731
    haystack = result.manifest.plan["haystack_sizes"]["gemma-3-270m"][row["task"]]["1024"]
    sample, _ = build_sample(SampleSpec(row["task"], 1024, int(row["sample"]), haystack), 42, demo_text_path().read_text(), count)
    text = b"".join(gemma.token_bytes(t) for t in gemma.generate(np.asarray([gemma.info.bos_id, *gemma.tokenize(sample.prompt)]), TASKS[row["task"]].tokens_to_generate))
    assert match_all(text.decode("utf-8", errors="replace"), tuple(row["answers"])) == 1.0
    again = api.read_result(tmp_path / "run")
    pd.testing.assert_frame_equal(again.table, result.table, check_dtype=False)


def test_a_killed_run_resumes_to_identical_records(tmp_path):
    # one sample of each task, one pass each: the run is killed after the first, resumed for the second
    args = ("ruler", "--tasks", "niah_single_1,fwe", "--lengths", "512", "--samples", "1", "--quiet", "--threads", "1", "--model", "smollm2-135m")
    whole = run_cli(*args, "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    killed = run_cli(*args, "--out", str(tmp_path / "killed"), env={STOP_AFTER_PASSES_ENV: "1"})
    assert killed.returncode == 130, killed.stderr
    resumed = run_cli(*args, "--out", str(tmp_path / "killed"))
    assert resumed.returncode == 0, resumed.stderr
    assert pq.read_table(tmp_path / "killed" / "samples.parquet").equals(pq.read_table(tmp_path / "whole" / "samples.parquet"))


def test_a_length_beyond_the_models_context_is_one_line_and_exit_code_2(tmp_path):
    proc = run_cli("ruler", "--tasks", "niah_single_1", "--lengths", "16384", "--samples", "1", "--model", "smollm2-135m", "--out", str(tmp_path / "x"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "--lengths 16384 is beyond smollm2-135m's training context of 8192 tokens" in proc.stderr


def test_through_serve_an_api_model_scores_as_the_local_model(gemma, tmp_path):
    """`ctxeval serve` on loopback, the same model as an openai: model: its generated answers
    are the local model's (the server generates on the same llama.cpp path) and its likelihood
    numbers agree within the batched-versus-stepwise rounding (docs/numerics.md)."""
    from ctxeval.backends.openai_options import OpenAIOptions
    from ctxeval.server.launch import serve_in_thread
    from ctxeval.server.settings import ServerSettings

    args = {"tasks": ("niah_single_1", "vt"), "lengths": (1024,), "samples": 2}
    local = api.ruler(models=("gemma-3-270m",), out=tmp_path / "local", **args)
    with serve_in_thread(ServerSettings(n_ctx=1200, served_names=("gemma-3-270m",)), gemma) as (url, _):
        options = OpenAIOptions(base_url=url, mode="prompt", tokenizer="gemma-3-270m", cache=None, concurrency=1)
        remote = api.ruler(models=("openai:gemma-3-270m",), openai=options, out=tmp_path / "remote", **args)
    a, b = local.samples, remote.samples
    assert list(b["model"].unique()) == ["openai:gemma-3-270m"] and (b["method"] == "greedy generation").all()
    assert (a["prompt_tokens"].to_numpy() == b["prompt_tokens"].to_numpy()).all()  # the prompt generated from is the same
    assert (a["generation_score"].to_numpy() == b["generation_score"].to_numpy()).all()
    # the needle answers tokenize alike either way; vt's names after the prefix's trailing space
    # re-tokenize differently as one text, so their likelihood numbers are not comparable
    needle = (a["task"] == "niah_single_1").to_numpy()
    assert np.allclose(a["mean_logprob"][needle], b["mean_logprob"][needle], atol=0.05)
    assert (a["likelihood_score"][needle].to_numpy() == b["likelihood_score"][needle].to_numpy()).all()
