"""hf backend: exact agreement with a naive full-log-softmax loop, batching, tokenization, the
run pipeline; and (model tests) the embedded Gemma in hf vs llama.cpp."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ctxeval import api
from ctxeval.data.texts import load_text
from ctxeval.errors import UserError
from tests.conftest import run_cli
from tests.hf_tiny import tiny_llama_dir
from tests.numeric_paths import FLOAT32_FORWARD, FLOAT32_PATHS, assert_rank_within_rounding, assert_same_argmax_where_clear, assert_same_top_k

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ctxeval.backends.hf import HFScorer  # noqa: E402

TEXT = load_text("demo").content


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {
        "llama": tiny_llama_dir(root / "tiny-bytes", TEXT[:20000]),
        "softcap": tiny_llama_dir(root / "tiny-softcap", TEXT[:20000], seed=1, softcap=5.0),
    }


def naive_scores(model, input_ids, positions, targets, top_k, temperatures):
    """Reference: the model's own full forward, a full float64 log-softmax per row, ranks by
    comparing with every logit, top-k by a full sort (ties by id); `rows` and `log_softmax` hold
    the float64 logits and log-softmax at `positions`. The scorer runs the head on blocks of
    rows and hands float32 logits to the scoring (whatever the dtype), so it is another numeric
    path: compare within FLOAT32_PATHS, ranks and top-k ids robustly to near-ties."""
    with torch.inference_mode():
        logits = model(input_ids=torch.as_tensor(input_ids[None], dtype=torch.long)).logits[0].double()
    out = {"logprob": [], "rank": [], "topk_ids": [], "topk_logprobs": [], "temp": []}
    out["rows"] = logits[np.asarray(positions)].numpy()
    out["log_softmax"] = torch.log_softmax(logits[np.asarray(positions)], dim=1).numpy()
    for pos, target in zip(positions, targets):
        row = logits[pos]
        logp = torch.log_softmax(row, dim=0)
        out["logprob"].append(logp[target].item())
        out["rank"].append(1 + int((row > row[target]).sum()))
        order = torch.sort(-row, stable=True).indices[:top_k]  # stable: ties by id ascending
        out["topk_ids"].append(order.numpy())
        out["topk_logprobs"].append(logp[order].numpy())
        out["temp"].append([torch.log_softmax(row / t, dim=0)[target].item() for t in temperatures])
    return {k: np.asarray(v) for k, v in out.items()}


def window(scorer, start, n):
    ids = np.asarray(scorer.tokenize(TEXT), dtype=np.int32)[start : start + n]
    input_ids = np.concatenate([[scorer.info.bos_id], ids[:-1]]).astype(np.int32)
    return input_ids, np.arange(n), ids


@pytest.mark.parametrize("kind", ["llama", "softcap"])
@pytest.mark.parametrize("top_k", [3, 8])  # 3: group-maxima top-k path; 8: full-sort path (vocab 1024)
def test_tiny_model_matches_naive_full_log_softmax(tiny_dirs, kind, top_k):
    scorer = HFScorer(tiny_dirs[kind], "hf:tiny", dtype="float64", rows_per_block=7)
    input_ids, positions, targets = window(scorer, 100, 50)
    temperatures = (0.5, 1.0, 2.0)
    got = scorer.score(input_ids, positions, targets, top_k, temperatures)
    ref = naive_scores(scorer._model, input_ids, positions, targets, top_k, temperatures)
    _assert_matches_naive(got, ref, targets)
    assert len(set(got.rank.tolist())) > 5  # the window exercises many different ranks


def _assert_matches_naive(got, ref, targets):
    """The scorer (head in blocks, float32 logits) against `naive_scores` (one forward, float64):
    values within FLOAT32_PATHS; ranks, top-k ids and greedy ids where no near-tie decides them."""
    np.testing.assert_allclose(got.logprob, ref["logprob"], **FLOAT32_PATHS)
    np.testing.assert_allclose(got.temp_logprobs, ref["temp"], **FLOAT32_PATHS)
    assert_rank_within_rounding(got.rank, ref["rows"], targets)
    assert_same_top_k(got.topk_ids, got.topk_logprobs, ref["log_softmax"])
    assert_same_argmax_where_clear(got.greedy_id, ref["rows"])


def test_tiny_model_batch_of_windows_equals_one_at_a_time(tiny_dirs):
    scorer = HFScorer(tiny_dirs["llama"], "hf:tiny", dtype="float64", batch_tokens=70)
    ids = np.asarray(scorer.tokenize(TEXT[:5000]), dtype=np.int32)
    bos = np.int32(scorer.info.bos_id)
    passes = []
    for start, length, scored in [(0, 33, 1), (40, 33, 5), (90, 20, 20), (200, 33, 33), (300, 20, 2)]:
        seg = ids[start : start + length]
        passes.append((np.concatenate([[bos], seg[:-1]]), np.arange(length - scored, length), seg[length - scored :]))
    batched = scorer.score_batch(passes, 5, (1.0, 2.0))
    for p, b in zip(passes, batched):
        # a [B, L] forward vs a [1, L] one: float64 bodies, float32 logits (FLOAT32_PATHS)
        one = scorer.score(*p, 5, (1.0, 2.0))
        np.testing.assert_allclose(b.logprob, one.logprob, **FLOAT32_PATHS)
        np.testing.assert_allclose(b.temp_logprobs, one.temp_logprobs, **FLOAT32_PATHS)
        rows = naive_scores(scorer._model, p[0], p[1], p[2], 5, ())["rows"]
        for scores in (b, one):
            assert_rank_within_rounding(scores.rank, rows, p[2])
        np.testing.assert_allclose(b.topk_logprobs, one.topk_logprobs, **FLOAT32_PATHS)


def test_tiny_model_float32_close_to_float64(tiny_dirs):
    s64 = HFScorer(tiny_dirs["llama"], "hf:tiny", dtype="float64")
    s32 = HFScorer(tiny_dirs["llama"], "hf:tiny", dtype="float32", rows_per_block=5)
    p = window(s32, 0, 60)
    a, b = s64.score(*p, 5, (1.0,)), s32.score(*p, 5, (1.0,))
    np.testing.assert_allclose(b.logprob, a.logprob, **FLOAT32_FORWARD)
    assert s32.info.details["dtype"] == "float32" and s64.info.details["dtype"] == "float64"


def test_tiny_tokenizer_bytes_bos_and_identity(tiny_dirs):
    scorer = HFScorer(tiny_dirs["llama"], "hf:tiny")
    text = "Zürich 日本語 🙂 <s> and </s> stay text.\r\n\ttabs"
    ids = scorer.tokenize(text)
    assert b"".join(scorer.token_bytes(i) for i in ids) == text.encode("utf-8")
    assert scorer.info.bos_id == 0 and scorer.tokenize("<s>") != [0]  # special strings are plain text
    info = scorer.info
    assert info.backend == "hf" and info.vocab_size == 1024 and info.n_ctx_train == 2048
    weights = info.details["weights_sha256"]
    assert list(weights) == ["model.safetensors"] and info.sha256 == weights["model.safetensors"]
    assert {"torch", "transformers", "safetensors", "device", "dtype", "n_params"} <= set(info.details)


def test_bad_device_and_dtype_are_user_errors(tiny_dirs, tmp_path):
    with pytest.raises(UserError, match="unknown dtype 'int8'"):  # a command spells it --dtype or dtype=
        HFScorer(tiny_dirs["llama"], "x", dtype="int8")
    with pytest.raises(UserError, match="unknown device 'tpu'"):
        HFScorer(tiny_dirs["llama"], "x", device="tpu")
    with pytest.raises(UserError, match="config.json"):
        HFScorer(tmp_path, "x")
    with pytest.raises(UserError, match="hf: models only"):
        api.score("demo", model="gemma-3-270m", dtype="float32")
    result = run_cli("score", "demo", "--model", f"hf:{tmp_path / 'missing'}", "--quiet")
    assert result.returncode == 2 and "hf model directory not found" in result.stderr


def test_score_run_through_the_pipeline(tiny_dirs, tmp_path):
    """A chunked run: BOS first, every token scored once, dtype in the run id and manifest;
    a second run gives identical records (batched chunks are deterministic)."""
    spec = f"hf:{tiny_dirs['llama']}"
    r1 = api.score("demo", method="chunked", window=64, model=spec, max_tokens=300, dtype="float64", out=tmp_path / "a")
    r2 = api.score("demo", method="chunked", window=64, model=spec, max_tokens=300, dtype="float32", out=tmp_path / "b")
    assert len(r1.records) == len(r2.records) == 300
    assert r1.records["target_pos"].tolist() == list(range(300))
    assert (r1.records["context_len"].to_numpy() == np.arange(300) % 64).all()
    m1 = json.loads((tmp_path / "a" / "manifest.json").read_text())
    m2 = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert m1["run_id"] != m2["run_id"] and m1["models"][0]["details"]["dtype"] == "float64"
    # chunks of equal length were batched; compare one chunk with a direct, unbatched pass
    # (the pipeline decodes the whole window, BOS + its 64 tokens: so does the direct pass)
    scorer = HFScorer(tiny_dirs["llama"], "hf:tiny", dtype="float64")
    ids = np.asarray(scorer.tokenize(TEXT), dtype=np.int32)[64:128]
    input_ids = np.concatenate([[0], ids]).astype(np.int32)
    one = scorer.score(input_ids, np.arange(64), ids, 20, (1.0,))
    np.testing.assert_allclose(r1.records["logprob"].to_numpy()[64:128], one.logprob, **FLOAT32_PATHS)
    rows = naive_scores(scorer._model, input_ids, np.arange(64), ids, 1, ())["rows"]
    assert_rank_within_rounding(r1.records["rank"].to_numpy()[64:128], rows, ids)


# --- the embedded Gemma in hf vs llama.cpp (same weights) ----------------------------------


@pytest.fixture(scope="module")
def hf_gemma():
    from ctxeval.backends.registry import load_scorer, parse_model_spec

    scorer = load_scorer(parse_model_spec("hf:gemma-3-270m"))
    yield scorer
    scorer.close()


@pytest.mark.model
def test_hf_gemma_matches_naive_full_log_softmax(hf_gemma):
    input_ids, positions, targets = window(hf_gemma, 1000, 64)
    got = hf_gemma.score(input_ids, positions, targets, 10, (1.0, 2.0))
    ref = naive_scores(hf_gemma._model, input_ids, positions, targets, 10, (1.0, 2.0))
    _assert_matches_naive(got, ref, targets)


@pytest.mark.model
def test_hf_gemma_agrees_with_llamacpp(hf_gemma, gemma):
    """Same GGUF weights, same token ids: hf runs them dequantized to float32; llama.cpp runs
    Q4_K/Q6_K matmuls on 8-bit-quantized activations with an f16 KV cache. Measured here on
    256 demo tokens: mean |Δ logprob| ≈ 0.08 nats, max ≈ 0.6, perplexity within ~1 %,
    the same top-1 token on ~96 % of targets; ranks agree exactly on ~65 % of targets (a tiny
    logit shift moves a rank among the many near-equal logits of a 262K vocabulary)."""
    assert hf_gemma.tokenize(TEXT) == gemma.tokenize(TEXT)
    # the conversion builds llama.cpp's SentencePiece merges: whitespace runs and tags are pieces
    # of their own, control tokens are text, bytes fall back (transformers 5.2's Unigram split words)
    odd = "Hello  world\n\n\t<b>x</b> <bos> naïve 日本語 🙂 <unused1>"
    assert hf_gemma.tokenize(odd) == gemma.tokenize(odd)
    assert hf_gemma.info.details["conversion_version"] == 2
    assert hf_gemma.info.bos_id == gemma.info.bos_id == 2
    assert hf_gemma.info.details["gguf_sha256"] == gemma.info.sha256
    p = window(gemma, 3000, 256)
    a, b = hf_gemma.score(*p, 20, (1.0,)), gemma.score(*p, 20, (1.0,))
    delta = np.abs(a.logprob - b.logprob)
    ppl_hf, ppl_llama = np.exp(-a.logprob.mean()), np.exp(-b.logprob.mean())
    print(f"\nmean|Δ|={delta.mean():.4f} max|Δ|={delta.max():.4f} rank_equal={np.mean(a.rank == b.rank):.3f} "
          f"top1_equal={np.mean(a.greedy_id == b.greedy_id):.3f} ppl hf={ppl_hf:.4f} llama.cpp={ppl_llama:.4f}")
    assert delta.mean() < 0.15 and delta.max() < 1.0
    assert abs(np.log(ppl_hf / ppl_llama)) < 0.03
    assert abs(np.mean(a.logprob - b.logprob)) < 0.03  # no systematic offset: noise, not a different model
    assert np.mean(a.greedy_id == b.greedy_id) > 0.9
    assert np.mean(np.abs(np.log(a.rank) - np.log(b.rank)) < np.log(2)) > 0.8  # ranks within a factor 2


def test_a_head_wider_than_the_tokenizer_gives_its_padding_ids_empty_pieces(tmp_path):
    """Padded head rows (Qwen's, random-weight models') can be ranked and predicted; they stand
    for no text. An id beyond the head is still an error."""
    scorer = HFScorer(tiny_llama_dir(tmp_path / "wide", TEXT[:20000], vocab_size=256, model_vocab=300), "wide")
    assert scorer.info.vocab_size == 300
    assert scorer.token_bytes(299) == b"" and scorer.token_bytes(120) != b""
    with pytest.raises(ValueError, match="outside the vocabulary"):
        scorer.token_bytes(300)


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_generation_follows_its_own_stepwise_scores(kind, tmp_path_factory):
    """`generate` is the greedy chain `score_stepwise` reads (one KV-cached path), and the
    stepwise scores equal one batched pass within float32 forward rounding."""
    from tests.hf_tiny import tiny_gemma3_dir

    root = tmp_path_factory.mktemp(f"gen-{kind}")
    path = tiny_llama_dir(root, TEXT[:20000], vocab_size=512) if kind == "llama" else tiny_gemma3_dir(root, TEXT[:20000])
    scorer = HFScorer(path, kind)
    prompt = np.asarray([scorer.info.bos_id, *scorer.tokenize(TEXT[3000:3600])], dtype=np.int32)
    generated = np.asarray(scorer.generate(prompt, 12), dtype=np.int32)
    stepwise = scorer.score_stepwise(prompt, generated, 2, (1.0,))
    assert np.array_equal(stepwise.greedy_id, generated)
    batched = scorer.score(np.concatenate([prompt, generated[:-1]]), np.arange(len(prompt) - 1, len(prompt) + len(generated) - 1), generated, 2, (1.0,))
    np.testing.assert_allclose(stepwise.logprob, batched.logprob, **FLOAT32_FORWARD)
    assert scorer.capabilities.generation
