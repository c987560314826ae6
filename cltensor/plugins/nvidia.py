"""The NVIDIA tensor-core plug-in: float32 GEMM in TF32 on tensor cores, through inline PTX
mma.sync from OpenCL (cl_kernels/nvidia_mma.cl) and, on Hopper (compute capability 9.0), wgmma
(cl_kernels/nvidia_wgmma.cl, whose PTX is edited and rebuilt for sm_90a: to_sm90a), and
implicit-GEMM convolution with its multiply on tensor cores (conv algorithm "tf32_implicit":
cl_kernels/xgemm_mma.cl), used for float32 tensors only while cltensor.backends.allow_tf32 is
True (or the caller allows TF32 for one product: gemm_into's tf32), for float16 and bfloat16
ones always (their values are exact in TF32).

It serves the NVIDIA devices whose OpenCL compiler builds its probe (mma.sync with tf32,
cvt.rna.tf32 and cp.async: Ampere and later). There it takes every float32 product with K > 0
while allow_tf32 is set, and declines the others (allow_tf32 off, float64, integers, K == 0),
which the portable engine then runs exactly as without the plug-in.

Operands are read in place when one of their dims is contiguous and the other stride, the
offset and the batch strides are multiples of 4 elements (16-byte copies); others are copied
first into a dense K-contiguous matrix (gemm_pack.cl's pad_copy). The wgmma kernel reads
both operands from a copy that gemm_pack.cl's pack_tf32_slices makes from any strides, rounded
to TF32 and laid out as its local memory holds them (a workspace of (M + N) * K floats, padded
to its tiles), so that one bulk copy moves each slice. Every product picks the parameter set of
CONFIGS and the split of K with the least estimated time (plan()).

Products of float16 or bfloat16 operands (both of one type; C and the biases stored in 16 bits or
float32) run on Hopper's wgmma in that type with float32 sums, whatever allow_tf32 says: the
products of 16-bit values are exact, so the result is what IEEE float32 sums of them give, as
cuBLAS's. pack_half_slices copies both operands into the wgmma kernel's layout (pairs of
K-consecutive values per 32-bit word), and HALF_CONFIGS rank as CONFIGS do, K counted in words.
Elsewhere, and for products of few tiles, they run on mma.sync m16n8k16 (nvidia_mma.cl with
HALF), both operands read K-contiguous in 32-bit words, copied first where they are not.
"""
import re
import warnings
from typing import NamedTuple

import numpy as np
import pyopencl as cl

from .. import backends, caches
from .. import dtypes as dt
from ..conv import dispatch, gemm1x1, im2col, implicit
from ..conv.implicit_gpu import MmaEngine
from ..ops import elementwise as ew
from ..ops import gemm as gm
from ..program import KernelBuildError, launch, memo_with, round_up
from ..tensor import ClTensor
from . import Plugin, PluginWarning

KERNEL_FILE = "nvidia_mma.cl"
KERNEL_KEYS = ("WM", "WN", "WARPS_M", "WARPS_N", "BK", "STAGES", "ASYNC", "ROUND", "GROUP_M",
               "PREFETCH")
