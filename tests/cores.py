"""The cores a test process decodes on: one of its own.

Each test process (each pytest-xdist worker, or a single run) is held to one core, so llama.cpp's threads never wait
on barriers with another process's threads on a shared core; a test that needs several cores widens its own set
(the ``all_cores`` fixture). Processes a test starts (the engine child, rpc-server) inherit the set.
"""

from __future__ import annotations

import os

# Every core this run may use, read before any pinning.
ALL_CORES: frozenset[int] = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()
WORKER_ENV = "PYTEST_XDIST_WORKER"  # "gw0", "gw1", ... under pytest-xdist


def own_core() -> int | None:
    """This process's core: the worker's number (or, outside xdist, the process id) over the cores in turn."""
    if len(ALL_CORES) < 2:
        return None
    worker = os.environ.get(WORKER_ENV, "")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else os.getpid()
    return sorted(ALL_CORES)[index % len(ALL_CORES)]


def pin_to_own_core() -> None:
    core = own_core()
    if core is not None:
        os.sched_setaffinity(0, {core})


def widen(cores: frozenset[int]) -> None:
    if cores:
        os.sched_setaffinity(0, cores)
