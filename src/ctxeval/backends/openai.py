"""Models behind an OpenAI-compatible HTTP API (OpenAI, vLLM, llama.cpp servers).

Such an API never shows the full next-token distribution, only the top-k log-probabilities
of tokens it returns, so ranks beyond k are unknown (`None` in the records), and each record
keeps how many alternatives the list held (`topk_returned`): the rank scores use l = that
length where it is below the cutoff, as the thesis's eq. 4 does (see docs/openai.md). Three paths:

- `prompt`: /v1/completions with `echo` and `logprobs`: the log-probability and top-k of
  every prompt token, so every target of a window in one request. Exact log-probabilities;
  exact ranks too where the server returns vLLM's `prompt_logprobs` (vLLM, `ctxeval serve`).
- `generate` / `chat`: the thesis protocol for APIs that only score *generated* tokens
  (/v1/completions without echo, or /v1/chat/completions with a system prompt): send the
  context, ask for up to `gen_tokens` tokens with top-k log-probabilities; generated step j
  scores reference position j only while every earlier *sampled* token equalled the
  reference token (reuse); the reference's log-probability is known only if it is among the
  returned tokens. A `thesis` sweep pass (`score_thesis`) uses the thesis's context schedule:
  every request sends exactly L tokens, and the records keep each target's actual context.

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
from ctxeval.backends.base import Capabilities, ModelInfo, ScheduledScores, ScorerBase
from ctxeval.backends.logits import BlockScores
from ctxeval.backends.openai_options import MODES, OpenAIOptions, RetryPolicy
from ctxeval.backends.registry import backend_for, load_vocabulary
from ctxeval.backends.request_cache import RequestCache
from ctxeval.errors import FieldError, UserError

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
    topk: list[float]  # the returned ranking, most probable first; its length is the thesis's l
    exact: bool = False  # `rank` is over the whole vocabulary (vLLM's prompt_logprobs), not the list


@dataclass
class ProtocolCounts:
    """Requests and comparisons of the generate/chat protocol (reuse = comparisons - requests)."""

    requests: int = 0
    comparisons: int = 0


class OpenAIScorer(ScorerBase):
    """Scorer protocol over an OpenAI-compatible API (see module docstring)."""

    remote = True

    def __init__(self, model: str, options: OpenAIOptions, n_threads: int | None = None) -> None:
        if options.mode not in MODES:
            raise FieldError("mode", f"unknown {{name}} {options.mode!r}; choose one of {', '.join(MODES)}")
        if options.top_logprobs < 1 or (options.mode == "chat" and options.top_logprobs > 20):
            raise FieldError("top_logprobs", "must be a positive integer (at most 20 for the chat path)")
        if options.tokens_per_request < 1:
            raise FieldError("gen_tokens", "must be a positive integer")
        if not options.base_url.startswith(("http://", "https://")):
            raise FieldError("base_url", f"must be an http:// or https:// URL, got {options.base_url!r}")
        self.model = model
        self.options = options
        api_key = os.environ.get(options.api_key_env)
        self._cache = RequestCache(Path(options.cache)) if options.cache else None
        self.client = ApiClient(options.base_url, api_key, self._cache, options.concurrency, options.retry, options.seed)
        self.concurrency = options.concurrency
        self._mode = None if options.mode == "auto" else options.mode
        self.protocol = ProtocolCounts()
        self._lock = threading.Lock()
        self._tokenizer = _load_tokenizer(options, model, api_key, self._cache, n_threads)
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
                "ranks": f"exact where the server returns vLLM's prompt_logprobs ranks (prompt path); otherwise known only within the top-{options.top_logprobs} returned by the API, null beyond",
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
    def api_mode(self) -> str | None:
        return self._mode

    @property
    def mode(self) -> str:
        if self._mode is None:
            self._mode = self._probe()
        return self._mode

    def score(self, input_ids, output_positions, target_ids, top_k: int, temperatures: tuple[float, ...]) -> BlockScores:
        _check_temperatures(temperatures)
        full, targets = self._sequence(input_ids, output_positions, target_ids)
        if self.mode == "prompt":
            comparisons = self._prompt_scores(full, targets, top_k)
        elif np.all(np.diff(targets) == 1):
            comparisons, _ = self.scan(full, int(targets[0]), int(targets[-1]) + 1, lambda t: 0, top_k)
        else:
            raise ValueError("generation paths score consecutive targets only")
        return _block(comparisons, top_k)

    def score_thesis(self, input_ids, output_positions, target_ids, top_k: int, temperatures: tuple[float, ...], n_compare: int, exhaustive: bool) -> ScheduledScores:
        """A thesis sweep pass: its first target is L tokens after its context start; which of its
        targets are scored, and with what context, the protocol decides (see `thesis`)."""
        _check_temperatures(temperatures)
        full, targets = self._sequence(input_ids, output_positions, target_ids)
        if self.mode == "prompt":  # auto found prompt log-probabilities: the server also completes without echo
            self._mode = "generate"
        comparisons, _ = self.thesis(full, int(targets[0]), int(targets[-1]) + 1, n_compare, exhaustive, top_k)
        return ScheduledScores(_block(comparisons, top_k), np.array([c.context_len for c in comparisons], dtype=np.int64))

    def _sequence(self, input_ids, output_positions, target_ids) -> tuple[np.ndarray, np.ndarray]:
        """The pass's text tokens (BOS dropped, the last target appended when the input stops
        before it) and the targets' indices into it."""
        n_bos = 1 if self.info.uses_bos else 0
        text_ids = np.asarray(input_ids[n_bos:], dtype=np.int64)
        targets = np.asarray(output_positions) - n_bos + 1
        full = text_ids if len(text_ids) > targets[-1] else np.concatenate([text_ids, np.asarray(target_ids[-1:], dtype=np.int64)])
        if not np.array_equal(full[targets], np.asarray(target_ids)):
            raise ValueError("targets disagree with the input tokens")
        return full, targets

    def estimate(self, n_input: int, n_targets: int) -> tuple[int, int, int]:
        """Upper bounds (requests, prompt tokens, completion tokens) of one pass, sent nothing."""
        # `n_input`: the whole window; + BOS or the chat template's first token (a lower bound for chat)
        if (self._mode or "prompt") == "prompt":
            return 1, n_input + 1, 1
        # worst case: every generated token differs from the reference, one request per target,
        # the longest sending the window without its last target
        per_request = min(self.options.tokens_per_request, n_targets)
        return n_targets, n_targets * n_input + n_targets * (n_targets - 1) // 2, n_targets * per_request

    def estimate_thesis(self, length: int, n_targets: int, n_compare: int, exhaustive: bool) -> tuple[int, int, int]:
        """Upper bounds of one thesis pass: every request sends L tokens (+ BOS or the chat
        template's first token); at most n_c requests, each generating at most `gen_tokens`
        (non-exhaustive: at most the comparisons still missing)."""
        gen = self.options.tokens_per_request
        requests = min(n_compare, n_targets)
        if exhaustive:
            completion = requests * min(gen, n_targets)
        else:
            completion = sum(min(gen, n_compare - i) for i in range(requests))  # every request misses at its first step
        return requests, requests * (length + 1), completion

    def usage(self) -> dict:
        """Requests this scorer sent; `tokenizer` counts the server tokenizer's own requests."""
        usage = self.client.usage.as_dict() | {"mode": self._mode, "protocol": asdict(self.protocol)}
        if isinstance(self._tokenizer, ServerTokenizer):
            usage["tokenizer"] = self._tokenizer.client.usage.as_dict()
        return usage

    def close(self) -> None:
        self.client.close()
        self._tokenizer.close()
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    # --- prompt scoring --------------------------------------------------------------------
    def _prompt_scores(self, full: np.ndarray, targets: np.ndarray, top_k: int) -> list[Comparison]:
        if targets[0] == 0:
            raise FieldError("method", "the prompt-scoring path cannot score a window's first token (the API returns no log-probability for it); use {method} fixed {head} skip, or windows that open after some context")
        pieces = [self.token_bytes(int(t)) for t in full]
        # prompt_logprobs: vLLM's extension (also `ctxeval serve`), whose entries carry each prompt
        # token's exact rank over the whole vocabulary; other servers ignore it
        payload = {"model": self.model, "prompt": _decode(pieces), "max_tokens": 1, "echo": True, "logprobs": self.options.top_logprobs,
                   "prompt_logprobs": self.options.top_logprobs, "temperature": 0}
        choice = _first_choice(self.client.post("/v1/completions", payload))
        logprobs = choice.get("logprobs") or {}
        prompt_logprobs = choice.get("prompt_logprobs")
        # the echo holds the prompt's tokens and one generated token; a server that echoes the
        # BOS it added (vLLM, `ctxeval serve`) has one token before the text, llama-cpp-python none
        tokens = logprobs.get("tokens") or []
        lead = 1 if self.info.uses_bos and len(tokens) == len(full) + 2 else 0
        expected = [p.decode("utf-8", errors="ignore") for p in pieces]
        if tokens[lead : lead + len(full)] != expected:
            raise RequestFailed(f"the server tokenized a window differently from ctxeval's tokenizer (first difference at token {_first_difference(tokens[lead:], expected)})")
        out = []
        for t in targets:
            lp = logprobs["token_logprobs"][lead + t]
            top = logprobs["top_logprobs"][lead + t]
            if lp is None or top is None:
                raise RequestFailed(f"no log-probability returned for prompt token {t}")
            others = [float(v) for s, v in top.items() if s != tokens[lead + t]]  # the prompt token's own entry is added by the server
            ranking, inside = _ranking(float(lp), others, self.options.top_logprobs)
            comparison = _compare(float(lp), ranking, inside, int(t), int(t))
            exact = _exact_rank(prompt_logprobs, lead + int(t), int(full[t]))
            if exact is not None:
                comparison.rank, comparison.exact = exact, True
            out.append(comparison)
        return out

    # --- generation protocol ---------------------------------------------------------------
    def thesis(self, full, first: int, end: int, n_compare: int, exhaustive: bool, top_k: int) -> tuple[list[Comparison], int]:
        """The thesis's API schedule (paper 000, section 3.1.2) from target `first` = L.

        Every request at target t sends exactly the L tokens before it, so a reused step j
        has L + j tokens of context and, after a miss, the context slides back to L.
        Non-exhaustive: stop after n_c comparisons; exhaustive: after n_c requests (more
        comparisons when steps are reused). Never past `end`.
        """
        limit = {"max_requests": n_compare} if exhaustive else {"max_comparisons": n_compare}
        return self.scan(full, first, end, lambda t: t - first, top_k, **limit)

    def scan(self, full, first: int, end: int, context_start, top_k: int, max_requests: int | None = None, max_comparisons: int | None = None, gen_tokens: int | None = None) -> tuple[list[Comparison], int]:
        """Score targets `first, first+1, ...` (< `end`) by generation with reuse.

        A request at target t sends `full[context_start(t):t]` and asks for up to
        `gen_tokens` tokens; generated step j scores target t+j, and step j+1 is used only if
        step j's *sampled* token equals the reference token t+j. Stops at `end`, after
        `max_requests` requests (thesis: exhaustive) or `max_comparisons` comparisons
        (non-exhaustive). Returns the comparisons and the number of requests made.
        """
        gen_tokens = gen_tokens or self.options.tokens_per_request
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

    def generate_text(self, input_ids: np.ndarray, max_new_tokens: int) -> str:
        """Greedy (temperature 0) completion of the prompt's text, BOS dropped: /v1/completions
        in the prompt and generate modes, the user message of /v1/chat/completions in chat mode."""
        ids = [int(t) for t in input_ids]
        if ids and self.info.bos_id is not None and ids[0] == self.info.bos_id:
            ids = ids[1:]
        text = _decode([self.token_bytes(t) for t in ids])
        common = {"model": self.model, "max_tokens": max_new_tokens, "temperature": 0, "seed": self.options.seed}
        if self.mode == "chat":
            messages = [{"role": "system", "content": self.options.system_prompt}, {"role": "user", "content": text}]
            body = self.client.post("/v1/chat/completions", common | {"messages": messages})
            out = (_first_choice(body).get("message") or {}).get("content") or ""
        else:
            out = _first_choice(self.client.post("/v1/completions", common | {"prompt": text})).get("text") or ""
        with self._lock:
            self.protocol.requests += 1
        return out

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