# Hopper's warpgroup kernel (sets with "WGS_M"): its PTX is edited and rebuilt for sm_90a.
WGMMA_FILE = "nvidia_wgmma.cl"
WGMMA_KEYS = ("BN", "WGS_M", "BK", "STAGES", "WG_WAIT", "PRODUCER", "GROUP_M")
SM90A_MARK = b"//SM90A "  # nvidia_wgmma.cl's marker before each sm_90a instruction
# The tuned parameter sets, largest tile first (see nvidia_mma.cl's and, for the sets with
# WGS_M, nvidia_wgmma.cl's header for the keys, and MIN_GROUPS, sm90a_rebuild's; the wgmma
# sets serve compute capability 9.0 alone). rate: TFLOP/s of the set's GEMM kernel alone at
# 4096^3 (mean of the nn and nt layouts); groups_per_cu: work-groups resident per compute
# unit (ptxas: 164, 255 and 125 registers, 41, 32 and 32 KiB local memory). Both feed
# plan(). Measured on the H200 (TUNED).
CONFIGS = (
    {"BN": 256, "WGS_M": 1, "BK": 8, "STAGES": 4, "WG_WAIT": 0, "PRODUCER": 1, "GROUP_M": 8,
     "rate": 264.0, "groups_per_cu": 2},
    {"WM": 64, "WN": 64, "WARPS_M": 2, "WARPS_N": 2, "BK": 16, "STAGES": 2, "ASYNC": 1,
     "ROUND": 3, "GROUP_M": 8, "PREFETCH": 0, "rate": 112.0, "groups_per_cu": 2},
    {"WM": 32, "WN": 32, "WARPS_M": 2, "WARPS_N": 2, "BK": 16, "STAGES": 4, "ASYNC": 1,
     "ROUND": 3, "GROUP_M": 8, "PREFETCH": 0, "rate": 70.0, "groups_per_cu": 4},
)
# Parameter sets of the implicit-GEMM convolution kernels on tensor cores (conv_xgemm.cl built
# with xgemm_mma.cl): gemm_xgemm.cl's engine keys (its local-memory rows padded to 8 mod 32
# elements: conflict-free fragment reads) and MMA_WARPS_N; rate: relative speed per kernel,
# which with the padded tile work ranks the sets (implicit_gpu._candidates). Rates fitted to
# the H200's kernel times on AlexNet's and GoogLeNet's layers at batch 128 (2026-12-01): the
# 64 x 128 tile won most forward passes, 128 x 128 the weight gradients of many taps, 32 x 128
# the layers of at most 48 channels.
_CONV_BASE = {"KWG": 16, "VWM": 4, "VWN": 4, "STRM": 1, "STRN": 1, "PADA": 8, "PADB": 8,
              "NBUF": 2}
CONV_CONFIGS = (
    dict(_CONV_BASE, MWG=64, NWG=128, MDIMC=8, NDIMC=16, MMA_WARPS_N=2,
         rate={"cx_conv": 1.0, "cx_wgrad": 0.9}),
    dict(_CONV_BASE, MWG=128, NWG=128, MDIMC=16, NDIMC=16, MMA_WARPS_N=4,
         rate={"cx_conv": 0.85, "cx_wgrad": 1.0}),
    dict(_CONV_BASE, MWG=32, NWG=128, MDIMC=8, NDIMC=16, MMA_WARPS_N=4,
         rate={"cx_conv": 0.8, "cx_wgrad": 0.7}),
)
# Where and when CONFIGS were measured, with the references measured in the same run
# (benchmarks/gemm.py --tf32 --quick --sizes 4096; the mma.sync sets: 111.1 TFLOP/s on
# 2026-11-30). NOTE: PREFETCH 1 passes the emulated tests but was not measured on hardware yet.
TUNED = {"device": "NVIDIA H200, driver 580.159.04", "date": "2026-12-04",
         "tflops_4096": 218.3, "cublas_tf32_tflops_4096": 380.4,
         "cublas_fp32_tflops_4096": 50.3, "mma_sync_ceiling_tflops": 319.9,
         "wgmma_ceiling_tflops": 481.6, "rel_diff_4096_vs_cublas_tf32": 7.1e-6}
# The 16-bit products' wgmma sets (nvidia_wgmma.cl with HALF; BK counts 32-bit words of two
# values of K), measured on the H100 (2026-12-06, a sweep of tile width, depth, stages, wait
# depth, producer warp and MIN_GROUPS at 8192^3 and 4096^3): 64 x 192 tiles, three work-groups
# a compute unit; 64 x 160 with two slices of k16 a stage (float16's best); 64 x 128 for
# products of few tiles. rate: TFLOP/s of the GEMM kernel alone at 4096^3 per operand type.
HALF_CONFIGS = (
    {"BN": 192, "WGS_M": 1, "BK": 8, "STAGES": 5, "WG_WAIT": 1, "PRODUCER": 1, "GROUP_M": 8,
     "MIN_GROUPS": 3, "rate": {"bfloat16": 392.1, "float16": 323.8}, "groups_per_cu": 3},
    {"BN": 160, "WGS_M": 1, "BK": 16, "STAGES": 3, "WG_WAIT": 0, "PRODUCER": 1, "GROUP_M": 8,
     "MIN_GROUPS": 2, "rate": {"bfloat16": 369.3, "float16": 341.4}, "groups_per_cu": 2},
    {"BN": 128, "WGS_M": 1, "BK": 16, "STAGES": 3, "WG_WAIT": 1, "PRODUCER": 1, "GROUP_M": 8,
     "MIN_GROUPS": 3, "rate": {"bfloat16": 348.9, "float16": 338.2}, "groups_per_cu": 3},
)
HALF_WGMMA = {dt.float16: 1, dt.bfloat16: 2}  # nvidia_wgmma.cl's HALF of each operand type
HALF_NAMES = {0: "float32", 1: "float16", 2: "bfloat16"}  # the keys of a set's rates
MAX_SPLITS = 16
MIN_SLICES_PER_SPLIT = 4
LAUNCH_COST_S = 8e-6         # one extra launch (a split's xgemm_reduce, a pack_tf32_slices)
BANDWIDTH_BYTES_S = 3.0e12   # of those launches' copies (partial sums, packed operands)
ALIGN = 4                    # elements of one 16-byte copy
HALF_ALIGN = 8               # 16-bit elements of one 16-byte copy
LOCAL_RESERVED = 16          # bytes of local memory NVIDIA's OpenCL adds to every kernel's
PACK_LOCAL = 256             # pack_tf32_slices' work-group


