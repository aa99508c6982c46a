"""The in-process executor (the default): passes run on the driver's own scorer, in plan order."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from ctxeval.backends.base import ScorerBase
from ctxeval.config import RunConfig
from ctxeval.executors import ScorerSpec
from ctxeval.executors.work import Job, score_unit, units, work_item


class LocalExecutor:
    """Runs units one after another, or, for a backend with `concurrency` > 1 (an API), that
    many at once on threads, dealt round-robin over its servers when it has several; results
    come back in plan order."""

    def __init__(self) -> None:
        self.worker_usage: dict[str, list[dict]] = {}

    def stream(self, scorer: ScorerBase, load_spec: ScorerSpec, config: RunConfig, jobs: list[Job]) -> Iterator[tuple[Job, object]]:
        """(job, BlockScores | ScheduledScores | ScoringFailed) for every job, in plan order."""
        groups = units(scorer, jobs)
        scorers = [scorer] + [spec.load() for spec in load_spec.per_server()[1:]]

        def run(k: int) -> list[object]:
            on = scorers[k % len(scorers)]
            return score_unit(on, config, [work_item(on.info, tt, p) for _, tt, p in groups[k]])

        workers = sum(max(1, s.concurrency) for s in scorers)
        try:
            if workers == 1:
                for k, group in enumerate(groups):
                    yield from zip(group, run(k))
                return
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ctxeval-api") as pool:
                for lo in range(0, len(groups), 4 * workers):
                    chunk = range(lo, min(lo + 4 * workers, len(groups)))
                    for k, results in zip(chunk, pool.map(run, chunk)):
                        yield from zip(groups[k], results)
        finally:
            for extra in scorers[1:]:
                self.worker_usage.setdefault(extra.info.name, []).append(extra.usage())
                extra.close()

    def close(self) -> None:
        """Nothing to release: the driver closes its own scorer."""
