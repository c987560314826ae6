"""Algorithm "implicit_gemm": the im2col gather done inside the GEMM's tile loads
(cl_kernels/conv_implicit.cl), so there is no column buffer. Its only scratch is a zero-padded
copy of the input (input-sized, so that the kernels' loads need no bounds checks) and the
weight in panels.

Forward: out = conv(pad(x), W). Input gradient: a stride-1 convolution of the output gradient,
upsampled by the stride and padded, with the flipped transposed weight, by the same kernel.
Weight gradient: gW[k][co] = sum over images and positions of pad(x)(k, q) * gout[q][co],
split over N*H*W into partial sums that a last kernel adds up in a fixed order.

CPUs run register-tiled kernels with no local memory (PoCL turns barriers into loops); other
devices run local-memory tiles.
"""
from typing import NamedTuple

import numpy as np

from .. import backends
from ..program import ctype_of, launch, round_up
from . import common

KERNEL_FILE = "conv_implicit.cl"
# CPU register tiles: MR output channels (or weight-gradient rows) x NR positions (or channels)
CPU_TILES = {4: {"MR": 12, "NR": 32, "VW": 16}, 8: {"MR": 12, "NR": 16, "VW": 8}}
# GPU work-group tiles, largest first; the first that fills the device runs
GPU_TILES = ({"TSM": 128, "TSN": 128, "TSK": 16, "WPTM": 8, "WPTN": 8},
             {"TSM": 64, "TSN": 64, "TSK": 16, "WPTM": 4, "WPTN": 4},
             {"TSM": 32, "TSN": 32, "TSK": 16, "WPTM": 2, "WPTN": 2})
GROUPS_PER_CU = 2  # work-groups per compute unit a GPU launch should reach
# None picks the kernels by device type; "cpu" or "gpu" forces one style (tests run both)
KERNEL_STYLE = None
SLACK = 1024       # extra zero elements after the padded input, beyond one plane
MAX_GROUPS = 65535  # work-groups a launch may have along dims 1 and 2 (NVIDIA's limit)


class Geometry(NamedTuple):
    """A convolution over a padded buffer: n images of g groups, cg channels in and cog out
    per group, (hp, wp) padded planes, (ho, wo) outputs."""
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
    hp: int
    wp: int
    ho: int
    wo: int
    dtype: np.dtype

    @property
    def contig(self):
        return self.sh == 1 and self.sw == 1

    @property
    def wq(self):
        return self.wp if self.contig else self.wo

    @property
    def qn(self):
        return (self.ho - 1) * self.wq + self.wo

    @property
    def k(self):
        return self.cg * self.kh * self.kw


def _forward_geometry(p):
    return Geometry(p.n, p.groups, p.cg, p.cog, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw,
                    p.h + p.pt + p.pb, p.w + p.pl + p.pr, p.ho, p.wo, p.dtype)


def _data_geometry(p):
    """The input gradient as a stride-1 convolution over the upsampled, padded gradient."""
    return Geometry(p.n, p.groups, p.cog, p.cg, p.kh, p.kw, 1, 1, p.dh, p.dw,
                    p.h + (p.kh - 1) * p.dh, p.w + (p.kw - 1) * p.dw, p.h, p.w, p.dtype)


def _defines(geo, **extra):
    d = {"T": ctype_of(geo.dtype), "KH": geo.kh, "KW": geo.kw, "SH": geo.sh, "SW": geo.sw,
         "DH": geo.dh, "DW": geo.dw}
    if geo.contig:
        d["CONTIG"] = None
    d.update(extra)
    return d


def _padded_numel(geo, channels):
    plane = geo.hp * geo.wp
    return geo.n * channels * plane + plane + SLACK


def workspace_bytes(p, backward=False):
    """The padded input and packed weight; in backward also the padded gradient, the
    positions-major gradient and the weight gradient's partial sums."""
    item = p.dtype.itemsize
    geo = _forward_geometry(p)
    total = _padded_numel(geo, p.c) + p.co * (p.k + 128) + 128 * p.k
    if backward:
        dgeo = _data_geometry(p)
        total += _padded_numel(dgeo, p.co) + p.n * p.ho * geo.wq * (p.co + 128)
        total += 4 * p.co * p.k
    return total * item


# ---- operand preparation ----------------------------------------------------------------------