def _exact_rank(prompt_logprobs, position: int, token_id: int) -> int | None:
    """The rank vLLM's `prompt_logprobs` gives prompt token `position` (its entry is keyed by the
    token's id), or None when the server sent none."""
    if not isinstance(prompt_logprobs, list) or position >= len(prompt_logprobs) or not isinstance(prompt_logprobs[position], dict):
        return None
    entry = prompt_logprobs[position].get(str(token_id))
    rank = entry.get("rank") if isinstance(entry, dict) else None
    return int(rank) if isinstance(rank, int) and rank >= 1 else None


def _check_temperatures(temperatures: tuple[float, ...]) -> None:
    if any(t != 1.0 for t in temperatures):
        raise UserError("the openai backend cannot compute log-probabilities at other temperatures (the API returns them at T = 1)")


def _ranking(own: float, others: list[float], k: int) -> tuple[list[float], bool]:
    """The top-k ranking a position's returned alternatives establish, and whether the
    position's own token (the prompt token when echoing, the sampled token when generating) is
    in it.

    Servers return the top-k log-probabilities plus the own token's, which they add even when
    it is outside the top-k (OpenAI: "as well the chosen tokens"); `others` are the remaining
    entries. Servers that key the top-k by string (llama-cpp-python) merge tokens with equal
    strings, so fewer than k can come back, and then an own token below all of them may have
    been added rather than ranked: 19 others and the own token at -10 below them all is either
    a whole top-20 whose 20th is the own token or 19 merged entries with the own token added,
    and the response cannot tell which (vLLM lists an added token among the alternatives too),
    so its rank is unknown (paper 000, eqs. 4-10: s_i = 0, log p_l - 3). The own token is ranked
    when fewer than k others are more probable and the returned list provably reaches it:
    another entry is at most as probable, or the probability of everything not returned is
    below its own (no unreturned token can outrank it; only when the returned values sum to at
    most 1, i.e. are probabilities of distinct tokens). The ranking's length is the thesis's l
    for this position (eq. 4), which `_block` records.
    """
    above = sum(1 for v in others if v > own)
    listed = math.fsum(math.exp(v) for v in [own, *others])
    reached = any(v <= own for v in others) or (listed <= 1.0 and 1.0 - listed < math.exp(own))
    inside = above < k and reached
    return sorted([*others, own] if inside else others, reverse=True)[:k], inside


