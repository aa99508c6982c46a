"""Executors: the only loops over passes. `local` runs them in-process (the default); `ray` deals
them to Ray actors that each hold a loaded scorer. Either way the driver alone writes records,
so records and resume do not depend on the executor."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ctxeval.backends.base import ScorerBase
from ctxeval.config import RunConfig
from ctxeval.errors import UserError
from ctxeval.executors.work import Job

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class ExecutorOptions:
    """Where passes run. None of it decides records, so none of it is part of the run id."""

    kind: str = "local"
    workers: int = 1  # ray: actors per model, each with its own loaded scorer
    address: str | None = None  # ray: an existing cluster (None: RAY_ADDRESS, else start one on 127.0.0.1)
    threads_per_worker: int = 1  # ray: CPU threads (and CPUs reserved) per actor
    gpus_per_worker: float = 0.0  # ray: GPUs reserved per actor (hf: models with --device cuda)

    def check(self) -> None:
        """Refuse impossible settings with one clear line."""
        if self.kind not in EXECUTORS:
            raise UserError(f"unknown --executor {self.kind!r}; choose one of {', '.join(EXECUTORS)}")
        if self.workers < 1:
            raise UserError(f"--workers must be a positive integer, got {self.workers}")
        if self.threads_per_worker < 1:
            raise UserError(f"--threads-per-worker must be a positive integer, got {self.threads_per_worker}")
        if self.gpus_per_worker < 0:
            raise UserError(f"--gpus-per-worker must not be negative, got {self.gpus_per_worker}")
        if self.kind == "local" and (self.workers != 1 or self.address or self.gpus_per_worker or self.threads_per_worker != 1):
            raise UserError("--workers, --address, --threads-per-worker and --gpus-per-worker apply to --executor ray only")


@dataclass(frozen=True)
class ScorerSpec:
    """How to load a scorer: what a worker needs to load its own copy of the driver's model."""

    spec: str
    n_threads: int | None = None
    openai_options: Any = None  # OpenAIOptions for openai: models
    device: str | None = None
    dtype: str | None = None

    def load(self, n_threads: int | None = None) -> ScorerBase:
        """The scorer, with `n_threads` in place of the spec's own when given."""
        from ctxeval.backends.registry import load_scorer

        hf = {"device": self.device, "dtype": self.dtype} if self.spec.startswith("hf:") else {}
        return load_scorer(self.spec, n_threads=n_threads or self.n_threads, openai_options=self.openai_options, **hf)

    def per_server(self) -> list[ScorerSpec]:
        """One spec per server of an openai: model given several (`--base-url` repeated), else itself."""
        if not self.spec.startswith("openai:") or self.openai_options is None or not self.openai_options.fanout:
            return [self]
        return [replace(self, openai_options=options) for options in self.openai_options.per_server()]


class Executor(Protocol):
    # usage() of the scorers it loaded besides the driver's, per model name (API requests they sent)
    worker_usage: dict[str, list[dict]]

    def stream(self, scorer: ScorerBase, load_spec: ScorerSpec, config: RunConfig, jobs: list[Job]) -> Iterator[tuple[Job, object]]:
        """(job, BlockScores | ScheduledScores | ScoringFailed) for every job, each exactly once,
        in any order (the records are sorted into plan order when parts are merged)."""
        ...

    def close(self) -> None: ...


@contextmanager
def open_executor(options: ExecutorOptions | None) -> Iterator[Executor]:
    """The executor `options` name, released (a Ray cluster it started shut down) afterwards."""
    options = options or ExecutorOptions()
    options.check()
    if options.kind == "local":
        from ctxeval.executors.local import LocalExecutor

        executor: Executor = LocalExecutor()
    else:
        from ctxeval.executors.ray import RayExecutor

        executor = RayExecutor(options)
    try:
        yield executor
    finally:
        executor.close()
