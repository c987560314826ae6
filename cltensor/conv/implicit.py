"""Algorithm "implicit_gemm": the im2col gather done inside the GEMM's tile loads
(cl_kernels/conv_implicit.cl), so there is no column buffer and no padded copy: the kernels read
the input through its own strides and bounds-check every tap (an out-of-image tap reads 0).
Its only scratch is the weight in panels and, for the weight gradient, a few weight-sized
partial sums.

Forward: out = conv(pad(x), W). Input gradient: a stride-1 convolution of the output gradient,
upsampled by the stride and padded (virtually, in the loads), with the flipped transposed
weight, by the same kernel. Weight gradient: gW[k][co] = sum over images and positions of
pad(x)(k, q) * gout[q][co], split over N*H*W into partial sums that a last kernel adds up in a
fixed order.

CPUs run register-tiled kernels with no local memory (PoCL turns barriers into loops), here;
other devices run the GEMM engine's local-memory tiles with gathering loads (implicit_gpu.py).

float16/bfloat16 tensors are read in place: the packed weight keeps their 16-bit values, the
kernels sum in float32 (the weight gradient's partial sums too) and round each result once.
"""
from typing import NamedTuple

import numpy as np
import pyopencl as cl

from .. import backends
from ..program import ctype_of, launch, round_up
from ..tensor import ClTensor
from . import common, implicit_gpu

KERNEL_FILE = "conv_implicit.cl"
HEADERS = ("conv_taps.cl",)
# CPU register tiles: MR output channels (or weight-gradient rows) x NR positions (or channels)
CPU_TILES = {4: {"MR": 12, "NR": 32, "VW": 16}, 8: {"MR": 12, "NR": 16, "VW": 8}}
GROUPS_PER_CU = 4  # work-items per compute unit the CPU weight gradient's splits aim at
# None picks the kernels by device type; "cpu" or "gpu" forces one style (tests run both)
KERNEL_STYLE = None
MAX_GROUPS = 65535  # work-groups a launch may have along dims 1 and 2 (NVIDIA's limit)
# stride-1 CPU convolutions stage a strip of this many padded-plane elements at most per
# work-item in private memory (conv_cpu's STRIP); longer strips gather tap by tap
MAX_STRIP = 2048
# the CPU weight gradient copies blocks of this many positions' taps and output gradient
# channels to local memory (at most WGRAD_LOCAL_BYTES); 128 beat 64 on PoCL on the networks'
# first layers
WGRAD_BQ = 128
WGRAD_LOCAL_BYTES = 256 * 2**10


class Geometry(NamedTuple):
    """A convolution over a virtually padded source: n images of g groups, cg channels in and
    cog out per group, (ho, wo) outputs. The source (h, w) planes are upsampled by (uh, uw) and
    shifted by (oy, ox) into the padded plane (wp columns) that the taps index."""
    n: int
    g: int
    cg: int
    cog: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    h: int
    w: int
    oy: int
    ox: int
    uh: int
    uw: int
    wp: int
    ho: int
    wo: int
    dtype: np.dtype

    @property
    def qn(self):
        return self.ho * self.wo

    @property
    def k(self):
        return self.cg * self.kh * self.kw

    def strip(self, nr):
        """conv_cpu's STRIP for nr positions per work-item (stride 1), or None."""
        if self.sh != 1 or self.sw != 1:
            return None
        size = nr + (self.kh - 1) * self.dh * self.wp + (self.kw - 1) * self.dw
        return size if size <= MAX_STRIP else None

    def source_args(self, src):
        """The kernels' SRC_ARGS for source tensor src."""
        return [*[np.int32(v) for v in (self.h, self.w, self.oy, self.ox)],
                *common.view_args(src)]


def _forward_geometry(p):
    return Geometry(p.n, p.groups, p.cg, p.cog, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw,
                    p.h, p.w, p.pt, p.pl, 1, 1, p.w + p.pl + p.pr, p.ho, p.wo, p.dtype)


