"""Score line-retrieval cases on a model: greedy exact match and the rank of the right value.

Each case costs one forward pass over prompt + reference answer, with logits only at the
answer's tokens: their log-probabilities and full-vocabulary ranks (teacher forcing), and the
greedy token at each step. When the greedy token equals the reference at every step of the
value and its terminator, greedy generation provably produces the value, so no generation is
needed; otherwise the model generates greedily (backends with `generate`) and the value is
extracted from its text. The rank view works even when a tiny model never gets the value right.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import numpy as np

from ctxeval.backends.base import Scorer
from ctxeval.errors import UserError
from ctxeval.probes.retrieval_data import RetrievalCase

_EXTRA_TOKENS = 4  # generated beyond the reference length, so a longer wrong answer is seen whole


@dataclass(frozen=True)
class CaseResult:
    """What one model did on one case."""

    model: str
    variant: str
    lines: int
    depth: float
    sample: int
    char_depth: float
    prompt_tokens: int
    correct: bool
    prediction: str
    accuracy_method: str  # "teacher-forced greedy chain", "greedy generation"
    first_rank: int  # rank of the answer's first token (full vocabulary)
    value_logprob: float  # sum of log-probabilities of the answer tokens that cover the value
    value_tokens: int
    answer_ranks: list[int]

    def to_row(self) -> dict:
        return asdict(self)


def score_case(scorer: Scorer, case: RetrievalCase) -> CaseResult:
    """Teacher-forced scores of the reference answer, and the greedy answer."""
    info = scorer.info
    bos = [info.bos_id] if info.uses_bos else []
    prompt_ids = scorer.tokenize(case.prompt)
    answer_ids = scorer.tokenize(case.answer)
    if not answer_ids:
        raise UserError("the reference answer has no tokens")
    n_input = len(bos) + len(prompt_ids) + len(answer_ids)
    if n_input > info.n_ctx_train:
        raise UserError(f"a {case.n_lines}-line record needs {n_input} tokens, beyond {info.name}'s training context of {info.n_ctx_train}")
    input_ids = np.asarray(bos + prompt_ids + answer_ids[:-1], dtype=np.int32)
    first = len(bos) + len(prompt_ids) - 1
    positions = np.arange(first, first + len(answer_ids))
    scores = scorer.score(input_ids, positions, np.asarray(answer_ids, dtype=np.int32), top_k=1, temperatures=(1.0,))
    covers_value = _covers(scorer, answer_ids, case.answer, case.value)
    chain_ok = bool(np.all(scores.greedy_id == np.asarray(answer_ids)))
    if chain_ok:
        correct, prediction, method = True, case.value, "teacher-forced greedy chain"
    elif scorer.capabilities.generation:
        prompt = np.asarray(bos + prompt_ids, dtype=np.int32)
        generated = scorer.generate(prompt, len(answer_ids) + _EXTRA_TOKENS)
        text = b"".join(scorer.token_bytes(t) for t in generated).decode("utf-8", errors="replace")
        prediction = extract_value(case.variant, text)
        correct, method = prediction == case.value, "greedy generation"
    else:
        correct, prediction, method = False, "", "teacher-forced greedy chain"
    return CaseResult(
        model=info.name, variant=case.variant, lines=case.n_lines, depth=case.depth, sample=case.sample,
        char_depth=round(case.char_depth, 6), prompt_tokens=len(bos) + len(prompt_ids), correct=correct,
        prediction=prediction, accuracy_method=method, first_rank=int(scores.rank[0]),
        value_logprob=float(scores.logprob[covers_value].sum()), value_tokens=int(covers_value.sum()),
        answer_ranks=[int(r) for r in scores.rank],
    )


def extract_value(variant: str, text: str) -> str:
    """The value a generated continuation names: its first word (cat) or first number (register)."""
    pattern = r"[A-Za-z]+" if variant == "cat" else r"\d+"
    match = re.search(pattern, text)
    return match.group(0) if match else ""


def _covers(scorer: Scorer, answer_ids: list[int], answer: str, value: str) -> np.ndarray:
    """Which answer tokens overlap the value's bytes (the leading space of ' Name' included)."""
    start = answer.encode("utf-8").index(value.encode("utf-8"))
    end = start + len(value.encode("utf-8"))
    lengths = np.array([len(scorer.token_bytes(t)) for t in answer_ids])
    ends = np.cumsum(lengths)
    starts = ends - lengths
    return (starts < end) & (ends > start)
