"""Options of the openai backend (kept free of HTTP imports so the core never needs httpx)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_CACHE = Path.home() / ".cache" / "ctxeval" / "api-cache.sqlite"


@dataclass(frozen=True)
class RetryPolicy:
    """Retries on 429/5xx/connection errors/malformed bodies: attempt a waits
    base_delay * 2^a (capped at max_delay) times a jitter in [0.5, 1.5), or Retry-After if longer."""

    max_attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 30.0
    timeout: float = 120.0  # seconds per request (connect, read, write)


MODES = ("auto", "prompt", "generate", "chat")
SYSTEM_PROMPT = "Complete the following text:"  # the thesis's system prompt


@dataclass(frozen=True)
class OpenAIOptions:
    """How to reach and use an OpenAI-compatible server. Only `identity()` decides records."""

    base_url: str = "http://127.0.0.1:8000"
    api_key_env: str = "OPENAI_API_KEY"
    mode: str = "auto"
    tokenizer: str | None = None  # a local .gguf whose vocabulary the server's model uses
    top_logprobs: int = 20  # OpenAI chat allows at most 20
    gen_tokens: int = 10  # tokens requested per generation request (generate/chat)
    temperature: float = 1.0  # sampling temperature of generate/chat (decides reuse)
    seed: int = 0
    system_prompt: str = SYSTEM_PROMPT
    concurrency: int = 4
    cache: str | None = str(DEFAULT_CACHE)  # None: no cache
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def identity(self) -> dict:
        """The options that change records (connection, cache and retry settings do not)."""
        keys = ("base_url", "mode", "tokenizer", "top_logprobs", "gen_tokens", "temperature", "seed", "system_prompt")
        return {k: getattr(self, k) for k in keys}




def dry_run_table(estimate: dict, price_in: float | None, price_out: float | None) -> str:
    """Markdown table of a dry run: requests and tokens per API model, and a cost if priced."""
    if not estimate:
        return "no API model in this run: nothing would be sent"
    priced = price_in is not None and price_out is not None
    lines = ["| model | mode | passes | requests | prompt tokens | completion tokens |" + (" cost |" if priced else ""),
             "|---|---|---:|---:|---:|---:|" + ("---:|" if priced else "")]
    for name, e in estimate.items():
        row = f"| {name} | {e['mode']} | {e['passes']} | {e['requests']} | {e['prompt_tokens']} | {e['completion_tokens']} |"
        if priced:
            row += f" {cost(e['prompt_tokens'], e['completion_tokens'], price_in, price_out):.4f} |"
        lines.append(row)
    lines.append("")
    lines.append("nothing was sent; generate/chat counts are upper bounds (no reuse), chat adds its template's tokens")
    return "\n".join(lines)


def cost(prompt_tokens: int, completion_tokens: int, price_in: float, price_out: float) -> float:
    """Cost with prices per 1M tokens."""
    return prompt_tokens * price_in / 1e6 + completion_tokens * price_out / 1e6
