"""Models behind an OpenAI-compatible HTTP API (OpenAI, vLLM, llama.cpp servers).

Such an API never shows the full next-token distribution, only the top-k log-probabilities
of tokens it returns, so ranks beyond k are unknown (`None` in the records) and the rank
scores are exact only for cutoffs <= k (see docs/openai.md). Three paths:

- `prompt`: /v1/completions with `echo` and `logprobs`: the log-probability and top-k of
  every prompt token, so every target of a window in one request. Exact log-probabilities.
- `generate` / `chat`: the thesis protocol for APIs that only score *generated* tokens
  (/v1/completions without echo, or /v1/chat/completions with a system prompt): send the
  context, ask for up to `gen_tokens` tokens with top-k log-probabilities; generated step j
  scores reference position j only while every earlier *sampled* token equalled the
  reference token (reuse); the reference's log-probability is known only if it is among the
  returned tokens.

Token identity: windows are cut by ctxeval's tokenization (a local GGUF vocabulary, or the
server's tokenize endpoint) and sent as text; the server's echo of the prompt tokens is
checked against that tokenization, and a window it tokenizes differently fails loudly.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ctxeval.backends.api_client import ApiClient, RequestFailed
from ctxeval.backends.base import Capabilities, ModelInfo
from ctxeval.backends.logits import BlockScores
from ctxeval.backends.openai_options import MODES, OpenAIOptions, RetryPolicy
from ctxeval.backends.request_cache import RequestCache
from ctxeval.errors import UserError

@dataclass
class Step:
    """One generated token: what was sampled and the (token, logprob) alternatives returned."""

    sampled: bytes
    sampled_logprob: float
    alternatives: list[tuple[bytes, float]]


@dataclass
class Comparison:
    """One reference token scored from one generated step."""

    target: int  # index into the token sequence
    context_len: int
    logprob: float  # NaN: the reference was not among the returned tokens
    rank: int | None
    topk: list[float]


@dataclass
class ProtocolCounts:
    """Requests and comparisons of the generate/chat protocol (reuse = comparisons - requests)."""

    requests: int = 0
    comparisons: int = 0


class OpenAIScorer:
    """Scorer protocol over an OpenAI-compatible API (see module docstring)."""

    def __init__(self, model: str, options: OpenAIOptions, n_threads: int | None = None) -> None:
        if options.mode not in MODES:
            raise UserError(f"unknown --api-mode {options.mode!r}; choose one of {', '.join(MODES)}")
        if options.top_logprobs < 1 or (options.mode == "chat" and options.top_logprobs > 20):
            raise UserError("--top-logprobs must be a positive integer (at most 20 for the chat path)")
        if options.gen_tokens < 1:
            raise UserError("--gen-tokens must be a positive integer")
        self.model = model
        self.options = options
        api_key = os.environ.get(options.api_key_env)
        self._cache = RequestCache(Path(options.cache)) if options.cache else None
        self.client = ApiClient(options.base_url, api_key, self._cache, options.concurrency, options.retry, options.seed)
        self.concurrency = options.concurrency
        self._mode = None if options.mode == "auto" else options.mode
        self.protocol = ProtocolCounts()
        self._lock = threading.Lock()
        self._tokenizer = _load_tokenizer(options, api_key, n_threads)
        vocab = self._tokenizer.info
        self.capabilities = Capabilities(full_logits=False, max_top_k=options.top_logprobs, temperatures=False)
        self.info = ModelInfo(
            name=f"openai:{model}",
            backend="openai",
            path=options.base_url,
            sha256="",
            vocab_size=vocab.vocab_size,
            n_ctx_train=vocab.n_ctx_train,
            bos_id=vocab.bos_id,
            details={
                "api": options.identity(),
                "tokenizer": vocab.details.get("tokenizer_source", vocab.path),
                "tokenizer_sha256": vocab.sha256,
                "ranks": f"known only within the top-{options.top_logprobs} returned by the API; null beyond",
                "ids": "greedy_id and topk_ids are -1: the API returns token strings, not ids",
            },
        )

    # --- tokenizer -------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        return self._tokenizer.tokenize(text)

    def token_bytes(self, token_id: int) -> bytes:
        return self._tokenizer.token_bytes(token_id)

    # --- scoring ---------------------------------------------------------------------------
    @property
    def mode(self) -> str:
        if self._mode is None:
            self._mode = self._probe()
        return self._mode

    def score(self, input_ids, output_positions, target_ids, top_k: int, temperatures: tuple[float, ...]) -> BlockScores:
        if any(t != 1.0 for t in temperatures):
            raise UserError("the openai backend cannot compute log-probabilities at other temperatures (the API returns them at T = 1)")
        n_bos = 1 if self.info.uses_bos else 0
        text_ids = np.asarray(input_ids[n_bos:], dtype=np.int64)
        targets = np.asarray(output_positions) - n_bos + 1  # indices into `full`
        full = np.concatenate([text_ids, np.asarray(target_ids[-1:], dtype=np.int64)])
        if not np.array_equal(full[targets], np.asarray(target_ids)):
            raise ValueError("targets disagree with the input tokens")
        if self.mode == "prompt":
            comparisons = self._prompt_scores(full, targets, top_k)
        elif np.all(np.diff(targets) == 1):
            comparisons, _ = self.scan(full, int(targets[0]), int(targets[-1]) + 1, lambda t: 0, top_k)
        else:
            raise ValueError("generation paths score consecutive targets only")
        return _block(comparisons, top_k)

    def estimate(self, n_input: int, n_targets: int) -> tuple[int, int, int]:
        """Upper bounds (requests, prompt tokens, completion tokens) of one pass, sent nothing."""
        prompt_tokens = n_input + 1  # + BOS or the chat template's first token (a lower bound for chat)
        if (self._mode or "prompt") == "prompt":
            return 1, prompt_tokens + 1, 1
        # worst case: every generated token differs from the reference, one request per target
        per_request = min(self.options.gen_tokens, n_targets)
        return n_targets, n_targets * prompt_tokens + n_targets * (n_targets - 1) // 2, n_targets * per_request

    def usage(self) -> dict:
        return self.client.usage.as_dict() | {"mode": self._mode, "protocol": asdict(self.protocol)}

    def close(self) -> None:
        self.client.close()
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    # --- prompt scoring --------------------------------------------------------------------
    def _prompt_scores(self, full: np.ndarray, targets: np.ndarray, top_k: int) -> list[Comparison]:
        if targets[0] == 0:
            raise UserError("the prompt-scoring path cannot score a window's first token (the API returns no log-probability for it); use --method fixed --head skip, or a sweep")
        pieces = [self.token_bytes(int(t)) for t in full]
        payload = {"model": self.model, "prompt": _decode(pieces), "max_tokens": 1, "echo": True, "logprobs": self.options.top_logprobs, "temperature": 0}
        logprobs = _first_choice(self.client.post("/v1/completions", payload)).get("logprobs") or {}
        tokens = logprobs.get("tokens") or []
        expected = [p.decode("utf-8", errors="ignore") for p in pieces]
        if tokens[: len(full)] != expected:
            raise RequestFailed(f"the server tokenized a window differently from ctxeval's tokenizer (first difference at token {_first_difference(tokens, expected)})")
        out = []
        for t in targets:
            lp = logprobs["token_logprobs"][t]
            top = logprobs["top_logprobs"][t]
            if lp is None or top is None:
                raise RequestFailed(f"no log-probability returned for prompt token {t}")
            out.append(_compare(float(lp), list(top.values()), self.options.top_logprobs, int(t), int(t)))
        return out

    # --- generation protocol ---------------------------------------------------------------
    def scan(self, full, first: int, end: int, context_start, top_k: int, max_requests: int | None = None, max_comparisons: int | None = None, gen_tokens: int | None = None) -> tuple[list[Comparison], int]:
        """Score targets `first, first+1, ...` (< `end`) by generation with reuse.

        A request at target t sends `full[context_start(t):t]` and asks for up to
        `gen_tokens` tokens; generated step j scores target t+j, and step j+1 is used only if
        step j's *sampled* token equals the reference token t+j. Stops at `end`, after
        `max_requests` requests (thesis: exhaustive) or `max_comparisons` comparisons
        (non-exhaustive). Returns the comparisons and the number of requests made.
        """
        gen_tokens = gen_tokens or self.options.gen_tokens
        out: list[Comparison] = []
        requests, t = 0, first
        while t < end and (max_requests is None or requests < max_requests) and (max_comparisons is None or len(out) < max_comparisons):
            start = context_start(t)
            budget = min(gen_tokens, end - t, (max_comparisons - len(out)) if max_comparisons else gen_tokens)
            steps = self._generate(full[start:t], budget)
            requests += 1
            for step, target in zip(steps, range(t, t + budget)):
                reference = self.token_bytes(int(full[target]))
                out.append(_compare_step(step, reference, self.options.top_logprobs, target, target - start))
                t = target + 1
                if not _same_token(step.sampled, reference):
                    break
            if not steps:
                raise RequestFailed("the server generated no token")
        with self._lock:
            self.protocol.requests += requests
            self.protocol.comparisons += len(out)
        return out, requests

    def _generate(self, context: np.ndarray, n: int) -> list[Step]:
        text = _decode([self.token_bytes(int(t)) for t in context])
        k = self.options.top_logprobs
        common = {"model": self.model, "max_tokens": n, "temperature": self.options.temperature, "seed": self.options.seed}
        if self.mode == "chat":
            messages = [{"role": "system", "content": self.options.system_prompt}, {"role": "user", "content": text}]
            body = self.client.post("/v1/chat/completions", common | {"messages": messages, "logprobs": True, "top_logprobs": k})
            content = (_first_choice(body).get("logprobs") or {}).get("content") or []
            return [
                Step(_token_bytes(c), float(c["logprob"]), [(_token_bytes(a), float(a["logprob"])) for a in c.get("top_logprobs") or []])
                for c in content
            ]
        body = self.client.post("/v1/completions", common | {"prompt": text, "logprobs": k})
        logprobs = _first_choice(body).get("logprobs") or {}
        return [
            Step(token.encode("utf-8"), float(lp), [(s.encode("utf-8"), float(v)) for s, v in (top or {}).items()])
            for token, lp, top in zip(logprobs.get("tokens") or [], logprobs.get("token_logprobs") or [], logprobs.get("top_logprobs") or [])
        ]

    def _probe(self) -> str:
        """Prompt scoring if /v1/completions echoes prompt log-probabilities, else chat."""
        payload = {"model": self.model, "prompt": "Hello world", "max_tokens": 1, "echo": True, "logprobs": 1, "temperature": 0}
        try:
            logprobs = _first_choice(self.client.post("/v1/completions", payload)).get("logprobs") or {}
            if len([x for x in logprobs.get("token_logprobs") or [] if x is not None]) >= 2:
                return "prompt"
        except RequestFailed:
            pass
        return "chat"


def _compare(logprob: float, alternatives: list[float], k: int, target: int, context_len: int) -> Comparison:
    """Rank from returned alternatives: 1 + how many are strictly more probable, if that is < k
    (then every more probable token is among the k returned); otherwise unknown."""
    above = sum(1 for v in alternatives if v > logprob)
    rank = above + 1 if above < k else None
    topk = sorted(alternatives, reverse=True)[:k]
    return Comparison(target, context_len, logprob, rank, topk)


def _compare_step(step: Step, reference: bytes, k: int, target: int, context_len: int) -> Comparison:
    entries = list(step.alternatives)
    if not any(_same_token(tok, step.sampled) for tok, _ in entries):
        entries.append((step.sampled, step.sampled_logprob))
    found = [lp for tok, lp in entries if _same_token(tok, reference)]
    values = [lp for _, lp in entries]
    if not found:
        return Comparison(target, context_len, math.nan, None, sorted(values, reverse=True)[:k])
    return _compare(found[0], values, k, target, context_len)


def _same_token(returned: bytes, reference: bytes) -> bool:
    """Servers that return strings drop bytes of partial UTF-8 characters; compare likewise."""
    return returned == reference or returned.decode("utf-8", errors="ignore") == reference.decode("utf-8", errors="ignore")


def _token_bytes(entry: dict) -> bytes:
    raw = entry.get("bytes")
    return bytes(raw) if raw else str(entry["token"]).encode("utf-8")


def _block(comparisons: list[Comparison], top_k: int) -> BlockScores:
    n = len(comparisons)
    topk = np.full((n, top_k), np.nan, dtype=np.float32)
    for i, c in enumerate(comparisons):
        values = c.topk[:top_k]
        topk[i, : len(values)] = values
    logprob = np.array([c.logprob for c in comparisons], dtype=np.float64)
    return BlockScores(
        logprob=logprob,
        rank=np.array([c.rank or 0 for c in comparisons], dtype=np.int64),  # 0 = unknown (beyond the top-k)
        greedy_id=np.full(n, -1, dtype=np.int32),
        topk_ids=np.full((n, top_k), -1, dtype=np.int32),
        topk_logprobs=topk,
        temp_logprobs=logprob[:, None],
    )


def _first_choice(body: dict) -> dict:
    choices = body.get("choices")
    if not choices or not isinstance(choices[0], dict):
        raise RequestFailed(f"response has no choices: {str(body)[:200]}")
    return choices[0]


def _decode(pieces: list[bytes]) -> str:
    try:
        return b"".join(pieces).decode("utf-8")
    except UnicodeDecodeError:
        raise RequestFailed("a window boundary splits a UTF-8 character, so it cannot be sent as text") from None


def _first_difference(a: list[str], b: list[str]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


# --- tokenizers --------------------------------------------------------------------------

def _load_tokenizer(options: OpenAIOptions, api_key: str | None, n_threads: int | None):
    if options.tokenizer:
        from ctxeval.backends.registry import load_scorer

        scorer = load_scorer(options.tokenizer, n_threads=n_threads)  # vocabulary only: no inference context
        if not isinstance(scorer.info, ModelInfo) or scorer.info.backend != "llamacpp":
            raise UserError("--tokenizer must be a GGUF model (gemma-3-270m or a .gguf path)")
        return scorer
    return ServerTokenizer(options.base_url, api_key)


class ServerTokenizer:
    """The server's own tokenizer (llama-cpp-python's /extras/tokenize and /extras/detokenize).

    Token bytes come from detokenizing one token at a time (cached); a server that cannot
    detokenize a token to exact text (e.g. a lone byte of a UTF-8 character) makes the text
    unusable here, and ctxeval says so instead of guessing offsets.
    """

    def __init__(self, base_url: str, api_key: str | None) -> None:
        self._client = ApiClient(base_url, api_key, None, 1, RetryPolicy(max_attempts=2, base_delay=0.2, timeout=30))
        self._pieces: dict[int, bytes] = {}
        try:
            bos = self._client.post("/extras/tokenize", {"input": ""})["tokens"]
        except (RequestFailed, KeyError):
            raise UserError(
                f"the server at {base_url} has no tokenize endpoint (/extras/tokenize); give --tokenizer PATH.gguf "
                "with the model's vocabulary"
            ) from None
        self.info = ModelInfo(
            name="server-tokenizer", backend="server", path=f"{base_url}/extras/tokenize", sha256="",
            vocab_size=0, n_ctx_train=1 << 30, bos_id=bos[0] if bos else None,
            details={"tokenizer_source": f"{base_url}/extras/tokenize"},
        )

    def tokenize(self, text: str) -> list[int]:
        ids = self._client.post("/extras/tokenize", {"input": text})["tokens"]
        return ids[1:] if self.info.bos_id is not None and ids[:1] == [self.info.bos_id] else ids

    def token_bytes(self, token_id: int) -> bytes:
        if token_id not in self._pieces:
            try:
                text = self._client.post("/extras/detokenize", {"tokens": [token_id]})["text"]
            except RequestFailed:
                raise UserError(f"the server cannot detokenize token {token_id} to text; give --tokenizer PATH.gguf") from None
            self._pieces[token_id] = text.encode("utf-8")
        return self._pieces[token_id]
