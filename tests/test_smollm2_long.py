"""SmolLM2 135M at its whole context (8,192 tokens): a RULER sample that fills it scores its
reference and generates. Apart from tests/test_smollm2_model.py so that this long test, which
loads SmolLM2 in llama.cpp only, runs in the suite's first part beside the other modules
(scripts/test_part.sh deals modules to workers) while that module's hf models keep to the second."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_smollm2_model import BOOK, smollm2  # noqa: F401  (the module's loaded SmolLM2, a fixture)

pytestmark = pytest.mark.model


def test_a_sample_that_fills_the_whole_context_scores_and_generates(smollm2):
    """RULER's length counts the tokens to generate, so a sample at a model's whole context has a
    prompt of n_ctx - 128 tokens and 128 to generate: scoring its reference and generating
    must fit in exactly n_ctx positions (the last generated token is never fed)."""
    n_ctx, n_new = smollm2.info.n_ctx_train, 128
    ids = smollm2.tokenize(BOOK.read_text(encoding="utf-8"))
    prompt = np.asarray(ids[: n_ctx - n_new], dtype=np.int32)
    reference = np.asarray(smollm2.tokenize(" zebra quintessence"), dtype=np.int32)  # greedy leaves it: generation runs
    scores, generated = smollm2.score_then_generate(prompt, reference, n_new, 2, (1.0,))
    assert len(scores.logprob) == len(reference) and np.isfinite(scores.logprob).all()
    assert generated is not None and 1 <= len(generated) <= n_new
    assert smollm2.generate(prompt, n_new) == generated
