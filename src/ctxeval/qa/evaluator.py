"""Scores text pairs with an evaluator model through the Scorer protocol, with a resumable cache.

Tokenization at the prefix/continuation boundary: prefix and continuation are tokenized
*separately* and the ids concatenated, [BOS] + tok(prefix) + tok(continuation). The answer is
then the same token sequence in PPL(a), PPL(q ⊕ a) and every prompt, so differences come from
the conditioning alone, never from a merge across the boundary. Every prefix ends in whitespace
("\\n\\n", "AI: ", "- Coherence: "), where Gemma's tokenizer does not merge anyway. BOS starts
every pass (as in run.py) and is never scored.

The cache is a JSONL file of pass results keyed by a hash of (model sha256, kind, texts), so
PPL(a) is computed once per answer, and an interrupted meta-evaluation resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ctxeval.backends.base import Scorer
from ctxeval.errors import UserError

DIGITS = ("1", "2", "3", "4", "5")
_FALLBACK_TOP_K = 20


@dataclass(frozen=True)
class PairScore:
    """Sums of natural-log probabilities of one pass: prefix tokens (each given BOS and the
    prefix before it) and continuation tokens (given BOS and the whole prefix)."""

    n_prefix: int
    prefix_sum: float
    n_cont: int
    cont_sum: float


class Evaluator:
    """An evaluator model plus a cache of its pass results."""

    def __init__(self, scorer: Scorer, cache_path: Path | None = None) -> None:
        self.scorer = scorer
        self._cache: dict[str, dict] = {}
        self._cache_file = None
        self.passes_run = 0
        if cache_path is not None:
            cache_path.parent.mkdir(parents=True, exist_ok=True)
            if cache_path.exists():
                with cache_path.open(encoding="utf-8") as f:
                    for line in f:
                        if line.strip():
                            try:
                                row = json.loads(line)
                            except json.JSONDecodeError:
                                continue  # a line cut off by an interruption: recomputed
                            self._cache[row["key"]] = row["value"]
            self._cache_file = cache_path.open("a", encoding="utf-8")
        bos = scorer.info.bos_id
        self._bos = [bos] if bos is not None else []
        self._digit_ids = [self._single_token(d) for d in DIGITS]

    def _single_token(self, text: str) -> int:
        ids = self.scorer.tokenize(text)
        if len(ids) != 1:
            raise UserError(f"{self.scorer.info.name}: the score token {text!r} is not a single token, G-Eval cannot read it")
        return ids[0]

    def _key(self, kind: str, *texts: str) -> str:
        payload = json.dumps([self.scorer.info.sha256, self.scorer.info.name, kind, *texts], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def _store(self, key: str, value: dict) -> None:
        self._cache[key] = value
        if self._cache_file is not None:
            self._cache_file.write(json.dumps({"key": key, "value": value}) + "\n")
            self._cache_file.flush()

    def _ids(self, prefix: str, continuation: str) -> tuple[np.ndarray, int, int]:
        p = self.scorer.tokenize(prefix) if prefix else []
        c = self.scorer.tokenize(continuation) if continuation else []
        ids = np.asarray(self._bos + p + c, dtype=np.int32)
        return ids, len(p), len(c)

    def prepare(self, max_tokens: int) -> None:
        """Size the backend's context once for the longest pass (it would otherwise grow step by step)."""
        if max_tokens + len(self._bos) > self.scorer.info.n_ctx_train:
            raise UserError(f"a pass of {max_tokens} tokens exceeds {self.scorer.info.name}'s training context of {self.scorer.info.n_ctx_train}")
        self.scorer.prepare(max_tokens + len(self._bos))

    def n_tokens(self, text: str) -> int:
        return len(self.scorer.tokenize(text)) if text else 0

    def pair(self, prefix: str, continuation: str) -> PairScore:
        """Log-probabilities of every prefix and continuation token in one forward pass."""
        key = self._key("pair", prefix, continuation)
        if key not in self._cache:
            ids, n_p, n_c = self._ids(prefix, continuation)
            if not self._bos:  # without BOS the very first token has no context and is not scored
                n_p, n_c = (n_p - 1, n_c) if n_p else (0, max(n_c - 1, 0))
            targets = np.arange(len(ids) - n_p - n_c, len(ids))
            if len(targets) == 0:
                self._store(key, asdict(PairScore(n_p, 0.0, n_c, 0.0)))
            else:
                lp = self.scorer.score(ids, targets - 1, ids[targets], 0, ()).logprob
                self._store(key, asdict(PairScore(n_p, float(lp[:n_p].sum()), n_c, float(lp[n_p:].sum()))))
                self.passes_run += 1
        return PairScore(**self._cache[key])

    def next_token_logprobs(self, prompt: str) -> tuple[list[float], int]:
        """Log-probabilities of the tokens "1".."5" as the next token after `prompt`, and the
        top-k used. A full-logits backend returns the whole sorted distribution at that one
        position, so all five are exact; a top-k backend reports NaN for a digit outside its
        top-k (G-Eval then treats it as probability 0)."""
        key = self._key("digits", prompt)
        if key not in self._cache:
            ids, n_p, _ = self._ids(prompt, "")
            caps = self.scorer.capabilities
            top_k = self.scorer.info.vocab_size if caps.full_logits else (caps.max_top_k or _FALLBACK_TOP_K)
            position = np.array([len(ids) - 1])
            scores = self.scorer.score(ids, position, np.array([self._digit_ids[0]]), top_k, ())
            found = dict(zip(scores.topk_ids[0].tolist(), scores.topk_logprobs[0].astype(float).tolist()))
            found[self._digit_ids[0]] = float(scores.logprob[0])  # exact even outside the top-k
            values = [found.get(d, math.nan) for d in self._digit_ids]
            self._store(key, {"logprobs": [None if math.isnan(v) else v for v in values], "top_k": int(top_k)})
            self.passes_run += 1
        row = self._cache[key]
        return [math.nan if v is None else float(v) for v in row["logprobs"]], row["top_k"]

    def close(self) -> None:
        if self._cache_file is not None:
            self._cache_file.close()
            self._cache_file = None
