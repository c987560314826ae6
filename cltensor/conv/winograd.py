"""Algorithms "winograd" and "winograd_4x4": Winograd's minimal filtering F(m x m, r x r) for
3x3 and 5x5 convolutions with stride 1 and dilation 1 (any padding), after Lavin & Gray;
m = 2 and m = 4 output positions a side. Per chunk of images: the input transform
(cl_kernels/conv_winograd.cl), A*A GEMMs in one batched call of the GEMM engine
(M[e] = U[e] @ V[e], A = m + r - 1), the output transform with the bias. The filter transform
U is cached per weight version (common.per_weight), so an optimizer's in-place update makes the
next call transform again. A run of one chunk records its three launches (program.record), and
the next run with the same shapes, strides, offsets and GEMM settings replays them with its own
tensors and scratch: about half of the forward's host time (GoogLeNet's 5x5 passes of 0.1-0.3
ms on the H200 waited on the host's 90 us).

The transforms are Toom-Cook's (matrices()): A - 1 interpolation points and infinity. Each
output costs A*A / (m*m) multiplications in the GEMMs against r*r for direct convolution:
F(2x2, 3x3) 4 (2.25x fewer), F(4x4, 3x3) 2.25 (4x), F(2x2, 5x5) 9 (2.8x), F(4x4, 5x5) 4
(6.25x), paid for with larger transformed tiles and larger rounding errors.

The input gradient is the same algorithm on the output gradient with the flipped transposed
filter and padding r - 1 - p (an r x r stride-1 convolution). The weight gradient runs the
product backwards: per chunk of images, the input transform V and the output gradient's
transform P = A Z A^T per tile, A*A GEMMs dU[e] += P[e] @ V[e]^T summed over the tiles (the
GEMM engine splits that long sum to fill the device), then dW = G^T dU G.

Accuracy: fp32 norm-relative error of a layer with 64 input channels on uniform random data,
against a float64 reference (direct fp32: 1.0e-7): F(2x2, 3x3) 2.7e-7, F(4x4, 3x3) 1.3e-6,
F(2x2, 5x5) 1.5e-6, F(4x4, 5x5) 3.5e-6. The tests bound every variant and pass by
WINOGRAD_RTOL (1e-5).

bfloat16 problems let the GEMM engine multiply the transformed tiles in TF32 (tf32_products)
where that error stays under bfloat16's unit roundoff (3.9e-3): rounding U and V to TF32's 11
significant bits gives a norm-relative error of 4.2e-4 with F(2x2, 3x3), 2.0e-3 with F(4x4,
3x3), 2.5e-3 with F(2x2, 5x5) and 5.9e-3 with F(4x4, 5x5), whose products stay float32
(bfloat16 data, 256 channels, a float64 model of the rounding). float16's unit roundoff
(4.9e-4) is below them all: its products stay float32.
"""
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from .. import backends, caches, program
from .. import dtypes as dt
from ..ops import gemm
from ..program import ctype_of, round_up
from ..tensor import ClTensor
from . import common

KERNEL_FILE = "conv_winograd.cl"
WINOGRAD_RTOL = 1e-5
KERNEL_SIZES = (3, 5)
# Interpolation points per tile size A (plus infinity). Small points keep the transforms'
# coefficients near 1; 1/2 in place of 2 lowered the error of F(4x4, 3x3) from 1.9e-6 to
# 1.3e-6 and of F(2x2, 5x5) from 2.1e-6 to 1.5e-6 (same measure as above).
POINTS = {4: (0, 1, -1), 6: (0, 1, -1, Fraction(1, 2), -2),
          8: (0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2))}


