"""The llama.cpp backend on the embedded model, against a naive full-softmax computation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ctxeval.data.texts import load_text, ruler_haystack_path
from ctxeval.pipeline.tokens import tokenize

from tests.numeric_paths import FLOAT32_PATHS, assert_rank_within_rounding

from .conftest import FIXTURES

pytestmark = pytest.mark.model


def naive_logits(scorer, input_ids: np.ndarray) -> np.ndarray:
    """All logits of one decode (every position flagged), copied out: what a user's
    `logits_all=True` loop would hold in memory."""
    import llama_cpp

    scorer.prepare(len(input_ids))
    ctx = scorer._ctx.ctx
    scorer.prefix_cache.forget()  # this loop overwrites the cells a later prompt would reuse
    batch = scorer._batch.batch
    logits = np.empty((len(input_ids), scorer.info.vocab_size), dtype=np.float32)
    for start in range(0, len(input_ids), scorer._n_batch):
        chunk = input_ids[start : start + scorer._n_batch]
        for i, tok in enumerate(chunk):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = int(tok), start + i, 1, 1
            batch.seq_id[i][0] = 0
        batch.n_tokens = len(chunk)
        assert llama_cpp.llama_decode(ctx, batch) == 0
        ptr = llama_cpp.llama_get_logits(ctx)
        logits[start : start + len(chunk)] = np.ctypeslib.as_array(ptr, shape=(len(chunk), scorer.info.vocab_size))
    return logits


@pytest.fixture(scope="module")
def wikitext(gemma):
    return tokenize(gemma, load_text(FIXTURES / "wikitext2-test-head.txt"))


def test_blocked_path_equals_naive_full_softmax_on_real_text(gemma, wikitext):
    n = 600  # more than one 512-token batch
    input_ids = np.concatenate([[gemma.info.bos_id], wikitext.ids[: n - 1]]).astype(np.int32)
    targets = wikitext.ids[:n]
    got = gemma.score(input_ids, np.arange(n), targets, top_k=20, temperatures=(0.5, 1.0))
    logits = naive_logits(gemma, input_ids)
    for lo in range(0, n, 25):  # the float64 reference in blocks of rows: whole, it needs 6 GB
        rows, block = np.arange(lo, min(lo + 25, n)), slice(lo, lo + 25)
        z = logits[block].astype(np.float64)
        local = rows - lo
        log_softmax = z - z.max(axis=1, keepdims=True)
        log_softmax -= np.log(np.exp(log_softmax).sum(axis=1, keepdims=True))
        assert np.abs(got.logprob[block] - log_softmax[local, targets[block]]).max() < 1e-4
        naive_rank = 1 + (z > z[local, targets[block]][:, None]).sum(axis=1)
        assert np.array_equal(got.rank[block], naive_rank)
        top = np.argsort(-z, axis=1, kind="stable")[:, :20]
        assert np.array_equal(got.topk_ids[block], top)
        assert np.abs(got.topk_logprobs[block] - np.take_along_axis(log_softmax, top, axis=1)).max() < 1e-4
        assert np.array_equal(got.greedy_id[block], z.argmax(axis=1))
        z_half = z / 0.5
        lsm_half = z_half - z_half.max(axis=1, keepdims=True)
        lsm_half -= np.log(np.exp(lsm_half).sum(axis=1, keepdims=True))
        assert np.abs(got.temp_logprobs[block, 0] - lsm_half[local, targets[block]]).max() < 1e-4


def test_logits_only_at_targets_give_the_same_scores(gemma, wikitext):
    """Three output rows instead of 300: llama.cpp runs the last layer and the output matmul on
    those rows only, another batch shape, so the scores agree to float32 rounding (FLOAT32_PATHS)
    and ranks where no other logit is within that rounding of the target's."""
    n = 300
    input_ids = np.concatenate([[gemma.info.bos_id], wikitext.ids[: n - 1]]).astype(np.int32)
    full = gemma.score(input_ids, np.arange(n), wikitext.ids[:n], 20, (1.0,))
    some = np.array([5, 77, 299])
    part = gemma.score(input_ids, some, wikitext.ids[some], 20, (1.0,))
    np.testing.assert_allclose(part.logprob, full.logprob[some], **FLOAT32_PATHS)
    assert_rank_within_rounding(part.rank, naive_logits(gemma, input_ids)[some], wikitext.ids[some])


def test_scores_do_not_depend_on_the_batch_size(gemma, wikitext):
    """A short sweep pass and a long chunk must take the same numeric path."""
    from ctxeval.backends.llamacpp import LlamaCppScorer

    n = 200
    input_ids = np.concatenate([[gemma.info.bos_id], wikitext.ids[: n - 1]]).astype(np.int32)
    reference = gemma.score(input_ids, np.arange(n), wikitext.ids[:n], 5, (1.0,))
    small = LlamaCppScorer(Path(gemma.info.path), "small-batches", n_batch=16)
    try:
        got = small.score(input_ids, np.arange(n), wikitext.ids[:n], 5, (1.0,))
    finally:
        small.close()
    assert np.array_equal(got.logprob, reference.logprob)
    assert np.array_equal(got.rank, reference.rank)


