"""The evaluator passes of the answer-quality methods, as work an executor runs.

Every method needs one of two pass kinds (`PassRequest`): `pair` (log-probabilities of a prefix
and of a continuation, PPLqa and GPTScore) and `digits` (the next-token log-probabilities of
the score tokens "1".."5" after a G-Eval prompt). The driver's `Evaluator` turns a request
into a `QAPass` (token ids) keyed by a hash of (model sha256, model name, kind, texts); a
`QATask` scores passes on any loaded scorer, in this process or a Ray actor, and returns one
record per pass (`qa/passes.py` writes them), so PPL(a) is computed once per answer and an
interrupted evaluation resumes where it stopped.

Tokenization at the prefix/continuation boundary: prefix and continuation are tokenized
*separately* and the ids concatenated, [BOS] + tok(prefix) + tok(continuation). The answer is
then the same token sequence in PPL(a), PPL(q ⊕ a) and every prompt, so differences come from
the conditioning alone, never from a merge across the boundary. Every prefix ends in whitespace
("\\n\\n", "AI: ", "- Coherence: "), where Gemma's tokenizer does not merge anyway. BOS starts
every pass (as in run.py) and is never scored.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np

from ctxeval.backends.base import Scorer
from ctxeval.errors import UserError

DIGITS = ("1", "2", "3", "4", "5")
PASS_KINDS = ("pair", "digits")


@dataclass(frozen=True)
class PassRequest:
    """What a method needs from the model: a `pair` pass over prefix + continuation, or the
    `digits` after a prompt (the prompt is the prefix; no continuation)."""

    kind: str
    prefix: str
    continuation: str = ""


@dataclass(frozen=True)
class PairScore:
    """Sums of natural-log probabilities of one pass: prefix tokens (each given BOS and the
    prefix before it) and continuation tokens (given BOS and the whole prefix)."""

    n_prefix: int
    prefix_sum: float
    n_cont: int
    cont_sum: float


@dataclass(frozen=True)
class QAPass:
    """The model input of one pass (picklable, for Ray actors): ids with BOS, which positions
    are scored, and for `digits` the score tokens and the top-k that reports them."""

    key: str
    kind: str
    input_ids: np.ndarray
    n_prefix: int  # scored prefix tokens (pair)
    n_cont: int  # scored continuation tokens (pair)
    digit_ids: tuple[int, ...] = ()
    top_k: int = 0


@dataclass(frozen=True)
class QATask:
    """Scores QA passes on a worker's scorer; one record (a dict of `qa/passes.py`'s columns)
    per pass. The context is sized once for the evaluation's longest pass, so numbers do not
    depend on which passes a worker happens to get."""

    max_input_len: int

    def __call__(self, model: Scorer, items: list[QAPass]) -> list[object]:
        model.prepare(self.max_input_len)
        return [_score_pair(model, p) if p.kind == "pair" else _score_digits(model, p) for p in items]


def _score_pair(scorer: Scorer, p: QAPass) -> dict:
    ids = p.input_ids
    targets = np.arange(len(ids) - p.n_prefix - p.n_cont, len(ids))
    prefix_sum = cont_sum = 0.0
    if len(targets):
        lp = scorer.score(ids, targets - 1, ids[targets], 0, ()).logprob
        prefix_sum, cont_sum = float(lp[: p.n_prefix].sum()), float(lp[p.n_prefix :].sum())
    return {"key": p.key, "kind": "pair", "n_input": len(ids), "n_prefix": p.n_prefix, "prefix_sum": prefix_sum,
            "n_cont": p.n_cont, "cont_sum": cont_sum, "digit_logprobs": None, "top_k": None}


def _score_digits(scorer: Scorer, p: QAPass) -> dict:
    ids = p.input_ids
    scores = scorer.score(ids, np.array([len(ids) - 1]), np.array([p.digit_ids[0]]), p.top_k, ())
    found = dict(zip(scores.topk_ids[0].tolist(), scores.topk_logprobs[0].astype(float).tolist()))
    found[p.digit_ids[0]] = float(scores.logprob[0])  # exact even outside the top-k
    values = [found.get(d, math.nan) for d in p.digit_ids]
    return {"key": p.key, "kind": "digits", "n_input": len(ids), "n_prefix": None, "prefix_sum": None, "n_cont": None, "cont_sum": None,
            "digit_logprobs": [None if math.isnan(v) else v for v in values], "top_k": p.top_k}


def pair_score(record: dict) -> PairScore:
    """The PairScore a `pair` record holds."""
    return PairScore(int(record["n_prefix"]), float(record["prefix_sum"]), int(record["n_cont"]), float(record["cont_sum"]))


def digit_logprobs(record: dict) -> list[float]:
    """The score tokens' log-probabilities a `digits` record holds (NaN: outside the top-k)."""
    return [math.nan if v is None else float(v) for v in record["digit_logprobs"]]


class Evaluator:
    """An evaluator model on the driver: turns requests into keyed passes (tokenizing there,
    so workers only run the model)."""

    def __init__(self, scorer: Scorer) -> None:
        if not scorer.capabilities.full_logits:  # a top-k backend would leave score tokens outside its top-k unknown
            raise UserError(f"{scorer.info.name}: answer-quality methods need a backend with full logits (a .gguf path or hf:MODEL)")
        self.scorer = scorer
        bos = scorer.info.bos_id
        self._bos = [bos] if bos is not None else []
        self._digit_ids = tuple(self._single_token(d) for d in DIGITS)

    def _single_token(self, text: str) -> int:
        ids = self.scorer.tokenize(text)
        if len(ids) != 1:
            raise UserError(f"{self.scorer.info.name}: the score token {text!r} is not a single token, G-Eval cannot read it")
        return ids[0]

    def key(self, request: PassRequest) -> str:
        texts = (request.prefix, request.continuation) if request.kind == "pair" else (request.prefix,)
        payload = json.dumps([self.scorer.info.sha256, self.scorer.info.name, request.kind, *texts], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def qa_pass(self, request: PassRequest) -> QAPass:
        """The token ids and scored positions of a request."""
        p = self.scorer.tokenize(request.prefix) if request.prefix else []
        c = self.scorer.tokenize(request.continuation) if request.continuation else []
        ids = np.asarray(self._bos + p + c, dtype=np.int32)
        if request.kind == "digits":  # the whole sorted distribution: every score token exact
            return QAPass(self.key(request), "digits", ids, len(p), 0, self._digit_ids, self.scorer.info.vocab_size)
        n_p, n_c = len(p), len(c)
        if not self._bos:  # without BOS the very first token has no context and is not scored
            n_p, n_c = (n_p - 1, n_c) if n_p else (0, max(n_c - 1, 0))
        return QAPass(self.key(request), "pair", ids, n_p, n_c)

    def max_input_len(self, requests: list[PassRequest]) -> int:
        """The context every pass fits in: the longest request (+8: separate tokenization of
        prefix and answer may add a few tokens) and BOS; refused beyond the training context."""
        longest = max(len(self.scorer.tokenize(r.prefix + r.continuation)) for r in requests) + 8
        if longest + len(self._bos) > self.scorer.info.n_ctx_train:
            raise UserError(f"a pass of {longest} tokens exceeds {self.scorer.info.name}'s training context of {self.scorer.info.n_ctx_train}")
        return longest + len(self._bos)
