"""conv2d's outputs, layouts and views: every algorithm writes every output element (NCHW and
channels_last); non-contiguous and expanded inputs, strided weights, s2d Winograd on views, the
output's layout, unbatched and empty inputs and the padding modes; and implicit GEMM's padding
in the loads (strided inputs and gradients read in place) without an input-sized workspace.
Against the float64 reference of test_conv.py."""
import gc
import numpy as np
import pytest

import cltensor
from cltensor import backends
from cltensor.conv import conv2d, dispatch, implicit, winograd
from cltensor.conv.params import make_params
from cltensor.testing import random_array, rel_error
from test_conv import ALGOS, CASES, FP32_RTOL, _check_case, _tensors, _views, ref_conv


# ---- outputs, layouts and views ---------------------------------------------------------------

@pytest.mark.parametrize("algo", ALGOS)
def test_every_output_element_written(device, rng, algo):
    """Each algorithm's forward into a NaN-poisoned output (NCHW and channels_last)."""
    xshape, wshape, kwargs = CASES[algo][0]
    x, w, b, X, W, B = _tensors(device, rng, xshape, wshape)
    p = make_params(X, W, B, groups=kwargs.get("groups", 1), stride=kwargs.get("stride", 1),
                    padding=kwargs.get("padding", 0), dilation=kwargs.get("dilation", 1))
    ref = ref_conv(x, w, b, **kwargs)
    for fmt in (cltensor.contiguous_format, cltensor.channels_last):
        out = cltensor.empty(*p.out_shape, device=device, memory_format=fmt).fill_(float("nan"))
        dispatch.ALGORITHMS[algo].forward(X, W, B, p, out)
        assert not np.isnan(out.numpy()).any(), f"{algo}: unwritten output elements ({fmt})"
        assert rel_error(out, ref) <= FP32_RTOL[algo]


@pytest.mark.parametrize("algo", ["im2col", "implicit_gemm", "winograd"])
def test_noncontiguous_inputs(device, rng, algo):
    x, w, b, X, W, B = _tensors(device, rng, (2, 3, 6, 7), (5, 3, 3, 3))
    ref = ref_conv(x, w, b, padding=1)
    for name, V in _views(X).items():
        for t in (V, W, B):
            t.requires_grad_(False)
        Vg = V.detach().requires_grad_()
        out = conv2d(Vg, W, B, padding=1, algo=algo)
        assert rel_error(out, ref) <= FP32_RTOL[algo], f"{algo}: {name} input"
        out.sum().backward()
        gx = ref_conv(x, w, None, padding=1, grad=np.ones(ref.shape))[1]
        assert rel_error(Vg.grad, gx) <= FP32_RTOL[algo], f"{algo}: {name} input gradient"


def test_s2d_winograd_views_and_layouts(device, rng):
    """s2d_winograd on strided input views: output and input gradient in the input's layout,
    both gradients right."""
    x, w, b, X, W, B = _tensors(device, rng, (2, 3, 11, 10), (5, 3, 5, 5))
    ref = ref_conv(x, w, b, stride=2, padding=2)
    g = random_array(rng, ref.shape, np.float32)
    _, gx, gw = ref_conv(x, w, b, stride=2, padding=2, grad=g.astype(np.float64))
    for name, V in _views(X).items():
        Vg, Wg = V.detach().requires_grad_(), W.detach().requires_grad_()
        out = conv2d(Vg, Wg, B, stride=2, padding=2, algo="s2d_winograd")
        assert out.is_contiguous(memory_format=cltensor.channels_last) == \
            (name == "channels_last"), name
        assert rel_error(out, ref) <= winograd.WINOGRAD_RTOL, name
        out.backward(cltensor.from_numpy(g, device=device))
        assert Vg.grad.is_contiguous(memory_format=cltensor.channels_last) == \
            (name == "channels_last"), name
        assert rel_error(Vg.grad, gx) <= winograd.WINOGRAD_RTOL, f"{name} input gradient"
        assert rel_error(Wg.grad, gw) <= winograd.WINOGRAD_RTOL, f"{name} weight gradient"


def test_expanded_and_strided_weight(device, rng):
    x, w, b, _X, _W, B = _tensors(device, rng, (1, 4, 6, 6), (3, 4, 3, 3))
    Xe = cltensor.from_numpy(x[:, :1], device=device).expand(2, 4, 6, 6)
    Wt = cltensor.from_numpy(np.ascontiguousarray(w.transpose(0, 1, 3, 2)),
                             device=device).transpose(2, 3)
    ref = ref_conv(np.broadcast_to(x[:, :1], (2, 4, 6, 6)), w, b, padding=1)
    for algo in ("im2col", "implicit_gemm", "winograd"):
        assert rel_error(conv2d(Xe, Wt, B, padding=1, algo=algo), ref) <= 1e-5, algo


def test_channels_last_output(device, rng):
    _x, _w, _b, X, W, B = _tensors(device, rng, (2, 3, 6, 7), (5, 3, 3, 3))
    Xc = X.contiguous(memory_format=cltensor.channels_last)
    for algo in ALGOS[:3]:
        out = conv2d(Xc, W, B, padding=1, algo=algo)
        assert out.is_contiguous(memory_format=cltensor.channels_last), algo
        assert not conv2d(X, W, B, padding=1, algo=algo).is_contiguous(cltensor.channels_last)


