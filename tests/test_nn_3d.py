"""cltensor's 3-d layers: max, average, adaptive pooling and max unpooling (nn/functional/
volume.py), batch and instance norm, interpolate and pad on (N, C, D, H, W) input, functional
and module forms, values, indices and gradients against CPU torch in float64, on contiguous,
permuted, step-sliced and offset inputs, and bad input."""
import numpy as np
import pytest
import torch
from test_nn_functional import strided_views

import cltensor
import cltensor.nn as nn
import cltensor.nn.functional as F

TF = torch.nn.functional


def _dtype(device):
    return np.float64 if device.has_fp64 else np.float32


def _ct(dtype):
    return cltensor.float64 if dtype == np.float64 else cltensor.float32


def _check(got, want, dtype):
    """got (a ClTensor) equal to torch's want by norm-relative error."""
    g = got.numpy().astype(np.float64)
    w = want.detach().double().numpy()
    assert g.shape == w.shape, (g.shape, w.shape)
    tol = 1e-12 if dtype == np.float64 else 3e-6
    assert np.linalg.norm(g - w) <= tol * max(np.linalg.norm(w), 1.0), np.abs(g - w).max()


def _compare(device, shape, ours, theirs, rng, layouts=True, data=None):
    """ours(x) against theirs(x) (torch), forward and the input's gradient for a random output
    gradient, on every layout of a random x (or of data); the outputs after the first are
    compared too (indices)."""
    dtype = _dtype(device)
    a = (rng.standard_normal(shape) if data is None else data).astype(dtype)
    xt = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    want = theirs(xt)
    want = want if isinstance(want, tuple) else (want,)
    gt = torch.tensor(rng.standard_normal(want[0].shape))
    want[0].backward(gt)
    views = strided_views(a, device) if layouts else [("contiguous", cltensor.from_numpy(
        a, device=device))]
    for name, x in views:
        x.requires_grad_()
        got = ours(x)
        got = got if isinstance(got, tuple) else (got,)
        for o, w in zip(got, want):
            if w.dtype == torch.int64:
                assert o.dtype == cltensor.int64, name
                np.testing.assert_array_equal(o.numpy(), w.numpy(), err_msg=name)
            else:
                _check(o, w, dtype)
        got[0].backward(cltensor.from_numpy(gt.numpy().astype(dtype), device=device))
        _check(x.grad, xt.grad, dtype)


# (input shape, arguments): odd sizes, strides unlike the kernel, padding, dilation, ceil_mode
# (the last windows clipped), an unbatched input
MAX_CASES = [
    ((2, 3, 5, 6, 7), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 7, 5, 6), dict(kernel_size=(2, 3, 2), stride=(1, 2, 3), padding=(1, 1, 0),
                           dilation=(2, 1, 2), ceil_mode=True)),
    ((3, 4, 5, 5), dict(kernel_size=2, ceil_mode=True)),
    ((1, 1, 3, 4, 9), dict(kernel_size=(1, 2, 3), stride=(2, 1, 2), padding=(0, 1, 1))),
]


@pytest.mark.parametrize("shape,kw", MAX_CASES, ids=[f"case{i}" for i in range(len(MAX_CASES))])
def test_max_pool3d(device, rng, shape, kw):
    _compare(device, shape, lambda x: F.max_pool3d(x, **kw, return_indices=True),
             lambda x: TF.max_pool3d(x, **kw, return_indices=True), rng)
    _compare(device, shape, lambda x: F.max_pool3d(x, **kw), lambda x: TF.max_pool3d(x, **kw),
             rng, layouts=False)


def test_max_pool3d_ties_take_torchs_first(device, rng):
    """Equal values in a window: torch's index (the first in (d, h, w) order) and gradient."""
    data = rng.integers(0, 3, (2, 2, 5, 4, 6)).astype(np.float64)
    kw = dict(kernel_size=3, stride=(1, 2, 1), padding=1)
    _compare(device, data.shape, lambda x: F.max_pool3d(x, **kw, return_indices=True),
             lambda x: TF.max_pool3d(x, **kw, return_indices=True), rng, data=data)


AVG_CASES = [
    ((2, 3, 5, 6, 7), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 7, 5, 6), dict(kernel_size=(2, 3, 2), stride=(3, 2, 1), padding=(1, 1, 0),
                           ceil_mode=True, count_include_pad=False)),
    ((1, 2, 7, 5, 6), dict(kernel_size=(3, 2, 3), stride=2, padding=1, ceil_mode=True)),
    ((3, 5, 4, 6), dict(kernel_size=2, padding=1, divisor_override=3)),
]