def pad(src, geo, channels, oy, ox, uh=1, uw=1):
    """src (N, C, H, W, any strides) upsampled by (uh, uw), shifted by (oy, ox) and
    zero-padded to (hp, wp) planes, as a flat contiguous tensor with slack at the end."""
    total = _padded_numel(geo, channels)
    dst = common.empty((total,), src)
    kernel = common.get_kernel(src.device, KERNEL_FILE, "pad_input",
                               {"T": ctype_of(src.dtype)})
    n, c, h, w = src.shape
    common.launch_1d(src.device, kernel, total, *[np.int32(v) for v in (
        n, c, h, w, geo.hp, geo.wp, oy, ox, uh, uw)], *common.view_args(src), dst.storage.buf,
        np.int64(total))
    return dst


def pack_weight(w, geo, pw, kp, flip):
    """The weight in panels of pw channels over kp (>= K) rows, per group."""
    panels = -(-geo.cog // pw)
    total = geo.g * panels * kp * pw
    wpk = common.empty((total,), w)
    defines = {"T": ctype_of(w.dtype), "KH": geo.kh, "KW": geo.kw}
    if flip:
        defines["FLIP"] = None
    kernel = common.get_kernel(w.device, KERNEL_FILE, "pack_weight", defines)
    common.launch_1d(w.device, kernel, total, np.int32(geo.cog), np.int32(geo.cg),
                     np.int32(geo.k), np.int32(kp), np.int32(panels), np.int32(pw),
                     *common.view_args(w), wpk.storage.buf, np.int64(total))
    return wpk


# ---- the convolution kernels ------------------------------------------------------------------

def _gpu_tile(device, itemsize, work, rows):
    """The largest GPU tile that fits the device and gives it enough work-groups."""
    fits = [t for t in GPU_TILES if _wg_size(t) <= device.max_work_group and
            t["TSK"] * (t["TSM"] + t["TSN"]) * itemsize <= device.local_mem]
    need = GROUPS_PER_CU * device.cl_device.max_compute_units
    for t in fits:
        if work(t) >= need and rows >= t["TSM"] // 2:
            return t
    return fits[-1]


def _wg_size(t):
    return (t["TSM"] // t["WPTM"]) * (t["TSN"] // t["WPTN"])


def _cpu_style(device):
    return KERNEL_STYLE == "cpu" or (KERNEL_STYLE is None and device.is_cpu)


def conv(xpad, geo, w, out, bias, flip):
    """out (a 4-d view) = the convolution of geo over xpad with weight w (flipped and
    transposed when flip), plus bias."""
    device = out.device
    if _cpu_style(device):
        tile = CPU_TILES[geo.dtype.itemsize]
        pw, kp, grid_x = tile["MR"], geo.k, -(-geo.qn // tile["NR"])
        name, local = "conv_cpu", (1, 1, 1)
    else:
        per_image = lambda t: -(-geo.qn // t["TSN"]) * -(-geo.cog // t["TSM"])
        tile = _gpu_tile(device, geo.dtype.itemsize, lambda t: per_image(t) * geo.n * geo.g,
                         geo.cog)
        pw, kp, grid_x = tile["TSM"], round_up(geo.k, tile["TSK"]), -(-geo.qn // tile["TSN"])
        name = "conv_gpu"
        local = (tile["TSN"] // tile["WPTN"], tile["TSM"] // tile["WPTM"], 1)
    wpk = pack_weight(w, geo, pw, kp, flip)
    defines = _defines(geo, **tile)
    if bias is not None:
        defines["HAS_BIAS"] = None
    kernel = common.get_kernel(device, KERNEL_FILE, name, defines)
    panels = -(-geo.cog // pw)
    bias_args = ([bias.storage.buf, np.int64(bias.offset), np.int64(bias.strides[0])]
                 if bias is not None else [wpk.storage.buf, np.int64(0), np.int64(0)])
    tail = [*[np.int32(v) for v in (geo.g, geo.cg, geo.cog, geo.k, kp, geo.wp)],
            np.int64(geo.hp * geo.wp), np.int32(geo.qn), np.int32(geo.wo), xpad.storage.buf,
            wpk.storage.buf, *bias_args, *common.view_args(out)]
    step = max(1, MAX_GROUPS // geo.g)  # NOTE: NVIDIA allows 65535 work-groups along dim 2
    for n0 in range(0, geo.n, step):
        nb = min(step, geo.n - n0)
        launch(device, kernel, (grid_x * local[0], panels * local[1], nb * geo.g), local,
               np.int32(n0), *tail)
    return out


def forward(x, w, bias, p, out):
    geo = _forward_geometry(p)
    xpad = pad(x, geo, p.c, p.pt, p.pl)
    return conv(xpad, geo, w, out, bias, flip=False)


# ---- backward ---------------------------------------------------------------------------------

def backward(x, w, gout, p, need_x, need_w):
    gx = gw = None
    if need_x:
        gx = common.empty((p.n, p.c, p.h, p.w), x, common.layout_of(x))
        dgeo = _data_geometry(p)
        gpad = pad(gout, dgeo, p.co, (p.kh - 1) * p.dh - p.pt, (p.kw - 1) * p.dw - p.pl,
                   p.sh, p.sw)
        conv(gpad, dgeo, w, gx, None, flip=True)
    if need_w:
        gw = weight_grad(x, gout, p)
    return gx, gw


def _splits(device, tiles, n, groups, part_bytes):
    """How many slices of the images the weight gradient's reduction runs in."""
    want = GROUPS_PER_CU * device.cl_device.max_compute_units
    s = min(n, max(1, -(-want // max(tiles, 1))), max(1, MAX_GROUPS // groups))
    s = max(1, min(s, backends.conv_workspace_limit // max(part_bytes, 1)))
    ips = -(-n // s)
    return -(-n // ips), ips


def _grad_positions(gout, geo, p, cop):
    """The output gradient positions-major: gq[n][q][c] (zero on dropped columns)."""
    qw = geo.ho * geo.wq
    gq = common.empty((p.n * qw * cop,), gout)
    rows = gout.device.is_cpu
    defines = {"T": ctype_of(p.dtype), **({"ROWS": None} if rows else {})}
    kernel = common.get_kernel(gout.device, KERNEL_FILE, "pad_grad", defines)
    common.launch_1d(gout.device, kernel, p.n * qw if rows else gq.numel(), np.int32(p.n),
                     np.int32(p.co), np.int32(qw), np.int32(geo.wq), np.int32(geo.wo),
                     np.int32(cop), *common.view_args(gout), gq.storage.buf)
    return gq, qw


def weight_grad(x, gout, p):
    """gW = sum over images and positions of the gathered input times the output gradient."""
    device = x.device
    geo = _forward_geometry(p)
    if _cpu_style(device):
        tile = CPU_TILES[p.dtype.itemsize]
        cols, rows = tile["NR"], tile["MR"]
        local, name = (1, 1, 1), "wgrad_cpu"
    else:
        tile = _gpu_tile(device, p.dtype.itemsize, lambda t: -(-p.cog // t["TSN"]) *
                         -(-geo.k // t["TSM"]) * p.groups * p.n, geo.k)
        cols, rows = tile["TSN"], tile["TSM"]
        local = (tile["TSN"] // tile["WPTN"], tile["TSM"] // tile["WPTM"], 1)
        name = "wgrad_gpu"
    cop = round_up(p.co + cols, 16)  # the tiles' vector loads may run cols past Co
    xpad = pad(x, geo, p.c, p.pt, p.pl)
    gq, qw = _grad_positions(gout, geo, p, cop)
    tiles = -(-p.cog // cols) * -(-geo.k // rows) * p.groups
    part_bytes = p.co * geo.k * p.dtype.itemsize
    s, ips = _splits(device, tiles, p.n, p.groups, part_bytes)
    part = common.empty((s * p.co * geo.k,), x)
    kernel = common.get_kernel(device, KERNEL_FILE, name, _defines(geo, **tile))
    gsize = (-(-p.cog // cols) * local[0], -(-geo.k // rows) * local[1], p.groups * s)
    launch(device, kernel, gsize, local, *[np.int32(v) for v in (
        p.n, p.groups, p.cg, p.cog, geo.k, geo.wp)], np.int64(geo.hp * geo.wp), np.int32(qw),
        np.int32(geo.wo), np.int32(cop), np.int32(ips), xpad.storage.buf, gq.storage.buf,
        part.storage.buf, np.int32(geo.k), np.int32(p.cog))
    gw = common.empty((p.co, p.cg, p.kh, p.kw), x)
    summer = common.get_kernel(device, KERNEL_FILE, "wgrad_sum", {"T": ctype_of(p.dtype)})
    common.launch_1d(device, summer, gw.numel(), np.int32(s), np.int32(p.groups),
                     np.int32(p.cog), np.int32(geo.k), np.int32(geo.k), np.int32(p.cog),
                     part.storage.buf, gw.storage.buf)
    return gw
