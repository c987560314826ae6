"""Algorithm "winograd": F(2x2, 3x3) for 3x3 convolutions with stride 1 and dilation 1 (any
padding), after Lavin & Gray. Per chunk of images: the input transform
(cl_kernels/conv_winograd.cl), 16 GEMMs in one batched call of the GEMM engine
(M[e] = U[e] @ V[e]), the output transform with the bias. The filter transform U is cached per
weight version (common.per_weight), so an optimizer's in-place update makes the next call
transform again.

The input gradient is the same algorithm on the output gradient with the flipped transposed
filter and padding 2 - p (a 3x3 stride-1 convolution). The weight gradient runs the product
backwards: per chunk of images, the input transform V and the output gradient's transform
P = A Z A^T per tile, 16 GEMMs dU[e] += P[e] @ V[e]^T summed over the tiles (the GEMM engine
splits that long sum to fill the device), then dW = G^T dU G.

Accuracy: the transforms scale by 1/2 and add at most 9 terms, so the result's error is a
small multiple of direct fp32's; the tests bound the norm-relative error by 1e-5 for fp32
(WINOGRAD_RTOL), as for the other algorithms.
"""
import numpy as np

from ..ops.gemm import gemm
from ..program import ctype_of, round_up
from . import common

KERNEL_FILE = "conv_winograd.cl"
WINOGRAD_RTOL = 1e-5


def eligible(p):
    if (p.kh, p.kw) != (3, 3):
        return False, f"winograd F(2x2,3x3) needs a 3x3 kernel, got {p.kh}x{p.kw}"
    if (p.sh, p.sw) != (1, 1):
        return False, f"winograd needs stride 1, got {p.sh}x{p.sw}"
    if (p.dh, p.dw) != (1, 1):
        return False, f"winograd needs dilation 1, got {p.dh}x{p.dw}"
    return True, ""


