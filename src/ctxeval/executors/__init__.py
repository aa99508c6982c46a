"""Executors: the only loops over passes. `local` runs them in-process (the default); `ray` deals
them to Ray actors that each hold a loaded scorer. Either way the driver alone writes records,
so records and resume do not depend on the executor."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Protocol

from ctxeval.backends.base import ScorerBase
from ctxeval.config import RunConfig
from ctxeval.executors.spec import EXECUTORS, ExecutorOptions, ScorerSpec
from ctxeval.executors.work import Job

__all__ = ["EXECUTORS", "Executor", "ExecutorOptions", "ScorerSpec", "open_executor"]


class Executor(Protocol):
    # usage() of the scorers it loaded besides the driver's, per model name (API requests they sent)
    worker_usage: dict[str, list[dict]]

    def stream(self, scorer: ScorerBase, load_spec: ScorerSpec, config: RunConfig, jobs: Iterable[Job]) -> Iterator[tuple[Job, object]]:
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
