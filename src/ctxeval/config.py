"""Typed run configurations, built by the CLI or by Python callers."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxeval.metrics.config import MetricConfig
from ctxeval.stats.defaults import DEFAULT_SEED

DEFAULT_MODEL = "gemma-3-270m"
DEFAULT_LENGTHS = (32, 64, 128, 256, 512, 1024, 2048, 4096)
DEFAULT_TOP_K = 20



def config_id(config: dict) -> str:
    """A run id: a short hash of the configuration that decides a run's records."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]

@dataclass(frozen=True)
class RunConfig:
    """Everything that decides which records a run produces (its identity for resuming)."""

    command: str  # "sweep", "score" or "context-gain"
    texts: tuple[str, ...]  # text content sha256s, in order
    text_ids: tuple[str, ...]
    models: tuple[str, ...]  # model specs (`gemma-3-270m`, a .gguf path), in order
    top_k: int = DEFAULT_TOP_K
    temperatures: tuple[float, ...] = (1.0,)
    # sweep
    lengths: tuple[int, ...] = ()
    n_compare: int = 0
    seed: int = DEFAULT_SEED
    repeats: int = 1
    context_modes: tuple[str, ...] = ()
    exhaustive: bool = False  # thesis context mode: n_c requests instead of n_c comparisons
    # score
    method: str = ""
    window: int = 0
    stride: int = 0
    head: str = ""  # fixed: "full" or "skip" (set for every fixed run, so pre-head fixed runs get new ids)
    max_tokens: int | None = None
    # context-gain
    short: int = 0  # k: the short context
    metrics: MetricConfig = field(default_factory=MetricConfig)
    # hf backend: torch device and dtype (None = the backend's default, cpu / float32)
    device: str | None = None
    dtype: str | None = None
    backend_options: str = ""  # JSON of API options that decide records (openai models only)

    @classmethod
    def of_documents(cls, command: str, documents: Sequence[Any], models: Sequence[str], **fields: Any) -> RunConfig:
        """The configuration of a `command` run over `documents` (anything with `sha256` and
        `text_id`, in order) and `models`; `fields` are the command's own settings."""
        return cls(command=command, texts=tuple(d.sha256 for d in documents), text_ids=tuple(d.text_id for d in documents), models=tuple(models), **fields)

    def identity(self) -> dict:
        """The fields that decide the records (metric settings excluded: they are post hoc)."""
        data = asdict(self)
        data.pop("metrics")
        # unset options added later are left out, so earlier runs keep their run ids
        for key, unset in (("device", None), ("dtype", None), ("short", 0), ("head", ""), ("backend_options", ""), ("exhaustive", False)):
            if data[key] == unset:
                data.pop(key)
        return data

    def run_id(self) -> str:
        return config_id(self.identity())