@pytest.mark.parametrize("shape,kw", AVG_CASES, ids=[f"case{i}" for i in range(len(AVG_CASES))])
def test_avg_pool3d(device, rng, shape, kw):
    _compare(device, shape, lambda x: F.avg_pool3d(x, **kw), lambda x: TF.avg_pool3d(x, **kw), rng)


@pytest.mark.parametrize("size", [(3, 2, 4), 1, (None, 5, 2)])
def test_adaptive_pool3d(device, rng, size):
    shape = (2, 3, 5, 7, 6)
    _compare(device, shape, lambda x: F.adaptive_avg_pool3d(x, size),
             lambda x: TF.adaptive_avg_pool3d(x, size), rng)
    _compare(device, shape, lambda x: F.adaptive_max_pool3d(x, size, return_indices=True),
             lambda x: TF.adaptive_max_pool3d(x, size, return_indices=True), rng)


def test_max_unpool3d(device, rng):
    dtype = _dtype(device)
    a = rng.standard_normal((2, 3, 5, 6, 7)).astype(dtype)
    y, i = TF.max_pool3d(torch.tensor(a, dtype=torch.float64), 2, return_indices=True)
    want = TF.max_unpool3d(y, i, 2, output_size=(5, 6, 7))
    ours, idx = F.max_pool3d(cltensor.from_numpy(a, device=device), 2, return_indices=True)
    _check(F.max_unpool3d(ours, idx, 2, output_size=(5, 6, 7)), want, dtype)


INTERP_CASES = [
    dict(size=(7, 5, 9), mode="nearest"),
    dict(scale_factor=(1.7, 0.6, 2.0), mode="nearest"),
    dict(size=(3, 8, 4), mode="nearest-exact"),
    dict(size=(7, 5, 9), mode="trilinear"),
    dict(size=(7, 5, 9), mode="trilinear", align_corners=True),
    dict(scale_factor=(1.5, 2.3, 0.7), mode="trilinear"),
    dict(scale_factor=2, mode="trilinear", recompute_scale_factor=True),
    dict(size=(2, 3, 4), mode="area"),
]


@pytest.mark.parametrize("kw", INTERP_CASES, ids=[f"case{i}" for i in range(len(INTERP_CASES))])
def test_interpolate_5d(device, rng, kw):
    _compare(device, (2, 3, 4, 6, 5), lambda x: F.interpolate(x, **kw),
             lambda x: TF.interpolate(x, **kw), rng)


@pytest.mark.parametrize("call,message", [
    (lambda x: F.max_pool3d(x[0, 0], 2), r"4-d \(C, D, H, W\) or 5-d .* got shape \(3, 4, 5\)"),
    (lambda x: F.max_pool3d(x, 2, padding=2), r"pad should be at most half"),
    (lambda x: F.avg_pool3d(x, (4, 2, 2)), r"input size \(3, 3, 4, 5\).*too small"),
    (lambda x: F.avg_pool3d(x, 2, divisor_override=0), r"divisor_override"),
    (lambda x: F.max_pool3d(x, 2, stride=(1, 0, 1)), r"stride must be in"),
    (lambda x: F.adaptive_avg_pool3d(x, (2, 2)), r"output_size must be an int or a triple"),
    (lambda x: F.adaptive_max_pool3d(x, (2, 0, 1)), r"positive ints"),
    (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), r"'bilinear' is not supported"),
    (lambda x: F.interpolate(x, size=(2, 2)), r"size must be a positive int or 3"),
])
def test_bad_input(device, call, message):
    x = cltensor.zeros(1, 3, 3, 4, 5, device=device)
    with pytest.raises(ValueError, match=message):
        call(x)
    with pytest.raises(TypeError, match="kernel_size must be an int or a triple"):
        F.max_pool3d(x, (2, 2))


