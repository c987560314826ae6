"""Implicit GEMM on GPUs: the convolution kernels of cl_kernels/conv_xgemm.cl, which run the
GEMM engine of gemm_xgemm.cl (tiles and parameters from the GEMM database) with its operand
loads replaced by gathers from the input and the output gradient. The positions of all images
form one GEMM dimension, so small images fill whole tiles.

float16/bfloat16 tensors are read in place (the engine's TA/TB/TC storage types: the local
tiles and sums are float32, each result rounded once), by a plug-in's tensor-core engine too:
16-bit values are exact in TF32, so its products are.
"""
from typing import NamedTuple

import numpy as np

from .. import backends, caches
from .. import dtypes as dt
from ..ops import gemm
from ..program import ctype_of, launch, memo_with, round_up
from ..tensor import ClTensor
from . import common

KERNEL_FILE = "conv_xgemm.cl"
ENGINE = ("gemm_common.cl", "gemm_xgemm.cl", "conv_taps.cl")  # prepended to KERNEL_FILE
MMA_ENGINE = ("gemm_common.cl", "gemm_xgemm.cl", "xgemm_mma.cl", "conv_taps.cl")
# the largest MWG and KWG of the GEMM database's parameter sets (for workspace estimates)
MAX_PANEL = 128
MAX_KWG = 32


class MmaEngine(NamedTuple):
    """A plug-in's tensor-core multiply for these kernels (cl_kernels/xgemm_mma.cl): its
    parameter sets (the engine's keys, MMA_WARPS_N, and `rate`: {kernel name: relative
    speed}) and whether it is emulated in plain OpenCL (tests)."""
    sets: tuple
    emulate: bool = False


class Product(NamedTuple):
    """The sizes gemm.xgemm_plan prices a parameter set with."""
    device: object
    dtype: np.dtype
    m: int
    n: int
    k: int
    nbatch: int


def _engine_ok(q, kernel):
    """The gathers need every slice's loads spread evenly: WGS a multiple of NWG (cx_conv, one
    position per work-item) and of KWG (cx_wgrad, one position per work-item and slice)."""
    wgs = q["MDIMC"] * q["NDIMC"]
    return wgs % q["KWG"] == 0 and (kernel != "cx_conv" or wgs % q["NWG"] == 0)


# kernel name -> a parameter set that replaces the GEMM database's choice (experiments, tests)
FORCE_PARAMS = {}
# (device, dtype, kernel, m, n, k, nbatch, plain) -> parameter sets, best first
_ranked = caches.register("conv.implicit_gpu.ranked", {})


