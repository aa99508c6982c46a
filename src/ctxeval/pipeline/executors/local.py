"""The in-process executor (the default): work runs on the driver's own model, in plan order."""

from __future__ import annotations

from collections.abc import Iterator
from ctxeval.pipeline.executors.spec import Loadable, WorkerModel
from ctxeval.pipeline.executors.threads import ordered_map
from ctxeval.pipeline.executors.work import J, Work


class LocalExecutor:
    """Runs units one after another, or, for a model with `concurrency` > 1 (an API), that
    many at once on daemon threads, dealt round-robin over its servers when it has several;
    results come back in plan order."""

    def __init__(self) -> None:
        self.worker_usage: dict[str, list[dict]] = {}

    def stream(self, model: WorkerModel, load_spec: Loadable, work: Work[J]) -> Iterator[tuple[J, object]]:
        """(job, result) for every job, in plan order; jobs are taken lazily, a few units ahead
        of the results."""
        models = [model] + [spec.load() for spec in load_spec.per_server()[1:]]

        def run(k: int, group: list[J]) -> list[object]:
            return work.task(models[k % len(models)], [work.item(job) for job in group])

        workers = sum(max(1, m.concurrency) for m in models)
        groups = enumerate(work.units)
        try:
            if workers == 1:
                for k, group in groups:
                    yield from zip(group, run(k, group))
                return
            # daemon threads: an interrupt abandons the requests in flight instead of waiting for them
            for (_, group), results in ordered_map(lambda kg: (kg, run(*kg)), groups, workers, ahead=4 * workers, name="ctxeval-api"):
                yield from zip(group, results)
        finally:
            for extra in models[1:]:
                self.worker_usage.setdefault(extra.name, []).append(extra.usage())
                extra.close()

    def warm(self, load_spec: Loadable) -> None:
        """Nothing to start: the driver's own model runs the work."""

    def close(self) -> None:
        """Nothing to release: the driver closes its own model."""