def test_norms_and_pad_5d(device, rng):
    """batch_norm, instance_norm and pad (every mode), functional forms, on 5-d input."""
    pads = (1, 2, 0, 2, 2, 1)
    for mode in ("reflect", "replicate", "circular", "constant"):
        _compare(device, (2, 2, 3, 4, 5), lambda x: F.pad(x, pads, mode),
                 lambda x: TF.pad(x, pads, mode), rng)
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    wt, bt = torch.tensor(w), torch.tensor(b)
    _compare(device, (2, 3, 4, 5, 3), lambda x: F.instance_norm(x, None, None, _on(w, x), _on(b, x)),
             lambda x: TF.instance_norm(x, None, None, wt, bt), rng)
    _compare(device, (2, 3, 4, 5, 3), lambda x: F.batch_norm(x, None, None, _on(w, x), _on(b, x), True),
             lambda x: TF.batch_norm(x, None, None, wt, bt, True), rng)


def _on(a, like):
    """numpy a on like's device in like's dtype."""
    return cltensor.from_numpy(a, device=like.device).to(dtype=like.dtype)


# ---- the modules ----------------------------------------------------------------------------

def test_pool3d_modules(device, rng):
    shape = (2, 3, 5, 6, 7)
    pairs = [(nn.MaxPool3d(3, 2, 1, ceil_mode=True), torch.nn.MaxPool3d(3, 2, 1, ceil_mode=True)),
             (nn.MaxPool3d(2, return_indices=True), torch.nn.MaxPool3d(2, return_indices=True)),
             (nn.AvgPool3d(3, 2, 1, count_include_pad=False),
              torch.nn.AvgPool3d(3, 2, 1, count_include_pad=False)),
             (nn.AdaptiveAvgPool3d((2, 3, 3)), torch.nn.AdaptiveAvgPool3d((2, 3, 3))),
             (nn.AdaptiveMaxPool3d(2, True), torch.nn.AdaptiveMaxPool3d(2, True))]
    for ours, theirs in pairs:
        _compare(device, shape, ours, theirs, rng, layouts=False)
    a = rng.standard_normal(shape)
    y, i = torch.nn.MaxPool3d(2, return_indices=True)(torch.tensor(a))
    ours, idx = nn.MaxPool3d(2, return_indices=True)(cltensor.from_numpy(a.astype(_dtype(device)),
                                                                         device=device))
    _check(nn.MaxUnpool3d(2)(ours, idx, output_size=(2, 3, 5, 6, 7)),
           torch.nn.MaxUnpool3d(2)(y, i, output_size=(2, 3, 5, 6, 7)), _dtype(device))


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm3d(device, rng, training):
    dtype = _dtype(device)
    ours, theirs = nn.BatchNorm3d(3).to(dtype=_ct(dtype)), torch.nn.BatchNorm3d(3)
    theirs = theirs.double()
    stats = [rng.standard_normal(3), rng.random(3) + 0.5, rng.standard_normal(3),
             rng.standard_normal(3)]
    for t in (ours, theirs):
        for name, v in zip(("running_mean", "running_var", "weight", "bias"), stats):
            getattr(t, name).data = torch.tensor(v) if t is theirs else \
                cltensor.from_numpy(v.astype(dtype), device=device)
        t.train(training)
    ours = ours.to(device)
    # NOTE: one call in training, whose running stats each call updates
    _compare(device, (2, 3, 4, 5, 3), ours, theirs, rng, layouts=not training)
    _check(ours.running_mean, theirs.running_mean, dtype)
    _check(ours.running_var, theirs.running_var, dtype)
    assert ours.weight.grad is not None


@pytest.mark.parametrize("affine", [False, True])
def test_instance_norm3d(device, rng, affine):
    ours, theirs = nn.InstanceNorm3d(3, affine=affine), torch.nn.InstanceNorm3d(3, affine=affine)
    ours = ours.to(device=device, dtype=_ct(_dtype(device)))
    _compare(device, (2, 3, 4, 5, 3), ours, theirs.double(), rng)
    _compare(device, (3, 4, 5, 3), lambda x: F.instance_norm(x), TF.instance_norm, rng,
             layouts=False)


def test_upsample_5d_module(device, rng):
    _compare(device, (1, 2, 3, 4, 5), nn.Upsample(scale_factor=2, mode="trilinear"),
             torch.nn.Upsample(scale_factor=2, mode="trilinear"), rng, layouts=False)


