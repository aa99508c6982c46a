"""Prefix reuse on llama.cpp (backends/llamacpp_prefix.py): prompts that share a prefix with the
previous one give bit-identical scores and the same generated text as fresh prefills, on Gemma 3
270M, whose sliding-window layers are put back from checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

from ctxeval.backends.registry import load_scorer, parse_model_spec
from ctxeval.data.texts import demo_text_path

pytestmark = pytest.mark.model


def _prompts(gemma) -> list[np.ndarray]:
    """Three prompts of about 1,800 tokens: one text, then the same with a needle at token 1,600
    (it resumes from the checkpoint at 1,536) and at token 900 (from the one at 512)."""
    ids = gemma.tokenize(demo_text_path().read_text())
    assert len(ids) >= 1800
    needle = gemma.tokenize(" One of the special magic numbers for quiet-river is: 7512152.")
    base = [gemma.info.bos_id, *ids[:1800]]
    return [np.asarray(p, dtype=np.int32) for p in (base, base[:1600] + needle + base[1600:], base[:900] + needle + base[900:])]


def test_reused_prefills_equal_fresh_prefills(gemma):
    fresh = load_scorer(parse_model_spec("gemma-3-270m?prefix_reuse=0"))
    reference = np.asarray(gemma.tokenize(": 7512152."), dtype=np.int32)
    prompts = _prompts(gemma)
    # the shared scorer's context, as earlier tests left it, may be too small for these prompts:
    # grown now, not inside the loop (a grown context starts a new prefix cache and its count)
    gemma.prepare(max(map(len, prompts)) + 16)
    gemma.generate(np.asarray([gemma.info.bos_id, 17], dtype=np.int32), 1)  # nothing reusable before the first prompt
    before = gemma.prefix_cache.reused
    for k, prompt in enumerate(prompts):
        got, want = gemma.score_stepwise(prompt, reference, 2, (1.0,)), fresh.score_stepwise(prompt, reference, 2, (1.0,))
        assert np.array_equal(got.logprob, want.logprob) and np.array_equal(got.rank, want.rank)
        if k:  # generation resumes the prompt just scored at 1,536
            assert gemma.generate(prompt, 16) == fresh.generate(prompt, 16)
    assert gemma.prefix_cache.reused - before == 1536 + 1536 + 512 + 1536
    assert fresh.prefix_cache.reused == 0
    fresh.close()


def test_scoring_a_window_clears_what_a_prompt_left(gemma):
    """`score` decodes another input on the same sequence: the next prompt starts afresh."""
    prompt = _prompts(gemma)[0][:600]  # a short prompt: no sliding-window checkpoint needed
    gemma.generate(prompt, 1)
    gemma.score(prompt[:100], np.arange(99), prompt[1:100], 2, (1.0,))
    before = gemma.prefix_cache.reused
    first = gemma.generate(prompt, 3)
    assert gemma.prefix_cache.reused == before
    assert gemma.generate(prompt, 3) == first and gemma.prefix_cache.reused == before + 512