def _data_geometry(p):
    """The input gradient as a stride-1 convolution over the upsampled, padded gradient."""
    return Geometry(p.n, p.groups, p.cog, p.cg, p.kh, p.kw, 1, 1, p.dh, p.dw,
                    p.ho, p.wo, (p.kh - 1) * p.dh - p.pt, (p.kw - 1) * p.dw - p.pl, p.sh, p.sw,
                    p.w + (p.kw - 1) * p.dw, p.h, p.w, p.dtype)


def _tile(dtype):
    """The CPU register tile of a dtype's compute type."""
    return CPU_TILES[common.compute_dtype(dtype).itemsize]


def _defines(geo, **extra):
    compute = common.compute_dtype(geo.dtype)
    d = {"T": ctype_of(compute), **common.storage_define(geo.dtype), "KH": geo.kh,
         "KW": geo.kw, "SH": geo.sh, "SW": geo.sw, "DH": geo.dh, "DW": geo.dw, "UH": geo.uh,
         "UW": geo.uw,
         "MASK_T": "long" if compute.itemsize == 8 else "int"}
    d.update(extra)
    return d


def workspace_bytes(p, backward=False, device=None):
    """Nothing input-sized: at most the packed weight (each group's channels padded to a
    panel, its rows to a multiple of TSK); in backward also the flipped packed weight, the
    weight gradient's partial sums (one weight and bias per split, as many splits as
    backends.conv_workspace_limit allows, at least one: on CPUs GROUPS_PER_CU per compute
    unit at most (wgrad_blocks), on GPUs (a device given) at most WGRAD_WAVES per compute
    unit and one per WGRAD_MIN_SLICES positions, see implicit_gpu._wgrad_splits); partial
    sums in the compute type (float32 for 16-bit tensors)."""
    item, sums = p.dtype.itemsize, common.compute_dtype(p.dtype).itemsize
    pw = max(max(t["MR"] for t in CPU_TILES.values()), implicit_gpu.MAX_PANEL)
    tsk = implicit_gpu.MAX_KWG
    packed = p.groups * round_up(p.cog, pw) * round_up(p.k, tsk) * item
    if not backward:
        return packed
    part, npos = p.co * (p.k + 1) * sums, p.n * p.ho * p.wo  # + 1: a fused bias gradient
    if device is not None and not _cpu_style(device):
        splits = min(implicit_gpu.WGRAD_WAVES * device.cl_device.max_compute_units,
                     -(-npos // implicit_gpu.WGRAD_MIN_SLICES))
    elif device is not None:
        cut = wgrad_blocks(p, device)
        return 2 * packed + cut.splits * p.groups * cut.krows * cut.cols * sums
    else:
        splits = p.n
    parts = max(part, min(splits * part, backends.conv_workspace_limit))
    return 2 * packed + parts


# ---- operand preparation ----------------------------------------------------------------------

def pack_weight(w, geo, pw, kp, flip, taps_outer=False):
    """The weight in panels of pw channels over kp (>= K) rows, per group; rows ordered
    (kh, kw, c) when taps_outer, else (c, kh, kw). Made once per weight version."""
    key = ("implicit", geo.g, geo.cog, geo.cg, pw, kp, flip, taps_outer)
    return common.per_weight(w, key, lambda w: _pack(w, geo, pw, kp, flip, taps_outer))


def _pack(w, geo, pw, kp, flip, taps_outer):
    panels = -(-geo.cog // pw)
    total = geo.g * panels * kp * pw
    wpk = common.empty((total,), w)
    defines = {"T": ctype_of(common.bits_dtype(w.dtype)), "KH": geo.kh, "KW": geo.kw}
    if flip:
        defines["FLIP"] = None
    if taps_outer:
        defines["TAPS_OUTER"] = None
    kernel = common.get_kernel(w.device, KERNEL_FILE, "pack_weight", defines, HEADERS)
    common.launch_1d(w.device, kernel, total, np.int32(geo.cog), np.int32(geo.cg),
                     np.int32(geo.k), np.int32(kp), np.int32(panels), np.int32(pw),
                     *common.view_args(w), wpk.storage.buf, np.int64(total))
    return wpk


# ---- the convolution kernels ------------------------------------------------------------------

def _cpu_style(device):
    return KERNEL_STYLE == "cpu" or (KERNEL_STYLE is None and device.is_cpu)


def conv(src, geo, w, out, bias, flip, engine=None, relu=False, relu_y=None):
    """out (a 4-d view) = the convolution of geo over the virtually padded src with weight w
    (flipped and transposed when flip), plus bias, then max(., 0) with relu. engine: a
    plug-in's multiply for the GPU kernels (implicit_gpu.MmaEngine), which then run on any
    device. relu_y: src taken back through that ReLU output as it is read (GPU kernels)."""
    device = out.device
    if engine is not None or not _cpu_style(device):
        return implicit_gpu.conv(src, geo, w, out, bias, flip, pack_weight, engine, relu,
                                 relu_y)
    extra, wq, qn = {}, geo.wo, geo.qn
    tile = _tile(geo.dtype)
    strip = geo.strip(tile["NR"])
    if strip is not None:  # positions over the padded width: q = oh * wp + ow
        extra, wq, qn = {"STRIP": strip}, geo.wp, max(0, (geo.ho - 1) * geo.wp + geo.wo)
    pw, kp, grid_x = tile["MR"], geo.k, -(-qn // tile["NR"])
    name, local = "conv_cpu", (1, 1, 1)
    wpk = pack_weight(w, geo, pw, kp, flip, taps_outer=not extra)
    defines = _defines(geo, **tile, **extra)
    if bias is not None:
        defines["HAS_BIAS"] = None
    kernel = common.get_kernel(device, KERNEL_FILE, name, defines, HEADERS)
    panels = -(-geo.cog // pw)
    bias_args = ([bias.storage.buf, np.int64(bias.offset), np.int64(bias.strides[0])]
                 if bias is not None else [wpk.storage.buf, np.int64(0), np.int64(0)])
    tail = [*[np.int32(v) for v in (geo.g, geo.cg, geo.cog, geo.k, kp, qn, geo.wo, wq)],
            *geo.source_args(src), wpk.storage.buf, *bias_args, np.int32(relu),
            *common.view_args(out)]
    step = max(1, MAX_GROUPS // geo.g)  # NOTE: NVIDIA allows 65535 work-groups along dim 2
    for n0 in range(0, geo.n, step):
        nb = min(step, geo.n - n0)
        launch(device, kernel, (grid_x * local[0], panels * local[1], nb * geo.g), local,
               np.int32(n0), *tail)
    return out


FUSES_RELU = True  # forward(..., relu=True) applies max(., 0) as it stores (conv/function.py)


def forward(x, w, bias, p, out, engine=None, relu=False):
    return conv(x, _forward_geometry(p), w, out, bias, flip=False, engine=engine, relu=relu)


# ---- backward ---------------------------------------------------------------------------------

def backward(x, w, gout, p, need_x, need_w, engine=None, relu_y=None):
    return backward_with_bias(x, w, gout, p, need_x, need_w, engine, False, relu_y)[:2]


def takes_relu_mask(device, engine=None):
    """Whether backward's passes take gout back through a fused ReLU themselves (relu_y): the
    GPU kernels, as they read it."""
    return engine is not None or not _cpu_style(device)


def backward_with_bias(x, w, gout, p, need_x, need_w, engine=None, with_bias=True,
                       relu_y=None):
    """(gx, gw, gb): gb, the bias gradient, comes with the weight gradient where the GPU
    kernel folds it in (implicit_gpu.weight_grad), else None (the caller reduces gout).
    relu_y: the output of the forward's fused ReLU, through which the GPU kernels take gout
    back as they read it (takes_relu_mask; gout's strides but for its own image
    stride)."""
    assert relu_y is None or takes_relu_mask(x.device, engine), "CPU kernels take no mask"
    gx = gw = gb = None
    if need_x:
        gx = common.empty((p.n, p.c, p.h, p.w), x, common.layout_of(x))
        conv(gout, _data_geometry(p), w, gx, None, flip=True, engine=engine, relu_y=relu_y)
    if need_w:
        gw, gb = weight_grad(x, gout, p, engine, with_bias, relu_y)
    return gx, gw, gb


def weight_grad(x, gout, p, engine=None, with_bias=False, relu_y=None):
    """(gW, gb): gW = sum over images and positions of the gathered input times the output
    gradient; gb the bias gradient when with_bias and the GPU kernel folds it in, else None."""
    device = x.device
    geo = _forward_geometry(p)
    if engine is not None or not _cpu_style(device):
        return implicit_gpu.weight_grad(x, gout, geo, engine, with_bias, relu_y)
    cut = wgrad_blocks(p, device)
    sums = common.compute_dtype(p.dtype)
    part = ClTensor.empty_on((cut.splits * p.groups * cut.krows * cut.cols,), sums, device)
    kernel = common.get_kernel(device, KERNEL_FILE, "wgrad_blocks",
                               _defines(geo, **_tile(p.dtype), BQ=WGRAD_BQ), HEADERS)
    item = sums.itemsize
    launch(device, kernel, (cut.items,), (1,), *[np.int32(v) for v in (
        p.groups, p.cg, p.cog, geo.k, cut.kb, cut.cb, cut.krows, cut.cols, cut.kch, cut.cch,
        p.ho, p.wo)], np.int64(cut.positions), np.int64(cut.per_split),
        *geo.source_args(x), *common.view_args(gout), part.storage.buf,
        cl.LocalMemory(WGRAD_BQ * cut.cb * item), cl.LocalMemory(WGRAD_BQ * cut.kb * item))
    gw = common.empty((p.co, p.cg, p.kh, p.kw), x)
    summer = common.get_kernel(device, KERNEL_FILE, "wgrad_sum",
                               {"T": ctype_of(sums), **common.storage_define(p.dtype)}, HEADERS)
    common.launch_1d(device, summer, gw.numel(), np.int32(cut.splits), np.int32(p.groups),
                     np.int32(p.cog), np.int32(geo.k), np.int32(cut.krows), np.int32(cut.cols),
                     part.storage.buf, gw.storage.buf)
    return gw, None


class WgradCut(NamedTuple):
    """How wgrad_blocks cuts a CPU weight gradient: the K rows (krows: K rounded up to MR) in
    kch chunks of kb, the channels (cols: Cog rounded up to NR) in cch chunks of cb, the
    n*ho*wo positions in `splits` slices of per_split; one work-item per slice, group and
    chunk pair (items in all), each slice's partial sums krows x cols per group."""
    krows: int
    cols: int
    kb: int
    cb: int
    kch: int
    cch: int
    positions: int
    splits: int
    per_split: int
    items: int


def wgrad_blocks(p, device):
    """wgrad_blocks' cut of problem p's weight gradient on a CPU device."""
    tile, item = _tile(p.dtype), common.compute_dtype(p.dtype).itemsize
    mr, nr = tile["MR"], tile["NR"]
    krows, cols = round_up(p.k, mr), round_up(p.cog, nr)
    # the block's copies fit WGRAD_LOCAL_BYTES and half the device's local memory (at least
    # one tile: 22.5 KiB, float64 28 KiB); channels take half at most
    budget = min(WGRAD_LOCAL_BYTES, device.cl_device.local_mem_size // 2)
    fit = budget // (WGRAD_BQ * item)
    cb = min(cols, max(nr, fit // 2 // nr * nr))
    kb = min(krows, max(mr, (fit - cb) // mr * mr))
    kch, cch = -(-krows // kb), -(-cols // cb)
    positions = p.n * p.ho * p.wo
    per_slice = p.groups * kch * cch
    part_bytes = p.groups * krows * cols * item
    splits = max(1, min(-(-GROUPS_PER_CU * device.cl_device.max_compute_units // per_slice),
                        -(-positions // WGRAD_BQ),
                        backends.conv_workspace_limit // part_bytes))
    per_split = max(1, -(-positions // splits))
    splits = max(1, -(-positions // per_split))
    return WgradCut(krows, cols, kb, cb, kch, cch, positions, splits, per_split,
                    splits * per_slice)
