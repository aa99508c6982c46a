"""HTTP client for OpenAI-compatible servers: cache, retries with backoff, bounded concurrency,
and an exact count of what was sent and billed.

A request either returns a well-formed JSON object or raises `RequestFailed` after its retries;
callers record the failure and never score it.
"""

from __future__ import annotations

import email.utils
import json
import random
import threading
import time
from dataclasses import asdict, dataclass

import httpx

from ctxeval.backends.openai_options import DEFAULT_CONCURRENCY, RetryPolicy, server_root
from ctxeval.backends.request_cache import RequestCache, request_key
from ctxeval.errors import ScoringFailed

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class RequestFailed(ScoringFailed):
    """A request that still failed after all retries (or failed permanently, e.g. HTTP 400)."""


@dataclass
class Usage:
    """What a run cost. `requests` are HTTP attempts actually sent (retries included)."""

    requests: int = 0
    retries: int = 0
    cache_hits: int = 0
    failed: int = 0
    prompt_tokens: int = 0  # billed: from responses received over the network
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # from responses served by the cache (not billed again)
    cached_completion_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class ApiClient:
    """POSTs JSON to `root + path`, where `root` is `base_url` without a trailing `/v1` and paths
    are absolute (`/v1/completions`, `/extras/tokenize`). Thread-safe; at most `concurrency`
    requests in flight."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        cache: RequestCache | None,
        concurrency: int = DEFAULT_CONCURRENCY,
        retry: RetryPolicy = RetryPolicy(),
        seed: int | None = None,
    ) -> None:
        self.base_url = server_root(base_url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=retry.timeout, limits=httpx.Limits(max_connections=concurrency))
        self._cache = cache
        self._slots = threading.Semaphore(concurrency)
        self._retry = retry
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.usage = Usage()

    def post(self, path: str, payload: dict, use_cache: bool = True) -> dict:
        """The response JSON of one request, from the cache when it was made before."""
        key = request_key(self.base_url, path, payload)
        if use_cache and self._cache is not None:
            cached = self._cache.get(key)
            if cached is not None:
                self._count(cache_hits=1, **_tokens(cached, "cached_"))
                return cached
        response = self._send(path, payload)
        self._count(**_tokens(response, ""))
        if use_cache and self._cache is not None:
            self._cache.put(key, path, response)
        return response

    def _send(self, path: str, payload: dict) -> dict:
        last_error = ""
        for attempt in range(self._retry.max_attempts):
            if attempt:
                self._count(retries=1)
            retry_after = None
            with self._slots:
                self._count(requests=1)
                try:
                    r = self._http.post(path, json=payload)
                except httpx.TransportError as exc:  # refused, dropped, timed out
                    last_error = f"{type(exc).__name__}: {exc}"
                else:
                    if r.status_code == 200:
                        try:
                            body = r.json()
                        except (json.JSONDecodeError, UnicodeDecodeError):
                            body = None
                        if isinstance(body, dict) and "error" not in body:
                            return body
                        last_error = f"malformed response body: {r.text[:120]!r}"
                    elif r.status_code in RETRY_STATUS:
                        last_error = f"HTTP {r.status_code}: {r.text[:200]}"
                        retry_after = _retry_after(r.headers.get("retry-after"))
                    else:
                        self._count(failed=1)
                        raise RequestFailed(f"HTTP {r.status_code} from POST {self.url(path)}: {r.text[:300]}")
            if attempt + 1 < self._retry.max_attempts:
                time.sleep(self._delay(attempt, retry_after))
        self._count(failed=1)
        raise RequestFailed(f"POST {self.url(path)} failed after {self._retry.max_attempts} attempts; last error: {last_error}")

    def url(self, path: str) -> str:
        """The full URL a request to `path` goes to (for messages)."""
        return self.base_url + path

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        with self._lock:
            jitter = 0.5 + self._rng.random()
        backoff = min(self._retry.max_delay, self._retry.base_delay * 2**attempt) * jitter
        return max(backoff, retry_after) if retry_after is not None else backoff

    def _count(self, **amounts: int) -> None:
        with self._lock:
            for name, value in amounts.items():
                setattr(self.usage, name, getattr(self.usage, name) + value)

    def close(self) -> None:
        self._http.close()


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, parsed.timestamp() - time.time())


def _tokens(response: dict, prefix: str) -> dict[str, int]:
    usage = response.get("usage") or {}
    return {
        f"{prefix}prompt_tokens": int(usage.get("prompt_tokens") or 0),
        f"{prefix}completion_tokens": int(usage.get("completion_tokens") or 0),
    }
