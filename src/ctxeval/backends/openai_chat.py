"""Chat over an OpenAI-compatible API: messages in, text out (the judge's `ChatGenerator`),
loadable by an executor's workers from a `ChatSpec`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ctxeval.backends.api_client import ApiClient, RequestFailed
from ctxeval.backends.base import GREEDY
from ctxeval.backends.openai_options import OpenAIOptions
from ctxeval.backends.request_cache import RequestCache


class OpenAIChat:
    """/v1/chat/completions at temperature 0 (L-Eval's judge setting), cached like scoring requests."""

    remote = True

    def __init__(self, model: str, options: OpenAIOptions, max_tokens: int) -> None:
        self.model = model
        self.concurrency = options.concurrency
        self.max_tokens = max_tokens
        self.temperature = GREEDY
        self._cache = RequestCache(Path(options.cache)) if options.cache else None
        self.client = ApiClient(options.base_url, os.environ.get(options.api_key_env), self._cache, options.concurrency, options.retry, options.seed)

    def chat(self, messages: list[dict[str, str]]) -> str:
        body = self.client.post("/v1/chat/completions", {"model": self.model, "messages": messages, "temperature": self.temperature, "max_tokens": self.max_tokens})
        try:
            content = body["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise RequestFailed(f"chat response without message content: {str(body)[:200]}") from None
        if not isinstance(content, str):
            raise RequestFailed("chat response content is not text")
        return content

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    def describe(self) -> dict:
        """The chat model as a run manifest records it."""
        return {"name": self.name, "backend": "openai-chat", "max_tokens": self.max_tokens, "temperature": self.temperature}

    def usage(self) -> dict:
        """Requests and tokens this client sent."""
        return self.client.usage.as_dict()

    def close(self) -> None:
        self.client.close()
        if self._cache is not None:
            self._cache.close()


@dataclass(frozen=True)
class ChatSpec:
    """How an executor's worker opens its own connection to the chat model."""

    model: str
    options: OpenAIOptions
    max_tokens: int

    def load(self, n_threads: int | None = None) -> OpenAIChat:
        return OpenAIChat(self.model, self.options, self.max_tokens)

    def per_server(self) -> list[ChatSpec]:
        """One spec per server (`--base-url` repeated), else itself."""
        if not self.options.fanout:
            return [self]
        return [ChatSpec(self.model, options, self.max_tokens) for options in self.options.per_server()]
