"""How many cores this process may run on, and how many of them are free: the default thread
count of every backend, and llama.cpp's."""

from __future__ import annotations

import os

SAMPLE_SECONDS = 0.1  # how long the cores' load is watched before llama.cpp's threads are counted


def usable_cores() -> int:
    """The cores in this process's affinity mask (`taskset`, a container's cpuset, a test worker
    pinned to its share), not every core of the machine: llama.cpp's threads spin while they wait
    for each other, so more threads than cores makes each decode step several times slower."""
    if hasattr(os, "sched_getaffinity"):  # Linux; macOS and Windows have no affinity mask to read
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def free_cores() -> int:
    """The usable cores less the share of them other processes keep busy now (at least one):
    llama.cpp's threads wait for each other at every step of a decode, spinning, so a thread
    whose core another process holds stalls them all. Beside two busy processes on a 2-core
    Intel Xeon (2026-12-06) the demo's sweep took 102 s at two threads, its passes 0.4–8 s with
    no order in their length, and 63 s at one thread, each pass in step with its tokens. Read
    once, when a model is loaded: load that comes later is not seen."""
    cores = usable_cores()
    if cores == 1 or not hasattr(os, "sched_getaffinity"):
        return cores
    import psutil

    mask = os.sched_getaffinity(0)
    busy = psutil.cpu_percent(interval=SAMPLE_SECONDS, percpu=True)
    held = sum(share for cpu, share in enumerate(busy) if cpu in mask) / 100
    return max(1, round(cores - held))
