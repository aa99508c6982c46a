"""An ordered map over daemon threads, for requests that may be abandoned.

`concurrent.futures.ThreadPoolExecutor` joins its threads when it is shut down and again when
the interpreter exits, so a Ctrl-C while a request waits on a slow server would keep the process
alive until the server answers. An interrupted run has nothing to gain from those answers (its
finished work is already on disk and the same command asks again), so requests run on daemon
threads: the caller stops consuming, the threads are abandoned, and the process exits at once.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")
_DONE = object()


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int, ahead: int, name: str) -> Iterator[R]:
    """fn(item) for every item, in the items' order, computed on `workers` daemon threads that
    take at most `ahead` items beyond the result the caller is waiting for. An exception in fn is
    raised where its result would have been yielded. Closing the iterator (or an exception in the
    caller, e.g. KeyboardInterrupt) stops the threads taking new items; running calls are
    abandoned, never waited for."""
    source = iter(items)
    source_lock = threading.Lock()
    stop = threading.Event()
    results: dict[int, tuple[bool, object]] = {}
    ready = threading.Condition()
    slots = threading.Semaphore(ahead)
    taken = [0]

    def worker() -> None:
        while not stop.is_set():
            slots.acquire()
            with source_lock:
                if stop.is_set():
                    return
                index = taken[0]
                try:
                    item = next(source, _DONE)
                except BaseException as error:  # the items' own generator failed: the caller sees it in order
                    stop_taking(index, (False, error))
                    return
                if item is _DONE:
                    stop_taking(index, (True, _DONE))
                    return
                taken[0] += 1
            try:
                outcome = (True, fn(item))  # type: ignore[arg-type]
            except BaseException as error:  # handed to the caller, in order
                outcome = (False, error)
            with ready:
                results[index] = outcome
                ready.notify_all()

    def stop_taking(end: int, outcome: tuple[bool, object]) -> None:
        with ready:
            results.setdefault(end, outcome)
            ready.notify_all()
        stop.set()

    threads = [threading.Thread(target=worker, name=f"{name}-{k}", daemon=True) for k in range(workers)]
    for thread in threads:
        thread.start()
    try:
        index = 0
        while True:
            with ready:
                while index not in results:
                    ready.wait()
                ok, value = results.pop(index)
            if ok and value is _DONE:
                return
            slots.release()
            if not ok:
                raise value  # type: ignore[misc]
            yield value  # type: ignore[misc]
            index += 1
    finally:
        stop.set()
        for _ in threads:  # wake any thread waiting for a slot, so it sees `stop` and ends
            slots.release()
