"""How many cores this process may run on: the default thread count of every backend."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The cores in this process's affinity mask (`taskset`, a container's cpuset, a test worker
    pinned to its share), not every core of the machine: llama.cpp's threads spin while they wait
    for each other, so more threads than cores makes each decode step several times slower."""
    if hasattr(os, "sched_getaffinity"):  # Linux; macOS and Windows have no affinity mask to read
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1
