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
"""
from .device import all_devices

benchmark = False
conv_workspace_limit = 256 * 2**20
allow_tf32 = False
conv_precision = "accurate"


class _Matmul:
    """torch.backends.cuda.matmul: allow_tf32 is this module's allow_tf32."""

    @property
    def allow_tf32(self):
        return globals()["allow_tf32"]

    @allow_tf32.setter
    def allow_tf32(self, value):
        globals()["allow_tf32"] = bool(value)


class _Cuda:
    """torch.backends.cuda, so that common probes work: is_built() says whether an OpenCL
    GPU is present ("cuda" names one)."""

    matmul = _Matmul()

    @staticmethod
    def is_built():
        return any(d.is_gpu for d in all_devices())


class _Mps:
    """torch.backends.mps: cltensor has no Metal backend."""

    @staticmethod
    def is_available():
        return False

    @staticmethod
    def is_built():
        return False


cuda = _Cuda()
mps = _Mps()