class MmaOperand(NamedTuple):
    """An operand as nvmma_gemm reads it: tensor, batch strides, leading dim and layout flag
    (1: K contiguous), and the offset (in the kernel's units: 32-bit words; None: the
    tensor's, for float32)."""
    t: object
    bstrides: list
    ld: int
    kc: int
    offset: object = None


class NvidiaTensorCores(Plugin):
    """Tensor-core GEMM on NVIDIA GPUs (sm_80+): float32 products in TF32 while
    cltensor.backends.allow_tf32, products of two float16 or two bfloat16 operands always.

    Example:
        >>> cltensor.backends.allow_tf32 = True
        >>> c = cltensor.matmul(a, b)   # float32 on an H200: wgmma, about 1e-3 rel. error
    """
    name = "nvidia_tf32"
    description = ("tensor-core GEMM (inline PTX mma.sync; wgmma on Hopper): float32 products in "
                   "TF32 while cltensor.backends.allow_tf32 is True, float16 and bfloat16 "
                   "products always")
    vendors = ("nvidia",)
    probe_file = KERNEL_FILE
    probe_defines = {"NVMMA_PROBE": None}
    emulate = False   # True: plain OpenCL instead of PTX (the tests, on any device)
    configs = CONFIGS
    conv_configs = CONV_CONFIGS

    def __init__(self):
        self._broken = set()  # (device, parameter set) that failed to build or fit
        self._plans = {}  # (device, problem, sets) -> (sets, [(parameter set, K splits)]): memo_with
        self._kernels = {}  # (device, its limits, id of a set, layouts) -> (the set, kernel)
        self._half_sets = None  # (self.configs, HALF_CONFIGS, the sets of 16-bit products)

    reads_16bit = True  # the GEMM engine offers products of 16-bit tensors too

    def gemm(self, p, alpha, beta, has_ci, row_bias, col_bias, relu):
        if p.k == 0:
            return False
        half = half_type(p)
        if half:
            return self._gemm_half(p, half, alpha, beta, has_ci, row_bias, col_bias, relu)
        if not (backends.allow_tf32 or p.tf32) or p.dtype != np.float32 or \
                not gm.reads_as_computed(p):
            return False
        found = (_in_place(p, p.a, p.m, p.a.rs, p.a.cs), _in_place(p, p.b, p.n, p.b.cs, p.b.rs))
        for q, splits in self.plans(p):
            kernel = self._kernel(p, q, *[1 if x is None else x.kc for x in found])
            if kernel is not None:  # NOTE: a copy (None) is K-contiguous
                epi = gm.epilogue_args(p, alpha, beta, has_ci, row_bias, col_bias, relu)
                if is_wgmma(q):
                    _run_wgmma(p, q, kernel, splits, epi)
                else:
                    _run(p, q, kernel, splits, epi, *found)
                return True
        return False

    def _gemm_half(self, p, half, alpha, beta, has_ci, row_bias, col_bias, relu):
        """A product of 16-bit operands: on wgmma (Hopper, HALF_CONFIGS), else on mma.sync
        m16n8k16 (the mma.sync sets of self.configs)."""
        for q, splits in self.plans(words(p), self.half_configs()):
            kernel = self._kernel(p, q, 1, 1, half)
            if kernel is not None:
                epi = gm.epilogue_args(p, alpha, beta, has_ci, row_bias, col_bias, relu)
                if is_wgmma(q):
                    _run_wgmma(p, q, kernel, splits, epi, half)
                else:
                    _run_half(p, q, kernel, splits, epi)
                return True
        return False

    def conv_algorithms(self):
        return {"tf32_gemm": Tf32Convolution(self), "tf32_implicit": Tf32Implicit(self)}

    def conv_engine(self):
        """The tensor-core multiply of the implicit-GEMM convolution kernels."""
        return MmaEngine(self.conv_configs, self.emulate)

    def half_configs(self):
        """The sets of 16-bit products: HALF_CONFIGS and the mma.sync sets of self.configs
        (one tuple while both stay the same objects: the plans' memo keys on its id)."""
        made = self._half_sets
        if made is None or made[0] is not self.configs or made[1] is not HALF_CONFIGS:
            sets = HALF_CONFIGS + tuple(q for q in self.configs if not is_wgmma(q))
            made = self._half_sets = (self.configs, HALF_CONFIGS, sets)
        return made[2]

    def plans(self, p, configs=None):
        """(parameter set, K splits) for problem p, the fastest estimate first, among `configs`
        (default: self.configs); memoized (the estimates cost more host time than a launch)."""
        configs = self.configs if configs is None else configs
        # NOTE: a set found broken changes the key
        key = (p.device, p.device.local_mem, p.m, p.n, p.k, p.nbatch, half_type(p),
               len(self._broken))
        return memo_with(self._plans, key, configs, lambda: self._rank(p, configs))

    def _rank(self, p, configs):
        hopper = not self.emulate and is_sm90(p.device)
        usable = [q for q in configs if (p.device, _key(q)) not in self._broken and
                  local_bytes(q) + LOCAL_RESERVED <= p.device.local_mem and
                  (hopper or not is_wgmma(q))]
        units = p.device.cl_device.max_compute_units
        return sorted(((q, plan(p, q, units)) for q in usable),
                      key=lambda e: estimate(p, e[0], e[1], units))

    def _kernel(self, p, q, a_kc, b_kc, half=0):
        """The built kernel of set q for these layouts (and, for 16-bit operands, their wgmma
        type and C's and the biases' storage), or None when it fails to build or fit (memoized
        per device, its limits and the emulation flag: every product asks)."""
        key = (p.device, p.device.max_work_group, p.device.local_mem, id(q), a_kc, b_kc,
               self.emulate, half, p.co.t.dtype, p.tr)
        hit = self._kernels.get(key)
        if hit is not None and hit[0] is q:
            return hit[1]
        # NOTE: 16-bit values need no rounding (ROUND 0) on mma.sync
        kernel = self._build(p, q, a_kc, b_kc,
                             dict(gm.storage_defines(p), HALF=half,
                                  **({} if is_wgmma(q) else {"ROUND": 0})) if half else {})
        if kernel is not None:
            self._kernels[key] = (q, kernel)  # NOTE: q in the value keeps its id from passing on
        return kernel

    def _build(self, p, q, a_kc, b_kc, half_defines):
        key = (p.device, _key(q))
        try:
            if is_wgmma(q):
                defines = dict(_defines(q), **half_defines)
                kernel = gm.get_kernel(p.device, WGMMA_FILE, "nvwg_gemm", defines,
                                       sm90a_rebuild(q.get("MIN_GROUPS", 0)))
            else:
                defines = dict(_defines(q), A_KC=a_kc, B_KC=b_kc, EMULATE=int(self.emulate),
                               **half_defines)
                kernel = gm.get_kernel(p.device, KERNEL_FILE, "nvmma_gemm", defines)
        except KernelBuildError as e:
            self._broken.add(key)
            warnings.warn(f"cltensor plug-in {self.name!r}: {defines} does not build on "
                          f"{p.device}; that parameter set is skipped:\n{e.log[:2000]}",
                          PluginWarning, stacklevel=4)
            return None
        if not gm.kernel_fits(p.device, kernel, tile_shape(q)[2]):
            self._broken.add(key)
            warnings.warn(f"cltensor plug-in {self.name!r}: {defines} exceeds {p.device}'s "
                          f"registers or local memory; that parameter set is skipped",
                          PluginWarning, stacklevel=4)
            return None
        return kernel


