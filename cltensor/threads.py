"""torch's thread-count settings. The OpenCL runtime picks the threads (or compute units) a
kernel runs on, so these record the value for get_num_threads() and change nothing else."""
import os

_counts = {"intra": os.cpu_count() or 1, "inter": os.cpu_count() or 1}


def _set(kind, n, op):
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"{op}: expected a positive int number of threads, got {n!r}")
    _counts[kind] = n


def set_num_threads(n):
    """Accepted for torch scripts; the OpenCL runtime chooses how many threads kernels use."""
    _set("intra", n, "set_num_threads")


def get_num_threads():
    """The value last given to set_num_threads (the CPU count at first)."""
    return _counts["intra"]


def set_num_interop_threads(n):
    """Accepted for torch scripts; cltensor runs ops in the calling thread's queue order."""
    _set("inter", n, "set_num_interop_threads")


def get_num_interop_threads():
    return _counts["inter"]