def _compare(logprob: float, ranking: list[float], inside: bool, target: int, context_len: int) -> Comparison:
    """The target's rank in `ranking` (1 + how many are strictly more probable: ties count for
    the target) if it is in it (`inside`), else unknown; `ranking` is what the records keep as top-k."""
    above = sum(1 for v in ranking if v > logprob)
    rank = above + 1 if inside and above < len(ranking) else None
    return Comparison(target, context_len, logprob, rank, ranking)


def _compare_step(step: Step, reference: bytes, k: int, target: int, context_len: int) -> Comparison:
    """One generated step: the reference is either the sampled token (ranked as `_ranking`
    says) or one of the other returned alternatives (then within the top-k), or not returned."""
    others = [(tok, lp) for tok, lp in step.alternatives if not _same_token(tok, step.sampled)]
    ranking, sampled_inside = _ranking(step.sampled_logprob, [lp for _, lp in others], k)
    if _same_token(step.sampled, reference):
        return _compare(step.sampled_logprob, ranking, sampled_inside, target, context_len)
    found = [lp for tok, lp in others if _same_token(tok, reference)]
    if not found:
        return Comparison(target, context_len, math.nan, None, ranking)
    return _compare(found[0], ranking, True, target, context_len)


def _same_token(returned: bytes, reference: bytes) -> bool:
    """Servers that return strings drop bytes of partial UTF-8 characters; compare likewise."""
    return returned == reference or returned.decode("utf-8", errors="ignore") == reference.decode("utf-8", errors="ignore")


