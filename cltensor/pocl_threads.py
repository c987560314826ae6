"""PoCL's worker threads pinned one to a CPU (POCL_AFFINITY=1) where that cannot misplace them.

NOTE: unpinned, PoCL's workers woken together after the queue went idle often ran the next
kernel on one core at half speed (docs/performance.md, "PoCL's workers pinned"). PoCL pins
worker i to CPU i whatever CPUs the process may use, so pinning is left off where the process
may not use every CPU or the user chose a thread count (ranks sharing a host would each pin
from CPU 0).
"""
import contextlib
import os


def pins_by_default(environ, allowed, cpu_count):
    """Whether cltensor sets POCL_AFFINITY=1: the user set neither POCL_AFFINITY nor
    POCL_MAX_PTHREAD_COUNT, and the process may run on CPUs 0 .. cpu_count - 1 (allowed: its
    affinity mask, None where the platform has none)."""
    if "POCL_AFFINITY" in environ or "POCL_MAX_PTHREAD_COUNT" in environ:
        return False
    return allowed is not None and bool(cpu_count) and set(allowed) == set(range(cpu_count))


@contextlib.contextmanager
def pinned_start(environ=os.environ):
    """Around the opening of the OpenCL platforms (PoCL reads the variable as it starts its
    workers): POCL_AFFINITY=1 where pins_by_default says so, removed afterwards, so that
    processes started later (with CPU masks of their own) do not inherit it."""
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):  # no affinity masks here (macOS, Windows)
        allowed = None
    pin = pins_by_default(environ, allowed, os.cpu_count())
    if pin:
        environ["POCL_AFFINITY"] = "1"
    try:
        yield
    finally:
        if pin:
            environ.pop("POCL_AFFINITY", None)
