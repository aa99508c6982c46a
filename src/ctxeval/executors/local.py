"""The in-process executor (the default): passes run on the driver's own scorer, in plan order."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

from ctxeval.backends.base import ScorerBase
from ctxeval.config import RunConfig
from ctxeval.executors.spec import ScorerSpec
from ctxeval.executors.work import Job, score_unit, units, work_item


class LocalExecutor:
    """Runs units one after another, or, for a backend with `concurrency` > 1 (an API), that
    many at once on threads, dealt round-robin over its servers when it has several; results
    come back in plan order."""

    def __init__(self) -> None:
        self.worker_usage: dict[str, list[dict]] = {}

    def stream(self, scorer: ScorerBase, load_spec: ScorerSpec, config: RunConfig, jobs: Iterable[Job]) -> Iterator[tuple[Job, object]]:
        """(job, BlockScores | ScheduledScores | ScoringFailed) for every job, in plan order;
        jobs are taken lazily, a few units ahead of the results."""
        scorers = [scorer] + [spec.load() for spec in load_spec.per_server()[1:]]

        def run(k: int, group: list[Job]) -> list[object]:
            on = scorers[k % len(scorers)]
            return score_unit(on, config, [work_item(on.info, tt, p) for _, tt, p in group])

        workers = sum(max(1, s.concurrency) for s in scorers)
        groups = enumerate(units(scorer, jobs))
        try:
            if workers == 1:
                for k, group in groups:
                    yield from zip(group, run(k, group))
                return
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ctxeval-api") as pool:
                while chunk := list(islice(groups, 4 * workers)):
                    for (_, group), results in zip(chunk, pool.map(lambda kg: run(*kg), chunk)):
                        yield from zip(group, results)
        finally:
            for extra in scorers[1:]:
                self.worker_usage.setdefault(extra.info.name, []).append(extra.usage())
                extra.close()

    def close(self) -> None:
        """Nothing to release: the driver closes its own scorer."""
