"""KV-cache presses (kvpress) as hf: model options: ratio 0 is the plain model, StreamingLLM
equals an independent masked forward, budgets keep exactly B tokens, Gemma 3's sliding-window
layers stay whole, no target sees a later one, bad options are one line before any model work,
and a killed pressed run resumes to the same records."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from ctxeval import api
from ctxeval.data.texts import load_text
from ctxeval.errors import UserError
from ctxeval.results.records import STOP_AFTER_PASSES_ENV
from tests.conftest import run_cli
from tests.hf_tiny import tiny_gemma3_dir, tiny_llama_dir
from tests.numeric_paths import FLOAT32_FORWARD

torch = pytest.importorskip("torch")
pytest.importorskip("kvpress")

from ctxeval.backends.kv_press import parse_press, ratio_for_budget  # noqa: E402
from ctxeval.backends.registry import load_scorer, parse_model_spec  # noqa: E402

TEXT = load_text("demo").content
PRESSES = ("StreamingLLMPress", "SnapKVPress", "KnormPress", "ExpectedAttentionPress")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("press")
    return {"llama": f"hf:{tiny_llama_dir(root / 'llama', TEXT[:20000], vocab_size=512)}",
            "gemma3": f"hf:{tiny_gemma3_dir(root / 'gemma3', TEXT[:20000])}"}


def _pass(scorer, context: int, n: int):
    ids = np.asarray(scorer.tokenize(TEXT), dtype=np.int32)[: context + n + 1]
    return ids[:-1], np.arange(context, context + n), ids[context + 1 :]


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
@pytest.mark.parametrize("press", PRESSES)
def test_ratio_zero_scores_as_the_plain_model(tiny, kind, press):
    plain = load_scorer(parse_model_spec(tiny[kind]))
    pressed = load_scorer(parse_model_spec(f"{tiny[kind]}?press={press}&compression_ratio=0"))
    args = _pass(plain, 80, 24)
    a, b = plain.score(*args, 5, (1.0,)), pressed.score(*args, 5, (1.0,))
    # the pressed pass is two forwards (prefill, then the rest against the cache) with explicit
    # masks: another float32 path than one causal forward (docs/numerics.md)
    np.testing.assert_allclose(b.logprob, a.logprob, **FLOAT32_FORWARD)
    assert pressed.info.name.endswith(f"?press={press}&compression_ratio=0")
    assert pressed.info.details["kv_press"]["press"] == press


def _masked_reference(scorer, input_ids, context: int, kept: np.ndarray) -> np.ndarray:
    """Independent reference: one plain forward over the whole pass whose context rows attend
    causally to everything, and whose later rows see only the `kept` context positions (and the
    later rows before them) — what a cache holding those entries gives, since each kept entry
    was computed with the whole context before it."""
    model = scorer._model
    n = len(input_ids)
    allowed = np.tril(np.ones((n, n), dtype=bool))
    allowed[context:, :context] = False
    allowed[context:, kept] = True
    mask = torch.zeros(1, 1, n, n).masked_fill(~torch.as_tensor(allowed), torch.finfo(torch.float32).min)
    with torch.inference_mode():
        logits = model(input_ids=torch.as_tensor(input_ids[None], dtype=torch.long), attention_mask=mask).logits[0].double()
    return torch.log_softmax(logits, -1).numpy()


def test_streaming_llm_equals_a_masked_forward_over_the_whole_pass(tiny):
    pressed = load_scorer(parse_model_spec(f"{tiny['llama']}?press=StreamingLLMPress&budget=20&n_sink=4"))
    input_ids, positions, targets = _pass(pressed, 80, 24)
    got = pressed.score(input_ids, positions, targets, 5, (1.0,))
    kept = np.r_[0:4, 80 - 16 : 80]  # 4 sinks and the last 16 of the 80 context tokens
    reference = _masked_reference(pressed, input_ids, 80, kept)
    np.testing.assert_allclose(got.logprob, reference[positions, targets], **FLOAT32_FORWARD)


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_no_target_sees_a_later_target(tiny, kind):
    """Changing the last target moves no earlier target's score, whatever each layer kept."""
    pressed = load_scorer(parse_model_spec(f"{tiny[kind]}?press=PyramidKVPress&budget=24&window_size=8"))
    input_ids, positions, targets = _pass(pressed, 80, 24)
    changed = input_ids.copy()
    changed[-1] = (changed[-1] + 1) % 100
    a, b = pressed.score(input_ids, positions, targets, 5, (1.0,)), pressed.score(changed, positions, targets, 5, (1.0,))
    np.testing.assert_array_equal(a.logprob[:-1], b.logprob[:-1])


