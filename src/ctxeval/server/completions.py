"""POST /v1/completions: prompts in, OpenAI legacy completions (and vLLM's prompt_logprobs) out.

Prompt log-probabilities come from one scoring pass per prompt, computed by the backend's
exact full-vocabulary scorer (so `rank` is exact however far down the vocabulary a token is):
the pass decodes the whole prompt and scores tokens 2..n, exactly as `ctxeval score` scores a
window (and as llama.cpp's own tools decode it). The first token has no log-probability (null),
as in OpenAI's format.

One greedy token (`max_tokens: 1`, `temperature: 0`, what lm-eval's loglikelihood requests
ask for) is read from that same decode: the row at the prompt's last token, so the prompt's
numbers stay those of `ctxeval score` (llama.cpp rounds a row differently when the batch around
it has another length). Longer or sampled completions run the backend's generation (one token
per decode), and their log-probabilities are scored on that same kernel path (`score_stepwise`).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import numpy as np

from ctxeval.backends.logits import BlockScores
from ctxeval.server.errors import ApiError
from ctxeval.server.model import ServedModel
from ctxeval.server.schemas import CompletionRequest
from ctxeval.server.worker import CallJob, ScoreJob


@dataclass
class Token:
    """One token of a choice: its id, log-probability, exact rank and alternatives (id, logprob)."""

    id: int
    logprob: float | None = None
    rank: int | None = None
    top: list[tuple[int, float]] | None = None


@dataclass
class Generated:
    tokens: list[Token]
    finish_reason: str


async def complete(request: CompletionRequest, model: ServedModel) -> dict:
    model.check_model(request.model)
    model.check_k(request.logprobs, "logprobs")
    model.check_k(request.prompt_logprobs, "prompt_logprobs")
    prompts = _prompts(request.prompt)
    n_new = 16 if request.max_tokens is None else request.max_tokens
    temperature = 1.0 if request.temperature is None else float(request.temperature)
    ids_list = [model.string_ids(p) if isinstance(p, str) else list(p) for p in prompts]
    for ids in ids_list:
        model.check_ids(ids, "prompt", n_new)
    k = request.logprobs or 0
    one_step = n_new == 1 and temperature == 0
    want_prompt = (request.echo and request.logprobs is not None) or request.prompt_logprobs is not None
    if n_new > 0 and not one_step and not model.generates:
        raise ApiError(400, f"max_tokens: {model.info.name} cannot generate more than one greedy token (temperature 0) here", "max_tokens")

    scores: list[tuple[BlockScores | None, BlockScores | None]] = [(None, None)] * len(ids_list)
    passes, owners = [], []
    for i, ids in enumerate(ids_list):
        pass_ = _pass(ids, one_step, want_prompt)
        if pass_ is not None:
            passes.append(pass_)
            owners.append(i)
    if passes:
        top_k = max(k, request.prompt_logprobs or 0, 1 if one_step else 0)
        for i, (s, after) in zip(owners, await model.run(ScoreJob(passes, [one_step] * len(passes), top_k))):
            # a one-token prompt has no prompt scores: its pass's only row is the greedy one
            scores[i] = (s if len(ids_list[i]) > 1 else None, after)

    choices, completion_tokens = [], 0
    for index, (prompt, ids, (s, after)) in enumerate(zip(prompts, ids_list, scores)):
        if n_new == 0:
            generated = Generated([], "length")
        elif one_step:
            generated = _next_token(after, k, model)
        else:
            generated = await generate_tokens(model, ids, n_new, temperature, request.seed, k if request.logprobs is not None else None)
        generated = cut_at_stop(generated, request.stop, model)
        completion_tokens += len(generated.tokens)
        choices.append(_choice(index, prompt, ids, s, generated, request, model))
    prompt_tokens = sum(len(ids) for ids in ids_list)
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": request.model or model.settings.names[0],
        "choices": choices,
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
    }


def _prompts(prompt) -> list:
    """One prompt per choice: a string, a list of strings, token ids, or a list of token-id lists."""
    if isinstance(prompt, str) or (prompt and isinstance(prompt[0], int)):
        return [prompt]
    return list(prompt)


def _pass(ids: list[int], one_step: bool, want_prompt: bool):
    """The scoring pass a prompt needs (module docstring), or None: the whole prompt decoded,
    tokens 2..n scored, and for one greedy token one more row at the last token (its target a
    placeholder)."""
    arr = np.asarray(ids, dtype=np.int64)
    if one_step:
        return arr, np.arange(len(arr)), np.append(arr[1:], 0)
    if len(arr) > 1 and want_prompt:
        return arr, np.arange(len(arr) - 1), arr[1:]
    return None


def _row(s: BlockScores, i: int, target: int, k: int) -> Token:
    return Token(target, float(s.logprob[i]), int(s.rank[i]), [(int(a), float(b)) for a, b in zip(s.topk_ids[i, :k], s.topk_logprobs[i, :k])])


def _next_token(after: BlockScores, k: int, model: ServedModel) -> Generated:
    """The greedy token after the prompt, from the one row read after it."""
    token = int(after.greedy_id[0])
    row = Token(token, float(after.topk_logprobs[0, 0]), 1, [(int(a), float(b)) for a, b in zip(after.topk_ids[0, :k], after.topk_logprobs[0, :k])])
    return Generated([row], "stop" if token == model.special.eos_id else "length")


async def generate_tokens(model: ServedModel, ids: list[int], n_new: int, temperature: float, seed: int | None, k: int | None) -> Generated:
    def call(scorer) -> Generated:
        prompt = np.asarray(ids, dtype=np.int64)
        out = scorer.generate(prompt, n_new, temperature, seed)
        stopped = len(out) < n_new or (out and out[-1] == model.special.eos_id)
        if k is None or not out:
            return Generated([Token(t) for t in out], "stop" if stopped else "length")
        s = scorer.score_stepwise(prompt, np.asarray(out, dtype=np.int64), max(k, 1), (1.0,))
        return Generated([_row(s, j, t, k) for j, t in enumerate(out)], "stop" if stopped else "length")

    return await model.run(CallJob(call))


def cut_at_stop(generated: Generated, stop, model: ServedModel) -> Generated:
    """Cut the completion before the first stop sequence (the tokens that reach into it go)."""
    stops = [stop] if isinstance(stop, str) else [s for s in stop or [] if s]
    if not stops:
        return generated
    text = ""
    for j, token in enumerate(generated.tokens):
        text += model.token_text(token.id)
        if any(s in text for s in stops):
            return Generated(generated.tokens[:j], "stop")
    return generated


def _choice(index: int, prompt, ids: list[int], s: BlockScores | None, generated: Generated, request: CompletionRequest, model: ServedModel) -> dict:
    new_ids = [t.id for t in generated.tokens if t.id != model.special.eos_id]
    new_text = model.text(new_ids)
    prompt_text = prompt if isinstance(prompt, str) else model.text(ids)
    choice: dict = {"index": index, "text": (prompt_text + new_text) if request.echo else new_text, "finish_reason": generated.finish_reason}
    prompt_tokens = _prompt_tokens(ids, s)
    if request.logprobs is not None:
        tokens = (prompt_tokens if request.echo else []) + generated.tokens
        choice["logprobs"] = _legacy(tokens, request.logprobs, model, 0 if request.echo else len(prompt_text))
    else:
        choice["logprobs"] = None
    if request.prompt_logprobs is not None:
        choice["prompt_logprobs"] = _vllm_prompt_logprobs(prompt_tokens, request.prompt_logprobs, model)
    return choice


def _prompt_tokens(ids: list[int], s: BlockScores | None) -> list[Token]:
    if s is None:
        return [Token(t) for t in ids]
    k = s.topk_ids.shape[1]
    return [Token(ids[0])] + [_row(s, i, ids[i + 1], k) for i in range(len(ids) - 1)]


def _legacy(tokens: list[Token], k: int, model: ServedModel, start: int) -> dict:
    """OpenAI's legacy `logprobs`: the first prompt token's entries are null; `text_offset`
    counts characters from the start of the prompt, echoed or not."""
    top_logprobs = []
    for t in tokens:
        if t.top is None:
            top_logprobs.append(None)
            continue
        # the most probable wins a shared text; the chosen token is always there (as OpenAI returns
        # it) with its own float64 log-probability, so "is it the maximum" compares equal values
        top = {model.token_text(a): b for a, b in reversed(t.top[:k])}
        if t.id in {a for a, _ in t.top[:k]} or model.token_text(t.id) not in top:
            top[model.token_text(t.id)] = t.logprob
        top_logprobs.append(dict(sorted(top.items(), key=lambda kv: -kv[1])))
    return {
        "tokens": [model.token_text(t.id) for t in tokens],
        "token_logprobs": [t.logprob for t in tokens],
        "top_logprobs": top_logprobs,
        "text_offset": model.offsets([t.id for t in tokens], start),
    }


def _vllm_prompt_logprobs(tokens: list[Token], k: int, model: ServedModel) -> list:
    """vLLM's `prompt_logprobs`: per prompt token {id: {logprob, rank, decoded_token}}, the token
    itself first with its exact rank over the whole vocabulary, then the top-k by position."""
    out: list = []
    for t in tokens:
        if t.top is None:
            out.append(None)
            continue
        entry = {str(t.id): {"logprob": t.logprob, "rank": t.rank, "decoded_token": model.token_text(t.id)}}
        for position, (a, b) in enumerate(t.top[:k], start=1):
            entry.setdefault(str(a), {"logprob": b, "rank": position, "decoded_token": model.token_text(a)})
        out.append(entry)
    return out