def test_unbatched_empty_and_padding_modes(device, rng):
    x, w, b, X, W, B = _tensors(device, rng, (1, 3, 6, 5), (4, 3, 3, 3))
    out = conv2d(X[0], W, B, padding=1)
    assert out.shape == (4, 6, 5)
    assert rel_error(out, ref_conv(x, w, b, padding=1)[0]) <= 1e-5
    same = conv2d(X, W, None, padding="same")
    assert same.shape == (1, 4, 6, 5)
    assert rel_error(same, ref_conv(x, w, None, padding=1)) <= 1e-5
    assert conv2d(X, W, padding="valid").shape == (1, 4, 4, 3)
    E = cltensor.zeros(0, 3, 6, 5, device=device).requires_grad_()
    We = W.detach().requires_grad_()
    out = conv2d(E, We, padding=1)
    assert out.shape == (0, 4, 6, 5)
    out.sum().backward()
    assert E.grad.shape == E.shape and not We.grad.numpy().any()


# ---- implicit GEMM: padding in the loads, no input-sized workspace ----------------------------

@pytest.mark.parametrize("style", ["cpu", "gpu"])
def test_implicit_gemm_views_and_gradient_layouts(device, rng, monkeypatch, style):
    """Both kernel families read strided inputs and gradients in place, padding in the loads:
    NaN around the sliced view and an upsampled (strided) input gradient show any tap that
    reads outside the image."""
    monkeypatch.setattr(implicit, "KERNEL_STYLE", style)
    kwargs = {"stride": (2, 1), "padding": (2, 0, 1, 3), "dilation": (1, 2)}
    x, w, b, X, W, B = _tensors(device, rng, (2, 3, 9, 8), (5, 3, 3, 2))
    g = None
    for name, V in _views(X).items():
        Vg = V.detach().requires_grad_()
        Wg = W.detach().requires_grad_()
        out = conv2d(Vg, Wg, B, algo="implicit_gemm", **kwargs)
        if g is None:
            g = random_array(rng, out.shape, np.float32)
            ref, gx, gw = ref_conv(x, w, b, grad=g.astype(np.float64), **kwargs)
        G = cltensor.from_numpy(g, device=device)
        out.backward(G.contiguous(memory_format=cltensor.channels_last)
                     if name == "channels_last" else G)
        for what, got, want in (("out", out, ref), ("gx", Vg.grad, gx), ("gw", Wg.grad, gw)):
            err = rel_error(got, want)
            assert err <= FP32_RTOL["implicit_gemm"], f"{style} {name}: {what} error {err:.1e}"


@pytest.mark.parametrize("style", ["cpu", "gpu"])
def test_implicit_gemm_allocates_no_input_sized_workspace(device, rng, monkeypatch, style):
    """Issue 4's claim, measured: the peak device memory of an implicit-GEMM forward and
    backward is its outputs plus the scratch that workspace_bytes reports (weight-sized, plus
    on CPUs one bounded chunk of the output gradient), far below one more copy of the input
    (or of the output gradient) once that is larger than the chunk."""
    monkeypatch.setattr(implicit, "KERNEL_STYLE", style)
    _x, _w, b, X, W, B = _tensors(device, rng, (2, 8, 512, 384), (8, 8, 3, 3))
    p = make_params(X, W, B, 1, 1, 1, 1)
    gout = cltensor.from_numpy(random_array(rng, p.out_shape, np.float32), device=device)
    out = cltensor.empty(*p.out_shape, device=device).fill_(float("nan"))
    big = min(X.numel(), gout.numel()) * 4
    for pass_, outputs in (("forward", out.numel() * 4),
                           ("backward", (X.numel() + W.numel()) * 4)):
        ws = implicit.workspace_bytes(p, backward=pass_ == "backward", device=device)
        assert ws < big / 4, f"{pass_}: workspace {ws} bytes is not small"
        gc.collect()  # NOTE: earlier tests' tensors in reference cycles, freed at any moment
        cltensor.synchronize(device)
        before = cltensor.memory_stats(device)["allocated"]
        cltensor.reset_peak_memory_stats(device)
        if pass_ == "forward":
            implicit.forward(X, W, B, p, out)
            kept = (out,)
        else:
            kept = implicit.backward(X, W, gout, p, True, True)
        cltensor.synchronize(device)
        extra = cltensor.memory_stats(device)["peak"] - before
        assert extra <= outputs + ws, f"{pass_}: peak +{extra} bytes > {outputs} + {ws}"
        assert all(not np.isnan(t.numpy()).any() for t in kept)


def test_implicit_gemm_weight_gradient_one_slice(device, rng, monkeypatch):
    """With no workspace to spare, the CPU weight gradient sums every position in one slice
    (blocks crossing images: 56 positions per image, not a multiple of WGRAD_BQ)."""
    monkeypatch.setattr(implicit, "KERNEL_STYLE", "cpu")
    monkeypatch.setattr(implicit, "WGRAD_BQ", 10)
    monkeypatch.setattr(backends, "conv_workspace_limit", 1)
    X, W = (cltensor.empty(*shape, device=device) for shape in ((3, 5, 11, 12), (17, 5, 5, 5)))
    assert implicit.wgrad_blocks(make_params(X, W, None, 1, 2, 2, 1), device).splits == 1
    _check_case(device, rng, "implicit_gemm", ((3, 5, 11, 12), (17, 5, 5, 5),
                                                {"padding": 2, "dilation": 2}), bias=False)