def matrices(m, r):
    """Exact (A^T (m x A), G (A x r), B^T (A x A)) of F(m, r) as lists of Fractions, such that
    y = A^T [(G g) * (B^T d)] is the correlation y[i] = sum_k d[i + k] g[k], i < m: the
    transpose of Toom-Cook's linear convolution, with 1 / prod_{l != j} (p_j - p_l) in G."""
    a = m + r - 1
    pts = [Fraction(p) for p in POINTS[a]]
    at = [[p ** i for p in pts] + [Fraction(i == m - 1)] for i in range(m)]
    g = [[p ** k / _product(p - q for q in pts if q != p) for k in range(r)] for p in pts]
    g.append([Fraction(k == r - 1) for k in range(r)])
    # B^T's row j: the coefficients of prod_{l != j} (x - p_l); the last (infinity) row:
    # those of prod_l (x - p_l)
    bt = [_from_roots([q for q in pts if q != p], a) for p in pts]
    bt.append(_from_roots(pts, a))
    return at, g, bt


def _product(values):
    out = Fraction(1)
    for v in values:
        out *= v
    return out


def _from_roots(roots, size):
    """The coefficients (lowest power first, `size` of them) of prod (x - root)."""
    poly = [Fraction(1)] + [Fraction(0)] * (size - 1)
    for q in roots:
        poly = [(poly[k - 1] if k else 0) - q * poly[k] for k in range(size)]
    return poly


@caches.lru_cache(maxsize=None)
def _defines(m, r, dtype, vec):
    """The build options of F(m, r)'s kernels for dtype (the matrices as brace lists), taking
    vec tiles or filters per work-item."""
    at, g, bt = matrices(m, r)
    return {"T": ctype_of(dtype), "WINO_M": m, "WINO_R": r, "WINO_A": m + r - 1,
            "WINO_AT": _literals(at, dtype), "WINO_G": _literals(g, dtype),
            "WINO_BT": _literals(bt, dtype), "VEC": vec}


@caches.lru_cache(maxsize=None)
def items_per_work_item(device, dtype):
    """conv_winograd.cl's VEC, the tiles or filters its kernels take per work-item: on CPUs
    the device's preferred vector width for dtype (a power of two up to 16, one per lane:
    see the kernels' header), 1 on other devices."""
    if not device.is_cpu:
        return 1
    d = device.cl_device
    width = (d.preferred_vector_width_double if np.dtype(dtype) == np.float64
             else d.preferred_vector_width_float)
    vec = 1
    while vec * 2 <= min(width, 16):
        vec *= 2
    return vec


def _literals(mat, dtype):
    """A matrix as an OpenCL brace list of literals of dtype."""
    suffix = "f" if np.dtype(dtype) == np.float32 else ""
    return "{" + ",".join("{" + ",".join(f"{float(v)!r}{suffix}" for v in row) + "}"
                          for row in mat) + "}"


# Work-group of the kernels along dim 0 (tiles or filters; dim 1 is the channels), fixed: on
# PoCL 16-32 tiles ran fastest and PoCL compiles a kernel again for every work-group size it
# picks itself (docs/performance.md); on GPUs a divisor of TILE_ALIGN, so padded rows fill groups
TILE_LOCAL = {"cpu": 32, "gpu": 128}
# The transformed tiles' rows are padded (with zero tiles) to a multiple of this many, so that
# the GEMM engine's tiles read them in place rather than through padded copies (H200,
# docs/performance.md); CPUs' GEMM family packs its operands anyway
TILE_ALIGN = {"cpu": 1, "gpu": 128}


def _scratch(shape, like):
    """A transform buffer for tensors like `like`: in their compute type (float32 for 16-bit
    tensors, whose transforms run in float32)."""
    return ClTensor.empty_on(tuple(shape), dt.compute_dtype(like.dtype), like.device)


# the largest tile (A = m + r - 1) whose products a bfloat16 problem takes in TF32
TF32_MAX_ALPHA = 6


def padded_tiles(device, count):
    return round_up(count, TILE_ALIGN["cpu" if device.is_cpu else "gpu"])