def test_pads_3d(device, rng):
    pads = (1, 2, 0, 2, 2, 1)
    pairs = [(nn.ReflectionPad3d(pads), torch.nn.ReflectionPad3d(pads)),
             (nn.ReplicationPad3d(pads), torch.nn.ReplicationPad3d(pads)),
             (nn.CircularPad3d(pads), torch.nn.CircularPad3d(pads)),
             (nn.ConstantPad3d(1, 2.5), torch.nn.ConstantPad3d(1, 2.5)),
             (nn.ZeroPad3d(pads), torch.nn.ZeroPad3d(pads))]
    for ours, theirs in pairs:
        _compare(device, (2, 2, 3, 4, 5), ours, theirs, rng, layouts=False)
    _compare(device, (2, 2, 3, 4, 5), lambda x: F.pad(x, pads, "reflect"),
             lambda x: TF.pad(x, pads, "reflect"), rng)


def test_bad_module_input(device):
    x = cltensor.zeros(1, 3, 3, 4, 5, device=device)
    with pytest.raises(ValueError, match=r"expected 2 channels in dim 1.*\(1, 3, 3, 4, 5\)"):
        nn.BatchNorm3d(2)(x)
    with pytest.raises(ValueError, match=r"expected 5D input, got 4D"):
        nn.BatchNorm3d(3)(x[0])
    with pytest.raises(ValueError, match=r"expected 3D \(unbatched\) or 4D input, got 5D"):
        nn.InstanceNorm2d(3)(x)
    with pytest.raises(ValueError, match=r"padding must be an int or a 6-tuple"):
        nn.ReflectionPad3d((1, 1, 1, 1))


# (function name, arguments after the input), the same in F and torch's
DEPTH_OPS = [
    ("max_pool3d", (3, 2, 1), {}),
    ("avg_pool3d", (3, 2, 1), dict(ceil_mode=True)),
    ("adaptive_avg_pool3d", ((2, 3, 2),), {}),
    ("adaptive_max_pool3d", (2,), {}),
    ("interpolate", (), dict(scale_factor=2, mode="trilinear")),
    ("interpolate", (), dict(size=(7, 3, 4), mode="nearest")),
]
DEPTH_IDS = ["max", "avg", "adaptive_avg", "adaptive_max", "trilinear", "nearest"]


def _op(module, name, args, kw):
    return lambda x: getattr(module, name)(x, *args, **kw)


@pytest.mark.parametrize("name,args,kw", DEPTH_OPS, ids=DEPTH_IDS)
def test_launches_do_not_grow_with_depth(device, name, args, kw):
    op = _op(F, name, args, kw)

    def launches(depth):
        x = cltensor.randn(2, 3, depth, 6, 5, device=device).requires_grad_()
        op(x)  # the builds out of the way
        with cltensor.profile() as p:
            y = op(x)
            y.backward(cltensor.ones_like(y))
        return len(p.records())

    assert launches(2) == launches(13) <= 5  # two forward, two backward and the ones


@pytest.mark.parametrize("name,args,kw", DEPTH_OPS, ids=DEPTH_IDS)
def test_double_backward(device, rng, name, args, kw):
    """The input gradient's own gradient w.r.t. the output gradient, against torch's."""
    ours, theirs = _op(F, name, args, kw), _op(TF, name, args, kw)
    dtype = _dtype(device)
    a = rng.standard_normal((2, 2, 5, 6, 5)).astype(dtype)
    xt = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    yt = theirs(xt)
    b, v = rng.standard_normal(yt.shape).astype(dtype), rng.standard_normal(a.shape).astype(dtype)
    gt = torch.tensor(b, dtype=torch.float64, requires_grad=True)
    (gxt,) = torch.autograd.grad(yt, xt, gt, create_graph=True)
    (gxt * torch.tensor(v, dtype=torch.float64)).sum().backward()
    x = cltensor.from_numpy(a, device=device).requires_grad_()
    g = cltensor.from_numpy(b, device=device).requires_grad_()
    (gx,) = cltensor.autograd.grad(ours(x), x, g, create_graph=True)
    _check(gx, gxt, dtype)
    (gx * cltensor.from_numpy(v, device=device)).sum().backward()
    _check(g.grad, gt.grad, dtype)


def test_empty_batch(device):
    x = cltensor.zeros(0, 2, 4, 5, 6, device=device)
    assert F.max_pool3d(x, 2, return_indices=True)[1].shape == (0, 2, 2, 2, 3)
    assert F.adaptive_max_pool3d(x, 2, return_indices=True)[1].shape == (0, 2, 2, 2, 2)
    assert F.avg_pool3d(x, 3, 1, 1).shape == (0, 2, 4, 5, 6)
    assert F.interpolate(x, scale_factor=2, mode="trilinear").shape == (0, 2, 8, 10, 12)
