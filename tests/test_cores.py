"""The backends' thread counts: the cores this process may use, less those other processes hold."""

import pytest


@pytest.mark.parametrize(("busy", "free"), [([2.0, 3.0], 2), ([100.0, 0.0], 1), ([100.0, 100.0], 1), ([60.0, 60.0], 1), ([30.0, 20.0], 2)])
def test_llama_cpp_threads_are_the_cores_other_processes_leave_free(monkeypatch, busy, free):
    """Read over the process's own cores: a core another process holds would stall every step of
    llama.cpp's decode (its threads wait for each other); at least one thread."""
    import psutil

    from ctxeval.backends import cores

    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(psutil, "cpu_percent", lambda interval, percpu: busy + [100.0, 100.0])  # cores 2, 3: not this process's
    assert cores.free_cores() == free
