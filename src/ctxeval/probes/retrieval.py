"""Score line-retrieval cases on a model: greedy exact match and the rank of the right value.

Accuracy is what real greedy generation produces. On every local backend (llama.cpp, hf),
the reference answer is scored teacher-forced *on generation's own kernel path*: the prompt in
one batched decode, then one token per decode (`score_stepwise`). While every greedy token
equals the reference, generation performs exactly these computations, so the value is produced
and no generation is run; otherwise the model generates greedily and the value is extracted
from its text. A shortcut through one batched pass over prompt + answer is *not* taken: batched
and one-token decodes use different kernels, their logits differ in the last digits, and near
ties flip (measured in docs/numerics.md). A model with a KV-cache press compresses the record
and runs the question, the answer and every generated token against the compressed cache
(probes/context_split.py). The rank view works even when a tiny model never gets the value right.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import numpy as np

from ctxeval.backends.base import Scorer
from ctxeval.errors import UserError
from ctxeval.probes.answer_tokens import answer_cover, min_margin
from ctxeval.probes.context_split import context_end as context_end_of
from ctxeval.probes.retrieval_data import RetrievalCase, make_case

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
    accuracy_method: str  # "generation path", "greedy generation" ("batched greedy chain (no generation)": a pressed model in an older run)
    min_margin: float  # smallest top-1 minus runner-up log-probability over the answer's tokens
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
    prompt = np.asarray(bos + prompt_ids, dtype=np.int32)
    answer = np.asarray(answer_ids, dtype=np.int32)
    # a pressed model compresses the record alone; the question and the answer run against its cache
    context_end = context_end_of(scorer, case.prompt, prompt_ids, case.record_char_end, len(bos)) if scorer.compresses_context else None
    scores = scorer.score_stepwise(prompt, answer, top_k=2, temperatures=(1.0,), context_end=context_end)
    covers_value = answer_cover(scorer, answer_ids, case.answer, (case.value,))[0]
    if np.all(scores.greedy_id == answer):
        correct, prediction, method = True, case.value, "generation path"
    else:
        generated = scorer.generate(prompt, len(answer_ids) + _EXTRA_TOKENS, context_end=context_end)
        text = scorer.text_of(generated)
        prediction = extract_value(case.variant, text)
        correct, method = prediction == case.value, "greedy generation"
    return CaseResult(
        model=info.name, variant=case.variant, lines=case.n_lines, depth=case.depth, sample=case.sample,
        char_depth=round(case.char_depth, 6), prompt_tokens=len(bos) + len(prompt_ids), correct=correct,
        prediction=prediction, accuracy_method=method, min_margin=round(min_margin(scores), 6), first_rank=int(scores.rank[0]),
        value_logprob=float(scores.logprob[covers_value].sum()), value_tokens=int(covers_value.sum()),
        answer_ranks=[int(r) for r in scores.rank],
    )


@dataclass(frozen=True)
class CaseSpec:
    """Which case to build: all a worker needs to make and score it (picklable)."""

    lines: int
    depth: float
    sample: int


@dataclass(frozen=True)
class RetrievalTask:
    """Scoring retrieval cases on a worker's model: one CaseResult row per CaseSpec."""

    variant: str
    seed: int

    def __call__(self, model: Scorer, items: list[CaseSpec]) -> list[object]:
        return [score_case(model, make_case(self.variant, c.lines, c.depth, c.sample, self.seed)).to_row() for c in items]


def extract_value(variant: str, text: str) -> str:
    """The value a generated continuation names: its first word (cat) or first number (register)."""
    pattern = r"[A-Za-z]+" if variant == "cat" else r"\d+"
    match = re.search(pattern, text)
    return match.group(0) if match else ""

