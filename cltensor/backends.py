"""Backend flags, after torch.backends: read at call time, so they can be set at any moment.

    benchmark            like torch.backends.cudnn.benchmark: conv2d's algo="auto" times every
                         eligible algorithm once per (device, problem) and keeps the fastest, in
                         memory and in a per-user file keyed by device and driver
                         (cltensor/conv/dispatch.py); GPU GEMMs (the xgemm family) likewise
                         time their near-best parameter sets and K splits once per shape and
                         keep the fastest in memory (cltensor/ops/gemm.py)
    conv_workspace_limit bytes of scratch memory an algorithm may use at once (im2col's column
                         buffer, Winograd's transformed tiles); larger problems run in chunks
    allow_tf32           let float32 products and convolutions multiply in TF32 (10-bit
                         mantissas, fp32 accumulation; about 1e-3 relative error): the NVIDIA
                         plug-in (cltensor/plugins/nvidia.py) uses tensor cores only when this is
                         True. Off by default, as torch.backends.cuda.matmul.allow_tf32: IEEE
                         fp32 everywhere
    conv_precision       "accurate" (default) or "fast": what conv2d's algo="auto" may pick on
                         CPUs. "accurate" keeps every pass's float32 error within twice
                         PyTorch CPU's where an algorithm can (an error model per algorithm,
                         cltensor/conv/precision.py): Winograd F(4x4) gives way to F(2x2), a GEMM
                         path or the most accurate one; "fast" takes the fastest measured
                         algorithm, F(4x4) included (up to 17x PyTorch's error).
                         GPUs keep their speed rules in both modes (docs/conv_precision.md)
    cudnn                torch.backends.cudnn for torch scripts: its benchmark and allow_tf32 are
                         the two above; deterministic and enabled are kept but change nothing
                         (every kernel here is deterministic: no atomics)
    mps                  torch.backends.mps: is_available() is False (OpenCL devices are "cuda")
"""
import sys
import types

benchmark = False
conv_workspace_limit = 256 * 2**20
allow_tf32 = False
conv_precision = "accurate"


_this = sys.modules[__name__]


class _Cudnn(types.ModuleType):
    """torch.backends.cudnn's flags, importable as cltensor.backends.cudnn."""

    deterministic = False
    enabled = True
    benchmark = property(lambda self: _this.benchmark,
                         lambda self, value: setattr(_this, "benchmark", bool(value)))
    allow_tf32 = property(lambda self: _this.allow_tf32,
                          lambda self, value: setattr(_this, "allow_tf32", bool(value)))

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


cudnn = sys.modules[__name__ + ".cudnn"] = _Cudnn(__name__ + ".cudnn")
mps = sys.modules[__name__ + ".mps"] = _Mps(__name__ + ".mps")
