"""POST /v1/chat/completions: the model's own chat template (from its GGUF or tokenizer), then
generation, with OpenAI's chat `logprobs` (`content`: token, logprob, bytes, top_logprobs)."""

from __future__ import annotations

import time
import uuid

from ctxeval.backends.chat_template import ChatTemplateRefused, apply_chat_template
from ctxeval.server.completions import Generated, Token, cut_at_stop, generate_tokens
from ctxeval.server.errors import ApiError
from ctxeval.server.model import ServedModel
from ctxeval.server.schemas import ChatRequest


def render(model: ServedModel, messages: list[dict]) -> str:
    """The conversation as the chat template writes it, ready for the assistant's turn."""
    template = model.settings.chat_template or model.special.chat_template
    if not template:
        raise ApiError(400, f"messages: {model.info.name} has no chat template (start the server with --chat-template FILE); use /v1/completions", "messages")
    try:
        return apply_chat_template(template, messages, model.special.bos_text or "", model.special.eos_text or "")
    except ChatTemplateRefused as exc:
        raise ApiError(400, f"messages: the chat template refused them: {exc}", "messages") from None


async def chat(request: ChatRequest, model: ServedModel) -> dict:
    model.check_model(request.model)
    model.check_k(request.top_logprobs, "top_logprobs")
    if not model.generates:
        raise ApiError(400, f"messages: {model.info.name} cannot generate here; use /v1/completions", "messages")
    ids = model.string_ids(render(model, [m.model_dump() for m in request.messages]))
    n_new = request.max_completion_tokens or request.max_tokens or max(model.settings.n_ctx - len(ids), 1)
    model.check_ids(ids, "messages", n_new)
    temperature = 1.0 if request.temperature is None else float(request.temperature)
    k = (request.top_logprobs or 0) if request.logprobs else None
    generated = await generate_tokens(model, ids, n_new, temperature, request.seed, k)
    n_generated = len(generated.tokens)
    generated = cut_at_stop(Generated([t for t in generated.tokens if t.id != model.special.eos_id], generated.finish_reason), request.stop, model)
    tokens, finish = generated.tokens, generated.finish_reason
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": model.text([t.id for t in tokens])},
        "logprobs": {"content": [_content(t, model) for t in tokens]} if k is not None else None,
        "finish_reason": finish,
    }
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model or model.settings.names[0],
        "choices": [choice],
        "usage": {"prompt_tokens": len(ids), "completion_tokens": n_generated, "total_tokens": len(ids) + n_generated},
    }


def _content(t: Token, model: ServedModel) -> dict:
    def one(token_id: int, logprob: float) -> dict:
        return {"token": model.token_text(token_id), "logprob": logprob, "bytes": list(model.piece(token_id))}

    return one(t.id, t.logprob) | {"top_logprobs": [one(a, b) for a, b in t.top or []]}