@pytest.mark.parametrize("press", PRESSES)
def test_gemma3_compresses_its_full_attention_layers_only(tiny, press):
    pressed = load_scorer(parse_model_spec(f"{tiny['gemma3']}?press={press}&budget=20"))
    details = pressed.info.details["kv_press"]
    assert details["compressed_layers"] == [1, 3] and details["uncompressed_sliding_layers"] == [0, 2]
    ids = torch.as_tensor(np.asarray(pressed.tokenize(TEXT)[:104], dtype=np.int64)[None])
    with torch.inference_mode():
        _, kept = pressed._press.hidden_states(pressed._body, ids, 80)
    assert kept == [15, 20, 15, 20]  # sliding layers hold their last W - 1 = 15 tokens, full ones the budget
    scores = pressed.score(*_pass(pressed, 80, 24), 5, (1.0,))
    assert np.isfinite(scores.logprob).all()


@pytest.mark.parametrize("press", PRESSES)
def test_a_budget_keeps_exactly_b_tokens_whatever_the_context(tiny, press):
    pressed = load_scorer(parse_model_spec(f"{tiny['llama']}?press={press}&budget=29" + ("&window_size=8" if press == "SnapKVPress" else "")))
    for context in (37, 80, 113):
        ids = torch.as_tensor(np.asarray(pressed.tokenize(TEXT)[: context + 8], dtype=np.int64)[None])
        with torch.inference_mode():
            _, kept = pressed._press.hidden_states(pressed._body, ids, context)
        assert kept == [29, 29]


def test_a_context_a_press_cannot_compress_is_one_clear_error(tiny):
    pressed = load_scorer(parse_model_spec(f"{tiny['llama']}?press=SnapKVPress&budget=8"))  # SnapKV's window of 64 needs a longer context
    with pytest.raises(UserError, match="press SnapKVPress cannot compress a context of 40 tokens: .*window size 64"):
        pressed.score(*_pass(pressed, 40, 8), 5, (1.0,))


def test_the_budget_ratio_rounds_as_kvpress_does():
    for context in range(1, 400):
        for budget in (1, 5, 16, 29, 128):
            ratio = ratio_for_budget(budget, context)
            assert 0 <= ratio < 1 and int(context * (1 - ratio)) == min(budget, context)
    assert int(80 * (1 - (1 - 16 / 80))) == 15  # the naive ratio loses a token here


@pytest.mark.parametrize("spec, message", [
    ("hf:x?press=FooPress&budget=3", "unknown press 'FooPress'"),
    ("hf:x?press=SnapKVPress&compression_ratio=1", "must be in [0, 1)"),
    ("hf:x?press=SnapKVPress&compression_ratio=-0.1", "must be in [0, 1)"),
    ("hf:x?press=SnapKVPress&budget=0", "must be a positive integer"),
    ("hf:x?press=SnapKVPress", "needs compression_ratio=R"),
    ("hf:x?press=SnapKVPress&budget=8&compression_ratio=0.5", "not both"),
    ("hf:x?budget=8", "needs press=NAME"),
    ("hf:x?press=SnapKVPress&budget=8&windowsize=3", "SnapKVPress takes window_size, kernel_size"),
])
def test_bad_press_options_are_refused_by_name(spec, message):
    from ctxeval.backends.model_options import hf_options, split_spec

    with pytest.raises(UserError, match=re.escape(message)):
        hf_options(split_spec(spec)[1], spec)