class Tf32Convolution:
    """Conv algorithm "tf32_gemm": convolution on tensor cores while allow_tf32 is True. It runs
    the portable GEMM-based algorithms (gemm_1x1 for 1x1 layers, else im2col), whose products
    reach the plug-in's TF32 GEMM through gemm_into."""
    PASSES_NOT_SUPPORTED = ()

    def __init__(self, plugin):
        self.plugin = plugin

    def serves(self, device):
        return self.plugin.serves(device)

    # float16/bfloat16 tensors are read in place: their products are exact in TF32, so these
    # run them whatever allow_tf32 says (sums in float32, each result rounded once)
    READS_16BIT = True

    def eligible(self, p):
        # NOTE: checked at call time, so a choice remembered with allow_tf32 on is not reused
        # once it is off
        if p.dtype in dt.HALF_TYPES:
            return True, ""
        if not backends.allow_tf32:
            return False, "cltensor.backends.allow_tf32 is False"
        if p.dtype != np.float32:
            return False, f"TF32 multiplies float32 or 16-bit floats only, not {p.dtype}"
        return True, ""

    def prefer(self, p, device, pass_):
        # NOTE: measured on the H200 (each pass of every conv layer of the four networks, alone):
        # im2col through the TF32 GEMM beat the best IEEE fp32 algorithm (Winograd, implicit
        # GEMM) in 12 of 198 passes, by at most 10%, and lost up to 3x elsewhere; auto keeps the
        # portable rules, benchmark mode still times this algorithm, and algo= picks it
        return False

    def workspace_bytes(self, p, backward=False, device=None):
        return _base(p).workspace_bytes(p, backward, device)

    FUSES_RELU = True  # as the portable algorithms it runs (conv/function.py)

    def forward(self, x, w, bias, p, out, relu=False):
        return _base(p).forward(x, w, bias, p, out, relu=relu)

    def backward(self, x, w, gout, p, need_x, need_w):
        return _base(p).backward(x, w, gout, p, need_x, need_w)


