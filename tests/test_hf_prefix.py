"""Prefix reuse on transformers: a prompt that shares a prefix with the previous sequence runs
only the rest on the held cache, and scores and generates as a fresh prefill does (tiny
random-weight models; the measured identity on SmolLM2 135M is in docs/numerics.md)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from ctxeval.backends.hf import HFScorer  # noqa: E402
from ctxeval.backends.model_options import hf_options  # noqa: E402
from ctxeval.data.texts import demo_text_path  # noqa: E402
from ctxeval.errors import UserError  # noqa: E402
from tests.hf_tiny import tiny_gemma3_dir, tiny_llama_dir  # noqa: E402

# torch's CPU kernels may round a row differently when the rows around it differ (the rest of a
# prompt against the whole of it); measured: bit-identical on SmolLM2 and the tiny Llama here
TOLERANCE = dict(rtol=0, atol=1e-5)


def _prompts(scorer: HFScorer) -> list[np.ndarray]:
    """Three prompts as RULER's needle samples are: one haystack, a different needle spot each,
    and the second prompt a prefix of the third's shared part."""
    text = demo_text_path().read_text()
    hay = np.asarray(scorer.tokenize(text[:6000]), dtype=np.int64)[:600]
    needle = np.asarray(scorer.tokenize(" The special magic number is 7351. "), dtype=np.int64)
    question = np.asarray(scorer.tokenize(" What is the special magic number?"), dtype=np.int64)
    return [np.concatenate([hay[:cut], needle, hay[cut:], question]) for cut in (400, 250, 520)]


def test_reused_prefixes_score_and_generate_as_fresh_prefills(tmp_path):
    model = tiny_llama_dir(tmp_path / "llama", demo_text_path().read_text()[:20000], vocab_size=512)
    reusing, fresh = HFScorer(model, "reusing"), HFScorer(model, "fresh", prefix_reuse=False)
    assert reusing.info.details["prefix_reuse"] is True and fresh.info.details["prefix_reuse"] is False
    continuation = np.asarray(reusing.tokenize(" 7351"), dtype=np.int64)
    for prompt in _prompts(reusing):
        ours = reusing.score_stepwise(prompt, continuation, 5, (1.0,))
        theirs = fresh.score_stepwise(prompt, continuation, 5, (1.0,))
        np.testing.assert_allclose(ours.logprob, theirs.logprob, **TOLERANCE)
        assert ours.rank.tolist() == theirs.rank.tolist()
        assert reusing.generate(prompt, 12) == fresh.generate(prompt, 12)
    # generation after the likelihood pass reuses all but the prompt's last token; each later prompt
    # its shared part: more than a haystack's worth in all
    assert reusing.prefix_tokens_reused > 3 * 600 and fresh.prefix_tokens_reused == 0


def test_a_sliding_window_cache_or_a_press_is_not_reused(tmp_path):
    """Gemma 3's sliding-window layers drop early positions: nothing to cut back, nothing held."""
    gemma = HFScorer(tiny_gemma3_dir(tmp_path / "gemma3", demo_text_path().read_text()[:20000]), "gemma3")
    assert gemma.info.details["prefix_reuse"] is None  # not a choice this cache has
    prompt = _prompts(gemma)[0]
    gemma.generate(prompt, 4)
    gemma.generate(prompt, 4)
    assert gemma.prefix_tokens_reused == 0


def test_prefix_reuse_is_a_model_option_of_hf_models():
    assert hf_options({"prefix_reuse": "0"}, "hf:smollm2-135m?prefix_reuse=0").prefix_reuse is False
    assert hf_options({}, "hf:smollm2-135m").prefix_reuse is True
    with pytest.raises(UserError, match="prefix_reuse of 'hf:smollm2-135m\\?prefix_reuse=2' must be 0 or 1"):
        hf_options({"prefix_reuse": "2"}, "hf:smollm2-135m?prefix_reuse=2")
