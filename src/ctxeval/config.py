"""Typed run configurations, built by the CLI or by Python callers."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

from ctxeval.errors import UserError
from ctxeval.metrics.perplexity import DEFAULT_PENALTY
from ctxeval.options import comma_floats, non_negative, option, positive
from ctxeval.stats.defaults import DEFAULT_SEED

DEFAULT_MODEL = "gemma-3-270m"
DEFAULT_LENGTHS = (32, 64, 128, 256, 512, 1024, 2048, 4096)
DEFAULT_TOP_K = 20



def config_id(config: dict) -> str:
    """A run id: a short hash of the configuration that decides a run's records."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]

def parse_cutoff(value: str, flag: str) -> int | None:
    """A rank cutoff as typed: a positive integer, or 'full' (None: the whole vocabulary)."""
    if value.strip().lower() == "full":
        return None
    try:
        return int(value)
    except ValueError:
        raise UserError(f"{flag} expects a positive integer or 'full', got {value!r}") from None


@dataclass(frozen=True)
class MetricConfig:
    """How records become scores; changing it never needs a new model run."""

    cutoff: int | None = option("--cutoff", "Rank cutoff l of the rank scores: a positive integer, or 'full' for the whole vocabulary (a rank an API read from a shorter top-k list is scored with l = that list's length).",
                                20, cli_type=str, shown="20", to_value=lambda v: parse_cutoff(v, "--cutoff"), check=positive)  # None = full vocabulary
    alphas: tuple[float, ...] = option("--alphas", "Comma-separated alphas of the non-linear score e^(-alpha (r-1)).", (0.1, 0.3),
                                       cli_type=str, shown="0.1,0.3", to_value=comma_floats("--alphas"), check=lambda a: "must be positive" if any(x <= 0 for x in a) else None)
    approx_k: int = option("--approx-k", "k of the approximate perplexity (an API's top-k).", 20, check=positive)  # top-k an API would return
    penalty: float = option("--penalty", "Penalty subtracted from log p_k for tokens outside the top-k.", DEFAULT_PENALTY, check=non_negative)  # thesis eq. 10

    @staticmethod
    def from_dict(stored: dict) -> MetricConfig:
        """The settings as stored in a run manifest."""
        return MetricConfig(stored["cutoff"], tuple(stored["alphas"]), stored["approx_k"], stored["penalty"])


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