class Tf32Implicit(Tf32Convolution):
    """Conv algorithm "tf32_implicit": implicit-GEMM convolution (cltensor/conv/implicit_gpu.py,
    the kernels of conv_xgemm.cl: gathers, no workspace) with its multiply on tensor cores
    (xgemm_mma.cl), every pass, while allow_tf32 is True."""

    def prefer(self, p, device, pass_):
        # NOTE: measured on the H200 (every pass of AlexNet's and 25 of GoogLeNet's layers at
        # batch 128, kernel times): where the portable rules pick implicit GEMM this beat it
        # on all but 3 passes (1.1-2x: GoogLeNet 4a/1x1 forward 0.21 -> 0.11 ms, AlexNet conv1
        # weight gradient 1.14 -> 0.58) and lost by at most 10% (4a/5x5r's input gradient);
        # Winograd's choices won everywhere, and strided input gradients ran 30-60x slower
        return dispatch.portable_rule(p, device, pass_) == "implicit_gemm"

    def workspace_bytes(self, p, backward=False, device=None):
        return implicit.workspace_bytes(p, backward, device)

    def forward(self, x, w, bias, p, out, relu=False):
        return implicit.forward(x, w, bias, p, out, self.plugin.conv_engine(), relu)

    def backward(self, x, w, gout, p, need_x, need_w, relu_y=None):
        return self.backward_with_bias(x, w, gout, p, need_x, need_w, False, relu_y)[:2]

    def takes_relu_mask(self, device):
        return True

    # its passes are implicit.py's launches, chosen from the engine's parameter sets: a
    # recorded pass is replayed (conv/plans.py) while those sets are the same object
    REPLAYABLE = True

    def replay_anchor(self):
        return self.plugin.conv_configs

    def backward_with_bias(self, x, w, gout, p, need_x, need_w, with_bias=True, relu_y=None):
        return implicit.backward_with_bias(x, w, gout, p, need_x, need_w,
                                           self.plugin.conv_engine(), with_bias, relu_y)


def _base(p):
    return gemm1x1 if gemm1x1.eligible(p)[0] else im2col


# ---- parameter sets and the plan --------------------------------------------------------------

def is_wgmma(q):
    return "WGS_M" in q


def half_type(p):
    """nvidia_wgmma.cl's HALF for a product of two float16 or two bfloat16 operands summed in
    float32, else 0."""
    dtype = p.a.t.dtype
    if p.dtype != np.float32 or p.b.t.dtype != dtype:
        return 0
    return HALF_WGMMA.get(dtype, 0)


