"""Options of the openai backend (kept free of HTTP imports so the core never needs httpx)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from ctxeval.described import described
from ctxeval.stats.defaults import DEFAULT_SEED

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
API_PREFIX = "/v1"  # OpenAI's routes live under it; llama-cpp-python's /extras/* at the server root
SYSTEM_PROMPT = "Complete the following text:"  # the thesis's system prompt
DEFAULT_CONCURRENCY = 4  # requests in flight at once
OPENAI_TEMPERATURE = 1.0  # the sampling temperature of OpenAI's API when a request names none
DEFAULT_GEN_TOKENS = 10  # tokens per generation request outside a thesis sweep (there: n_c)


@dataclass(frozen=True)
class OpenAIOptions:
    """How to reach and use an OpenAI-compatible server. Only `identity()` decides records."""

    # `--base-url` repeated: the first reaches the model, the others are `fanout` (from_cli)
    base_url: str = described("openai models: the server's base URL (default http://127.0.0.1:8000). Repeat for several servers of the same model: passes are dealt across them.",
                              "http://127.0.0.1:8000", many=True)
    api_key_env: str = described("openai models: environment variable holding the API key (never stored).", "OPENAI_API_KEY")
    mode: str = described("openai models: auto (probe), prompt (echo+logprobs), generate (completions, thesis reuse) or chat (chat completions, thesis reuse).", "auto", name="api-mode")
    tokenizer: str | None = described("openai models: a GGUF (gemma-3-270m or .gguf path) with the served model's vocabulary; default: the server's tokenize endpoint.", None)
    top_logprobs: int = described("openai models: top-k log-probabilities to request (chat: at most 20).", 20)  # OpenAI chat allows at most 20
    gen_tokens: int | None = described("openai generate/chat: tokens requested per request (reused while the sampled tokens equal the text). Default: n_c with --context-mode thesis, else 10.", None)
    temperature: float = described("openai generate/chat: sampling temperature.", OPENAI_TEMPERATURE, name="api-temperature")  # decides reuse
    seed: int = DEFAULT_SEED
    system_prompt: str = SYSTEM_PROMPT
    concurrency: int = described("openai models: requests in flight at once.", DEFAULT_CONCURRENCY)
    cache: str | None = described("openai models: SQLite request cache ('none' to disable). Default ~/.cache/ctxeval/api-cache.sqlite.", str(DEFAULT_CACHE),
                                  from_text=lambda v: str(DEFAULT_CACHE) if v is None else (None if v.strip().lower() == "none" else v))
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # more servers of the same model (`--base-url` repeated): the executor deals passes across
    # base_url and these; they serve the same records, so they are not part of identity()
    fanout: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_url", server_root(self.base_url))  # both URL forms: one run id, one cache key
        object.__setattr__(self, "fanout", tuple(server_root(u) for u in self.fanout))

    @classmethod
    def from_cli(cls, values: dict) -> OpenAIOptions:
        """The options from flags: the first --base-url reaches the model, the others are
        servers of the same model that work is dealt across."""
        first, *others = values.pop("base_url") or [cls.base_url]
        return cls(base_url=first, fanout=tuple(others), **values)

    def per_server(self) -> list[OpenAIOptions]:
        """These options once per server, each reaching one of them."""
        return [replace(self, base_url=url, fanout=()) for url in (self.base_url, *self.fanout)]

    @property
    def tokens_per_request(self) -> int:
        """`gen_tokens`, or DEFAULT_GEN_TOKENS when unset (a thesis sweep sets n_c first)."""
        return DEFAULT_GEN_TOKENS if self.gen_tokens is None else self.gen_tokens

    def with_default_gen_tokens(self, n: int) -> OpenAIOptions:
        """These options with `gen_tokens` = n unless the user chose a value."""
        return self if self.gen_tokens is not None else replace(self, gen_tokens=n)

    def identity(self) -> dict:
        """The options that change records (connection, cache and retry settings do not)."""
        keys = ("base_url", "mode", "tokenizer", "top_logprobs", "temperature", "seed", "system_prompt")
        return {k: getattr(self, k) for k in keys} | {"gen_tokens": self.tokens_per_request}


def server_root(base_url: str) -> str:
    """The server's root URL from a base URL written either way: with `/v1` (the convention of
    the OpenAI SDK, vLLM, inspect and lm-eval) or without it (llama.cpp's)."""
    root = base_url.strip().rstrip("/")
    return root[: -len(API_PREFIX)] if root.endswith(API_PREFIX) else root


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
