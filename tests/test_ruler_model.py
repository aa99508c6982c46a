"""RULER on the real embedded models: generation and likelihood agree where the likelihood pass
decides the greedy answer, the one-prefill generation path equals `generate`, a killed run
resumes to identical records, and a length beyond the model's context is refused in one line."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from ctxeval import api
from ctxeval.data.texts import RULER_HAYSTACK_NAME, demo_text_path, load_text
from ctxeval.metrics.ruler import match_all
from ctxeval.results.records import STOP_AFTER_PASSES_ENV
from ctxeval.ruler.score import reference_text
from ctxeval.ruler.aggregation import Setting
from ctxeval.ruler.samples import SampleSpec, build_sample, fit_size, render_sample, sample_rng, vt_worked_example
from ctxeval.ruler.tasks import TASKS, essay_words, split_answer_prefix

from .conftest import run_cli
from .ruler_evaluate import rescored

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
    essay = load_text(RULER_HAYSTACK_NAME).content
    sample, _ = build_sample(SampleSpec(row["task"], 1024, int(row["sample"]), haystack), 42, essay, count)
    text = b"".join(gemma.token_bytes(t) for t in gemma.generate(np.asarray([gemma.info.bos_id, *gemma.tokenize(sample.prompt)]), TASKS[row["task"]].tokens_to_generate))
    assert match_all(text.decode("utf-8", errors="replace"), tuple(row["answers"])) == 1.0
    again = api.read_result(tmp_path / "run")
    pd.testing.assert_frame_equal(again.table, result.table, check_dtype=False)
    # RULER's evaluate.py re-scores the records to the reported cells: a sample the likelihood pass
    # settled stores the reference, which generation would have produced first
    table = result.table.set_index(["model", "task", "length"])
    for key, score in rescored(s).items():
        assert score == round(table.loc[key, "score"], 2)
    settled = s[s["method"] == "generation path"]
    assert len(settled) and all(p == reference_text(TASKS[t].family, tuple(a)).strip() for p, t, a in zip(settled["prediction"], settled["task"], settled["answers"]))
    # every prompt rebuilt from its record (vt's worked example from the tokenizer): the same text and tokens
    example = vt_worked_example(count, 42, TASKS["vt"].args)
    for row in s[s["model"] == "gemma-3-270m"].itertuples():
        spec = SampleSpec(row.task, row.length, row.sample, row.haystack, example if row.task == "vt" else "")
        text = render_sample(spec, 42, essay, row.haystack).prompt
        assert hashlib.sha256(text.encode()).hexdigest() == row.prompt_sha256 and 1 + count(text) == row.prompt_tokens


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
    cases = [
        ("smollm2-135m", "16384", "--lengths 16384 is beyond smollm2-135m's training context of 8192 tokens"),
        # Gemma prepends BOS: a sample filling its whole context would need one more token, refused before any sample runs
        ("gemma-3-270m", "1024,32768", "--lengths 32768 is gemma-3-270m's whole training context: a sample that fills it, as RULER's rule allows, "
                                       "needs one more token for BOS; choose at most 32767"),
        ("smollm2-135m", "10", "--lengths 10 is too short for niah_single_1 with smollm2-135m: its smallest prompt has 110 tokens and 128 are generated, "
                               "238 in all, 228 more than 10"),
        ("gemma-3-270m", "1024", "--chat-template: gemma-3-270m has no chat template"),
    ]
    for model, lengths, message in cases:
        extra = ("--chat-template",) if "chat" in message else ()
        proc = run_cli("ruler", "--tasks", "niah_single_1", "--lengths", lengths, "--samples", "1", "--model", model, *extra, "--out", str(tmp_path / "x"))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
        assert not (tmp_path / "x" / "samples.parquet").exists()


def test_chat_template_gives_the_model_its_own_turns_and_rulers_answer_prefix(tmp_path):
    """SmolLM2's GGUF carries its chat template: the records' prompts are RULER's input as the
    user's turn, the generation prompt, then the answer prefix, its special tokens single ids."""
    from ctxeval.backends.registry import load_scorer, parse_model_spec

    result = api.ruler(tasks=("niah_single_2",), lengths=(512,), samples=1, models=("smollm2-135m",), chat_template=True, out=tmp_path / "run")
    scorer = load_scorer(parse_model_spec("smollm2-135m"))
    essay = load_text(RULER_HAYSTACK_NAME).content
    head = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\n"
    for row in result.samples.itertuples():
        prompt = render_sample(SampleSpec(row.task, 512, 0, row.haystack), 42, essay, row.haystack).prompt
        text, prefix = split_answer_prefix(TASKS[row.task].family, prompt)
        wrapped = f"{head}{text}<|im_end|>\n<|im_start|>assistant\n{prefix}"
        assert hashlib.sha256(wrapped.encode()).hexdigest() == row.prompt_sha256
        ids = scorer.tokenize_with_specials(wrapped)
        assert len(ids) == row.prompt_tokens and ids[:2] == [1, 9690] and ids.count(1) == 3 and ids.count(2) == 2  # <|im_start|> x3, <|im_end|> x2
        assert row.prompt_tokens + TASKS[row.task].tokens_to_generate <= 512
    assert result.manifest.config["chat_template"] is True
    # the template's tokens leave less room for the haystack than RULER's base prompt has
    plain = fit_size("niah_single_2", 512, 42, essay, lambda text: len(scorer.tokenize(text)), "smollm2-135m")
    assert result.manifest.plan["haystack_sizes"]["smollm2-135m"]["niah_single_2"]["512"] < plain


def test_the_bundled_haystack_holds_128k_tokens_of_both_tokenizers_without_a_repeat():
    """Counted on Gemma 3's and SmolLM2's tokenizers (their GGUFs' vocabularies, no weights): at
    least 128K tokens of sentences that never repeat (test_ruler.py), so a needle haystack fitted
    to 128K tokens of Gemma takes fewer words than the text has; cwe at 128K finds the largest size."""
    import llama_cpp
    from llama_cpp._internals import LlamaModel

    from ctxeval.backends.model_files import embedded_model_path, smollm2_path

    essay = load_text(RULER_HAYSTACK_NAME).content
    counts = []
    for path in (embedded_model_path(), smollm2_path()):
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        vocab = LlamaModel(path_model=str(path), params=params, verbose=False)
        counts.append(lambda text, vocab=vocab: len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False)))
    assert all(count(" ".join(essay.split())) >= 128 * 1024 for count in counts)
    gemma = counts[0]
    size = fit_size("niah_single_2", 131072, 42, essay, gemma, "gemma")
    assert 0.9 * len(essay_words(essay)) < size <= len(essay_words(essay))
    cwe = fit_size("cwe", 131072, 42, essay, gemma, "gemma")
    setting = Setting(TASKS["cwe"].args, 42, 131072)

    def tokens(n: int) -> int:
        return gemma(TASKS["cwe"].render(sample_rng(42, "size", "cwe", 131072), n, setting).prompt)

    assert tokens(cwe) + 120 <= 131072 < tokens(cwe + 1) + 120


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
