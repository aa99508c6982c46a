"""Answer-quality scores from evaluator log-probabilities: PPLqa, GPTScore, G-Eval (pure functions).

Inputs are the sums and counts of token log-probabilities (natural log) of one forward pass,
so a cached pass can be re-scored without the model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

GEVAL_SCORES = (1, 2, 3, 4, 5)


def perplexity(logprob_sum: float, n_tokens: int) -> float:
    """exp(-mean log p) over n tokens (eq. 1 of the PPLqa paper); NaN for no tokens."""
    if n_tokens <= 0:
        return math.nan
    return math.exp(-logprob_sum / n_tokens)


def ppl_qa(
    prefix_sum: float,
    n_prefix: int,
    answer_sum_given_prefix: float,
    n_answer: int,
    answer_sum_alone: float,
    scope: str = "all",
    n_answer_alone: int | None = None,
) -> tuple[float, float, float]:
    """(PPL(q ⊕ a), PPL(a), PPLqa = |PPL(q ⊕ a) − PPL(a)|); lower PPLqa is better.

    `scope="all"` averages PPL(q ⊕ a) over every token of the concatenation (question and
    answer, the paper's eq. 1 applied to X(qa)); `scope="answer"` only over the answer tokens,
    conditioned on the question. PPL(a) is always over the answer scored after BOS alone
    (`n_answer_alone` tokens, default `n_answer`; a model without BOS cannot score the first).
    """
    if scope == "all":
        ppl_joint = perplexity(prefix_sum + answer_sum_given_prefix, n_prefix + n_answer)
    elif scope == "answer":
        ppl_joint = perplexity(answer_sum_given_prefix, n_answer)
    else:
        raise ValueError("scope must be 'all' or 'answer'")
    ppl_answer = perplexity(answer_sum_alone, n_answer if n_answer_alone is None else n_answer_alone)
    return ppl_joint, ppl_answer, abs(ppl_joint - ppl_answer)


def gpt_score(answer_sum_given_prefix: float, n_answer: int) -> float:
    """GPTScore: mean log-probability of the answer tokens given the (prompted) question; higher is better."""
    if n_answer <= 0:
        return math.nan
    return answer_sum_given_prefix / n_answer


@dataclass(frozen=True)
class GEvalScore:
    """G-Eval read from one next-token distribution over the score tokens "1".."5"."""

    integer: float  # the PPLqa paper's form: the most probable score (1..5); NaN if none is known
    weighted: float  # G-Eval's probability-weighted sum_s s * p(s)
    digit_mass: float  # probability the evaluator put on the five score tokens together


def geval_score(digit_logprobs: Sequence[float], scores: Sequence[int] = GEVAL_SCORES) -> GEvalScore:
    """Both G-Eval forms from the score tokens' log-probabilities, p renormalised over them.

    The PPLqa paper's G-Eval is "an integer score from 1 through 5" (hence its frequent ties);
    reading the most probable score token is what greedy decoding of the form would print,
    restricted to the five scores. Of two exactly equal probabilities the lower score is taken.
    A score token the backend could not report (outside its top-k) is NaN and counts as p = 0.
    """
    lp = np.asarray(digit_logprobs, dtype=np.float64)
    if lp.shape != (len(scores),):
        raise ValueError("one log-probability per score token is needed")
    known = np.isfinite(lp)
    if not known.any():
        return GEvalScore(math.nan, math.nan, 0.0)
    top = lp[known].max()
    weights = np.where(known, np.exp(np.where(known, lp, top) - top), 0.0)
    probs = weights / weights.sum()
    values = np.asarray(scores, dtype=np.float64)
    return GEvalScore(float(values[np.argmax(probs)]), float(np.dot(probs, values)), float(np.exp(top) * weights.sum()))


def pick_winner(score_1: float, score_2: float, higher_is_better: bool) -> int:
    """1 or 2 for the better answer, 0 for a tie; a NaN score (e.g. an empty answer) loses."""
    nan_1, nan_2 = math.isnan(score_1), math.isnan(score_2)
    if nan_1 or nan_2:
        return 0 if nan_1 and nan_2 else (2 if nan_1 else 1)
    if score_1 == score_2:
        return 0
    first_better = score_1 > score_2 if higher_is_better else score_1 < score_2
    return 1 if first_better else 2


def rank_scores(values: Sequence[float], higher_is_better: bool) -> np.ndarray:
    """Ranks 1 = best (average ranks for ties, NaN last) of one question's answers."""
    from scipy.stats import rankdata

    v = np.asarray(values, dtype=np.float64)
    keyed = -v if higher_is_better else v.copy()
    keyed[np.isnan(keyed)] = np.inf
    return rankdata(keyed, method="average")
