"""Executors: the only loops over model work. `local` runs it in-process (the default); `ray`
deals it to Ray actors that each hold a loaded model. Either way the driver alone writes
records, so records and resume do not depend on the executor."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from ctxeval.pipeline.executors.spec import EXECUTORS, ExecutorOptions, Loadable, ScorerSpec, WorkerModel
from ctxeval.pipeline.executors.work import J, Work

__all__ = ["EXECUTORS", "Executor", "ExecutorOptions", "Loadable", "ScorerSpec", "Work", "WorkerModel", "open_executor"]


class Executor(Protocol):
    # usage() of the models it loaded besides the driver's, per model name (API requests they sent)
    worker_usage: dict[str, list[dict]]

    def stream(self, model: WorkerModel, load_spec: Loadable, work: Work[J]) -> Iterator[tuple[J, object]]:
        """(job, the task's result for it) for every job of `work`, each exactly once, in any
        order (records are sorted into plan order when parts are merged)."""
        ...

    def warm(self, load_spec: Loadable) -> None:
        """Start loading a model on the workers ahead of its `stream` (the driver plans meanwhile)."""
        ...

    def close(self) -> None: ...


@contextmanager
def open_executor(options: ExecutorOptions | None) -> Iterator[Executor]:
    """The executor `options` name, released (a Ray cluster it started shut down) afterwards."""
    options = options or ExecutorOptions()
    options.check()
    if options.kind == "local":
        from ctxeval.pipeline.executors.local import LocalExecutor

        executor: Executor = LocalExecutor()
    else:
        from ctxeval.pipeline.executors.ray import RayExecutor

        executor = RayExecutor(options)
    try:
        yield executor
    finally:
        executor.close()