def test_press_arguments_are_typed():
    press = parse_press({"press": "StreamingLLMPress", "budget": "128", "n_sink": "4"}, "hf:x")
    assert press.budget == 128 and press.compression_ratio is None and press.arguments == {"n_sink": 4}


@pytest.mark.parametrize("args, message", [
    (["effective-length", "demo", "--model", "hf:nowhere?press=FooPress&budget=3"], "unknown press 'FooPress'"),
    (["effective-length", "demo", "--model", "gemma-3-270m?press=SnapKVPress&budget=3"], "presses run on hf: models only"),
    (["context-gain", "demo", "--window", "64", "--short", "8", "--model", "openai:gpt-4o?press=SnapKVPress&budget=3"], "presses run on hf: models only"),
    (["effective-length", "demo", "--model", "gemma-3-270m", "--model", "hf:nowhere?press=SnapKVPress&compression_ratio=1.5"], "must be in [0, 1)"),
    (["score", "demo", "--model", "hf:nowhere?press=SnapKVPress&budget=0"], "must be a positive integer"),
    (["score", "demo", "--model", "hf:nowhere?press=SnapKVPress&budget=8"], "no context to compress"),
    (["diff", "gemma-3-270m", "gemma-3-270m?press=SnapKVPress&budget=8", "demo", "--window", "64"], "presses run on hf: models only"),
])
def test_bad_press_options_are_one_line_and_exit_2_before_any_model_loads(args, message, tmp_path):
    result = run_cli(*args, "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_pressed_effective_length_run_records_the_press_and_resumes_to_the_same_records(tiny, tmp_path):
    model = f"{tiny['llama']}?press=SnapKVPress&budget=24&window_size=8"
    args = ["effective-length", "demo", "--model", tiny["llama"], "--model", model, "--lengths", "32,64", "--starts", "3", "--targets", "8",
            "--unit", "span", "--replicates", "200", "--quiet"]
    whole = run_cli(*(a for a in args if a != "--quiet"), "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    # the answer first: both models' L*, and the press's gain lost and share kept against the reference, with intervals
    head = whole.stdout.splitlines()[:12]
    assert head[0] == "# Effective context length"
    assert head[4].startswith("| model | verdict vs reference | L* [95 %] | log p at 64 | gain 32→64 [95 %] | gain lost vs reference |")
    pressed = [cell.strip() for cell in next(line for line in head if "?press=SnapKVPress" in line).strip("|").split("|")]
    assert pressed[1].split(" (")[0].removesuffix(", by more than δ") in ("hurts", "gains", "within δ", "too few samples to tell")
    assert pressed[5].count("[") == 1 and (pressed[6].endswith("%]") or "(no interval" in pressed[6] or pressed[6].endswith("(the reference gains nothing)"))
    killed = run_cli(*args, "--out", str(tmp_path / "killed"), env={STOP_AFTER_PASSES_ENV: "5"})
    assert killed.returncode == 130, killed.stderr
    resumed = run_cli(*args, "--out", str(tmp_path / "killed"))
    assert resumed.returncode == 0, resumed.stderr
    records = [pq.read_table(tmp_path / run / "records.parquet").to_pandas() for run in ("whole", "killed")]
    pd.testing.assert_frame_equal(*records, check_exact=True)
    manifest = json.loads((tmp_path / "whole" / "manifest.json").read_text())
    models = {m["name"]: m for m in manifest["models"]}
    assert models[model.replace(f"hf:{tiny['llama'][3:]}", "hf:llama")]["details"]["kv_press"]["budget"] == 24
    fingerprints = {f["model"]: f["sha256"] for f in manifest["fingerprints"]}
    assert len(set(fingerprints.values())) == 2  # the press is its own model, its own scores


def test_retrieval_compresses_the_record_and_scores_question_and_answer_after_it(tiny, tmp_path):
    args = {"lines": (8,), "depths": (0.0, 1.0), "samples": 1}
    plain = api.retrieval(models=(tiny["llama"],), out=tmp_path / "plain", **args)
    zero = api.retrieval(models=(f"{tiny['llama']}?press=StreamingLLMPress&compression_ratio=0",), out=tmp_path / "zero", **args)
    kept = api.retrieval(models=(f"{tiny['llama']}?press=StreamingLLMPress&budget=8",), out=tmp_path / "kept", **args)
    cases = [pd.read_parquet(run / "cases.parquet") for run in (tmp_path / "plain", tmp_path / "zero", tmp_path / "kept")]
    np.testing.assert_allclose(cases[1].value_logprob, cases[0].value_logprob, **FLOAT32_FORWARD)
    assert (cases[2].value_logprob != cases[0].value_logprob).all()  # 8 kept tokens of the record change every answer's score
    assert cases[1].answer_ranks.map(list).tolist() == cases[0].answer_ranks.map(list).tolist()


def test_the_record_ends_at_a_token_boundary_of_the_prompt(tiny):
    from ctxeval.probes.context_split import first_token_from
    from ctxeval.probes.retrieval_data import make_case

    scorer = load_scorer(parse_model_spec(tiny["llama"]))
    case = make_case("register", 8, 0.5, 0)
    ids = scorer.tokenize(case.prompt)
    first = first_token_from(scorer, ids, case.record_char_end)
    record = b"".join(scorer.token_bytes(t) for t in ids[:first]).decode()
    assert case.prompt[: case.record_char_end].startswith(record) and len(case.prompt[: case.record_char_end]) - len(record) < 8
    assert case.prompt[len(record) :].startswith(b"".join(scorer.token_bytes(t) for t in ids[first:]).decode()[:20])


def test_sliding_windows_of_a_ratio_zero_press_score_as_the_plain_model(tiny, tmp_path):
    args = {"method": "sliding", "window": 64, "stride": 16, "max_tokens": 160}
    plain = api.score(["demo"], model=tiny["llama"], out=tmp_path / "plain", **args)
    zero = api.score(["demo"], model=f"{tiny['llama']}?press=KnormPress&compression_ratio=0", out=tmp_path / "zero", **args)
    a, b = (pd.read_parquet(r.run_dir / "records.parquet") for r in (plain, zero))
    assert a.target_pos.tolist() == b.target_pos.tolist() and a.context_len.tolist() == b.context_len.tolist()
    np.testing.assert_allclose(b.logprob, a.logprob, **FLOAT32_FORWARD)


@pytest.mark.parametrize("press", PRESSES)
def test_kl_against_the_full_cache_grows_as_the_budget_shrinks_and_a_budget_covering_every_context_is_refused(tiny, tmp_path, press):
    """diff REF 'REF?press=…' on 64-token windows moved by 16 (48 tokens before a window's first
    scored position): a budget of 48 keeps every context whole and is refused in one line naming
    a stride that works; below it, less is kept and the KL grows."""
    mean_kl = {}
    extra = "&window_size=4" if press == "SnapKVPress" else ""
    with pytest.raises(UserError, match=r"stride= \(16\) leaves 48 tokens .* keeps whole; give a stride= S ≤ 15 \(e.g. 15\)"):
        api.diff(tiny["llama"], f"{tiny['llama']}?press={press}&budget=48{extra}", ["demo"], window=64, stride=16, max_tokens=200, out=tmp_path / "48")
    for budget in (32, 8):
        result = api.diff(tiny["llama"], f"{tiny['llama']}?press={press}&budget={budget}{extra}", ["demo"], window=64, stride=16,
                          max_tokens=200, out=tmp_path / str(budget), bootstrap=api.Bootstrap(replicates=200))
        mean_kl[budget] = result.report["summary"]["all"]["kl"]["estimate"]
    assert 1e-6 < mean_kl[32] < mean_kl[8], mean_kl


def test_a_stride_less_press_diff_is_refused_before_any_model_loads(tiny):
    result = run_cli("diff", tiny["llama"], f"{tiny['llama']}?press=StreamingLLMPress&budget=16", "demo", "--window", "64")
    assert result.returncode == 2 and result.stdout == "" and len(result.stderr.strip().splitlines()) == 1
    assert "--stride is needed" in result.stderr and "give a --stride S ≤ 47 (e.g. 32)" in result.stderr


def test_a_strided_press_diff_reports_its_first_window_apart_and_opens_on_a_compressed_one(tiny, tmp_path):
    """Window 0 of each document has no context to compress: its targets are counted, summarised
    apart, never averaged into the headline; the page opens on the first compressed window."""
    result = api.diff(tiny["llama"], f"{tiny['llama']}?press=StreamingLLMPress&budget=8", ["demo"], window=64, stride=32, max_tokens=160,
                      out=tmp_path / "d", bootstrap=api.Bootstrap(replicates=200))
    records = pd.read_parquet(result.run_dir / "diff_records.parquet")
    first = records.pass_index == 0
    assert (records.kl[first] == 0).all() and (records.kl[~first] > 0).any()
    summary = result.report["summary"]
    assert summary["compressed"]["targets"] == int((~first).sum()) and summary["compressed"]["of"] == len(records) == 160
    assert summary["all"]["tokens"] == int((~first).sum()) and summary["all"]["kl"]["estimate"] == pytest.approx(records.kl[~first].mean())
    assert summary["compressed"]["uncompressed"]["tokens"] == 64 and summary["compressed"]["uncompressed"]["kl"]["estimate"] == 0
    assert f"{int((~first).sum())} of 160 targets scored against a compressed cache (StreamingLLMPress budget 8)" in result.markdown
    assert result.markdown.splitlines()[6].startswith("| verdict (δ = ±0.01 nats/token) | ")
    assert '"open":1' in result.html.replace(" ", "")
    assert result.report["verdict"]["n"] == summary["all"]["resampling_units"] == 3  # the compressed windows


@pytest.mark.model
def test_the_embedded_gemma_compresses_its_three_global_layers_only():
    """Gemma 3 270M: 18 layers, every sixth full attention; its sliding-window layers (512
    positions) keep their own cache whole."""
    pressed = load_scorer(parse_model_spec("hf:gemma-3-270m?press=ExpectedAttentionPress&budget=64"))
    details = pressed.info.details["kv_press"]
    assert details["compressed_layers"] == [5, 11, 17] and len(details["uncompressed_sliding_layers"]) == 15
    ids = torch.as_tensor(np.asarray(pressed.tokenize(TEXT)[:616], dtype=np.int64)[None])
    with torch.inference_mode():
        _, kept = pressed._press.hidden_states(pressed._body, ids, 600)
    assert [kept[i] for i in (5, 11, 17)] == [64, 64, 64] and {kept[i] for i in details["uncompressed_sliding_layers"]} == {511}
    assert np.isfinite(pressed.score(*_pass(pressed, 600, 16), 5, (1.0,)).logprob).all()


def test_a_small_effective_length_run_of_a_press_is_too_few_samples_to_tell(tiny, tmp_path):
    """Two spans of a pressed model against the full cache: no verdict either way, the spans that
    would settle it, and no L* (the reference's gain rests on two units)."""
    result = api.effective_length(["demo"], models=(tiny["llama"], f"{tiny['llama']}?press=StreamingLLMPress&budget=8"), lengths=(16, 32, 64), starts=2,
                                  targets=8, unit="span", replicates=200, out=tmp_path / "e")
    verdict = result.summary["comparisons"][0]["verdict"]
    assert verdict["outcome"] == "too few samples to tell" and verdict["n"] == 2 and verdict["samples_needed"] is not None
    assert verdict["reason"] == "2 span(s): fewer than 3 paired units decide nothing"
    assert all(s["effective_length"]["measurable"] is False for s in result.summary["models"].values())
    assert f"| too few samples to tell (about {verdict['samples_needed']} spans would settle it) | not measurable at this size |" in result.markdown
