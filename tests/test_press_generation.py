"""Greedy decoding against a compressed KV cache (hf: models with a kvpress press): the context
is prefilled inside the press and compressed, the rest of the prompt and every generated token
run against the compressed cache at their true positions. Ratio 0 decodes as the plain model,
each step equals an independent masked forward, SmolLM2's answers equal kvpress's own
KVPressTextGenerationPipeline token for token, `ctxeval ruler` stores pressed generations, and
bad input is one line before any work."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ctxeval.data.texts import load_text
from ctxeval.errors import UserError
from tests.conftest import run_cli
from tests.hf_tiny import byte_bpe_tokenizer, tiny_gemma3_dir, tiny_llama_dir
from tests.numeric_paths import FLOAT32_FORWARD

torch = pytest.importorskip("torch")
pytest.importorskip("kvpress")

from ctxeval.backends.registry import load_scorer, parse_model_spec  # noqa: E402
from tests.test_kv_press import _masked_reference  # noqa: E402

TEXT = load_text("demo").content


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("press_generation")
    return {"llama": f"hf:{tiny_llama_dir(root / 'llama', TEXT[:20000], vocab_size=512)}",
            "gemma3": f"hf:{tiny_gemma3_dir(root / 'gemma3', TEXT[:20000])}"}


def _prompt(scorer, n: int) -> np.ndarray:
    return np.asarray(scorer.tokenize(TEXT)[:n], dtype=np.int64)


def test_a_pressed_model_generates_only_when_told_where_its_context_ends(tiny):
    pressed = load_scorer(parse_model_spec(f"{tiny['llama']}?press=StreamingLLMPress&budget=20"))
    assert pressed.capabilities.generation and pressed.compresses_context
    prompt = _prompt(pressed, 96)
    with pytest.raises(UserError, match="compresses its KV cache: generating needs context_end"):
        pressed.generate(prompt, 4)
    with pytest.raises(UserError, match="context_end must lie between 1 and 95"):
        pressed.generate(prompt, 4, context_end=96)
    with pytest.raises(UserError, match="budget=20 keeps all 20 tokens of the context: nothing is compressed"):
        pressed.score_stepwise(prompt, prompt[:3], 2, (1.0,), context_end=20)


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_ratio_zero_decodes_as_the_plain_model(tiny, kind):
    plain = load_scorer(parse_model_spec(tiny[kind]))
    zero = load_scorer(parse_model_spec(f"{tiny[kind]}?press=SnapKVPress&compression_ratio=0&window_size=8"))
    prompt, continuation = _prompt(plain, 96), _prompt(plain, 112)[96:]
    a = plain.score_stepwise(prompt, continuation, 5, (1.0,))
    b = zero.score_stepwise(prompt, continuation, 5, (1.0,), context_end=80)
    np.testing.assert_allclose(b.logprob, a.logprob, **FLOAT32_FORWARD)
    assert zero.generate(prompt, 12, context_end=80) == plain.generate(prompt, 12)


def test_each_step_equals_a_masked_forward_over_the_whole_sequence(tiny):
    """Independent reference: one plain forward over prompt and continuation whose rows after the
    context see only the kept context positions (StreamingLLM: 4 sinks and the last 16) and every
    later token; decoding one token per step against the compressed cache gives its scores."""
    pressed = load_scorer(parse_model_spec(f"{tiny['llama']}?press=StreamingLLMPress&budget=20&n_sink=4"))
    ids = _prompt(pressed, 113)
    prompt, continuation = ids[:96], ids[96:]
    got = pressed.score_stepwise(prompt, continuation, 5, (1.0,), context_end=80)
    reference = _masked_reference(pressed, ids[:-1], 80, np.r_[0:4, 80 - 16 : 80])
    rows = np.arange(len(prompt) - 1, len(ids) - 1)
    np.testing.assert_allclose(got.logprob, reference[rows, continuation], **FLOAT32_FORWARD)


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_one_token_per_step_equals_the_rest_in_one_forward(tiny, kind):
    """Decoding the continuation one token at a time against the compressed cache equals scoring
    prompt and continuation in one pass whose first scored position ends the context (per-layer
    masks on true positions, Gemma 3's whole sliding-window layers included)."""
    pressed = load_scorer(parse_model_spec(f"{tiny[kind]}?press=KnormPress&budget=24"))
    ids = _prompt(pressed, 113)
    prompt, continuation, context = ids[:96], ids[96:], 80
    stepwise = pressed.score_stepwise(prompt, continuation, 5, (1.0,), context_end=context)
    batched = pressed.score(ids[:-1], np.arange(context, len(ids) - 1), ids[context + 1 :], 5, (1.0,))
    np.testing.assert_allclose(stepwise.logprob, batched.logprob[-len(continuation) :], **FLOAT32_FORWARD)


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    """A random-weight 2-layer GPT-2: an architecture kvpress does not compress (its layers are
    not where kvpress's hooks look)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    path = tmp_path_factory.mktemp("gpt2")
    tokenizer = byte_bpe_tokenizer(TEXT[:20000], 512)
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=64, n_layer=2, n_head=4, n_positions=1024)).save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return f"hf:{path}"


def test_a_press_on_an_architecture_kvpress_does_not_compress_is_one_line_and_exit_2(tiny_gpt2, tmp_path):
    result = run_cli("ruler", "--tasks", "niah_single_1", "--lengths", "256", "--samples", "1", "--model", f"{tiny_gpt2}?press=KnormPress&budget=32",
                     "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stderr
    assert "press KnormPress cannot compress a GPT2LMHeadModel: kvpress compresses Gemma3ForCausalLM" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, message", [
    (["ruler", "--tasks", "niah_single_1", "--lengths", "512,1024", "--model", "hf:nowhere?press=SnapKVPress&budget=512"],
     "--lengths 512 is within hf:nowhere?press=SnapKVPress&budget=512's press budget of 512 tokens: the press would keep every token of a context"),
    (["retrieval", "--tokens", "256", "--model", "hf:nowhere?press=StreamingLLMPress&budget=300"],
     "--tokens 256 is within hf:nowhere?press=StreamingLLMPress&budget=300's press budget of 300 tokens"),
])
def test_a_budget_that_covers_every_context_is_one_line_and_exit_2_before_any_model_loads(args, message, tmp_path):
    result = run_cli(*args, "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


# --- SmolLM2 135M: kvpress's own pipeline, and `ctxeval ruler` --------------------------------

def _ruler_prompt(scorer) -> tuple[str, str, str, int]:
    """A niah_single_1 sample of 256 tokens split as kvpress's RULER benchmark splits it: the
    context up to the question, the question up to the answer prefix ("The special magic"), the
    answer prefix; and how many leading ids of the whole prompt ctxeval's ruler compresses."""
    from ctxeval.probes.context_split import context_end, ruler_context_chars
    from ctxeval.ruler.samples import SampleSpec, build_sample, fit_size

    def count(text: str) -> int:
        return len(scorer.tokenize(text))

    size = fit_size("niah_single_1", 256, 42, TEXT, count, scorer.info.name)
    prompt = build_sample(SampleSpec("niah_single_1", 256, 0, size), 42, TEXT, count)[0].prompt
    chars = ruler_context_chars("niah", prompt)
    split = prompt.index("The special magic", chars)
    return prompt[:chars], prompt[chars:split], prompt[split:], context_end(scorer, prompt, scorer.tokenize(prompt), chars, 0)


@pytest.fixture(scope="module")
def kvpress_pipeline():
    """kvpress's KVPressTextGenerationPipeline on its own copy of hf:smollm2-135m, and the ids its
    greedy answers decode. Its preprocessing is told to add what ctxeval feeds: no chat template
    and no BOS (SmolLM2's tokenizer adds none), so the ids are the text's tokens."""
    from kvpress import KVPressTextGenerationPipeline
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = load_scorer(parse_model_spec("hf:smollm2-135m")).info.path
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa").eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.chat_template, tokenizer.bos_token = None, ""
    decoded: list[list[int]] = []
    decode = tokenizer.decode

    def recording_decode(ids, **kwargs):
        decoded.append([int(t) for t in ids])
        return decode(ids, **kwargs)

    tokenizer.decode = recording_decode
    return KVPressTextGenerationPipeline(model=model, tokenizer=tokenizer, device="cpu"), decoded


@pytest.mark.model
@pytest.mark.parametrize("press, ratio", [("StreamingLLMPress", 0.75), ("SnapKVPress", 0.5)])
def test_pressed_greedy_generation_equals_kvpress_pipeline_token_for_token(kvpress_pipeline, press, ratio):
    import kvpress

    pipeline, decoded = kvpress_pipeline
    scorer = load_scorer(parse_model_spec(f"hf:smollm2-135m?press={press}&compression_ratio={ratio}"))
    *ruler, ruler_context_end = _ruler_prompt(scorer)
    prompts = [tuple(ruler),
               (TEXT[2000:3100], "Question: Who speaks first in the text above?", "Answer:"),
               (TEXT[9000:10000], "Question: Where does the scene above take place?", "Answer: The scene takes place")]
    for context, question, prefix in prompts:
        ids = pipeline.preprocess(context, [question], prefix, 10**9)
        context_ids, question_ids = ids["context_ids"][0].tolist(), ids["questions_ids"][0][0].tolist()
        assert context_ids == scorer.tokenize(context) and question_ids == scorer.tokenize(question + "\n" + prefix)
        if context == ruler[0]:  # ctxeval's ruler compresses the ids kvpress's pipeline compresses
            assert len(context_ids) == ruler_context_end
        pipeline(context, question=question, answer_prefix=prefix, press=getattr(kvpress, press)(compression_ratio=ratio), max_new_tokens=12)
        ours = scorer.generate(np.asarray(context_ids + question_ids), 12, context_end=len(context_ids))
        assert ours == decoded[-1], (context[:40], scorer.text_of(ours), scorer.text_of(decoded[-1]))


@pytest.mark.model
def test_ruler_with_a_pressed_model_stores_generated_predictions(tmp_path):
    model = "hf:smollm2-135m?press=StreamingLLMPress&budget=128"
    result = run_cli("ruler", "--tasks", "niah_single_1", "--lengths", "512", "--samples", "1", "--model", model, "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    assert "RULER's string_match_all on the greedy generation" in result.stdout
    samples = pd.read_parquet(tmp_path / "run" / "samples.parquet")
    assert len(samples) == 1 and samples["generation_score"].notna().all()
    sample = samples.iloc[0]
    assert sample["method"] in ("generation path", "greedy generation") and (sample["method"] == "generation path" or sample["prediction"] != "")


def test_the_server_scores_prompts_of_a_pressed_model_but_does_not_generate(tiny):
    """A request does not say where its context ends, so `ctxeval serve` does not decode with a
    press; scoring a prompt (and its one greedy token) works as for any model."""
    import httpx

    from ctxeval.server.launch import serve_in_thread
    from ctxeval.server.settings import ServerSettings

    scorer = load_scorer(parse_model_spec(f"{tiny['llama']}?press=StreamingLLMPress&compression_ratio=0.5"))
    prompt = [int(t) for t in _prompt(scorer, 40)]
    with serve_in_thread(ServerSettings(model="tiny", n_ctx=256), scorer) as (url, _):
        one = httpx.post(url + "/v1/completions", json={"prompt": prompt, "max_tokens": 1, "temperature": 0}, timeout=60)
        more = httpx.post(url + "/v1/completions", json={"prompt": prompt, "max_tokens": 4, "temperature": 0}, timeout=60)
        chat = httpx.post(url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "Hi"}]}, timeout=60)
    assert one.status_code == 200 and one.json()["usage"]["completion_tokens"] == 1
    assert more.status_code == 400 and "cannot generate more than one greedy token" in more.json()["error"]["message"]
    assert chat.status_code == 400 and "cannot generate here" in chat.json()["error"]["message"]
