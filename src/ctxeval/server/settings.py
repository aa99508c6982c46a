"""What `ctxeval serve` is started with: the model, its limits and its access rules."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ctxeval.config import DEFAULT_MODEL
from ctxeval.errors import FieldError

STRING_BOS = ("model", "none")  # what a string prompt gets before its tokens


@dataclass(frozen=True)
class ServerSettings:
    """Options of one server; every limit answers a client with a 4xx, never a crash."""

    model: str = DEFAULT_MODEL
    host: str = "127.0.0.1"
    port: int = 8000
    served_names: tuple[str, ...] = ()  # names clients may give as `model` (default: the model spec)
    n_ctx: int = 4096  # longest prompt + completion, in tokens
    n_threads: int | None = None
    device: str | None = None  # hf: models
    dtype: str | None = None
    string_bos: str = "model"  # model: BOS before a string prompt's tokens when the model uses one; none: never
    api_key: str | None = None  # required as `Authorization: Bearer KEY` when set
    max_queue: int = 64  # requests waiting for the model; one more is answered 429
    max_body_bytes: int = 8 << 20  # a larger request body is answered 413
    max_logprobs: int = 20  # largest `logprobs` / `prompt_logprobs` / `top_logprobs`
    batch_tokens: int = 8192  # queued passes scored in one `score_batch` call, up to this many tokens
    chat_template: str | None = None  # Jinja text for /v1/chat/completions (default: the model's own)

    @property
    def names(self) -> tuple[str, ...]:
        return self.served_names or (self.model,)

    def check(self) -> None:
        """Refuse impossible settings before the model loads (one line each)."""
        if not 1 <= self.port <= 65535:
            raise FieldError("port", f"must be between 1 and 65535, got {self.port}")
        for name, value in (("n_ctx", self.n_ctx), ("max_queue", self.max_queue), ("max_body_bytes", self.max_body_bytes), ("batch_tokens", self.batch_tokens)):
            if value < 1:
                raise FieldError(name, f"must be a positive integer, got {value}")
        if self.max_logprobs < 0:
            raise FieldError("max_logprobs", f"must be >= 0, got {self.max_logprobs}")
        if self.string_bos not in STRING_BOS:
            raise FieldError("string_bos", f"must be one of {', '.join(STRING_BOS)}, got {self.string_bos!r}")


def server_settings(model: str, chat_template: str | Path | None, api_key_env: str | None, **options) -> ServerSettings:
    """Settings from command-line values: the chat template read from its file, the API key from
    its environment variable (a key never appears on a command line)."""
    template = None
    if chat_template is not None:
        path = Path(chat_template)
        if not path.is_file():
            raise FieldError("chat_template", f"{{name}}: file not found: {path}")
        template = path.read_text(encoding="utf-8")
    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise FieldError("api_key_env", f"{api_key_env}: that environment variable is not set")
    return ServerSettings(model=model, chat_template=template, api_key=api_key, **options)