def _candidates(device, dtype, kernel, m, n, k, nbatch, engine=None, plain=False):
    """The parameter sets for the kernel's (nbatch x) m x n x k product, best first: the
    database's sets measured on the kernel itself, then the GEMM-style sets (the entry's
    cx_sets, else the GEMM's) by gemm.xgemm_plan; for a plain product (a 1x1 convolution of
    stride 1, without padding: no gathers), the GEMM's own sets as the GEMM ranks them; a
    plug-in engine's sets by their padded tile work at their rates."""
    if kernel in FORCE_PARAMS:
        return [FORCE_PARAMS[kernel]]
    if engine is not None:
        def cost(q):
            padded = -(-m // q["MWG"]) * q["MWG"] * -(-n // q["NWG"]) * q["NWG"]
            return padded / q["rate"][kernel]
        return sorted((q for q in engine.sets if _engine_ok(q, kernel)), key=cost)
    key = (device, np.dtype(dtype), kernel, m, n, k, nbatch, plain)
    if key not in _ranked:
        _ranked[key] = _rank(*key)
    return _ranked[key]


# NOTE: plain products rank the GEMM's sets (H200, GoogLeNet's 28 1x1 layers at batch 128,
# forward and input gradient, kernel ms summed over the 56 passes: 9.19 with the conv sets,
# 7.83 with the GEMM's sets as xgemm_plan ranks them, 7.50 with the best set for each pass).
# The conv sets are double-buffered for the gathers' latency, which a 1x1 layer's loads lack.
def _rank(device, dtype, kernel, m, n, k, nbatch, plain=False):
    entry = gemm.entry_for(device, dtype)
    if plain:
        measured, entry = [], dict(entry, split_k=False)  # the conv kernels do not split K
    else:
        usable = lambda q: _engine_ok(q, kernel) and _fits(device, q, dtype.itemsize)  # noqa: E731
        measured = [q for q in entry.get(kernel, []) if gemm.xgemm_valid(q) and usable(q)
                    and m <= q.get("max_m", m)]  # a set may serve only products of few rows
        # the conv kernels' own list of GEMM-style sets where the database has one (cx_sets),
        # priced as when they were measured: one work-group of any size fills a compute unit
        entry = dict(entry, xgemm=entry.get("cx_sets", entry.get("xgemm", [])),
                     threads_per_cu=1)
    own, extra = gemm.xgemm_candidates(device, entry, dtype.itemsize)
    others = [q for q in own + extra if _engine_ok(q, kernel)]
    if kernel == "cx_wgrad":
        return _rank_wgrad(measured, others, m, n)
    prod = Product(device, dtype, m, n, k, nbatch)
    return measured + sorted(others, key=lambda q: gemm.xgemm_plan(prod, entry, q)[0])


# the GEMM's parameter sets ran the weight gradient at about half their GEMM rate (H200,
# GoogLeNet conv3: 10.1 ms with the 64 x 64 set, 4.7 with the set measured on cx_wgrad)
WGRAD_GEMM_RATE_SHARE = 0.5


def _rank_wgrad(measured, others, m, n):
    """The weight gradient's sets by their padded (m x n) tile work at their rate: its position
    splits fill the device whatever the tiles, so a tile the product does not fill only wastes
    (a first layer's 64 x 27 product in 128 x 128 tiles: 10% used). Sets measured on the kernel
    itself count at the best GEMM rate, the others at WGRAD_GEMM_RATE_SHARE of theirs."""
    top = max((q.get("rate", 0.0) for q in others), default=0.0) or 1.0
    def cost(q):
        padded = -(-m // q["MWG"]) * q["MWG"] * -(-n // q["NWG"]) * q["NWG"]
        return padded / (top if q in measured else WGRAD_GEMM_RATE_SHARE * q.get("rate", 1.0))
    return sorted(measured + others, key=cost)


# (device, geometry, kernel, product, engine, variant) -> (engine's sets, (parameters, kernel))
_built = caches.register("conv.implicit_gpu.built", {})


def _build(device, geo, name, product, extra, engine=None, variant=None):
    """(parameters, kernel): the best parameter set whose built kernel the device accepts
    (work-group size within what its registers allow); extra(q) gives the set's own defines,
    the same for calls of the same `variant`. Memoized: choosing and keying the kernel cost
    more host time than its launch."""
    if name in FORCE_PARAMS:
        return _search(device, geo, name, product, extra, engine)
    key = (device, geo, name, product, engine and engine.emulate, variant)
    return memo_with(_built, key, engine and engine.sets,
                     lambda: _search(device, geo, name, product, extra, engine))


def clear_cache():
    """Forget the ranked parameter sets and the kernels chosen per problem."""
    _ranked.clear()
    _built.clear()


def _search(device, geo, name, product, extra, engine):
    for q in _candidates(device, common.compute_dtype(geo.dtype), name, *product, engine=engine,
                         plain=name == "cx_conv" and is_plain(geo)):
        defines = extra(q)
        if engine is not None:
            defines.update(XGEMM_MMA=1, MMA_EMULATE=int(engine.emulate),
                           MMA_HALF=mma_half(name, geo, q))
        kernel = _kernel(device, name, q, geo, **defines)
        if gemm.kernel_fits(device, kernel, q["MDIMC"] * q["NDIMC"]):
            return q, kernel
    raise RuntimeError(f"conv: no parameter set of the GEMM engine fits {device} for {name}")


def mma_half(name, geo, q):
    """xgemm_mma.cl's MMA_HALF: 16-bit operands on m16n8k16 (slices of a multiple of 16 values
    of K), else 0: TF32 products, exact for 16-bit values too. cx_conv alone takes them: on
    the H100 they took 28-34% off its time on 1x1 layers, while cx_wgrad took 1-7% longer
    with them in three of the four networks (docs/performance.md)."""
    if q["KWG"] % 16 or geo.dtype not in dt.HALF_TYPES or name != "cx_conv":
        return 0
    return 1 if geo.dtype == dt.float16 else 2


def is_plain(geo):
    """True when the convolution is a plain product: 1x1 taps, stride 1, no padding or
    upsampling (the input gradient of a stride-1 layer)."""
    return (geo.kh, geo.kw, geo.sh, geo.sw, geo.uh, geo.uw, geo.oy, geo.ox) == \
        (1, 1, 1, 1, 1, 1, 0, 0) and (geo.ho, geo.wo) == (geo.h, geo.w)


def _fits(device, q, itemsize):
    return gemm.group_fits(device, q["NDIMC"], q["MDIMC"], gemm.xgemm_local_bytes(q, itemsize))


def _a_width(q):
    """The vector width of cx_conv's packed-weight loads (rows of MWG elements)."""
    w = 4
    while w > 1 and (q["MWG"] % w or (q["KWG"] * q["MWG"] // w) % (q["MDIMC"] * q["NDIMC"])):
        w //= 2
    return w


def _kernel(device, name, params, geo, **extra):
    defines = {k: v for k, v in params.items() if k.isupper()}  # not "rate", "max_m"
    defines.update(T=ctype_of(common.compute_dtype(geo.dtype)), XGEMM_ENGINE_ONLY=None, KH=geo.kh, KW=geo.kw,
                   SH=geo.sh, SW=geo.sw, DH=geo.dh, DW=geo.dw, UH=geo.uh, UW=geo.uw, H=geo.h,
                   W=geo.w, OY=geo.oy, OX=geo.ox, WO=geo.wo, QN=geo.qn, CG=geo.cg,
                   COG=geo.cog, K=geo.k, **_storage(geo.dtype), **extra)
    headers = MMA_ENGINE if defines.get("XGEMM_MMA") else ENGINE
    return common.get_kernel(device, KERNEL_FILE, name, defines, headers)


def _storage(dtype):
    """The storage defines of a dtype's operands and results (none where it is the compute
    type): every tensor the kernels read or write has the problem's dtype."""
    return {k: v for name in ("TA", "TB", "TC") for k, v in
            common.storage_define(dtype, name).items()}


def conv(src, geo, w, out, bias, flip, pack_weight, engine=None, relu=False, relu_y=None):
    """out (a 4-d view) = the convolution of geometry geo over the virtually padded src with
    weight w (flipped and transposed when flip), plus bias, then max(., 0) with relu; engine:
    a plug-in's multiply. relu_y: src is taken back through the ReLU whose output this is
    (src's strides but for its own image stride) as it is read (the input gradient of a
    convolution with a fused ReLU)."""
    device = out.device
    def extra(q):
        defines = {"VWA": _a_width(q), "VWB": 1, "A_KC": 0, "B_KC": 0,
                   "KP": round_up(geo.k, q["KWG"]), "RELU_MASK": int(relu_y is not None)}
        if bias is not None:
            defines["HAS_BIAS"] = None
        return defines

    q, kernel = _build(device, geo, "cx_conv", (geo.cog, geo.n * geo.qn, geo.k, geo.g), extra,
                       engine, variant=(bias is not None, relu_y is not None))
    wpk = pack_weight(w, geo, q["MWG"], round_up(geo.k, q["KWG"]), flip)
    b = bias if bias is not None else wpk  # NOTE: not read without HAS_BIAS
    bias_args = [b.storage.buf, np.int64(b.offset), np.int64(b.strides[0])]
    local = (q["NDIMC"], q["MDIMC"], 1)
    grid = (-(-geo.n * geo.qn // q["NWG"]) * local[0], -(-geo.cog // q["MWG"]) * local[1], geo.g)
    launch(device, kernel, grid, local, np.int32(geo.n), *common.view_args(src), wpk.storage.buf,
           *bias_args, np.int32(relu), *common.view_args(out), *_mask_args(relu_y))
    return out


def _mask_args(relu_y):
    """RELU_MASK's arguments: the ReLU output's buffer, offset and image stride (none without
    it)."""
    return () if relu_y is None else (relu_y.storage.buf, np.int64(relu_y.offset),
                                      np.int64(relu_y.strides[0]))


# work-groups per compute unit the weight gradient's splits aim at: enough waves that the last,
# partly filled one costs little (H200: 4 -> 8 waves gained 5-25%)
WGRAD_WAVES = 8
WGRAD_MIN_SLICES = 8  # position slices per split, at least


def _wgrad_splits(device, q, geo, npos, columns):
    """How many shares of the positions the weight gradient is summed in: enough work-groups
    to fill the device WGRAD_WAVES times over, within the workspace budget."""
    tiles = -(-geo.cog // q["MWG"]) * -(-columns // q["NWG"]) * geo.g
    want = -(-WGRAD_WAVES * device.cl_device.max_compute_units // tiles)
    part_bytes = geo.g * geo.cog * columns * common.compute_dtype(geo.dtype).itemsize
    most = min(-(-npos // (q["KWG"] * WGRAD_MIN_SLICES)),
               backends.conv_workspace_limit // max(part_bytes, 1))
    return max(1, min(want, most))


def weight_grad(x, gout, geo, engine=None, with_bias=False, relu_y=None):
    """(gw, gb): the weight gradient (Co, Cg, Kh, Kw) of a convolution of geometry geo, and with
    with_bias the bias gradient (Co,) as one more column of the same product (a row of ones
    among the taps) where the parameter set's column tiles pad the taps anyway, else None;
    engine: a plug-in's multiply. relu_y: gout is taken back through the ReLU whose output
    this is (gout's strides but for its own image stride) as it is read."""
    device = x.device
    npos = geo.n * geo.qn
    fused = lambda q: with_bias and geo.k % q["NWG"] != 0  # noqa: E731 (a spare column)
    masked = int(relu_y is not None)
    q, kernel = _build(device, geo, "cx_wgrad", (geo.cog, geo.k, npos, geo.g),
                       lambda q: {"VWA": 1, "VWB": 1, "A_KC": 1, "B_KC": 1,
                                  "WITH_BIAS": int(fused(q)), "RELU_MASK": masked}, engine,
                       variant=(with_bias, masked))
    bias_column = fused(q)  # what the chosen set was built with
    columns = geo.k + bias_column
    splits = _wgrad_splits(device, q, geo, npos, columns)
    gw = common.empty((geo.g * geo.cog, geo.cg, geo.kh, geo.kw), x)
    gb = common.empty((geo.g * geo.cog,), x) if bias_column else None
    sums = common.compute_dtype(geo.dtype)
    part = (ClTensor.empty_on((splits * geo.g * geo.cog * columns,), sums, device)
            if splits > 1 else gw)
    bias_buf = (gb if gb is not None else gw).storage.buf  # NOTE: not written without WITH_BIAS
    local = (q["NDIMC"], q["MDIMC"], 1)
    grid = (-(-columns // q["NWG"]) * local[0], -(-geo.cog // q["MWG"]) * local[1],
            geo.g * splits)
    launch(device, kernel, grid, local, np.int32(geo.n), *common.view_args(x),
           *common.view_args(gout), np.int32(splits), part.storage.buf, bias_buf,
           *_mask_args(relu_y))
    if splits > 1:
        summer = common.get_kernel(device, KERNEL_FILE, "cx_wgrad_sum",
                                   {"T": ctype_of(sums), **common.storage_define(geo.dtype, "TC"),
                                    "COG": geo.cog, "K": geo.k, "WITH_BIAS": int(bias_column)})
        common.launch_1d(device, summer, geo.g * geo.cog * columns, np.int32(geo.g),
                         np.int32(splits), part.storage.buf, gw.storage.buf, bias_buf)
    return gw, gb