def test_bos_is_needed(gemma, wikitext):
    """DESIGN.md: without BOS Gemma collapses; with it the same targets score far higher."""
    ctx = wikitext.ids[:33]
    with_bos = gemma.score(np.concatenate([[gemma.info.bos_id], ctx[:32]]).astype(np.int32), np.arange(1, 33), ctx[1:33], 5, (1.0,))
    without = gemma.score(ctx[:32].astype(np.int32), np.arange(0, 32), ctx[1:33], 5, (1.0,))
    assert with_bos.logprob.mean() > without.logprob.mean() + 1.0


def test_model_identity(gemma):
    info = gemma.info
    assert info.vocab_size == 262144
    assert info.n_ctx_train == 32768
    assert info.bos_id == 2
    assert info.sha256 == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def test_tokens_reproduce_the_text_byte_for_byte_with_crlf(gemma, wikitext):
    raw = wikitext.text.content.encode()
    assert b"\r\n" in raw
    pieces = b"".join(gemma.token_bytes(int(t)) for t in wikitext.ids)
    assert pieces == raw
    assert int(wikitext.n_bytes.sum()) == len(raw)
    i = 10
    assert wikitext.text.content[wikitext.char_starts[i] : wikitext.char_ends[i]].encode() == gemma.token_bytes(int(wikitext.ids[i]))


def _llama_cpp_python_full_window(path: str, windows: list[np.ndarray], bos_id: int) -> list[np.ndarray]:
    """Float64 log-probabilities of each window's tokens from llama-cpp-python's own `eval` of
    the whole window (BOS + every token, all logits), as its users and llama.cpp's tools decode."""
    import llama_cpp

    from ctxeval.backends.llamacpp import load_llama_without_amx_buffers

    load_llama_without_amx_buffers(llama_cpp)
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, logits_all=True, flash_attn=False, verbose=False)
    out = []
    try:
        for win in windows:
            llm.reset()
            llm.eval([bos_id, *win.tolist()])
            z = np.array(llm.scores[: len(win)], dtype=np.float64)
            z -= z.max(axis=1, keepdims=True)
            z -= np.log(np.exp(z).sum(axis=1, keepdims=True))
            out.append(z[np.arange(len(win)), win])
    finally:
        llm.close()
    return out


def test_every_target_equals_llama_cpp_pythons_full_window_eval(gemma, tmp_path):
    """`ctxeval score` decodes whole windows: every target, the last ones of each window too,
    equals llama-cpp-python's `eval` of the same window to float32 rounding (FLOAT32_PATHS: its
    eval asks for one output row more than ctxeval, the window's last; measured 2e-8 on an AMD
    EPYC with AVX-512, 2026-11-25). Window lengths 37 and 83
    are not multiples of 4 or 16, where llama.cpp's kernels round a batch's last rows by the
    batch's row count: decoding the first n - 1 tokens instead moved the last target of an
    83-token window by 0.084 nats there."""
    import pandas as pd

    from ctxeval import api

    text = tmp_path / "demo.txt"
    text.write_text(load_text("demo").content[:4000], encoding="utf-8", newline="")
    for window in (37, 83):
        run = api.score([text], method="chunked", window=window, max_tokens=3 * window + 5, out=tmp_path / f"w{window}")
        rec = pd.read_parquet(run.run_dir / "records.parquet").sort_values("target_pos")
        ids = tokenize(gemma, load_text(text)).ids
        starts = list(range(0, 3 * window + 5, window))
        windows = [ids[s : min(s + window, 3 * window + 5)] for s in starts]
        expected = np.concatenate(_llama_cpp_python_full_window(gemma.info.path, windows, gemma.info.bos_id))
        assert rec.target_id.tolist() == np.concatenate(windows).tolist()
        np.testing.assert_allclose(rec.logprob.to_numpy(), expected, **FLOAT32_PATHS)


def test_tokenize_in_one_call_equals_llama_cpp_pythons_on_texts_short_and_past_the_context(gemma):
    """ctxeval sizes llama.cpp's token buffer by the text's bytes; llama-cpp-python's own
    tokenize (which re-tokenizes a text longer than the training context) gives the same ids,
    on a book of more than 32,768 tokens (the bundled RULER haystack's Chesterton and Melville), a short text, an empty one and non-ASCII text."""
    book = ruler_haystack_path().read_text(encoding="utf-8")[:400_000]
    for text in (book, "Call me Ishmael.", "", "naïve café — 東京 🐋\n\n"):
        ours = gemma.tokenize(text)
        assert ours == gemma._vocab_model.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    assert len(gemma.tokenize(book)) > 32_768


def test_scorers_of_one_file_share_one_vocabulary(gemma):
    """An API model's tokenizer, a variant and the scorer of the same GGUF load its vocabulary once
    per process (Gemma 3's takes 0.4 s); each still has its own inference context."""
    from ctxeval.backends.registry import load_scorer, load_vocabulary, parse_model_spec

    tokenizer = load_vocabulary("gemma-3-270m")
    variant = load_scorer(parse_model_spec("gemma-3-270m?max_context=512"))
    assert tokenizer._vocab_model is gemma._vocab_model is variant._vocab_model
    assert variant.info.name == "gemma-3-270m?max_context=512" and variant.info.sha256 == gemma.info.sha256
    assert variant.tokenize("Call me Ishmael.") == gemma.tokenize("Call me Ishmael.")
