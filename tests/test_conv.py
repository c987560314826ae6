"""conv2d: every algorithm against a direct float64 numpy reference, forward and backward,
with the kernels' variants (the fused ReLU, implicit GEMM's kernel styles and parameter sets,
gemm_1x1's weight-gradient paths and merged products); the dispatch rules, benchmark mode and
the query; bad input; a property test. The reference and the helpers live here: the other
test_conv_*.py files (layouts, Winograd) and other tests import them."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cltensor
from cltensor import backends, tune
from cltensor.conv import (common, conv2d, conv_algorithms, dispatch, gemm1x1, implicit,
                           implicit_gpu, winograd)
from cltensor.conv import function as conv_function
from cltensor.conv.params import make_params
from cltensor.ops import gemm as gemm_ops
from cltensor.testing import gradcheck, random_array, rel_error

ALGOS = ["im2col", "implicit_gemm", "winograd", "winograd_4x4", "gemm_1x1", "s2d_winograd"]
FP32_RTOL = {"im2col": 1e-5, "implicit_gemm": 1e-5, "gemm_1x1": 1e-5, "auto": 1e-5,
             "winograd": winograd.WINOGRAD_RTOL, "winograd_4x4": winograd.WINOGRAD_RTOL,
             "s2d_winograd": winograd.WINOGRAD_RTOL}


# ---- the reference ----------------------------------------------------------------------------

def _pads(padding):
    """(top, bottom, left, right) as conv2d reads `padding` (ints, pairs, 4-tuples)."""
    if isinstance(padding, tuple) and len(padding) == 4:
        left, right, top, bottom = padding
        return top, bottom, left, right
    ph, pw = padding if isinstance(padding, tuple) else (padding, padding)
    return ph, ph, pw, pw


def _taps(xp, kh, kw, s, d, ho, wo):
    """For each tap (i, j): the (N, C, Ho, Wo) input values it multiplies."""
    for i in range(kh):
        for j in range(kw):
            yield i, j, xp[:, :, i * d[0]: i * d[0] + s[0] * (ho - 1) + 1: s[0],
                           j * d[1]: j * d[1] + s[1] * (wo - 1) + 1: s[1]]


def ref_conv(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, grad=None):
    """Direct convolution in float64; with `grad` (dL/dout) also (out, gx, gw)."""
    s = stride if isinstance(stride, tuple) else (stride, stride)
    d = dilation if isinstance(dilation, tuple) else (dilation, dilation)
    t, bt, lf, r = _pads(padding)
    x, w = x.astype(np.float64), w.astype(np.float64)
    xp = np.pad(x, ((0, 0), (0, 0), (t, bt), (lf, r)))
    co, cg, kh, kw = w.shape
    ho = (xp.shape[2] - d[0] * (kh - 1) - 1) // s[0] + 1
    wo = (xp.shape[3] - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((x.shape[0], co, ho, wo))
    gxp, gw = np.zeros_like(xp), np.zeros_like(w)
    cog = co // groups
    for g in range(groups):
        oc, ic = slice(g * cog, (g + 1) * cog), slice(g * cg, (g + 1) * cg)
        for i, j, patch in _taps(xp[:, ic], kh, kw, s, d, ho, wo):
            out[:, oc] += np.einsum("nchw,oc->nohw", patch, w[oc, :, i, j])
            if grad is not None:
                gw[oc, :, i, j] = np.einsum("nohw,nchw->oc", grad[:, oc], patch)
                gxp[:, ic, i * d[0]: i * d[0] + s[0] * (ho - 1) + 1: s[0],
                    j * d[1]: j * d[1] + s[1] * (wo - 1) + 1: s[1]] += \
                    np.einsum("nohw,oc->nchw", grad[:, oc], w[oc, :, i, j])
    if b is not None:
        out += b.astype(np.float64)[None, :, None, None]
    if grad is None:
        return out
    gx = gxp[:, :, t: t + x.shape[2], lf: lf + x.shape[3]]
    return out, gx, gw


# ---- helpers ----------------------------------------------------------------------------------

def _tensors(device, rng, xshape, wshape, dtype=np.float32, bias=True):
    x = random_array(rng, xshape, dtype)
    w = random_array(rng, wshape, dtype)
    b = random_array(rng, (wshape[0],), dtype) if bias else None
    put = lambda a: None if a is None else cltensor.from_numpy(a, device=device)
    return x, w, b, put(x), put(w), put(b)


def _check_case(device, rng, algo, case, dtype=np.float32, rtol=None, bias=True):
    """Forward and all gradients of one case against the reference."""
    xshape, wshape, kwargs = case
    x, w, b, X, W, B = _tensors(device, rng, xshape, wshape, dtype, bias)
    for t in (X, W, B):
        if t is not None:
            t.requires_grad_()
    out = conv2d(X, W, B, algo=algo, **kwargs)
    g = random_array(rng, out.shape, dtype)
    out.backward(cltensor.from_numpy(g, device=device))
    ref, gx, gw = ref_conv(x, w, b, grad=g.astype(np.float64), **kwargs)
    rtol = rtol or (FP32_RTOL[algo] if dtype == np.float32 else 1e-12)
    checks = [("out", out, ref), ("gx", X.grad, gx), ("gw", W.grad, gw)]
    if bias:
        checks.append(("gb", B.grad, g.astype(np.float64).sum((0, 2, 3))))
    for name, got, want in checks:
        assert got.shape == want.shape, f"{algo} {case}: {name} shape"
        err = rel_error(got, want)
        assert err <= rtol, f"{algo} {case}: {name} relative error {err:.2e} > {rtol:.0e}"


def _views(X):
    """Non-contiguous views holding the same values as X, and how to get them from X."""
    n, c, h, w = X.shape
    big = cltensor.from_numpy(np.full((n + 1, c, h * 2, w + 3), np.nan, X.dtype),
                              device=X.device)
    big[1:, :, ::2, 3:] = X
    return {"channels_last": X.contiguous(memory_format=cltensor.channels_last),
            "offset, step-sliced": big[1:, :, ::2, 3:],
            "transposed": X.transpose(2, 3).contiguous().transpose(2, 3),
            "batch-permuted": X.permute(1, 0, 2, 3).contiguous().permute(1, 0, 2, 3)}


# ---- every algorithm, forward and backward ----------------------------------------------------

# NOTE: kernels bake in kernel size, stride, dilation (and im2col's padding), and PoCL builds
# take seconds: the cases share those where they can, and vary everything else.
GENERAL_CASES = [  # (input shape, weight shape, conv2d kwargs)
    ((2, 3, 7, 9), (4, 3, 3, 3), {"padding": 1}),
    ((2, 4, 8, 11), (6, 2, 3, 3), {"padding": (1, 0, 2, 1), "groups": 2}),
    ((1, 5, 13, 10), (7, 5, 3, 2), {"stride": (2, 3), "padding": (1, 2)}),
    ((3, 5, 11, 12), (17, 5, 5, 5), {"padding": 2, "dilation": 2}),
    ((2, 6, 5, 5), (6, 1, 3, 3), {"padding": 1, "groups": 6}),
    ((1, 33, 9, 9), (37, 33, 1, 1), {}),
]
WINOGRAD_CASES = [
    ((2, 3, 7, 9), (4, 3, 3, 3), {"padding": 1}),
    ((2, 4, 8, 11), (6, 2, 3, 3), {"padding": (1, 0, 2, 1), "groups": 2}),
    ((3, 19, 6, 5), (13, 19, 3, 3), {"padding": 0}),
    ((1, 2, 5, 4), (3, 2, 3, 3), {"padding": (3, 2)}),
    ((2, 17, 14, 15), (33, 17, 3, 3), {"padding": 1}),
    ((2, 5, 9, 8), (6, 5, 5, 5), {"padding": 2}),
    ((1, 4, 11, 7), (6, 2, 5, 5), {"padding": (3, 0, 1, 2), "groups": 2}),
]
ONE_BY_ONE_CASES = [
    ((2, 33, 9, 7), (37, 33, 1, 1), {}),
    ((2, 8, 9, 7), (6, 4, 1, 1), {"groups": 2}),
    ((2, 5, 9, 8), (3, 5, 1, 1), {"stride": (2, 3)}),
]
S2D_CASES = [  # kernels of 3x3 or 5x5 blocks of the stride
    ((2, 3, 13, 15), (16, 3, 5, 5), {"stride": 2, "padding": 1}),
    ((1, 3, 23, 21), (16, 3, 11, 11), {"stride": 4, "padding": 2}),  # AlexNet's conv1, small
    ((2, 2, 17, 16), (6, 2, 9, 9), {"stride": 2, "padding": (1, 3, 0, 2)}),  # 5x5 blocks
    ((2, 3, 20, 19), (5, 3, 6, 6), {"stride": 2}),
    ((2, 3, 19, 17), (4, 3, 7, 3), {"stride": 2, "padding": (1, 1, 3, 2)}),  # 4 x 2 blocks: 5x5
]
CASES = {"im2col": GENERAL_CASES, "implicit_gemm": GENERAL_CASES, "winograd": WINOGRAD_CASES,
         "winograd_4x4": WINOGRAD_CASES, "gemm_1x1": ONE_BY_ONE_CASES, "s2d_winograd": S2D_CASES}


@pytest.mark.parametrize("algo", ALGOS)
def test_algorithm_against_reference(device, rng, algo):
    for case in CASES[algo]:
        _check_case(device, rng, algo, case)


# (algorithm, implicit GEMM's kernel style): the style matters for implicit_gemm alone
FUSED_RELU_RUNS = [(a, None) for a in ALGOS if a != "implicit_gemm"] + \
    [("implicit_gemm", "cpu"), ("implicit_gemm", "gpu")]


@pytest.mark.parametrize("algo, style", FUSED_RELU_RUNS)
def test_fused_relu_every_algorithm(device, rng, monkeypatch, algo, style):
    """conv2d(relu=True): each algorithm applies max(., 0) as it stores (FUSES_RELU) into a
    NaN-poisoned output, biased or not, float32 and float64; the gradients are the convolution's
    of the output gradient masked where the computed output is 0 (as ReLU's)."""
    monkeypatch.setattr(implicit, "KERNEL_STYLE", style)
    mod = dispatch.algorithm(algo, device)
    assert mod.FUSES_RELU
    dtypes = [np.float32] + ([np.float64] if device.has_fp64 else [])
    # NOTE: the second cases have groups (except s2d's), whose bias takes the GEMM's addend
    for (xshape, wshape, kwargs), dtype, bias in zip(CASES[algo][:2], dtypes * 2, [False, True]):
        x, w, b, X, W, B = _tensors(device, rng, xshape, wshape, dtype, bias)
        p = make_params(X, W, B, kwargs.get("stride", 1), kwargs.get("padding", 0),
                        kwargs.get("dilation", 1), kwargs.get("groups", 1))
        g = random_array(rng, p.out_shape, dtype)
        ref = ref_conv(x, w, b, **kwargs)
        assert (ref > 0).any() and (ref < 0).any(), "the case needs outputs on both sides of 0"
        rtol = FP32_RTOL[algo] if dtype == np.float32 else 1e-12
        out = cltensor.full(p.out_shape, float("nan"), dtype=dtype, device=device)
        conv_function.forward(mod, X, W, B, p, out, relu=True)
        assert rel_error(out, np.maximum(ref, 0)) <= rtol, f"{algo} {xshape}: fused forward"
        assert (out.numpy() >= 0).all(), f"{algo} {xshape}: a negative or unwritten output"
        for t in (X, W, B):
            if t is not None:
                t.requires_grad_()
        y = conv2d(X, W, B, algo=algo, relu=True, **kwargs)
        y.backward(cltensor.from_numpy(g, device=device))
        mask = y.numpy() > 0
        _, gx, gw = ref_conv(x, w, b, grad=np.where(mask, g, 0.0), **kwargs)
        for name, got, want in (("out", y, np.maximum(ref, 0)), ("gx", X.grad, gx),
                                ("gw", W.grad, gw)):
            err = rel_error(got, want)
            assert err <= rtol, f"{algo} {xshape} {dtype.__name__}: {name} error {err:.1e}"
        if bias:
            want = np.where(mask, g, 0.0).sum((0, 2, 3))
            assert rel_error(B.grad, want) <= rtol, f"{algo} {xshape}: bias gradient"


def test_relu_of_an_algorithm_that_does_not_fuse(device, rng):
    """An algorithm without FUSES_RELU (a plug-in's, say) runs as it is, and the ReLU follows
    in place; its saved output is checked for in-place changes before backward, as ReLU's."""
    class Plain:  # im2col's forward, without relu=
        forward = staticmethod(lambda x, w, b, p, out: dispatch.algorithm("im2col").forward(
            x, w, b, p, out))
    x, w, b, X, W, B = _tensors(device, rng, (2, 3, 7, 9), (4, 3, 3, 3))
    p = make_params(X, W, B, 1, 1, 1, 1)
    out = cltensor.full(p.out_shape, float("nan"), device=device)
    conv_function.forward(Plain, X, W, B, p, out, relu=True)
    ref = ref_conv(x, w, b, padding=1)
    assert rel_error(out, np.maximum(ref, 0)) <= 1e-5
    W.requires_grad_()
    y = conv2d(X, W, B, padding=1, relu=True)
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("style", ["cpu", "gpu"])
def test_implicit_gemm_kernel_styles(device, rng, monkeypatch, style):
    """Both kernel families of implicit GEMM on every device: the register-tiled CPU kernels
    and the local-memory GPU kernels (tiles smaller and larger than the problems)."""
    monkeypatch.setattr(implicit, "KERNEL_STYLE", style)
    for xshape, wshape, kwargs in [((2, 20, 9, 12), (70, 20, 3, 3), {"padding": 1}),
                                   ((2, 4, 8, 11), (6, 2, 3, 3), {"padding": 1, "groups": 2}),
                                   ((1, 5, 13, 10), (7, 5, 3, 2), {"stride": (2, 3)}),
                                   ((2, 33, 9, 7), (37, 33, 1, 1), {})]:  # a plain product
        _check_case(device, rng, "implicit_gemm", (xshape, wshape, kwargs), bias=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_implicit_cpu_weight_gradient_cuts(device, rng, monkeypatch, dtype):
    """The CPU weight gradient (wgrad_blocks) cut as finely as it goes: blocks of 7 positions
    that cross rows, images and slice ends, one register tile per K and channel chunk, several
    slices; the input and output gradient as strided views (_views)."""
    if dtype == np.float64 and not device.has_fp64:
        pytest.skip("the device has no float64")
    monkeypatch.setattr(implicit, "KERNEL_STYLE", "cpu")
    monkeypatch.setattr(implicit, "WGRAD_BQ", 7)
    monkeypatch.setattr(implicit, "WGRAD_LOCAL_BYTES", 1)
    monkeypatch.setattr(implicit, "GROUPS_PER_CU", 16)
    empty = common.empty  # scratch and result poisoned: every element must be written
    monkeypatch.setattr(common, "empty", lambda *a, **k: empty(*a, **k).fill_(float("nan")))
    for xshape, wshape, kwargs in [
            ((3, 6, 7, 9), (40, 3, 3, 3), {"padding": (1, 2), "stride": 2, "groups": 2}),
            ((2, 5, 6, 5), (7, 5, 2, 3), {"padding": 2, "dilation": (2, 1)})]:
        x, w, _b, X, W, _B = _tensors(device, rng, xshape, wshape, dtype, bias=False)
        p = make_params(X, W, None, kwargs.get("stride", 1), kwargs["padding"],
                        kwargs.get("dilation", 1), kwargs.get("groups", 1))
        g = random_array(rng, p.out_shape, dtype)
        want = ref_conv(x, w, None, grad=g.astype(np.float64), **kwargs)[2]
        cut = implicit.wgrad_blocks(p, device)
        assert cut.kch > 1 and cut.splits > 1, cut
        G = cltensor.from_numpy(g, device=device)
        for (xname, XV), (gname, GV) in zip(_views(X).items(), reversed(_views(G).items())):
            gw = implicit.weight_grad(XV, GV, p)[0]
            err = rel_error(gw, want)
            assert err <= (1e-5 if dtype == np.float32 else 1e-12), f"{xname} x, {gname} grad"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_by_one_weight_gradient_paths(device, rng, monkeypatch, dtype):
    """gemm_1x1's weight gradient: with NCHW tensors on a device whose GEMM sums over a batch in
    one kernel (CPUs), the sum over images read in place, no (C, N*H*W) copies; elsewhere, and
    with channels_last (positions merge), one product. Groups, a strided 1x1, input and output
    gradient as strided views; results NaN-poisoned first."""
    if dtype == np.float64 and not device.has_fp64:
        pytest.skip("the device has no float64")
    empty = common.empty  # results poisoned: every element must be written
    monkeypatch.setattr(common, "empty", lambda *a, **k: empty(*a, **k).fill_(float("nan")))
    summed = gemm_ops.sums_batches(device, dtype)
    algo = dispatch.ALGORITHMS["gemm_1x1"]
    copies = []  # the (C, N*H*W) copies made
    to_cnhw = common.to_cnhw
    monkeypatch.setattr(common, "to_cnhw", lambda t: copies.append(t.shape) or to_cnhw(t))
    for xshape, wshape, kwargs in [((3, 8, 5, 7), (6, 4, 1, 1), {"groups": 2}),
                                   ((2, 5, 9, 8), (3, 5, 1, 1), {"stride": (2, 3)})]:
        x, w, _b, X, W, _B = _tensors(device, rng, xshape, wshape, dtype, bias=False)
        p = make_params(X, W, None, kwargs.get("stride", 1), 0, 1, kwargs.get("groups", 1))
        g = random_array(rng, p.out_shape, dtype)
        want = ref_conv(x, w, None, grad=g.astype(np.float64), **kwargs)[2]
        G = cltensor.from_numpy(g, device=device)
        views = {"contiguous": (X, G), **{n: (v, _views(G)[n]) for n, v in _views(X).items()}}
        for name, (XV, GV) in views.items():
            copies.clear()
            gw = algo.backward(XV, W, GV, p, False, True)[1]
            err = rel_error(gw, want)
            assert err <= (1e-5 if dtype == np.float32 else 1e-12), f"{kwargs} {name}: {err}"
            if name in ("contiguous", "channels_last") and "stride" not in kwargs:
                merge = name == "channels_last"
                assert len(copies) == (0 if summed or merge else 2), (name, copies)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_by_one_merged_products(device, rng, monkeypatch, dtype):
    """gemm_1x1's forward and input gradient as one product over all images (merges: CPUs,
    small images), forced on every device: groups with a bias, a strided 1x1, the fused ReLU,
    inputs as strided views and channels_last (read in place, no copy); outputs and scratch
    NaN-poisoned; the per-image products give the same values."""
    if dtype == np.float64 and not device.has_fp64:
        pytest.skip("the device has no float64")
    empty = common.empty
    monkeypatch.setattr(common, "empty", lambda *a, **k: empty(*a, **k).fill_(float("nan")))
    copies = []
    to_cnhw = common.to_cnhw
    monkeypatch.setattr(common, "to_cnhw", lambda t: copies.append(t.shape) or to_cnhw(t))
    algo = dispatch.ALGORITHMS["gemm_1x1"]
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for xshape, wshape, kwargs in [((3, 8, 5, 7), (6, 4, 1, 1), {"groups": 2}),
                                   ((2, 5, 9, 8), (3, 5, 1, 1), {"stride": (2, 3)}),
                                   ((2, 33, 4, 3), (37, 33, 1, 1), {})]:
        x, w, b, X, W, B = _tensors(device, rng, xshape, wshape, dtype)
        stride = kwargs.get("stride", 1)
        p = make_params(X, W, B, stride, 0, 1, kwargs.get("groups", 1))
        g = random_array(rng, p.out_shape, dtype)
        ref, gx, _ = ref_conv(x, w, b, grad=g.astype(np.float64), **kwargs)
        G = cltensor.from_numpy(g, device=device)
        for merged in (True, False):
            monkeypatch.setattr(gemm1x1, "merges", lambda p, device, pass_: merged)
            for name, XV in {"contiguous": X, **_views(X)}.items():
                copies.clear()
                out = algo.forward(XV, W, B, p, empty(p.out_shape, X, common.layout_of(XV)),
                                   relu=True)
                err = rel_error(out, np.maximum(ref, 0))
                assert err <= rtol, f"{kwargs} {name} merged={merged}: forward error {err:.1e}"
                if merged and name == "channels_last" and stride == 1:
                    assert not copies, "channels_last positions merge: read in place"
                if stride == 1:
                    GV = _views(G)[name] if name in _views(G) else G
                    got = algo.backward(XV, W, GV, p, True, False)[0]
                    err = rel_error(got, gx)
                    assert err <= rtol, f"{kwargs} {name} merged={merged}: gx error {err:.1e}"


def test_one_by_one_merges_small_images_on_cpus(device, monkeypatch):
    """The rule: one product over all images for GoogLeNet's 14 x 14 forwards and 7 x 7
    forwards and input gradients with 48 channels or more, per image otherwise (28 x 28
    images, 16-32 channels, one image); only where the GEMM sums over batches (CPUs)."""
    cases = {  # (C, Co, side, N): (forward merged, input gradient merged)
        (480, 192, 14, 8): (True, False), (832, 128, 7, 8): (True, True),
        (832, 48, 7, 8): (True, True), (832, 32, 7, 8): (False, False),
        (480, 16, 14, 8): (False, False), (192, 64, 28, 8): (False, False),
        (832, 384, 7, 1): (False, False)}
    for summed in (True, False):
        monkeypatch.setattr(gemm1x1, "sums_batches", lambda device, dtype: summed)
        for (c, co, side, n), want in cases.items():
            X, W = (cltensor.empty(*s, device=device) for s in ((n, c, side, side), (co, c, 1, 1)))
            p = make_params(X, W, None, 1, 0, 1, 1)
            got = tuple(gemm1x1.merges(p, device, pass_) for pass_ in ("forward", "backward_data"))
            assert got == (want if summed else (False, False)), (c, co, side, n, summed)
            ws = dispatch.workspace_bytes("gemm_1x1", p, "forward", device)
            assert ws == (n * (c + co) * side * side * 4 if got[0] else 0), (c, co, side, n)


def _h200_entry():
    return tune.database("gemm")["gemm_float32"]["vendors"]["nvidia"]["devices"]["NVIDIA H200"]


def _h200_parameter_sets():
    entry = _h200_entry()
    return [(kernel, q) for kernel in ("cx_conv", "cx_wgrad")
            for q in entry["cx_sets"] + entry.get(kernel, [])
            if implicit_gpu._engine_ok(q, kernel)]


def _h200_ranking(monkeypatch, kernel):
    """(m, n, k) -> implicit_gpu._rank's parameter sets for `kernel`, best first, as on the H200
    (its database entry, every set fitting)."""
    entry = _h200_entry()
    monkeypatch.setattr(implicit_gpu.gemm, "entry_for", lambda device, dtype: entry)
    monkeypatch.setattr(implicit_gpu, "_fits", lambda device, q, itemsize: True)
    monkeypatch.setattr(implicit_gpu.gemm, "xgemm_candidates",
                        lambda device, entry, itemsize: (list(entry["xgemm"]), []))
    h200 = type("FakeH200", (), {"cl_device": type("D", (), {"max_compute_units": 132})()})()
    return lambda m, n, k: implicit_gpu._rank(h200, np.dtype(np.float32), kernel, m, n, k, 1)


def test_weight_gradient_tiles_follow_the_product(monkeypatch):
    """The weight gradient's parameter sets on the H200 (M output channels, N taps, K
    positions): the 128 x 128 set measured on the kernel for big products, the 64 x 64 one for
    at most its max_m output channels (first layers, GoogLeNet's 1x1 and 5x5 layers)."""
    big, small = _h200_entry()["cx_wgrad"]
    ranked = _h200_ranking(monkeypatch, "cx_wgrad")
    # GoogLeNet conv3, 4d/3x3, 3b/5x5 (where the 64 x 64 set lost), Overfeat conv1
    for m, n in ((192, 576), (288, 1296), (96, 800), (96, 363)):
        assert ranked(m, n, 10**5)[0] is big, (m, n)
    # VGG-A and GoogLeNet conv1, GoogLeNet 4a/5x5 and 3a/5x5r
    for m, n in ((64, 27), (64, 147), (48, 400), (16, 192)):
        assert ranked(m, n, 10**6)[0] is small, (m, n)
    assert small not in ranked(small["max_m"] + 1, 147, 10**6)


def test_plain_products_rank_the_gemm_sets(device, monkeypatch):
    """A 1x1 stride-1 convolution without padding, forward or input gradient, is a plain
    product: cx_conv ranks the GEMM's own sets for it (as xgemm_plan orders them); any gather
    (taps, stride, padding) keeps the conv sets."""
    from cltensor.conv.params import ConvParams
    entry = _h200_entry()
    monkeypatch.setattr(gemm_ops, "entry_for", lambda _device, _dtype: entry)
    monkeypatch.setattr(implicit_gpu, "_ranked", {})
    f32 = np.dtype(np.float32)
    def geometries(k, stride, pad):
        p = ConvParams(128, 480, 14, 14, 192, k, k, stride, stride, pad, pad, pad, pad, 1, 1, 1,
                       f32)
        return implicit._forward_geometry(p), implicit._data_geometry(p)
    for k, stride, pad in ((1, 1, 0), (1, 2, 0), (1, 1, 1), (3, 1, 1)):
        for geo in geometries(k, stride, pad):
            plain = implicit_gpu.is_plain(geo)
            assert plain == ((k, stride, pad) == (1, 1, 0)), (k, stride, pad, geo)
            first = implicit_gpu._candidates(device, f32, "cx_conv", geo.cog, geo.n * geo.qn,
                                             geo.k, geo.g, plain=plain)[0]
            sets = entry["xgemm"] if plain else entry["cx_sets"] + entry["cx_conv"]
            assert first in sets, (k, stride, pad, first)
    product = implicit_gpu.Product(device, f32, 192, 128 * 196, 480, 1)
    ranked = implicit_gpu._candidates(device, f32, "cx_conv", *product[2:], plain=True)
    plan = dict(entry, split_k=False)
    assert ranked[0] is min(ranked, key=lambda q: gemm_ops.xgemm_plan(product, plan, q)[0])


@pytest.mark.parametrize("kernel, params", _h200_parameter_sets())
def test_implicit_gemm_gpu_parameter_sets(device, rng, monkeypatch, kernel, params):
    """The GPU kernels with each parameter set the H200's database entry gives them, on every
    device (tiles that the problem's channels and positions do not fill)."""
    monkeypatch.setattr(implicit, "KERNEL_STYLE", "gpu")
    monkeypatch.setitem(implicit_gpu.FORCE_PARAMS, kernel, params)
    _check_case(device, rng, "implicit_gemm", ((2, 20, 9, 12), (70, 20, 3, 3), {"padding": 1}))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_weight_gradient_carries_the_bias_gradient(device, rng, monkeypatch, dtype):
    """The GPU weight-gradient kernel sums the bias gradient as one more column where its
    column tiles pad the taps (K % NWG != 0), split over positions or not; where the taps fill
    the tiles the bias gradient is a reduction of gout, as before."""
    if dtype == np.float64 and not device.has_fp64:
        pytest.skip(f"{device} has no float64")
    monkeypatch.setattr(implicit, "KERNEL_STYLE", "gpu")
    q = tune.database("gemm")["gemm_float32"]["default"]["xgemm"][0]  # fits in float64 too
    assert q["NWG"] == 64  # column tiles of 64 taps
    monkeypatch.setitem(implicit_gpu.FORCE_PARAMS, "cx_wgrad", q)
    reductions, splits = [], []
    real_bias_grad, real_splits = common.bias_grad, implicit_gpu._wgrad_splits

    def bias_grad(g):
        reductions.append(g.shape)
        return real_bias_grad(g)

    def wgrad_splits(*args):
        splits.append(real_splits(*args))
        return splits[-1]

    monkeypatch.setattr(common, "bias_grad", bias_grad)
    monkeypatch.setattr(implicit_gpu, "_wgrad_splits", wgrad_splits)
    cases = [(((2, 20, 9, 12), (70, 20, 3, 3), {"padding": 1}), 1 << 30, 0),  # K 180: fused
             (((2, 20, 9, 12), (70, 20, 3, 3), {"padding": 1}), 1, 0),        # one share
             (((2, 4, 8, 11), (6, 2, 3, 3), {"padding": 1, "groups": 2}), 1 << 30, 0),
             (((1, 32, 6, 5), (5, 32, 2, 2), {}), 1 << 30, 1)]                # K 128: reduced
    for case, limit, reduced in cases:
        monkeypatch.setattr(backends, "conv_workspace_limit", limit)
        reductions.clear()
        _check_case(device, rng, "implicit_gemm", case, dtype=dtype)
        assert len(reductions) == reduced, (case, reductions)
    assert 1 in splits and max(splits) > 1, splits


def test_measured_forward_set_serves_only_few_output_channels(monkeypatch):
    """The H200's cx_conv set (32 x 128 tiles) comes first for at most its max_m output
    channels, and not at all above; the rest are the entry's cx_sets."""
    entry = _h200_entry()
    small = entry["cx_conv"][0]
    rank = _h200_ranking(monkeypatch, "cx_conv")
    ranked = lambda m: rank(m, 10**5, 64)  # noqa: E731
    assert ranked(small["max_m"])[0] is small
    assert small not in ranked(small["max_m"] + 1)
    # the conv kernels take their own GEMM-style sets (cx_sets), not the GEMM's
    assert all(q in entry["cx_sets"] for q in ranked(small["max_m"] + 1)), "not cx_sets"


def test_implicit_gemm_gpu_skips_parameter_sets_the_device_refuses(device, rng, monkeypatch):
    """A built kernel whose work-group the device refuses (too many registers) is skipped for
    the next parameter set; none left is a clear error, not a launch failure."""
    monkeypatch.setattr(implicit, "KERNEL_STYLE", "gpu")
    implicit_gpu.clear_cache()
    refused = []

    def fits(device, kernel, wgs):
        if not refused:  # the first set asked for is refused
            refused.append(kernel)
            return False
        return True

    monkeypatch.setattr(implicit_gpu.gemm, "kernel_fits", fits)
    _check_case(device, rng, "implicit_gemm", GENERAL_CASES[0])
    assert refused
    monkeypatch.setattr(implicit_gpu.gemm, "kernel_fits", lambda *args: False)
    x, w = (cltensor.from_numpy(random_array(rng, s), device=device) for s in ((1, 3, 5, 5),
                                                                               (2, 3, 3, 3)))
    with pytest.raises(RuntimeError, match="no parameter set of the GEMM engine fits"):
        conv2d(x, w, algo="implicit_gemm")
    implicit_gpu.clear_cache()


@pytest.mark.parametrize("algo", ALGOS)
def test_float64(device, rng, algo):
    if not device.has_fp64:
        pytest.skip("the device has no float64")
    _check_case(device, rng, algo, CASES[algo][0], dtype=np.float64)


def test_auto_against_reference(device, rng):
    for case in GENERAL_CASES[:4] + [WINOGRAD_CASES[-1], ONE_BY_ONE_CASES[0]]:
        _check_case(device, rng, "auto", case)


def test_gradcheck(device, rng):
    if not device.has_fp64:
        pytest.skip("the device has no float64")
    _x, _w, _b, X, W, B = _tensors(device, rng, (1, 2, 5, 4), (3, 2, 3, 3), np.float64)
    for algo in ("im2col", "implicit_gemm", "winograd", "winograd_4x4"):
        inputs = [t.detach().requires_grad_() for t in (X, W, B)]
        assert gradcheck(lambda a, c, d, algo=algo: conv2d(a, c, d, padding=1, algo=algo),
                         inputs)


# ---- dispatch, benchmark mode and the query ---------------------------------------------------

def test_gpu_rules_pick_winograd_per_pass(monkeypatch):
    """The GPU rules as measured on the H200, speed first (conv_precision "fast"): F(4x4)
    Winograd from 16 channels in every pass, 3x3 and 5x5 kernels, large and small images
    alike, except the weight gradient of 5x5 layers on at most 14 x 14 outputs; strided
    layers' input gradient by s2d_winograd where it pays, else im2col, the rest (the first
    layers' 3 channels) implicit GEMM."""
    from cltensor.conv.params import ConvParams
    monkeypatch.setattr(dispatch, "_plugin_choice", lambda p, device, pass_: None)
    monkeypatch.setattr(backends, "conv_precision", "fast")
    gpu = type("FakeGpu", (), {"is_cpu": False})()
    def chosen(c, co, size, stride=1, k=3):
        p = ConvParams(128, c, size, size, co, k, k, stride, stride, 1, 1, 1, 1, 1, 1, 1,
                       np.dtype(np.float32))
        return tuple(dispatch.rule(p, gpu, pass_) for pass_ in dispatch.PASSES)
    f4, ig = "winograd_4x4", "implicit_gemm"
    assert chosen(256, 256, 56) == (f4,) * 3
    assert chosen(64, 128, 112) == (f4,) * 3
    assert chosen(3, 64, 224) == (ig,) * 3
    assert chosen(96, 208, 14) == chosen(144, 288, 14) == chosen(160, 320, 7) == (f4,) * 3
    assert chosen(384, 256, 13) == (f4,) * 3
    assert chosen(64, 192, 27, k=5) == chosen(16, 32, 28, k=5) == (f4,) * 3
    # output sides 12 and 5 (padding 1): GoogLeNet's 14 x 14 and 7 x 7 5x5 layers
    assert chosen(48, 128, 7, k=5) == chosen(24, 64, 14, k=5) == (f4, f4, ig)
    assert chosen(32, 128, 7, k=5) == chosen(16, 48, 14, k=5) == (f4, f4, ig)
    assert chosen(16, 48, 17, k=5) == (f4,) * 3  # 15 x 15 outputs
    assert chosen(8, 48, 14, k=5) == (ig,) * 3
    assert chosen(256, 256, 14, stride=2) == (ig, "im2col", ig)
    # AlexNet's conv1 shape: its input gradient by space to depth
    assert chosen(3, 64, 224, stride=4, k=11) == (ig, "s2d_winograd", ig)


def test_cpu_rules_pick_winograd_per_pass(monkeypatch):
    """The CPU rules as measured on PoCL, speed first (conv_precision "fast"): F(4x4) Winograd
    from 16 channels in every pass, 3x3 and 5x5 alike; 1x1 layers by gemm_1x1."""
    from cltensor.conv.params import ConvParams
    monkeypatch.setattr(dispatch, "_plugin_choice", lambda p, device, pass_: None)
    monkeypatch.setattr(backends, "conv_precision", "fast")
    cpu = type("FakeCpu", (), {"is_cpu": True})()
    def chosen(c, co, size, k=3):
        pad = k // 2
        p = ConvParams(8, c, size, size, co, k, k, 1, 1, pad, pad, pad, pad, 1, 1, 1,
                       np.dtype(np.float32))
        return tuple(dispatch.rule(p, cpu, pass_) for pass_ in dispatch.PASSES)
    f4 = "winograd_4x4"
    assert chosen(64, 128, 112) == (f4,) * 3
    assert chosen(32, 128, 7, k=5) == chosen(16, 48, 14, k=5) == (f4,) * 3
    assert f4 not in chosen(8, 48, 14, k=5) + chosen(3, 64, 224)
    assert chosen(64, 64, 56, k=1)[:2] == ("gemm_1x1",) * 2
    # strided first layers: AlexNet's conv1 by space to depth, GoogLeNet's (its 7x7 kernel
    # would pad to 10x10) not
    f32 = np.dtype(np.float32)
    alexnet = ConvParams(8, 3, 224, 224, 64, 11, 11, 4, 4, 2, 2, 2, 2, 1, 1, 1, f32)
    googlenet = ConvParams(8, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1, f32)
    assert {dispatch.rule(alexnet, cpu, ps) for ps in dispatch.PASSES} == {"s2d_winograd"}
    assert "s2d_winograd" not in {dispatch.rule(googlenet, cpu, ps) for ps in dispatch.PASSES}


def test_conv_algorithms_query(device):
    rows = conv_algorithms((2, 8, 9, 9), (16, 8, 3, 3), padding=1, device=device)
    by = {(r["algo"], r["pass"]): r for r in rows}
    assert by[("winograd", "forward")]["eligible"]
    assert by[("winograd", "backward_weight")]["eligible"]
    assert "1x1" in by[("gemm_1x1", "forward")]["reason"]
    assert by[("im2col", "forward")]["workspace_bytes"] >= 8 * 9 * 81 * 2 * 4
    for pass_ in dispatch.PASSES:
        assert sum(r["chosen"] for r in rows if r["pass"] == pass_) == 1
        assert all(r["time_ms"] is None for r in rows)
    one = conv_algorithms((2, 8, 9, 9), (16, 8, 1, 1), device=device)
    chosen = {r["pass"]: r["algo"] for r in one if r["chosen"]}
    # the rules: a plain GEMM on CPUs; on GPUs implicit GEMM measured faster even for 1x1
    want = "gemm_1x1" if device.is_cpu else "implicit_gemm"
    assert chosen["forward"] == chosen["backward_data"] == want


def test_benchmark_mode(device, rng, tmp_path, monkeypatch):
    monkeypatch.setenv("CLTENSOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(backends, "benchmark", True)
    monkeypatch.setattr(backends, "conv_precision", "fast")  # every eligible algorithm timed
    dispatch.clear_cache()
    x, w, b, X, W, B = _tensors(device, rng, (2, 4, 6, 6), (5, 4, 3, 3))
    out = conv2d(X, W, B, padding=1)
    assert rel_error(out, ref_conv(x, w, b, padding=1)) <= 1e-5
    data = json.loads(dispatch.cache_path(device).read_text())
    entry = next(v for k, v in data.items() if k.endswith("|forward"))
    assert entry["algo"] in ("im2col", "implicit_gemm", "winograd", "winograd_4x4")
    assert set(entry["times_ms"]) == {"im2col", "implicit_gemm", "winograd", "winograd_4x4"}
    # a new process (cleared memory) takes the choice from the file without timing again
    dispatch.clear_cache()
    timer = dispatch.time_pass
    monkeypatch.setattr(dispatch, "time_pass", lambda *a: pytest.fail("timed again"))
    assert rel_error(conv2d(X, W, B, padding=1), ref_conv(x, w, b, padding=1)) <= 1e-5
    monkeypatch.setattr(dispatch, "time_pass", timer)
    rows = conv_algorithms(X, W, B, padding=1)
    timed = [r for r in rows if r["pass"] == "forward" and r["eligible"]]
    assert all(r["time_ms"] is not None for r in timed)
    dispatch.clear_cache()


# ---- errors -----------------------------------------------------------------------------------

def test_errors(device, rng):
    _x, w, _b, X, W, B = _tensors(device, rng, (1, 3, 5, 5), (4, 3, 3, 3))
    bad = [
        (ValueError, "input has 4 channels, weight expects 3",
         lambda: conv2d(cltensor.zeros(1, 4, 5, 5, device=device), W)),
        (ValueError, "groups=2 does not divide", lambda: conv2d(X, W, groups=2)),
        (ValueError, "stride must be positive", lambda: conv2d(X, W, stride=0)),
        (ValueError, "dilation must be positive", lambda: conv2d(X, W, dilation=(1, 0))),
        (ValueError, "padding must be non-negative", lambda: conv2d(X, W, padding=-1)),
        (TypeError, "stride must be an int", lambda: conv2d(X, W, stride=1.5)),
        (ValueError, "larger than the padded input", lambda: conv2d(X, W, dilation=3)),
        (ValueError, "expected a 4-d input", lambda: conv2d(X[0, 0], W)),
        (ValueError, "expected a 4-d weight", lambda: conv2d(X, W[0])),
        (TypeError, "input is float32 but weight is", lambda: conv2d(X, W.to("float64"))
         if device.has_fp64 else conv2d(X, W.to("int32"))),
        (TypeError, "float32 or float64 input", lambda: conv2d(X.to("int32"), W)),
        (ValueError, r"bias must have shape \(4,\)", lambda: conv2d(X, W, B[:3])),
        (ValueError, "unknown algo 'fft'", lambda: conv2d(X, W, algo="fft")),
        (ValueError, "needs stride 1", lambda: conv2d(X, W, stride=2, algo="winograd")),
        (ValueError, "kernel is not 1x1", lambda: conv2d(X, W, algo="gemm_1x1")),
        (ValueError, "s2d_winograd needs a stride above 1",
         lambda: conv2d(X, W, algo="s2d_winograd")),
        (ValueError, r"a 3x13 kernel of stride 2 spans 7 blocks a side, more than Winograd's 5",
         lambda: conv2d(X, cltensor.zeros(4, 3, 3, 13, device=device), padding=4, stride=2,
                        algo="s2d_winograd")),
        (ValueError, "padding='same' is not supported for strided",
         lambda: conv2d(X, W, stride=2, padding="same")),
        (TypeError, "weight must be a tensor", lambda: conv2d(X, w)),
    ]
    for exc, match, fn in bad:
        with pytest.raises(exc, match=match):
            fn()


def test_remembered_arguments_are_still_checked(device, rng):
    """make_params remembers the normalized arguments of a call; a later call with a bool
    (equal to 1 and hashed alike) or a float in their place still fails."""
    _x, _w, _b, X, W, _B = _tensors(device, rng, (1, 3, 5, 5), (4, 3, 3, 3))
    assert conv2d(X, W, stride=1, padding=(1, 1)).shape == (1, 4, 5, 5)
    for kwargs in ({"stride": True}, {"padding": (True, 1)}, {"padding": (1.0, 1)}):
        with pytest.raises(TypeError, match="must be an int"):
            conv2d(X, W, **{"stride": 1, "padding": (1, 1), **kwargs})


def test_double_backward_records_a_graph(device, rng):
    """Under create_graph=True the input gradient (a transposed convolution of v by w) is
    recorded: its gradient w.r.t. w is the weight gradient at input u and output gradient v
    (tests/test_double_backward.py checks the rest against torch)."""
    x, w, _b, X, W, B = _tensors(device, rng, (1, 3, 5, 5), (4, 3, 3, 3))
    v, u = random_array(rng, (1, 4, 5, 5)), random_array(rng, x.shape)
    X.requires_grad_()
    W.requires_grad_()
    V, U = (cltensor.from_numpy(a, device=device) for a in (v, u))
    (gx,) = cltensor.autograd.grad(conv2d(X, W, B, padding=1), [X], V, create_graph=True)
    assert gx.grad_fn is not None
    (gw,) = cltensor.autograd.grad((gx * U).sum(), [W])
    assert rel_error(gw, ref_conv(u, w, padding=1, grad=v)[2]) < 1e-5


def test_failed_call_leaves_inputs_alone(device, rng):
    x, w, _b, X, W, B = _tensors(device, rng, (1, 3, 5, 5), (4, 3, 3, 3))
    with pytest.raises(ValueError):
        conv2d(X, W, B[:2])
    np.testing.assert_array_equal(X.numpy(), x)
    np.testing.assert_array_equal(W.numpy(), w)


# ---- properties -------------------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(1, 9), co=st.integers(1, 20), h=st.integers(3, 17),
       w=st.integers(3, 17), view=st.sampled_from(["plain", "channels_last", "sliced"]),
       algo=st.sampled_from(["im2col", "implicit_gemm", "winograd"]))
def test_property_shapes_and_views(device, n, c, co, h, w, view, algo):
    """Any sizes and input views, with one kernel configuration (3x3, padding 1), so the
    examples reuse the same builds."""
    rng = np.random.default_rng(n * 1000 + c * 100 + h * 10 + w)
    x, wt, b, X, W, B = _tensors(device, rng, (n, c, h, w), (co, c, 3, 3))
    if view == "channels_last":
        X = X.contiguous(memory_format=cltensor.channels_last)
    elif view == "sliced":
        big = cltensor.from_numpy(np.repeat(np.repeat(x, 2, axis=2), 2, axis=3), device=device)
        X = big[:, :, ::2, ::2]
    out = conv2d(X, W, B, padding=1, algo=algo)
    assert rel_error(out, ref_conv(x, wt, b, padding=1)) <= FP32_RTOL[algo]