def _tiles(ho, wo):
    return -(-ho // 2), -(-wo // 2)


def _per_image_bytes(p, ho, wo):
    th, tw = _tiles(ho, wo)
    return 16 * (p.c + p.co) * th * tw * p.dtype.itemsize


def workspace_bytes(p, backward=False):
    """The transformed tiles of one chunk of images, plus the transformed filter (or its
    gradient); backward, the larger of the two gradients' tiles (input, output positions)."""
    per = _per_image_bytes(p, p.ho, p.wo)
    if backward:
        per = max(per, _per_image_bytes(p, p.h, p.w))
    return per * common.images_per_chunk(p.n, per) + 16 * p.co * p.cg * p.dtype.itemsize


def filter_transform(w, p, flip):
    """U (16 * G, out, in) of w, made once per weight version (common.per_weight)."""
    return common.per_weight(w, ("winograd", p.groups, flip), lambda: _transform(w, p, flip))


def _transform(w, p, flip):
    cout, cin = (p.cg, p.cog) if flip else (p.cog, p.cg)
    U = common.empty((16 * p.groups, cout, cin), w)
    defines = {"T": ctype_of(p.dtype)}
    if flip:
        defines["FLIP"] = None
    kernel = common.get_kernel(w.device, KERNEL_FILE, "filter_transform", defines)
    common.launch_1d(w.device, kernel, p.groups * cout * cin, np.int32(p.groups),
                     np.int32(cout), np.int32(cin), *common.view_args(w), U.storage.buf)
    return U


def _images(t, n0, nb):
    return common.strided(t, (nb,) + tuple(t.shape[1:]), t.strides,
                          t.offset + n0 * t.strides[0])


def run(src, U, out, bias, p, cin, cout, pads):
    """out (N, G*cout, HO, WO view) = the 3x3 stride-1 convolution of src (N, G*cin, H, W)
    with transformed filter U, zero padding (top, left) = pads, in chunks of images."""
    n = src.shape[0]
    ho, wo = out.shape[2:]
    th, tw = _tiles(ho, wo)
    nb_max = common.images_per_chunk(n, _per_image_bytes(p, ho, wo))  # G*(cin+cout) = C+Co
    for n0 in range(0, n, nb_max):
        nb = min(nb_max, n - n0)
        tp = padded_tiles(src.device, nb * th * tw)
        V = _input_transform(_images(src, n0, nb), p.groups * cin, pads, th, tw, nb, tp)
        M = gemm(U, V.view(16 * p.groups, cin, tp))
        _output_transform(M, bias, _images(out, n0, nb), th, tw, nb, tp)
    return out


# The transformed tiles' rows are padded (with zero tiles) to a multiple of this many, so that
# the GEMM engine's tiles read them in place (H200: unpadded rows cost VGG-A 6.8 ms of
# zero-padded operand copies per step); CPUs' GEMM family packs its operands anyway
TILE_ALIGN = {"cpu": 1, "gpu": 128}


def padded_tiles(device, count):
    return round_up(count, TILE_ALIGN["cpu" if device.is_cpu else "gpu"])


def _input_transform(x, channels, pads, th, tw, nb, tp):
    V = common.empty((16, channels, tp), x)
    kernel = common.get_kernel(x.device, KERNEL_FILE, "input_transform",
                               {"T": ctype_of(x.dtype)})
    h, w = x.shape[2:]
    common.launch_1d(x.device, kernel, channels * tp, np.int32(channels), np.int32(h),
                     np.int32(w), np.int32(pads[0]), np.int32(pads[1]), np.int32(th),
                     np.int32(tw), np.int32(nb), np.int32(tp), *common.view_args(x),
                     V.storage.buf)
    return V


def _output_transform(M, bias, y, th, tw, nb, tp):
    defines = {"T": ctype_of(y.dtype)}
    if bias is not None:
        defines["HAS_BIAS"] = None
    kernel = common.get_kernel(y.device, KERNEL_FILE, "output_transform", defines)
    co, ho, wo = y.shape[1:]
    bias_args = ([bias.storage.buf, np.int64(bias.offset), np.int64(bias.strides[0])]
                 if bias is not None else [M.storage.buf, np.int64(0), np.int64(0)])
    common.launch_1d(y.device, kernel, co * nb * th * tw, np.int32(co), np.int32(ho),
                     np.int32(wo), np.int32(th), np.int32(tw), np.int32(nb), np.int32(tp),
                     M.storage.buf, *bias_args, *common.view_args(y))


def forward(x, w, bias, p, out):
    U = filter_transform(w, p, flip=False)
    return run(x, U, out, bias, p, p.cg, p.cog, (p.pt, p.pl))


def backward(x, w, gout, p, need_x, need_w):
    gx = gw = None
    if need_x:
        U = filter_transform(w, p, flip=True)
        gx = common.empty((p.n, p.c, p.h, p.w), x, common.layout_of(x))
        run(gout, U, gx, None, p, p.cog, p.cg, (2 - p.pt, 2 - p.pl))
    if need_w:
        gw = weight_grad(x, gout, p)
    return gx, gw


def weight_grad(x, gout, p):
    """The weight gradient (Co, Cg, 3, 3): dU = sum over tiles of P[e] @ V[e]^T, in chunks of
    images, then dW = G^T dU G."""
    n = x.shape[0]
    th, tw = _tiles(p.ho, p.wo)
    nb_max = common.images_per_chunk(n, _per_image_bytes(p, p.ho, p.wo))
    dU = common.empty((16 * p.groups, p.cog, p.cg), x)
    for n0 in range(0, n, nb_max):
        nb = min(nb_max, n - n0)
        tp = padded_tiles(x.device, nb * th * tw)
        V = _input_transform(_images(x, n0, nb), p.c, (p.pt, p.pl), th, tw, nb, tp)
        P = _grad_transform(_images(gout, n0, nb), th, tw, nb, tp)
        gemm(P.view(16 * p.groups, p.cog, tp),
             V.view(16 * p.groups, p.cg, tp).transpose(1, 2), out=dU, c=dU,
             beta=1 if n0 else 0)
    gw = common.empty((p.co, p.cg, 3, 3), x)
    kernel = common.get_kernel(x.device, KERNEL_FILE, "weight_transform",
                               {"T": ctype_of(x.dtype)})
    common.launch_1d(x.device, kernel, p.co * p.cg, np.int32(p.groups), np.int32(p.cog),
                     np.int32(p.cg), dU.storage.buf, gw.storage.buf)
    return gw


def _grad_transform(z, th, tw, nb, tp):
    co, ho, wo = z.shape[1:]
    P = common.empty((16, co, tp), z)
    kernel = common.get_kernel(z.device, KERNEL_FILE, "grad_transform",
                               {"T": ctype_of(z.dtype)})
    common.launch_1d(z.device, kernel, co * tp, np.int32(co), np.int32(ho), np.int32(wo),
                     np.int32(th), np.int32(tw), np.int32(nb), np.int32(tp),
                     *common.view_args(z), P.storage.buf)
    return P
