"""pipeline/executors/threads.ordered_map: order, errors, how far ahead it reads, and that a
caller who stops waits for no running call."""

from __future__ import annotations

import threading
import time

import pytest

from ctxeval.pipeline.executors.threads import ordered_map


def test_results_come_in_the_items_order_whatever_order_they_finish_in():
    def slow_first(i: int) -> int:
        time.sleep(0.05 if i % 3 == 0 else 0)
        return i * i

    assert list(ordered_map(slow_first, range(20), workers=4, ahead=8, name="t")) == [i * i for i in range(20)]


def test_an_error_is_raised_where_its_result_would_be():
    def fail_at_5(i: int) -> int:
        if i == 5:
            raise ValueError("five")
        return i

    got = []
    with pytest.raises(ValueError, match="five"):
        for value in ordered_map(fail_at_5, range(10), workers=3, ahead=6, name="t"):
            got.append(value)
    assert got == [0, 1, 2, 3, 4]


def test_it_takes_at_most_ahead_items_beyond_the_one_awaited():
    taken = []

    def record(i: int) -> int:
        taken.append(i)
        return i

    results = ordered_map(record, range(100), workers=2, ahead=5, name="t")
    assert next(results) == 0
    time.sleep(0.2)
    assert len(taken) <= 6  # the awaited item plus `ahead`
    results.close()


def test_closing_abandons_a_running_call_and_its_threads_are_daemons():
    release = threading.Event()
    started = threading.Event()

    def hold(i: int) -> int:
        if i == 1:
            started.set()
            release.wait(60)
        return i

    results = ordered_map(hold, range(3), workers=2, ahead=2, name="held")
    assert next(results) == 0
    assert started.wait(10)
    begun = time.monotonic()
    results.close()  # returns at once although item 1 is still held
    assert time.monotonic() - begun < 5
    held = [t for t in threading.enumerate() if t.name.startswith("held-") and t.is_alive()]
    assert held and all(t.daemon for t in held)
    release.set()


def test_an_empty_input_yields_nothing():
    assert list(ordered_map(lambda i: i, [], workers=3, ahead=3, name="t")) == []


def test_a_failing_source_is_raised_in_order_and_does_not_hang():
    def items():
        yield from range(3)
        raise RuntimeError("planning failed")

    got = []
    with pytest.raises(RuntimeError, match="planning failed"):
        for value in ordered_map(lambda i: i, items(), workers=2, ahead=4, name="t"):
            got.append(value)
    assert got == [0, 1, 2]
