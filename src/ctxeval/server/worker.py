"""One thread owns the model; requests reach it through a bounded queue.

A scorer is not thread-safe and a model computes one thing at a time, so every request becomes
a job for the worker thread. Scoring jobs that wait together are scored in one
`score_batch` call (up to `batch_tokens` tokens): a backend that batches (hf: equal-length
passes in one forward; llama.cpp with packing) then runs them together, and the others score
them one after another without a round trip per request. A job that fails inside a batch is
retried alone, so one bad request never fails its neighbours.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field


from ctxeval.backends.base import PassInput, Scorer
from ctxeval.backends.logits import BlockScores


_STOP = object()  # queued by `stop`: the worker ends after the jobs before it


class QueueFull(Exception):
    """More requests are waiting than the server accepts (answered 429)."""


@dataclass
class ScoreJob:
    """Passes of one request, scored with at least `top_k` alternatives per row; a pass whose
    `greedy_after` is set has one more row, at its last input token, whose target is a
    placeholder: the distribution after the input (its greedy token). The result: per pass,
    (scores, that distribution or None)."""

    passes: list[PassInput]
    greedy_after: list[bool]
    top_k: int
    future: Future = field(default_factory=Future)

    @property
    def n_tokens(self) -> int:
        return sum(len(p[0]) for p in self.passes)


@dataclass
class CallJob:
    """Anything else the model must do alone (generation): `call(scorer)`."""

    call: Callable[[Scorer], object]
    future: Future = field(default_factory=Future)


class ModelWorker:
    """The model's thread and its queue."""

    def __init__(self, scorer: Scorer, max_queue: int, batch_tokens: int) -> None:
        self.scorer = scorer
        self._queue: queue.Queue = queue.Queue(maxsize=max_queue)
        self._batch_tokens = batch_tokens
        self._held: list = []  # a job taken while grouping that must run next
        self._thread = threading.Thread(target=self._run, name="ctxeval-model", daemon=True)
        self._thread.start()

    def submit(self, job: ScoreJob | CallJob) -> Future:
        """Queue `job`; raises QueueFull when the queue is full."""
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            raise QueueFull from None
        return job.future

    @property
    def waiting(self) -> int:
        return self._queue.qsize()

    def stop(self) -> None:
        self._queue.put(_STOP)
        self._thread.join(timeout=60)

    def _next(self, block: bool):
        if self._held:
            return self._held.pop()
        return self._queue.get() if block else self._queue.get_nowait()

    def _run(self) -> None:
        while True:
            job = self._next(block=True)
            if job is _STOP:
                return
            if isinstance(job, CallJob):
                _settle(job.future, lambda: job.call(self.scorer))
                continue
            group = [job]
            tokens = job.n_tokens
            while tokens < self._batch_tokens:
                try:
                    more = self._next(block=False)
                except queue.Empty:
                    break
                if not isinstance(more, ScoreJob) or tokens + more.n_tokens > self._batch_tokens:
                    self._held.append(more)  # runs next, in arrival order
                    break
                group.append(more)
                tokens += more.n_tokens
            self._score(group)

    def _score(self, group: list[ScoreJob]) -> None:
        top_k = max(j.top_k for j in group)
        items = [(p, g) for j in group for p, g in zip(j.passes, j.greedy_after)]
        try:
            scores = self._score_items(items, top_k)
        except Exception as exc:  # noqa: BLE001 - it reaches the request; in a group, each job is retried alone
            if len(group) == 1:
                group[0].future.set_exception(exc)
            else:
                for j in group:
                    self._score([j])
            return
        start = 0
        for j in group:
            j.future.set_result(scores[start : start + len(j.passes)])
            start += len(j.passes)


    def _score_items(self, items: list[tuple[PassInput, bool]], top_k: int) -> list[tuple[BlockScores, BlockScores | None]]:
        """(scores, distribution after the input) per pass, all in one `score_batch`. The greedy
        row sits inside its pass's one decode of the whole input, so the prompt's numbers are
        `ctxeval score`'s (llama.cpp rounds a row by the length of the batch around it)."""
        scores = self.scorer.score_batch([p for p, _ in items], top_k, (1.0,))
        return [_split_last(s) if greedy else (s, None) for s, (_, greedy) in zip(scores, items)]


def _split_last(s: BlockScores) -> tuple[BlockScores, BlockScores]:
    n = len(s.logprob)
    return s.rows(0, n - 1), s.rows(n - 1, n)


def _settle(future: Future, compute: Callable[[], object]) -> None:
    """Run `compute` and put its result or its exception into `future`."""
    try:
        future.set_result(compute())
    except Exception as exc:  # noqa: BLE001 - the request handler turns it into an HTTP error
        future.set_exception(exc)