def _token_bytes(entry: dict) -> bytes:
    raw = entry.get("bytes")
    return bytes(raw) if raw else str(entry["token"]).encode("utf-8")


def _block(comparisons: list[Comparison], top_k: int) -> BlockScores:
    """The comparisons as a block; `listed` is each ranking's whole length (before the run's
    --top-k cuts what the records keep), or -1 for a rank over the whole vocabulary."""
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
        listed=np.array([-1 if c.exact else len(c.topk) for c in comparisons], dtype=np.int32),
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

def _load_tokenizer(options: OpenAIOptions, model: str, api_key: str | None, cache: RequestCache | None, n_threads: int | None):
    if options.tokenizer:
        if not backend_for(options.tokenizer).tokenizer or "?" in options.tokenizer:
            raise FieldError("tokenizer", "must be a GGUF model (gemma-3-270m or a .gguf path, without options)")
        return load_vocabulary(options.tokenizer, n_threads=n_threads)  # vocabulary only: no inference context
    client = ApiClient(options.base_url, api_key, cache, 1, RetryPolicy(max_attempts=2, base_delay=0.2, timeout=30))
    return ServerTokenizer(client, model)


class ServerTokenizer:
    """The server's own tokenizer: llama-cpp-python's /extras/tokenize and /extras/detokenize
    (at the server root, not under /v1).

    That API returns ids without their text, and detokenizes a list of ids to one string. So
    the pieces of a text's distinct ids are fetched in one request (per `DETOKENIZE_BATCH` ids):
    the ids interleaved with a separator token (`SEPARATOR`, a one-token text), and the answer
    split on it. A batch that fails or splits into the wrong number of parts (a piece holding
    the separator) is halved until single tokens are detokenized alone. Requests go through the
    run's request cache, so an identical rerun sends none. The server decodes strictly, so a
    token that is a lone byte of a UTF-8 character cannot be detokenized: ctxeval then says so
    instead of guessing offsets.
    """

    SEPARATOR = "\x00"  # a control character, absent from texts (a piece holding it is detected)
    DETOKENIZE_BATCH = 4096

    def __init__(self, client: ApiClient, model: str) -> None:
        self.client = client
        self._model = model
        self._pieces: dict[int, bytes] = {}
        url = client.url("/extras/tokenize")
        try:
            bos = self._tokenize("")
        except RequestFailed as exc:
            raise _no_tokenizer(str(exc)) from None
        except KeyError:
            raise _no_tokenizer(f"POST {url} answered without 'tokens'") from None
        self.info = ModelInfo(
            name="server-tokenizer", backend="server", path=url, sha256="",
            vocab_size=0, n_ctx_train=1 << 30, bos_id=bos[0] if bos else None,
            details={"tokenizer_source": url},
        )
        self._separator = self._find_separator()

    def tokenize(self, text: str) -> list[int]:
        """The text's ids; the pieces of all of them are fetched here, a batch at a time."""
        ids = self._strip_bos(self._tokenize(text))
        missing = list(dict.fromkeys(t for t in ids if t not in self._pieces))  # first-seen order: stable cache keys
        for lo in range(0, len(missing), self.DETOKENIZE_BATCH):
            self._fetch(missing[lo : lo + self.DETOKENIZE_BATCH])
        return ids

    def token_bytes(self, token_id: int) -> bytes:
        if token_id not in self._pieces:
            self._fetch([token_id])
        return self._pieces[token_id]

    def close(self) -> None:
        self.client.close()

    def _find_separator(self) -> int | None:
        """The id of `SEPARATOR` if it is one token that detokenizes to itself (else pieces come one by one)."""
        ids = self._strip_bos(self._tokenize(self.SEPARATOR))
        try:
            return ids[0] if len(ids) == 1 and self._detokenize(ids) == self.SEPARATOR else None
        except RequestFailed:
            return None

    def _tokenize(self, text: str) -> list[int]:
        return self.client.post("/extras/tokenize", {"model": self._model, "input": text})["tokens"]

    def _strip_bos(self, ids: list[int]) -> list[int]:
        return ids[1:] if self.info.bos_id is not None and ids[:1] == [self.info.bos_id] else ids

    def _fetch(self, ids: list[int]) -> None:
        if len(ids) == 1:
            try:
                self._pieces[ids[0]] = self._detokenize(ids).encode("utf-8")
            except RequestFailed:
                raise FieldError("tokenizer", f"the server cannot detokenize token {ids[0]} to text; give {{name}} PATH.gguf") from None
            return
        pieces = self._separated_pieces(ids) if self._separator is not None else None
        if pieces is None:
            half = len(ids) // 2
            self._fetch(ids[:half])
            self._fetch(ids[half:])
            return
        self._pieces.update(zip(ids, (p.encode("utf-8") for p in pieces)))

    def _separated_pieces(self, ids: list[int]) -> list[str] | None:
        """Pieces of `ids` from one request, or None if the batch cannot be split reliably."""
        interleaved = [x for t in ids for x in (t, self._separator)][:-1]
        try:
            parts = self._detokenize(interleaved).split(self.SEPARATOR)
        except RequestFailed:
            return None
        return parts if len(parts) == len(ids) else None

    def _detokenize(self, ids: list[int]) -> str:
        return self.client.post("/extras/detokenize", {"model": self._model, "tokens": ids})["text"]


def _no_tokenizer(reason: str) -> UserError:
    return FieldError("tokenizer", f"the server has no tokenize endpoint ({reason}); give {{name}} PATH.gguf with the model's vocabulary")
