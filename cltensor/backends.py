"""Backend flags, after torch.backends: read at call time, so they can be set at any moment.

    benchmark            like torch.backends.cudnn.benchmark: conv2d's algo="auto" times every
                         eligible algorithm once per (device, problem) and keeps the fastest, in
                         memory and in a per-user file keyed by device and driver
                         (cltensor/conv/dispatch.py); GPU GEMMs (the xgemm family) likewise
                         time their near-best parameter sets and K splits once per shape and
                         keep the fastest in memory (cltensor/ops/gemm/)
    conv_workspace_limit bytes of scratch memory an algorithm may use at once (im2col's column
                         buffer, Winograd's transformed tiles); larger problems run in chunks
    allow_tf32           let float32 products and convolutions multiply in TF32 (10-bit
                         mantissas, fp32 accumulation; about 1e-3 relative error): the NVIDIA
                         plug-in (cltensor/plugins/nvidia.py) uses tensor cores only when this is
                         True. Off by default, as torch.backends.cuda.matmul.allow_tf32: IEEE
                         fp32 everywhere
    conv_precision       "accurate" (default) or "fast": what conv2d's algo="auto" may pick.
                         "accurate" keeps every pass's float32 error within twice PyTorch's
                         where an algorithm can (an error model per algorithm,
                         cltensor/conv/precision.py): Winograd F(4x4) gives way to F(2x2), a GEMM
                         path or the most accurate one; "fast" takes the fastest measured
                         algorithm, F(4x4) included (up to 24x PyTorch's error)
    cudnn                torch.backends.cudnn for torch scripts: its benchmark and allow_tf32 are
                         the two above; deterministic and enabled are kept but change nothing
                         (every kernel here is deterministic: no atomics)
    mps                  torch.backends.mps: is_available() is False (Apple GPUs are OpenCL
                         devices here)
    cuda.matmul          torch.backends.cuda.matmul: its allow_tf32 is allow_tf32 above

torch's root-level switches over the same flags: set_float32_matmul_precision ("highest" turns
allow_tf32 off, "high" and "medium" on) and use_deterministic_algorithms (every kernel already
is deterministic).
"""
import os
import sys
import types

from .device import all_devices

benchmark = False
conv_workspace_limit = 256 * 2**20
allow_tf32 = False
conv_precision = "accurate"


_this = sys.modules[__name__]


def _flag(name):
    """A property that reads and sets this module's flag `name` (as a bool)."""
    return property(lambda self: getattr(_this, name),
                    lambda self, value: setattr(_this, name, bool(value)))


class _Cudnn(types.ModuleType):
    """torch.backends.cudnn's flags, importable as cltensor.backends.cudnn."""

    deterministic = False
    enabled = True
    benchmark, allow_tf32 = _flag("benchmark"), _flag("allow_tf32")

    @staticmethod
    def is_available():
        """True: cltensor's convolutions stand in for cuDNN's on every device."""
        return True

    @staticmethod
    def version():
        """None: no cuDNN library is loaded."""
        return None


class _Mps(types.ModuleType):
    """torch.backends.mps: never available (Apple GPUs are reached as OpenCL devices)."""

    @staticmethod
    def is_available():
        return False

    @staticmethod
    def is_built():
        return False


class _Matmul:
    """torch.backends.cuda.matmul: allow_tf32 is this module's allow_tf32."""

    allow_tf32 = _flag("allow_tf32")


class _Cuda(types.ModuleType):
    """torch.backends.cuda: its matmul.allow_tf32 switch, and is_built() (whether an OpenCL
    GPU is present: "cuda" names one) so that common probes work."""

    matmul = _Matmul()

    @staticmethod
    def is_built():
        return any(d.is_gpu for d in all_devices())


_PRECISIONS = ("highest", "high", "medium")
_deterministic = [False, False]  # use_deterministic_algorithms' mode and warn_only


def set_float32_matmul_precision(precision):
    """torch.set_float32_matmul_precision: "highest" keeps IEEE float32 products, "high" and
    "medium" allow TF32 (allow_tf32 = True; only the NVIDIA plug-in uses it)."""
    if precision not in _PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: expected one of {_PRECISIONS}, got "
                         f"{precision!r}")
    _this.allow_tf32 = precision != "highest"


def get_float32_matmul_precision():
    """"high" when allow_tf32 is on, else "highest" (cltensor has no "medium" of its own)."""
    return "high" if _this.allow_tf32 else "highest"


def use_deterministic_algorithms(mode, *, warn_only=False):
    """torch.use_deterministic_algorithms: recorded; every cltensor kernel is deterministic
    (no atomic additions), so no op needs refusing or a warning."""
    if not isinstance(mode, bool) or not isinstance(warn_only, bool):
        raise TypeError("use_deterministic_algorithms: mode and warn_only must be bools")
    _deterministic[:] = [mode, warn_only]


_threads = {}  # "intra" / "interop" -> what set_num_threads / set_num_interop_threads recorded


def _thread_count(n, op):
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"{op}: expected a positive int, got {n!r}")
    return n


def set_num_threads(n):
    """torch.set_num_threads: recorded for get_num_threads only. The OpenCL runtime runs the
    kernels with threads of its own choosing (PoCL: POCL_MAX_PTHREAD_COUNT before the first
    device is opened)."""
    _threads["intra"] = _thread_count(n, "set_num_threads")


def get_num_threads():
    """What set_num_threads recorded, else the host's CPU count."""
    return _threads.get("intra", os.cpu_count() or 1)


def set_num_interop_threads(n):
    _threads["interop"] = _thread_count(n, "set_num_interop_threads")


def get_num_interop_threads():
    return _threads.get("interop", os.cpu_count() or 1)


def are_deterministic_algorithms_enabled():
    return _deterministic[0]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic[1]


cudnn = sys.modules[__name__ + ".cudnn"] = _Cudnn(__name__ + ".cudnn")
cuda = sys.modules[__name__ + ".cuda"] = _Cuda(__name__ + ".cuda")
mps = sys.modules[__name__ + ".mps"] = _Mps(__name__ + ".mps")