def _launch_runs(device, kernel, dtype, count, channels, *args):
    """A kernel over (count, channels), items_per_work_item tiles or filters (of count) a
    work-item, the work-items rounded up to the group."""
    local = min(TILE_LOCAL["cpu" if device.is_cpu else "gpu"], device.max_work_group)
    items = -(-count // items_per_work_item(device, dtype))
    return program.launch(device, kernel, (round_up(items, local), channels), (local, 1),
                          *args)


def outputs_contiguous(device, dtype):
    """Whether U (out x in per transform position) is stored with the outputs contiguous: as
    the device's GEMM family reads it in place. NOTE: xgemm (GPUs) reads such an A in place
    whatever the input channels are; with the inputs contiguous, counts that are no multiple
    of its K tile (GoogLeNet's 5x5 layers: 16, 24, 48) cost a padded copy of U and a plan
    decided afresh every pass (H200 host, 4b/5x5 forward: the product's Python 44 -> 18 us,
    one launch fewer). gemm_packed (CPUs) reads A in place with the inputs contiguous."""
    return (gemm.FORCE_FAMILY or gemm.entry_for(device, dtype)["family"]) != "packed"


def _images(t, n0, nb):
    return common.strided(t, (nb,) + tuple(t.shape[1:]), t.strides,
                          t.offset + n0 * t.strides[0])


def _batches(t, count, rows, cols, transpose=False):
    """The contiguous scratch t as `count` (rows x cols) matrices, or their transposes.
    NOTE: common.strided, not view(): the tensor methods' checks and autograd hooks cost a
    small layer's pass several microseconds each."""
    if transpose:
        return common.strided(t, (count, cols, rows), (rows * cols, 1, cols))
    return common.strided(t, (count, rows, cols), (rows * cols, cols, 1))


class Winograd:
    """The algorithm F(m x m, r x r) for r in KERNEL_SIZES, the interface of an algorithm
    module (eligible, workspace_bytes, forward, backward)."""

    FUSES_RELU = True  # forward(..., relu=True) applies max(., 0) as it stores

    def __init__(self, m):
        self.m = m

    def __repr__(self):
        return f"Winograd(m={self.m})"

    def eligible(self, p):
        if p.kh != p.kw or p.kh not in KERNEL_SIZES:
            return False, (f"winograd F({self.m}x{self.m}, rxr) needs a square kernel of size "
                           f"{' or '.join(map(str, KERNEL_SIZES))}, got {p.kh}x{p.kw}")
        if (p.sh, p.sw) != (1, 1):
            return False, f"winograd needs stride 1, got {p.sh}x{p.sw}"
        if (p.dh, p.dw) != (1, 1):
            return False, f"winograd needs dilation 1, got {p.dh}x{p.dw}"
        return True, ""

    def _alpha(self, p):
        return self.m + p.kh - 1

    def tf32_products(self, p):
        """Whether p's transformed tiles may be multiplied in TF32 (the module's notes)."""
        return p.dtype == dt.bfloat16 and self._alpha(p) <= TF32_MAX_ALPHA

    def _tiles(self, ho, wo):
        return -(-ho // self.m), -(-wo // self.m)

    def _per_image_bytes(self, p, ho, wo):
        th, tw = self._tiles(ho, wo)
        return self._alpha(p) ** 2 * (p.c + p.co) * th * tw * dt.compute_dtype(p.dtype).itemsize

    def workspace_bytes(self, p, backward=False, device=None):
        """The transformed tiles of one chunk of images, plus the transformed filter (or its
        gradient); backward, the larger of the two gradients' tiles (input, output positions)."""
        per = self._per_image_bytes(p, p.ho, p.wo)
        if backward:
            per = max(per, self._per_image_bytes(p, p.h, p.w))
        return (per * common.images_per_chunk(p.n, per) +
                self._alpha(p) ** 2 * p.co * p.cg * dt.compute_dtype(p.dtype).itemsize)

    def _kernel(self, device, dtype, r, name):
        """A kernel for tensors of dtype: the transforms compute in its compute type, and
        16-bit tensors are read and written as their storage type TS."""
        # NOTE: one program per (m, r, dtype) holds the five kernels: each build of the
        # unrolled transforms costs seconds on PoCL
        compute = np.dtype(dt.compute_dtype(dtype))
        defines = _defines(self.m, r, compute, items_per_work_item(device, compute))
        if dtype in dt.HALF_TYPES:  # NOTE: a new dict: _defines' are memoized
            defines = dict(defines, TS=ctype_of(dtype))
        return program.get_kernel(device, KERNEL_FILE, name, defines)

    # ---- forward and input gradient ----

    def filter_transform(self, w, p, flip):
        """U (A*A * G, out, in) of w, made once per weight version (common.per_weight), laid
        out as the device's GEMM family reads it in place (outputs_contiguous)."""
        o_fast = outputs_contiguous(w.device, p.dtype)
        return common.per_weight(w, ("winograd", self.m, p.groups, flip, o_fast),
                                 lambda w: self._transform(w, p, flip, o_fast))

    def _transform(self, w, p, flip, o_fast):
        cout, cin = (p.cg, p.cog) if flip else (p.cog, p.cg)
        batches = self._alpha(p) ** 2 * p.groups
        U = _scratch((batches, cin, cout) if o_fast else (batches, cout, cin), w)
        kernel = self._kernel(w.device, p.dtype, p.kh, "filter_transform")
        _launch_runs(w.device, kernel, p.dtype, p.groups * cout * cin, 1, np.int32(p.groups),
                     np.int32(cout), np.int32(cin), np.int32(flip), np.int32(o_fast),
                     *common.view_args(w), U.storage.buf)
        return _batches(U, batches, cin, cout, transpose=True) if o_fast else U

    def run(self, src, U, out, bias, p, cin, cout, pads, relu=False):
        """out (N, G*cout, HO, WO view) = the r x r stride-1 convolution of src
        (N, G*cin, H, W) with transformed filter U (then max(., 0) with relu), zero padding
        (top, left) = pads, in chunks of images. A one-chunk run replays the launches of the
        last run with the same key (_plan_key), allocating its scratch again."""
        key = self._plan_key(src, U, out, bias, p, cin, cout, pads, relu)
        plan = _plans.get(key)
        if plan:
            return plan.run(src, U, out, bias)
        n = src.shape[0]
        nb_max = common.images_per_chunk(n, self._per_image_bytes(p, *out.shape[2:]))
        if nb_max >= n and key is not None and key not in _plans:
            with program.record() as launches:
                V, M = self._chunk(src, U, out, bias, p, cin, cout, pads, relu, 0, n)
            roles = dict(x=src.storage.buf, U=U.storage.buf, V=V.storage.buf,
                         M=M.storage.buf, out=out.storage.buf)
            if bias is not None:
                roles["bias"] = bias.storage.buf
            replay = program.Replay.make(launches, roles)
            program.remember(_plans, key, replay and _Plan(replay, V.shape, M.shape))
            return out
        for n0 in range(0, n, nb_max):
            self._chunk(src, U, out, bias, p, cin, cout, pads, relu, n0, min(nb_max, n - n0))
        return out

    def _chunk(self, src, U, out, bias, p, cin, cout, pads, relu, n0, nb):
        """run() on images n0 .. n0 + nb; returns its scratch (V, M)."""
        th, tw = self._tiles(*out.shape[2:])
        ee = self._alpha(p) ** 2
        tp = padded_tiles(src.device, nb * th * tw)
        V = self._input_transform(_images(src, n0, nb), p, p.groups * cin, pads, th, tw, nb,
                                  tp)
        # NOTE: gemm_into, not gemm(): the operands are ours and valid, and the public
        # entry's checks cost host time that the small layers' passes notice
        M = gemm.gemm_into(U, _batches(V, ee * p.groups, cin, tp),
                           common.empty((ee * p.groups, cout, tp), V),
                           tf32=self.tf32_products(p))
        self._output_transform(M, bias, _images(out, n0, nb), p, th, tw, nb, tp, relu)
        return V, M

    def _plan_key(self, src, U, out, bias, p, cin, cout, pads, relu):
        """Everything that decides run()'s launches but its buffers: shapes, strides, offsets,
        and the flags, plug-ins and tuning entry the GEMM engine reads; None in benchmark mode
        (the engine times its candidates)."""
        if backends.benchmark:
            return None
        dev = src.device
        return (self.m, p, cin, cout, pads, relu, src.shape, src.strides, src.offset, U.shape,
                U.strides, U.offset, out.shape, out.strides, out.offset,
                None if bias is None else (bias.offset, bias.strides), dev,
                backends.allow_tf32, backends.conv_workspace_limit, gemm.FORCE_FAMILY,
                gemm.generation, id(gemm.entry_for(dev, p.dtype)))

    def _input_transform(self, x, p, channels, pads, th, tw, nb, tp):
        V = _scratch((self._alpha(p) ** 2, channels, tp), x)
        kernel = self._kernel(x.device, x.dtype, p.kh, "input_transform")
        h, w = x.shape[2:]
        _launch_runs(x.device, kernel, x.dtype, tp, channels, np.int32(channels), np.int32(h),
                     np.int32(w), np.int32(pads[0]), np.int32(pads[1]), np.int32(th),
                     np.int32(tw), np.int32(nb), np.int32(tp), *common.view_args(x),
                     V.storage.buf)
        return V

    def _output_transform(self, M, bias, y, p, th, tw, nb, tp, relu):
        kernel = self._kernel(y.device, y.dtype, p.kh, "output_transform")
        co, ho, wo = y.shape[1:]
        bias_args = ([bias.storage.buf, np.int64(bias.offset), np.int64(bias.strides[0])]
                     if bias is not None else [M.storage.buf, np.int64(0), np.int64(0)])
        _launch_runs(y.device, kernel, y.dtype, nb * th * tw, co, np.int32(co), np.int32(ho),
                     np.int32(wo), np.int32(th), np.int32(tw), np.int32(nb),
                     np.int32(tp), M.storage.buf, np.int32(bias is not None),
                     np.int32(relu), *bias_args, *common.view_args(y))

    def forward(self, x, w, bias, p, out, relu=False):
        U = self.filter_transform(w, p, flip=False)
        return self.run(x, U, out, bias, p, p.cg, p.cog, (p.pt, p.pl), relu)

    def backward(self, x, w, gout, p, need_x, need_w):
        gx = gw = None
        if need_x:
            U = self.filter_transform(w, p, flip=True)
            gx = common.empty((p.n, p.c, p.h, p.w), x, common.layout_of(x))
            r = p.kh
            self.run(gout, U, gx, None, p, p.cog, p.cg, (r - 1 - p.pt, r - 1 - p.pl))
        if need_w:
            gw = self.weight_grad(x, gout, p)
        return gx, gw

    # ---- weight gradient ----

    def weight_grad(self, x, gout, p):
        """The weight gradient (Co, Cg, r, r): dU = sum over tiles of P[e] @ V[e]^T, in
        chunks of images, then dW = G^T dU G. A one-chunk pass replays the launches of the
        last one with the same key (_grad_key), as run() does."""
        key = self._grad_key(x, gout, p)
        plan = _plans.get(key)
        if plan:
            return plan.run(x, gout)
        one_chunk = common.images_per_chunk(x.shape[0], self._per_image_bytes(p, p.ho, p.wo))
        if one_chunk < x.shape[0] or key is None or key in _plans:
            return self._weight_grad(x, gout, p)
        with program.record() as launches:
            gw = self._weight_grad(x, gout, p)
        replay = program.Replay.make(launches, {"x": x.storage.buf, "gout": gout.storage.buf},
                                     [gw.storage])
        ok = replay is not None and None not in replay.outputs and gw.offset == 0
        program.remember(_plans, key, _GradPlan(replay, gw.shape, gw.strides, gw.dtype) if ok else None)
        return gw

    def _grad_key(self, x, gout, p):
        """weight_grad's _plan_key: x's and gout's layouts and the flags and tuning entry the
        GEMM engine reads; None in benchmark mode."""
        if backends.benchmark:
            return None
        dev = x.device
        return ("weight_grad", self.m, p, x.shape, x.strides, x.offset, gout.shape,
                gout.strides, gout.offset, dev, backends.allow_tf32,
                backends.conv_workspace_limit, gemm.FORCE_FAMILY, gemm.generation,
                id(gemm.entry_for(dev, p.dtype)))

    def _weight_grad(self, x, gout, p):
        n = x.shape[0]
        th, tw = self._tiles(p.ho, p.wo)
        ee = self._alpha(p) ** 2
        nb_max = common.images_per_chunk(n, self._per_image_bytes(p, p.ho, p.wo))
        dU = _scratch((ee * p.groups, p.cog, p.cg), x)
        for n0 in range(0, n, nb_max):
            nb = min(nb_max, n - n0)
            tp = padded_tiles(x.device, nb * th * tw)
            V = self._input_transform(_images(x, n0, nb), p, p.c, (p.pt, p.pl), th, tw, nb,
                                      tp)
            P = self._grad_transform(_images(gout, n0, nb), p, th, tw, nb, tp)
            gemm.gemm_into(_batches(P, ee * p.groups, p.cog, tp),
                           _batches(V, ee * p.groups, p.cg, tp, transpose=True), dU,
                           dU if n0 else None, beta=1 if n0 else 0,
                           tf32=self.tf32_products(p))
        gw = common.empty((p.co, p.cg, p.kh, p.kw), x)
        kernel = self._kernel(x.device, x.dtype, p.kh, "weight_transform")
        _launch_runs(x.device, kernel, x.dtype, p.co * p.cg, 1, np.int32(p.groups),
                     np.int32(p.cog), np.int32(p.cg), dU.storage.buf, gw.storage.buf)
        return gw

    def _grad_transform(self, z, p, th, tw, nb, tp):
        co, ho, wo = z.shape[1:]
        P = _scratch((self._alpha(p) ** 2, co, tp), z)
        kernel = self._kernel(z.device, z.dtype, p.kh, "grad_transform")
        _launch_runs(z.device, kernel, z.dtype, tp, co, np.int32(co), np.int32(ho), np.int32(wo),
                     np.int32(th), np.int32(tw), np.int32(nb), np.int32(tp),
                     *common.view_args(z), P.storage.buf)
        return P


class _Plan(NamedTuple):
    """A one-chunk Winograd run to replay: its launches and its scratch's shapes."""
    replay: program.Replay
    v_shape: tuple
    m_shape: tuple

    def run(self, src, U, out, bias):
        V, M = _scratch(self.v_shape, src), _scratch(self.m_shape, src)
        buffers = dict(x=src.storage.buf, U=U.storage.buf, V=V.storage.buf, M=M.storage.buf,
                       out=out.storage.buf, bias=None if bias is None else bias.storage.buf)
        self.replay(src.device, buffers)
        return out


class _GradPlan(NamedTuple):
    """A one-chunk weight gradient to replay: its launches and its result's shape, strides
    and dtype (the replay's one output)."""
    replay: program.Replay
    shape: tuple
    strides: tuple
    dtype: dt.DType

    def run(self, x, gout):
        buffers = {"x": x.storage.buf, "gout": gout.storage.buf}
        storage, = self.replay(x.device, buffers, self.replay.outputs)
        return ClTensor(storage, self.shape, self.strides, 0, self.dtype)


# Winograd.run's plans (_plan_key -> _Plan) and weight_grad's (_grad_key -> _GradPlan), or
# None where the launches use buffers that a replay could not know (a plug-in's split-K
# scratch, copies of operands)
_plans = caches.register("conv.winograd.plans", {})


def clear_plans():
    _plans.clear()

F2 = Winograd(2)  # algo "winograd"
F4 = Winograd(4)  # algo "winograd_4x4"
