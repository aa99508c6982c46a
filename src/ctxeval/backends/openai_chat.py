"""Chat over an OpenAI-compatible API: messages in, text out (the judge's `ChatGenerator`)."""

from __future__ import annotations

import os
from pathlib import Path

from ctxeval.backends.api_client import ApiClient, RequestFailed
from ctxeval.backends.openai_options import OpenAIOptions
from ctxeval.backends.request_cache import RequestCache


class OpenAIChat:
    """/v1/chat/completions at temperature 0 (L-Eval's judge setting), cached like scoring requests."""

    def __init__(self, model: str, options: OpenAIOptions, max_tokens: int = 2048, temperature: float = 0.0) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
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

    def close(self) -> None:
        self.client.close()
        if self._cache is not None:
            self._cache.close()
