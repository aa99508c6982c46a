"""The ASGI application: routes, error shapes, body limit and API key.

Every refused request gets OpenAI's error shape with a 4xx status and the field at fault;
an unexpected failure inside the model is a 500 for that request only, and the server goes on.
"""

from __future__ import annotations

import hmac
import time

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from ctxeval.errors import UserError
from ctxeval.server.chat import chat
from ctxeval.server.completions import complete
from ctxeval.server.errors import ApiError
from ctxeval.server.model import ServedModel
from ctxeval.server.schemas import ChatRequest, CompletionRequest, DetokenizeRequest, ExtrasTokenizeRequest, TokenizeRequest


def create_app(model: ServedModel) -> FastAPI:
    """The server's routes over `model` (already loaded)."""
    app = FastAPI(title="ctxeval serve", docs_url=None, redoc_url=None, openapi_url=None)
    started = int(time.time())
    settings = model.settings

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(validation_error(exc.errors()).body(), status_code=400)

    @app.exception_handler(UserError)
    async def user_error(_: Request, exc: UserError) -> JSONResponse:
        return JSONResponse(ApiError(400, str(exc)).body(), status_code=400)

    @app.exception_handler(Exception)
    async def failed(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(ApiError(500, f"{type(exc).__name__}: {exc}").body(), status_code=500)

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "waiting": model.worker.waiting}

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [
            {"id": name, "object": "model", "created": started, "owned_by": "ctxeval", "max_model_len": settings.n_ctx} for name in settings.names
        ]}

    @app.post("/v1/completions")
    async def completions(request: CompletionRequest) -> dict:
        return await complete(request, model)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: ChatRequest) -> dict:
        return await chat(request, model)

    @app.post("/tokenize")
    async def tokenize(request: TokenizeRequest) -> dict:
        model.check_model(request.model)
        ids = model.string_ids(request.prompt) if request.add_special_tokens else model.scorer.tokenize_with_specials(request.prompt)
        return {"count": len(ids), "max_model_len": settings.n_ctx, "tokens": ids}

    @app.post("/detokenize")
    async def detokenize(request: DetokenizeRequest) -> dict:
        model.check_model(request.model)
        model.check_vocab(request.tokens, "tokens")
        return {"prompt": model.text_with_specials(request.tokens)}

    @app.get("/tokenizer_info")
    async def tokenizer_info() -> dict:
        special = model.special
        return {"bos_token": special.bos_text, "eos_token": special.eos_text, "pad_token": None,
                "chat_template": settings.chat_template or special.chat_template, "model_max_length": settings.n_ctx,
                "add_bos_token": settings.string_bos == "model" and model.info.bos_id is not None}

    @app.post("/extras/tokenize")
    async def extras_tokenize(request: ExtrasTokenizeRequest) -> dict:
        model.check_model(request.model)
        return {"tokens": model.string_ids(request.input)}

    @app.post("/extras/detokenize")
    async def extras_detokenize(request: DetokenizeRequest) -> dict:
        model.check_model(request.model)
        model.check_vocab(request.tokens, "tokens")
        return {"text": model.text(request.tokens)}

    return Guard(app, settings.max_body_bytes, settings.api_key)


def validation_error(errors) -> ApiError:
    """pydantic's errors as one message that names each field at fault."""
    messages, param = [], None
    for e in errors:
        loc = [str(x) for x in e.get("loc", ()) if x != "body"]
        # a union reports one error per member; its member name (`str`, `list[int]`) is no field
        field = ".".join(x for x in loc if not any(c in x for c in "[]") and x not in ("str", "int", "float", "bool")) or "body"
        param = param or field.split(".")[0]
        text = f"{field}: {e.get('msg', 'invalid')}"
        if text not in messages:
            messages.append(text)
    return ApiError(400, "; ".join(messages[:4]), param)


class Guard:
    """ASGI middleware: bodies over `max_body` bytes get 413 before any route reads them, and
    with `api_key` set every route but /health needs `Authorization: Bearer KEY` (else 401)."""

    def __init__(self, app, max_body: int, api_key: str | None) -> None:
        self.app = app
        self.max_body = max_body
        self.api_key = api_key

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if self.api_key is not None and scope["path"] != "/health":
            given = headers.get(b"authorization", b"").decode("latin-1")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.api_key}".encode()):
                return await _reply(send, ApiError(401, "missing or wrong API key (send Authorization: Bearer KEY)", None, "invalid_api_key"))
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            return await _reply(send, _too_large(self.max_body))
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_body:
                return await _reply(send, _too_large(self.max_body))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"request body larger than {limit} bytes (--max-body-bytes)", None, "request_too_large")


async def _reply(send, error: ApiError) -> None:
    response = JSONResponse(error.body(), status_code=error.status)
    await send({"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})
