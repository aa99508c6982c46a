"""The in-process executor (the default): passes run on the driver's own scorer, in plan order."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from ctxeval.backends.base import ScorerBase
from ctxeval.config import RunConfig
from ctxeval.executors.work import Job, score_unit, units, work_item


class LocalExecutor:
    """Runs units one after another, or, for a backend with `concurrency` > 1 (an API), that
    many at once on threads; results come back in plan order."""

    def stream(self, scorer: ScorerBase, load_spec: object, config: RunConfig, jobs: list[Job]) -> Iterator[tuple[Job, object]]:
        """(job, BlockScores | ScheduledScores | ScoringFailed) for every job, in plan order."""
        groups = units(scorer, jobs)

        def run(group: list[Job]) -> list[object]:
            return score_unit(scorer, config, [work_item(scorer.info, tt, p) for _, tt, p in group])

        workers = max(1, scorer.concurrency)
        if workers == 1:
            for group in groups:
                yield from zip(group, run(group))
            return
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ctxeval-api") as pool:
            for lo in range(0, len(groups), 4 * workers):
                chunk = groups[lo : lo + 4 * workers]
                for group, results in zip(chunk, pool.map(run, chunk)):
                    yield from zip(group, results)

    def close(self) -> None:
        """Nothing to release: the driver closes its own scorers."""