def words(p):
    """Problem p with K counted in 32-bit words of two 16-bit values (as the wgmma kernel and
    the plan see a 16-bit product)."""
    return p._replace(k=-(-p.k // 2))


def is_sm90(device):
    """True on compute capability 9.0 (Hopper), the only one with wgmma (sm_90a)."""
    try:
        cc = (device.cl_device.compute_capability_major_nv,
              device.cl_device.compute_capability_minor_nv)
    except (cl.Error, AttributeError):  # not NVIDIA's driver
        return False
    return cc == (9, 0)


def to_sm90a(ptx):
    """nvidia_wgmma.cl's PTX as NVIDIA's driver returns it (for .target sm_90, the sm_90a
    instructions behind SM90A_MARK comments), made the PTX of sm_90a."""
    text = ptx.rstrip(b"\0").replace(SM90A_MARK, b"")
    return re.sub(rb"^(\.target\s+)sm_90\b", rb"\1sm_90a", text, count=1, flags=re.M)


@caches.lru_cache(maxsize=None)
def sm90a_rebuild(min_groups):
    """to_sm90a, and with min_groups > 0 a `.minnctapersm` on the kernel's entry: ptxas then
    caps its registers so that min_groups work-groups fit a compute unit (one function per
    value: the program cache keys on it)."""
    if not min_groups:
        return to_sm90a
    line = b".minnctapersm %d\n" % min_groups

    def rebuild(ptx):
        text = to_sm90a(ptx)
        at = re.search(rb"^\.reqntid[^\n]*\n", text, flags=re.M)
        assert at is not None, "nvidia_wgmma.cl: no .reqntid (reqd_work_group_size) in its PTX"
        return text[:at.end()] + line + text[at.end():]
    return rebuild


def _defines(q):
    return {k: q[k] for k in (WGMMA_KEYS if is_wgmma(q) else KERNEL_KEYS)}


def _key(q):
    extra = (("MIN_GROUPS", q.get("MIN_GROUPS", 0)),) if is_wgmma(q) else ()
    return tuple(sorted(_defines(q).items())) + extra


def tile_shape(q):
    """(BM, BN, work-items) of a parameter set."""
    if is_wgmma(q):
        return 64 * q["WGS_M"], q["BN"], 128 * q["WGS_M"] + 32 * q["PRODUCER"]
    return q["WARPS_M"] * q["WM"], q["WARPS_N"] * q["WN"], 32 * q["WARPS_M"] * q["WARPS_N"]


def local_bytes(q):
    bm, bn, _ = tile_shape(q)
    if is_wgmma(q):  # and two mbarriers per stage
        return q["STAGES"] * (q["BK"] * (bm + bn) * 4 + 16)
    return (q["STAGES"] if q["ASYNC"] else 2) * q["BK"] * (bm + bn) * 4


def config_valid(q):
    """True when a parameter set is self-consistent (see nvidia_mma.cl's and nvidia_wgmma.cl's
    headers)."""
    bm, bn, nt = tile_shape(q)
    if is_wgmma(q):
        return (q["BN"] in (64, 128, 160, 192, 224, 240, 256) and q["WGS_M"] in (1, 2) and
                q["BK"] in (8, 16, 32) and q["WG_WAIT"] in (0, 1) and
                q["STAGES"] > q["WG_WAIT"] and q["PRODUCER"] in (0, 1) and q["GROUP_M"] >= 1
                and q.get("MIN_GROUPS", 0) in range(5))
    return (q["WM"] % 16 == 0 and q["WN"] % 8 == 0 and q["BK"] in (8, 16, 32) and
            bm % 32 == 0 and bn % 32 == 0 and bm * q["BK"] // 4 % nt == 0 and
            bn * q["BK"] // 4 % nt == 0 and (not q["ASYNC"] or 2 <= q["STAGES"] <= 5) and
            q["GROUP_M"] >= 1)


def plan(p, q, units):
    """The number of K splits that minimizes estimate() for parameter set q."""
    slices = -(-p.k // q["BK"])
    most = max(1, min(MAX_SPLITS, slices // MIN_SLICES_PER_SPLIT))
    return min(range(1, most + 1), key=lambda s: estimate(p, q, s, units))


def estimate(p, q, splits, units):
    """Seconds of problem p with parameter set q and K split `splits` ways: whole waves of
    work-groups (groups_per_cu per compute unit) at the set's measured rate, plus the split's
    extra pass and the wgmma sets' packing of both operands."""
    bm, bn, _ = tile_shape(q)
    tiles = -(-p.m // bm) * -(-p.n // bn) * p.nbatch * splits
    slots = units * q["groups_per_cu"]
    slices = -(-p.k // q["BK"])
    depth = -(-slices // splits) * q["BK"]
    secs = -(-tiles // slots) * 2.0 * bm * bn * depth * slots / (rate_of(q, p) * 1e12)
    if splits > 1:
        secs += LAUNCH_COST_S + (splits + 1) * p.m * p.n * p.nbatch * 4 / BANDWIDTH_BYTES_S
    if is_wgmma(q):  # a launch per operand, each read and written once
        packed = 8 * (p.m + p.n) * depth * splits * p.nbatch
        secs += 2 * LAUNCH_COST_S + packed / BANDWIDTH_BYTES_S
    return secs


def rate_of(q, p):
    """TFLOP/s of set q for problem p: one figure, or one per 16-bit operand type."""
    rate = q["rate"]
    return rate[HALF_NAMES[half_type(p)]] if isinstance(rate, dict) else rate


# ---- operands and the launch ------------------------------------------------------------------

def _in_place(p, op, rows, rs, ks):
    """The operand read where it is, or None when its strides do not allow it: one dim of unit
    stride (16-byte copies along it), the other's stride (0 when the dim has one element), the
    offset and the batch strides multiples of ALIGN."""
    ld_k, ld_rows = (rs if rows > 1 else 0), (ks if p.k > 1 else 0)
    if any(s % ALIGN for s in [op.t.offset, *op.bstrides]):
        return None
    if (ks == 1 or p.k == 1) and ld_k >= 0 and ld_k % ALIGN == 0:
        return MmaOperand(op.t, op.bstrides, ld_k, 1)
    if (rs == 1 or rows == 1) and ld_rows >= 0 and ld_rows % ALIGN == 0:
        return MmaOperand(op.t, op.bstrides, ld_rows, 0)
    return None


def _operand(p, op, rows, rs, ks, found):
    """(op as nvmma_gemm reads it, the copy to launch first or None); found: _in_place's."""
    if found is not None:
        return found, None
    dst, bstrides, ld, copy = _dense_copy(p, op, rows, rs, ks, ALIGN, p.dtype)
    return MmaOperand(dst, bstrides, ld, 1), copy


def _dense_copy(p, op, rows, rs, ks, align, dtype, defines=None):
    """A K-contiguous, zero-padded copy of op (rows by K rounded up to `align`, one when the
    batches share it) in `dtype`: (the tensor, its batch strides, its leading dim, the copy to
    launch); defines: pad_copy's."""
    ld = round_up(p.k, align)
    shared = not any(op.bstrides)
    dst = ClTensor.empty_on(((1 if shared else p.nbatch) * rows * ld,), dtype, p.device)
    bstrides = [0] * len(p.bshape) if shared else gm.dense_strides(p.bshape, rows * ld)
    copy = lambda: gm.pad_copy(p, op, (rows, p.k), (rows, ld), (rs, ks), dst,  # noqa: E731
                               defines)
    return dst, bstrides, ld, copy


def _run(p, q, kernel, splits, epi, a_in_place, b_in_place):
    """Launch nvmma_gemm; a_in_place, b_in_place: _in_place's operands (None: copied)."""
    operands = (_operand(p, p.a, p.m, p.a.rs, p.a.cs, a_in_place),
                _operand(p, p.b, p.n, p.b.cs, p.b.rs, b_in_place))
    _launch_mma(p, q, kernel, splits, epi, operands, p.k)


def _run_half(p, q, kernel, splits, epi):
    """Launch nvmma_gemm on 16-bit operands (HALF): both read K-contiguous, in 32-bit words;
    copied first (zero-padded) unless aligned, or both when K is odd (a word would reach past
    a row)."""
    odd = p.k % 2
    operands = (_half_operand(p, p.a, p.m, p.a.rs, p.a.cs, odd),
                _half_operand(p, p.b, p.n, p.b.cs, p.b.rs, odd))
    _launch_mma(p, q, kernel, splits, epi, operands, words(p).k)


def _half_operand(p, op, rows, rs, ks, copy_anyway):
    """(the 16-bit op as nvmma_gemm reads it, in words; the copy to launch first or None)."""
    aligned = [op.t.offset, *op.bstrides, rs if rows > 1 else 0]
    if not copy_anyway and (ks == 1 or p.k == 1) and not any(s % HALF_ALIGN for s in aligned):
        return MmaOperand(op.t, [s // 2 for s in op.bstrides], (rs if rows > 1 else 0) // 2, 1,
                          op.t.offset // 2), None
    dst, bstrides, ld, copy = _dense_copy(p, op, rows, rs, ks, HALF_ALIGN, op.t.dtype,
                                          {"T": "ushort"})  # NOTE: the bits, exactly
    return MmaOperand(dst, [s // 2 for s in bstrides], ld // 2, 1, 0), copy


def _launch_mma(p, q, kernel, splits, epi, operands, k_arg):
    """Run the operands' copies (see _operand), then nvmma_gemm and a split's reduction."""
    bm, bn, nt = tile_shape(q)
    part = gm.scratch(p, splits * p.nbatch * p.m * p.n) if splits > 1 else p.co.t
    tail = []
    for x, _ in operands:
        offset = x.t.offset if x.offset is None else x.offset
        tail += [x.t.storage.buf, ew.view_arg(offset, x.bstrides), np.int64(x.ld)]
    tail += [np.int32(splits), part.storage.buf] + epi
    for _, copy in operands:
        if copy is not None:
            copy()
    gm.launch_tiles(p, kernel, bm, -(-p.n // bn), (nt, 1, 1), k_arg, tail, splits=splits)
    _sum_splits(p, splits, part, epi)


def _sum_splits(p, splits, part, epi):
    """With K split, xgemm_reduce adds the partial products into C through the epilogue."""
    if splits > 1:
        reduce = gm.get_kernel(p.device, "gemm_xgemm.cl", "xgemm_reduce", gm.storage_defines(p))
        gm.reduce_splits(p, reduce, splits, part, epi)


def _run_wgmma(p, q, kernel, splits, epi, half=0):
    """Launch gemm_pack.cl's pack_tf32_slices (pack_half_slices for 16-bit operands) on both
    operands, then nvwg_gemm."""
    bm, bn, nt = tile_shape(q)
    packed = [_pack_slices(p, p.a, p.m, p.a.rs, p.a.cs, bm, q["BK"], half),
              _pack_slices(p, p.b, p.n, p.b.cs, p.b.rs, bn, q["BK"], half)]
    part = gm.scratch(p, splits * p.nbatch * p.m * p.n) if splits > 1 else p.co.t
    tail = []
    for t, bs in packed:
        tail += [t.storage.buf, np.int64(bs)]
    tail += [np.int32(splits), part.storage.buf] + epi
    k_arg = words(p).k if half else p.k
    gm.launch_tiles(p, kernel, bm, -(-p.n // bn), (nt, 1, 1), k_arg, tail, splits=splits)
    _sum_splits(p, splits, part, epi)


def _pack_slices(p, op, rows, rs, ks, width, bk, half=0):
    """op in the wgmma kernel's slices of `width` rows by bk 32-bit words: rounded to TF32
    (pack_tf32_slices) or, with half, copied as pairs of 16-bit values (pack_half_slices);
    returns (the scratch tensor, its batch stride: 0 when every batch shares one copy)."""
    shared = not any(op.bstrides)
    nb = 1 if shared else p.nbatch
    kw = words(p).k if half else p.k
    size = -(-rows // width) * width * -(-kw // bk) * bk
    dst = gm.scratch(p, nb * size)
    name = "pack_half_slices" if half else "pack_tf32_slices"
    kernel = gm.get_kernel(p.device, "gemm_pack.cl", name, {"T": "float", "SLICE_K": bk})
    bshape = () if shared else p.bshape
    lx = min(PACK_LOCAL, p.device.max_work_group)
    for b0 in range(0, nb, gm.MAX_GROUPS):
        launch(p.device, kernel, (round_up(size // 4, lx), 1, min(gm.MAX_GROUPS, nb - b0)),
               (lx, 1, 1), np.int32(rows), np.int32(p.k), np.int32(width), np.int64(b0),
               np.int32(len(bshape)), ew.shape_arg(bshape), op.t.storage.buf,
               ew.view_arg(op.t.offset, op.bstrides), np.int64(rs), np.int64(ks),
               dst.storage.buf, np.int64(0 if shared else size))
    return dst, 0 if shared else size


assert all(config_valid(q) for q in CONFIGS + HALF_CONFIGS), \
    "nvidia.py: an invalid parameter set in CONFIGS or HALF_CONFIGS"
