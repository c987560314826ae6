"""cltensor.nn additions: 1-d layers, unfold/fold, instance/RMS norm, distances, the margin and
likelihood losses and the rest, against torch in float64 (forward, gradients, double backward),
numpy references where cheap, and bad input; torch's edge cases (binary cross entropy at 0 and
1, the place of a reassigned child, parameter or buffer)."""
import math
import re

import numpy as np
import pytest

import cltensor
import cltensor.nn.functional as F
from cltensor import nn


def dtype_of(device):
    return np.float64 if device.has_fp64 else np.float32


def tol(a):
    return dict(rtol=1e-9, atol=1e-10) if a.dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)


def C(a, device, grad=False):
    t = cltensor.from_numpy(np.array(a, order="C"), device=device)
    return t.requires_grad_() if grad else t


def check(cf, tf, arrays, device, rng, second=False):
    """cf(*cltensors) against tf(*torch tensors): the output(s), the gradients of every input
    for a random output gradient and, with second, the gradients of sum(grad^2) (double
    backward)."""
    torch = pytest.importorskip("torch")
    cs = [C(a, device, True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    y, yt = cf(*cs), tf(*ts)
    if isinstance(y, tuple):
        np.testing.assert_array_equal(y[1].numpy(), yt[1].numpy())
        y, yt = y[0], yt[0]
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), **tol(arrays[0]))
    g = rng.standard_normal(yt.shape).astype(arrays[0].dtype)
    gc = cltensor.autograd.grad(y, cs, C(g, device), create_graph=second)
    gt = torch.autograd.grad(yt, ts, torch.tensor(g), create_graph=second)
    for a, b in zip(gc, gt):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), **tol(arrays[0]))
    if second:
        gg = _grads_of_squares(gc, cs, cltensor.autograd.grad)
        ggt = _grads_of_squares(gt, ts, torch.autograd.grad)
        for a, b, x in zip(gg, ggt, arrays):
            a = np.zeros_like(x) if a is None else a.numpy()
            b = np.zeros_like(x) if b is None else b.numpy()
            np.testing.assert_allclose(a, b, **tol(arrays[0]))


def _grads_of_squares(grads, inputs, grad):
    """grad(sum(grad^2), inputs) (None where it does not depend on them)."""
    total = sum((a * a).sum() for a in grads)
    if not total.requires_grad:  # a linear op: its gradient does not depend on the input
        return [None] * len(inputs)
    return grad(total, inputs, allow_unused=True)


def randn(rng, device, *shape):
    return rng.standard_normal(shape).astype(dtype_of(device))


# ---- 1-d layers -----------------------------------------------------------------------------

def test_1d_layers_match_torch(device, rng):
    TF = pytest.importorskip("torch.nn.functional")
    x, w, b = randn(rng, device, 2, 3, 11), randn(rng, device, 4, 3, 3), randn(rng, device, 4)
    check(lambda x, w, b: F.conv1d(x, w, b, 2, 1, 1), lambda x, w, b: TF.conv1d(x, w, b, 2, 1, 1),
          [x, w, b], device, rng, second=True)
    check(lambda x, w: F.conv1d(x, w, padding="same", dilation=2),
          lambda x, w: TF.conv1d(x, w, padding="same", dilation=2), [x[0], w], device, rng)
    wt = randn(rng, device, 3, 2, 3)
    check(lambda x, w: F.conv_transpose1d(x, w, None, 2, 1, 1),
          lambda x, w: TF.conv_transpose1d(x, w, None, 2, 1, 1), [x, wt], device, rng)
    cases = [
        (lambda x: F.max_pool1d(x, 3, 2, 1, return_indices=True),
         lambda x: TF.max_pool1d(x, 3, 2, 1, return_indices=True)),
        (lambda x: F.max_pool1d_with_indices(x, 2, ceil_mode=True),
         lambda x: TF.max_pool1d_with_indices(x, 2, ceil_mode=True)),
        (lambda x: F.avg_pool1d(x, 3, 2, 1, True, False),
         lambda x: TF.avg_pool1d(x, 3, 2, 1, True, False)),
        (lambda x: F.adaptive_avg_pool1d(x, 4), lambda x: TF.adaptive_avg_pool1d(x, 4)),
        (lambda x: F.adaptive_max_pool1d(x, (4,), True),
         lambda x: TF.adaptive_max_pool1d(x, (4,), True)),
        (lambda x: F.lp_pool1d(x.abs(), 3, 2), lambda x: TF.lp_pool1d(x.abs(), 3, 2)),
        (lambda x: F.lp_pool2d(x.unsqueeze(0), 2, (2, 3), 1),
         lambda x: TF.lp_pool2d(x.unsqueeze(0), 2, (2, 3), 1)),
    ]
    for cf, tf in cases:
        check(cf, tf, [x], device, rng, second=True)


def test_max_unpool_and_aliases(device, rng):
    torch = pytest.importorskip("torch")
    x = randn(rng, device, 2, 3, 6, 7)
    y, i = torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True)
    yc, ic = F.max_pool2d_with_indices(C(x, device), 2)
    np.testing.assert_array_equal(ic.numpy(), i.numpy())
    ya, ia = F.adaptive_max_pool2d_with_indices(C(x, device), 3)
    np.testing.assert_array_equal(ia.numpy(), torch.nn.functional.adaptive_max_pool2d(
        torch.tensor(x), 3, True)[1].numpy())
    check(lambda y: F.max_unpool2d(y, C(i.numpy(), device), 2, output_size=(6, 7)),
          lambda y: torch.nn.functional.max_unpool2d(y, i, 2, output_size=(6, 7)),
          [y.numpy()], device, rng, second=True)
    y1, i1 = torch.nn.functional.max_pool1d(torch.tensor(x[0]), 3, 2, 1, return_indices=True)
    check(lambda y: F.max_unpool1d(y, C(i1.numpy(), device), 3, 2, 1),
          lambda y: torch.nn.functional.max_unpool1d(y, i1, 3, 2, 1), [y1.numpy()], device, rng)
    # numpy-free: unpooling puts each maximum back where it was
    back = F.max_unpool2d(yc, ic, 2, output_size=(6, 7)).numpy()
    assert np.array_equal(back[back != 0], x[back != 0]) and (back != 0).sum() == yc.numel()


# ---- unfold / fold ----------------------------------------------------------------------------

def ref_unfold(x, k, d, p, s):
    """A float64 numpy im2col in torch's layout."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    lh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    lw = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    out = np.empty((n, c, k[0], k[1], lh, lw), x.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            out[:, :, i, j] = xp[:, :, i * d[0]:i * d[0] + s[0] * (lh - 1) + 1:s[0],
                                 j * d[1]:j * d[1] + s[1] * (lw - 1) + 1:s[1]]
    return out.reshape(n, c * k[0] * k[1], lh * lw)


@pytest.mark.parametrize("k, d, p, s", [((2, 3), (2, 1), (1, 1), (1, 2)), (3, 1, 1, 2)])
def test_unfold_fold(device, rng, k, d, p, s):
    pair = (lambda v: v if isinstance(v, tuple) else (v, v))
    x = randn(rng, device, 2, 3, 6, 7)
    cols = F.unfold(C(x, device), k, d, p, s).numpy()
    np.testing.assert_allclose(cols, ref_unfold(x, *map(pair, (k, d, p, s))), rtol=0, atol=0)
    # fold is unfold's adjoint: <fold(c), x> == <c, unfold(x)>
    c = rng.standard_normal(cols.shape).astype(x.dtype)
    folded = F.fold(C(c, device), (6, 7), k, d, p, s).numpy()
    assert math.isclose((folded * x).sum(), (c * cols).sum(), rel_tol=1e-5)
    TF = pytest.importorskip("torch.nn.functional")
    check(lambda x: F.unfold(x, k, d, p, s), lambda x: TF.unfold(x, k, d, p, s), [x], device, rng,
          second=True)
    check(lambda c: F.fold(c, (6, 7), k, d, p, s), lambda c: TF.fold(c, (6, 7), k, d, p, s),
          [c[0]], device, rng)
    unf, fld = nn.Unfold(k, d, p, s), nn.Fold((6, 7), k, d, p, s)
    np.testing.assert_allclose(fld(unf(C(x, device))).numpy(),
                               TF.fold(TF.unfold(_t(x), k, d, p, s), (6, 7), k, d, p, s).numpy(),
                               **tol(x))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_unfold_fold_of_views_and_16_bits(device, rng, dtype):
    """Strided and offset views in, 16-bit values (unfold copies them exactly; fold sums each
    output element's taps in float32 and rounds once)."""
    x64 = rng.standard_normal((3, 2, 7, 6))
    big = C(np.pad(x64, ((1, 0), (0, 0), (0, 0), (0, 0))).transpose(0, 1, 3, 2).copy(), device)
    x = big.to(getattr(cltensor, dtype)).transpose(2, 3)[1:]  # offset, non-contiguous
    want = ref_unfold(x.to(cltensor.float64).numpy(), (3, 2), (1, 2), (1, 0), (2, 1))
    got = F.unfold(x, (3, 2), (1, 2), (1, 0), (2, 1))
    assert got.dtype == x.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.to(cltensor.float64).numpy(), want)
    cols64 = rng.standard_normal((2, want.shape[2], want.shape[1]))
    cols = C(cols64, device).to(getattr(cltensor, dtype)).transpose(1, 2)  # strided columns
    exact = cols.to(cltensor.float64).numpy()
    folded = F.fold(cols, (7, 6), (3, 2), (1, 2), (1, 0), (2, 1)).to(cltensor.float64).numpy()
    # fold is unfold's adjoint: its output element e is <c, unfold(one-hot e)>
    taps = ref_unfold(np.eye(2 * 7 * 6).reshape(-1, 2, 7, 6), (3, 2), (1, 2), (1, 0), (2, 1))
    ref = np.einsum("nkl,ekl->ne", exact, taps).reshape(2, 2, 7, 6)
    tol = 1e-6 if dtype == "float32" else 2 ** -10  # float16: one rounding of the sum
    np.testing.assert_allclose(folded, ref, rtol=tol, atol=tol)


def test_unfold_fold_empty_batch(device):
    x = cltensor.zeros(0, 2, 5, 4, device=device)
    assert F.unfold(x, 2, padding=1).shape == (0, 8, 30)
    assert F.fold(cltensor.zeros(0, 8, 30, device=device), (5, 4), 2, padding=1).shape == x.shape


def _t(a):
    import torch
    return torch.tensor(a)


# ---- normalization and distances --------------------------------------------------------------

def test_norms_match_torch(device, rng):
    TF = pytest.importorskip("torch.nn.functional")
    torch = pytest.importorskip("torch")
    x, w, b = randn(rng, device, 3, 4, 5), randn(rng, device, 4), randn(rng, device, 4)
    check(lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
          lambda x, w, b: TF.instance_norm(x, weight=w, bias=b), [x, w, b], device, rng,
          second=True)
    rm, rv = C(np.zeros(4, x.dtype), device), C(np.ones(4, x.dtype), device)
    trm, trv = torch.zeros(4).to(torch.tensor(x).dtype), torch.ones(4).to(torch.tensor(x).dtype)
    check(lambda x: F.instance_norm(x, rm, rv, momentum=0.3),
          lambda x: TF.instance_norm(x, trm, trv, momentum=0.3), [x], device, rng)
    np.testing.assert_allclose(rm.numpy(), trm.numpy(), **tol(x))
    np.testing.assert_allclose(rv.numpy(), trv.numpy(), **tol(x))
    check(lambda x: F.instance_norm(x, rm, rv, use_input_stats=False),
          lambda x: TF.instance_norm(x, trm, trv, use_input_stats=False), [x], device, rng)
    w5 = randn(rng, device, 5)
    check(lambda x, w: F.rms_norm(x, (5,), w), lambda x, w: TF.rms_norm(x, (5,), w), [x, w5],
          device, rng, second=True)
    check(lambda x: F.rms_norm(x, (4, 5), eps=1e-3), lambda x: TF.rms_norm(x, (4, 5), eps=1e-3),
          [x], device, rng)
    # numpy-free reference for rms_norm, the default eps included
    ref = x / np.sqrt((x * x).mean(-1, keepdims=True) + np.finfo(x.dtype).eps)
    np.testing.assert_allclose(F.rms_norm(C(x, device), 5).numpy(), ref, **tol(x))


def test_distances_match_torch(device, rng):
    TF = pytest.importorskip("torch.nn.functional")
    x, y = randn(rng, device, 3, 4, 5), randn(rng, device, 1, 4, 5)
    for p in (2, 1, 3.5, math.inf):
        check(lambda a: F.normalize(a, p, 2), lambda a: TF.normalize(a, p, 2), [x], device, rng)
        check(lambda a, b: F.pairwise_distance(a, b, p, keepdim=True),
              lambda a, b: TF.pairwise_distance(a, b, p, keepdim=True), [x, y], device, rng)
        check(lambda a: F.pdist(a, p), lambda a: TF.pdist(a, p), [x[0]], device, rng)
    check(lambda a, b: F.cosine_similarity(a, b, 1), lambda a, b: TF.cosine_similarity(a, b, 1),
          [x, y], device, rng, second=True)
    check(lambda a: F.softmin(a, 1), lambda a: TF.softmin(a, 1), [x], device, rng)
    # numpy-free references
    d = F.pairwise_distance(C(x[0], device), C(y[0], device)).numpy()
    np.testing.assert_allclose(d, np.sqrt(((x[0] - y[0] + 1e-6) ** 2).sum(-1)), **tol(x))
    np.testing.assert_allclose(F.normalize(C(x, device)).numpy(),
                               x / np.sqrt((x * x).sum(1, keepdims=True)), **tol(x))
    s2 = nn.Softmax2d()(C(x, device)).numpy()
    np.testing.assert_allclose(s2.sum(0), np.ones((4, 5)), **tol(x))


# ---- losses -----------------------------------------------------------------------------------

def _loss_cases(TF, rng, dt):
    sgn = np.sign(rng.standard_normal((6, 5))).astype(dt)
    sgn1 = np.sign(rng.standard_normal(6)).astype(dt)
    t01, w = (sgn > 0).astype(dt), rng.random(5).astype(dt)
    tc = rng.integers(0, 5, 6)
    tm = np.array([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 0, 0, 0, 0], [4, 4, -1, 0, 1],
                   [0, -1, 2, 2, 2], [2, 1, 0, -1, 3]])
    tp = rng.poisson(2.0, (6, 5)).astype(dt)
    cos_d = (lambda F_: lambda u, v: 1 - F_.cosine_similarity(u, v))
    return [  # (name, cltensor fn, torch fn, number of (6, 5) inputs, extra tensors)
        ("margin_ranking", lambda a, b, t, r: F.margin_ranking_loss(a, b, t, 0.3, reduction=r),
         lambda a, b, t, r: TF.margin_ranking_loss(a, b, t, 0.3, reduction=r), 2, [sgn]),
        ("hinge", lambda a, t, r: F.hinge_embedding_loss(a, t, 0.7, reduction=r),
         lambda a, t, r: TF.hinge_embedding_loss(a, t, 0.7, reduction=r), 1, [sgn]),
        ("soft_margin", lambda a, t, r: F.soft_margin_loss(a, t, reduction=r),
         lambda a, t, r: TF.soft_margin_loss(a, t, reduction=r), 1, [sgn]),
        ("multilabel_soft", lambda a, t, w, r: F.multilabel_soft_margin_loss(a, t, w, reduction=r),
         lambda a, t, w, r: TF.multilabel_soft_margin_loss(a, t, w, reduction=r), 1, [t01, w]),
        ("cosine_embedding", lambda a, b, t, r: F.cosine_embedding_loss(a, b, t, 0.2, reduction=r),
         lambda a, b, t, r: TF.cosine_embedding_loss(a, b, t, 0.2, reduction=r), 2, [sgn1]),
        ("multi_margin1", lambda a, t, w, r: F.multi_margin_loss(a, t, 1, 0.8, w, reduction=r),
         lambda a, t, w, r: TF.multi_margin_loss(a, t, 1, 0.8, w, reduction=r), 1, [tc, w]),
        ("multi_margin2", lambda a, t, r: F.multi_margin_loss(a, t, 2, reduction=r),
         lambda a, t, r: TF.multi_margin_loss(a, t, 2, reduction=r), 1, [tc]),
        ("multilabel_margin", lambda a, t, r: F.multilabel_margin_loss(a, t, reduction=r),
         lambda a, t, r: TF.multilabel_margin_loss(a, t, reduction=r), 1, [tm]),
        ("triplet", lambda a, b, c, r: F.triplet_margin_loss(a, b, c, 0.5, 3, swap=True,
                                                               reduction=r),
         lambda a, b, c, r: TF.triplet_margin_loss(a, b, c, 0.5, 3, swap=True, reduction=r), 3,
         []),
        ("triplet_distance", lambda a, b, c, r: F.triplet_margin_with_distance_loss(
            a, b, c, distance_function=cos_d(F), reduction=r),
         lambda a, b, c, r: TF.triplet_margin_with_distance_loss(
            a, b, c, distance_function=cos_d(TF), reduction=r), 3, []),
        ("poisson_full", lambda a, t, r: F.poisson_nll_loss(a, t, full=True, reduction=r),
         lambda a, t, r: TF.poisson_nll_loss(a, t, full=True, reduction=r), 1, [tp]),
        ("poisson_rate", lambda a, t, r: F.poisson_nll_loss(a.abs(), t, False, reduction=r),
         lambda a, t, r: TF.poisson_nll_loss(a.abs(), t, False, reduction=r), 1, [tp]),
    ]


NO_TORCH_DOUBLE_BACKWARD = ("multi_margin1", "multi_margin2", "multilabel_margin")


def test_losses_match_torch(device, rng):
    torch = pytest.importorskip("torch")
    dt = dtype_of(device)
    for name, cf, tf, n_in, extra in _loss_cases(torch.nn.functional, rng, dt):
        inputs = [randn(rng, device, 6, 5) for _ in range(n_in)]
        for r in ("mean", "sum", "none"):
            check(lambda *a: cf(*a, *[C(e, device) for e in extra], r),
                  lambda *a: tf(*a, *[torch.tensor(e) for e in extra], r), inputs, device, rng,
                  second=(r == "sum" and name not in NO_TORCH_DOUBLE_BACKWARD))


def test_gaussian_nll_and_numpy_references(device, rng):
    TF = pytest.importorskip("torch.nn.functional")
    x, t = randn(rng, device, 6, 5), randn(rng, device, 6, 5)
    v = rng.random((6, 5)).astype(x.dtype) + 0.1
    v[0, 0] = 1e-9  # clamped to eps, its gradient kept (torch's)
    for var in (v, v[:, 0], v[:, :1]):
        check(lambda a, b, s: F.gaussian_nll_loss(a, b, s, True),
              lambda a, b, s: TF.gaussian_nll_loss(a, b, s, True), [x, t, var], device, rng)
    # numpy-free references
    xc, tc = C(x, device), C(t, device)
    sgn = np.sign(t)
    np.testing.assert_allclose(
        F.margin_ranking_loss(xc, tc, C(sgn, device), 0.5, reduction="none").numpy(),
        np.maximum(0, -sgn * (x - t) + 0.5), **tol(x))
    np.testing.assert_allclose(
        F.hinge_embedding_loss(xc, C(sgn, device), 0.5, reduction="none").numpy(),
        np.where(sgn == 1, x, np.maximum(0, 0.5 - x)), **tol(x))
    np.testing.assert_allclose(F.soft_margin_loss(xc, C(sgn, device)).numpy(),
                               np.log1p(np.exp(-sgn * x)).mean(), **tol(x))
    v2 = v[1:] + 0
    np.testing.assert_allclose(
        F.gaussian_nll_loss(xc[1:], tc[1:], C(v2, device), eps=1e-6).numpy(),
        (0.5 * (np.log(v2) + (x[1:] - t[1:]) ** 2 / v2)).mean(), **tol(x))


# ---- others -----------------------------------------------------------------------------------

def test_bilinear_rrelu_dropout_gumbel(device, rng):
    TF = pytest.importorskip("torch.nn.functional")
    x1, x2 = randn(rng, device, 6, 5), randn(rng, device, 6, 3)
    w, b = randn(rng, device, 4, 5, 3), randn(rng, device, 4)
    check(lambda a, c, w, b: F.bilinear(a, c, w, b), lambda a, c, w, b: TF.bilinear(a, c, w, b),
          [x1, x2, w, b], device, rng, second=True)
    np.testing.assert_allclose(F.bilinear(C(x1, device), C(x2, device), C(w, device)).numpy(),
                               np.einsum("ni,kij,nj->nk", x1, w, x2), **tol(x1))
    check(lambda a: F.rrelu(a), lambda a: TF.rrelu(a), [x1], device, rng)
    cltensor.manual_seed(0)
    xt = C(x1, device, True)
    y = F.rrelu(xt, 0.1, 0.3, training=True)
    y.sum().backward()
    neg = x1 < 0
    slope = y.detach().numpy()[neg] / x1[neg]
    assert 0.1 <= slope.min() and slope.max() <= 0.3 and slope.std() > 0.01
    np.testing.assert_allclose(xt.grad.numpy()[neg], slope, **tol(x1))
    assert np.array_equal(y.detach().numpy()[~neg], x1[~neg])
    big = C(rng.standard_normal(200000).astype(x1.dtype), device)
    out = F.alpha_dropout(big, 0.2, training=True).numpy()
    assert abs(out.mean()) < 0.02 and abs(out.std() - 1) < 0.02
    assert F.alpha_dropout(big, 0.2) is big
    fa = F.feature_alpha_dropout(C(np.ones((200, 8, 6), x1.dtype), device), 0.5, True).numpy()
    assert (fa == fa[:, :, :1]).all() and len(np.unique(fa)) == 2
    g = F.gumbel_softmax(C(x1, device, True), 0.5, hard=True)
    assert set(np.unique(g.detach().numpy())) == {0.0, 1.0}
    np.testing.assert_allclose(g.detach().numpy().sum(1), np.ones(6))
    soft = F.gumbel_softmax(C(x1, device), 0.5).numpy()
    np.testing.assert_allclose(soft.sum(1), np.ones(6), **tol(x1))


def test_inplace_aliases_and_upsample(device, rng):
    x = randn(rng, device, 6, 5)
    cases = [(F.relu_, (), np.maximum(x, 0)),
             (F.leaky_relu_, (0.2,), np.where(x > 0, x, 0.2 * x)),
             (F.hardtanh_, (-0.5, 0.5), np.clip(x, -0.5, 0.5)),
             (F.elu_, (), np.where(x > 0, x, np.expm1(x))),
             (F.celu_, (2.0,), np.where(x > 0, x, 2 * np.expm1(x / 2))),
             (F.selu_, (), 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 *
                                                          np.expm1(x))),
             (F.threshold_, (0.1, 9.0), np.where(x > 0.1, x, 9.0)),
             (F.rrelu_, (0.1, 0.3), np.where(x >= 0, x, 0.2 * x))]
    for fn, args, want in cases:
        t = C(x, device)
        assert fn(t, *args) is t
        np.testing.assert_allclose(t.numpy(), want, **tol(x))
    img = C(randn(rng, device, 1, 2, 3, 4), device)
    with pytest.warns(UserWarning, match="deprecated"):
        up = F.upsample_bilinear(img, scale_factor=2)
    np.testing.assert_array_equal(up.numpy(), F.interpolate(img, scale_factor=2, mode="bilinear",
                                                            align_corners=True).numpy())
    with pytest.warns(UserWarning, match="deprecated"):
        assert F.upsample_nearest(img, (6, 8)).shape == (1, 2, 6, 8)
    with pytest.warns(UserWarning, match="deprecated"):
        assert F.upsample(img, scale_factor=2).shape == (1, 2, 6, 8)


# ---- modules ----------------------------------------------------------------------------------

def _repr_as_torch_prints(mine, theirs):
    """Our repr without the keyword arguments that this torch's repr does not print (the
    H200's torch 2.11 leaves out InstanceNorm's bias=), so that the rest still compares."""
    ours, printed = repr(mine), set(re.findall(r"(\w+)=", repr(theirs)))
    for name in set(re.findall(r"(\w+)=", ours)) - printed:
        ours = re.sub(rf", {name}=[^,)]*", "", ours)
    return ours


def _copy_params(mine, theirs):
    import torch
    with torch.no_grad():
        for (name, p), (tname, tp) in zip(mine.named_parameters(), theirs.named_parameters()):
            assert name == tname and tuple(p.shape) == tuple(tp.shape), (name, tname)
            tp.copy_(torch.tensor(p.numpy()))


def test_modules_match_torch(device, rng):
    torch = pytest.importorskip("torch")
    tnn = torch.nn
    x3, x4 = randn(rng, device, 2, 4, 9), randn(rng, device, 2, 4, 6, 6)
    f64 = dict(dtype=cltensor.float64 if device.has_fp64 else cltensor.float32, device=device)
    tdt = dict(dtype=torch.float64 if device.has_fp64 else torch.float32)
    pairs = [
        (nn.Conv1d(4, 6, 3, padding=1, padding_mode="reflect", **f64),
         tnn.Conv1d(4, 6, 3, padding=1, padding_mode="reflect", **tdt), x3),
        (nn.Conv1d(4, 6, 3, stride=2, groups=2, bias=False, **f64),
         tnn.Conv1d(4, 6, 3, stride=2, groups=2, bias=False, **tdt), x3),
        (nn.ConvTranspose1d(4, 6, 4, stride=2, padding=1, **f64),
         tnn.ConvTranspose1d(4, 6, 4, stride=2, padding=1, **tdt), x3),
        (nn.MaxPool1d(3, 2, 1), tnn.MaxPool1d(3, 2, 1), x3),
        (nn.AvgPool1d(3, 2, 1), tnn.AvgPool1d(3, 2, 1), x3),
        (nn.AdaptiveAvgPool1d(4), tnn.AdaptiveAvgPool1d(4), x3),
        (nn.AdaptiveMaxPool1d(4), tnn.AdaptiveMaxPool1d(4), x3),
        (nn.LPPool1d(2, 3), tnn.LPPool1d(2, 3), x3),
        (nn.LPPool2d(2, 3), tnn.LPPool2d(2, 3), x4),
        (nn.InstanceNorm1d(4, affine=True, **f64), tnn.InstanceNorm1d(4, affine=True, **tdt), x3),
        (nn.InstanceNorm2d(4, track_running_stats=True, **f64),
         tnn.InstanceNorm2d(4, track_running_stats=True, **tdt), x4),
        (nn.RMSNorm((6, 6), **f64), tnn.RMSNorm((6, 6), **tdt), x4),
        (nn.Softmin(1), tnn.Softmin(1), x3),
        (nn.Softmax2d(), tnn.Softmax2d(), x4),
        (nn.Unfold(2), tnn.Unfold(2), x4),
    ]
    pairs += [  # torch's attributes (1-tuples for the 1-d layers) and repr, same outputs
        (nn.Conv1d(4, 6, 3, padding="same", dilation=2, **f64),
         tnn.Conv1d(4, 6, 3, padding="same", dilation=2, **tdt), x3),
        (nn.ConvTranspose1d(4, 6, 3, stride=2, output_padding=1, **f64),
         tnn.ConvTranspose1d(4, 6, 3, stride=2, output_padding=1, **tdt), x3)]
    for mine, theirs, x in pairs:
        _copy_params(mine, theirs)
        assert _repr_as_torch_prints(mine, theirs) == repr(theirs)
        for name in ("kernel_size", "stride", "padding", "dilation", "output_padding"):
            assert getattr(mine, name, None) == getattr(theirs, name, None), (repr(mine), name)
        for train in (True, False):
            mine.train(train)
            theirs.train(train)
            np.testing.assert_allclose(mine(C(x, device)).numpy(),
                                       theirs(torch.tensor(x)).detach().numpy(), **tol(x),
                                       err_msg=repr(mine))
        for buf in ("running_mean", "running_var"):
            if getattr(mine, buf, None) is not None:
                np.testing.assert_allclose(getattr(mine, buf).numpy(),
                                           getattr(theirs, buf).numpy(), **tol(x))
    a, b = randn(rng, device, 6, 5), randn(rng, device, 6, 3)
    bil, tbil = nn.Bilinear(5, 3, 4, **f64), tnn.Bilinear(5, 3, 4, **tdt)
    _copy_params(bil, tbil)
    np.testing.assert_allclose(bil(C(a, device), C(b, device)).numpy(),
                               tbil(torch.tensor(a), torch.tensor(b)).detach().numpy(), **tol(a))
    assert abs(bil.weight.numpy()).max() <= 1 / math.sqrt(5)
    y, i = nn.MaxPool1d(2, return_indices=True)(C(x3, device))
    assert nn.MaxUnpool1d(2)(y, i, output_size=(9,)).shape == (2, 4, 9)
    y, i = nn.MaxPool2d(2, return_indices=True)(C(x4, device))
    assert nn.MaxUnpool2d(2)(y, i).shape == (2, 4, 6, 6)


def test_loss_modules_and_parameter_containers(device, rng):
    torch = pytest.importorskip("torch")
    x, y, z = (randn(rng, device, 6, 5) for _ in range(3))
    sgn, tc = np.sign(y), rng.integers(0, 5, 6)
    cases = [("MarginRankingLoss", (0.2,), (x, y, sgn)),
             ("HingeEmbeddingLoss", (), (x, sgn)),
             ("CosineEmbeddingLoss", (0.1,), (x, y, sgn[:, 0])),
             ("SoftMarginLoss", (), (x, sgn)),
             ("MultiLabelSoftMarginLoss", (), (x, (sgn > 0).astype(x.dtype))),
             ("MultiMarginLoss", (2, 0.5), (x, tc)),
             ("MultiLabelMarginLoss", (), (x, np.tile(tc[:, None], 5))),
             ("TripletMarginLoss", (0.3, 1.0), (x, y, z)),
             ("PoissonNLLLoss", (), (x, np.abs(y))),
             ("CosineSimilarity", (), (x, y)),
             ("PairwiseDistance", (3.0,), (x, y))]
    for name, args, inputs in cases:
        mine = getattr(nn, name)(*args)(*[C(a, device) for a in inputs]).numpy()
        theirs = getattr(torch.nn, name)(*args)(*[torch.tensor(a) for a in inputs]).numpy()
        np.testing.assert_allclose(mine, theirs, **tol(x), err_msg=name)
    g = nn.GaussianNLLLoss(full=True)(C(x, device), C(y, device), C(np.abs(z), device)).numpy()
    np.testing.assert_allclose(g, torch.nn.GaussianNLLLoss(full=True)(
        *[torch.tensor(a) for a in (x, y, np.abs(z))]).numpy(), **tol(x))
    d = nn.TripletMarginWithDistanceLoss(margin=0.5)(*[C(a, device) for a in (x, y, z)]).numpy()
    np.testing.assert_allclose(d, torch.nn.TripletMarginWithDistanceLoss(margin=0.5)(
        *[torch.tensor(a) for a in (x, y, z)]).numpy(), **tol(x))
    owner = nn.Module()
    owner.plist = nn.ParameterList([nn.Parameter(cltensor.ones(2, device=device)),
                                    cltensor.zeros(3, device=device)])
    owner.plist.append(cltensor.ones(4, device=device))
    owner.pdict = nn.ParameterDict({"a": cltensor.ones(5, device=device)})
    names = [n for n, _ in owner.named_parameters()]
    assert names == ["plist.0", "plist.1", "plist.2", "pdict.a"]
    assert isinstance(owner.plist[1], nn.Parameter) and owner.plist[-1].shape == (4,)
    assert "a" in owner.pdict and len(owner.pdict) == 1 and len(owner.plist[1:]) == 2
    with pytest.raises(IndexError, match="out of range"):
        owner.plist[3]


# ---- bad input --------------------------------------------------------------------------------

def test_bad_input(device, rng):
    x = C(randn(rng, device, 2, 3, 8), device)
    x2 = C(randn(rng, device, 6, 5), device)
    w = C(randn(rng, device, 4, 3, 3), device)
    bad = [
        (ValueError, "conv1d: expected a 2-d .C, L. or 3-d", lambda: F.conv1d(x[0, 0], w)),
        (ValueError, "conv1d: weight must be 3-d", lambda: F.conv1d(x, w[0])),
        (TypeError, "stride must be an int or a 1-tuple", lambda: F.conv1d(x, w, stride=(1, 2))),
        (TypeError, "max_pool1d: input must be a floating", lambda: F.max_pool1d(x.long(), 2)),
        (ValueError, "max_pool1d: pad should be at most half",
         lambda: F.max_pool1d(x, 2, padding=2)),
        (ValueError, "avg_pool1d: expected a 2-d", lambda: F.avg_pool1d(x.unsqueeze(0), 2)),
        (ValueError, "adaptive_avg_pool1d: output_size must hold positive",
         lambda: F.adaptive_avg_pool1d(x, 0)),
        (ValueError, "lp_pool1d: norm_type must be nonzero", lambda: F.lp_pool1d(x, 0, 2)),
        (ValueError, "max_unpool2d: expected int64 indices",
         lambda: F.max_unpool2d(x.unsqueeze(0), x.unsqueeze(0), 2)),
        (ValueError, "max_unpool1d: invalid output_size",
         lambda: F.max_unpool1d(x, x.long(), 2, output_size=(40,))),
        (ValueError, "unfold: .* calculated shape of the array of sliding blocks",
         lambda: F.unfold(x.unsqueeze(0), 4)),
        (ValueError, "fold: expected an input of shape .N, C . 4, 9.",
         lambda: F.fold(C(np.zeros((1, 5, 9)), device), (4, 4), 2)),
        (ValueError, "unfold: kernel_size .* must be positive", lambda: F.unfold(x, 0)),
        (ValueError, "instance_norm: expected more than 1 spatial element",
         lambda: F.instance_norm(x[:, :, :1])),
        (ValueError, "rms_norm: given normalized_shape=.4,., expected input",
         lambda: F.rms_norm(x, 4)),
        (ValueError, "pdist: expected a 2-d", lambda: F.pdist(x)),
        (ValueError, "pairwise_distance: p must be non-negative",
         lambda: F.pairwise_distance(x2, x2, -1)),
        (ValueError, "cosine_similarity: x1 of shape .* do not broadcast",
         lambda: F.cosine_similarity(x2, x2[:, :2])),
        (TypeError, "normalize: input must be a floating", lambda: F.normalize(x.long())),
        (ValueError, "margin_ranking_loss: target of shape", lambda: F.margin_ranking_loss(
            x2, x2, x2[0])),
        (ValueError, "multi_margin_loss: only p == 1 and p == 2",
         lambda: F.multi_margin_loss(x2, x2[:, 0].long(), p=3)),
        (IndexError, "multi_margin_loss: target out of bounds",
         lambda: F.multi_margin_loss(x2, C(np.full(6, 5), device))),
        (IndexError, "multilabel_margin_loss: target out of bounds",
         lambda: F.multilabel_margin_loss(x2, C(np.full((6, 5), 7), device))),
        (ValueError, "cosine_embedding_loss: expected .N, D.",
         lambda: F.cosine_embedding_loss(x2, x2, x2)),
        (ValueError, "triplet_margin_loss: the anchor, positive and negative",
         lambda: F.triplet_margin_loss(x2, x2, x2[0])),
        (ValueError, "expected margin to be greater than 0",
         lambda: F.triplet_margin_with_distance_loss(x2, x2, x2, margin=0)),
        (ValueError, "gaussian_nll_loss: var has negative",
         lambda: F.gaussian_nll_loss(x2, x2, -x2.abs())),
        (ValueError, "gaussian_nll_loss: var of shape .* incorrect size",
         lambda: F.gaussian_nll_loss(x2, x2, x2[:, :2])),
        (ValueError, "poisson_nll_loss: 'avg' is not a valid value for reduction",
         lambda: F.poisson_nll_loss(x2, x2, reduction="avg")),
        (ValueError, "bilinear: expected inputs", lambda: F.bilinear(x2, x2, x)),
        (ValueError, "dropout probability has to be between 0 and 1",
         lambda: F.alpha_dropout(x2, 1.5, True)),
        (ValueError, "rrelu: lower bound 0.5 must not exceed", lambda: F.rrelu(x2, 0.5, 0.1)),
        (ValueError, "InstanceNorm1d: expected 2D .unbatched. or 3D input",
         lambda: nn.InstanceNorm1d(3)(x.unsqueeze(0))),
        (ValueError, "MultiMarginLoss: only p == 1 and p == 2", lambda: nn.MultiMarginLoss(p=3)),
        (TypeError, "Conv1d: kernel_size must be an int or a 1-tuple",
         lambda: nn.Conv1d(3, 4, (3, 3))),
    ]
    for exc, match, fn in bad:
        with pytest.raises(exc, match=match):
            fn()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_binary_cross_entropy_at_zero_and_one(device, rng, reduction):
    """Probabilities exactly 0 and 1: finite loss (logs clamped at -100) and finite input
    gradients (x (1 - x) floored at 1e-12), both as torch's; F and nn.BCELoss."""
    torch = pytest.importorskip("torch")
    dt = dtype_of(device)
    x = np.array([0.0, 1.0, 0.0, 1.0, 0.3, 0.9, 1e-6, 0.5], dt)
    t = np.array([0.0, 1.0, 1.0, 0.0, 0.6, 0.2, 0.0, 1.0], dt)
    w = np.linspace(0.5, 2.0, x.size).astype(dt)
    for use_module in (False, True):
        cx, ct = C(x, device, True), C(t, device, True)
        tx, tt = torch.tensor(x, requires_grad=True), torch.tensor(t, requires_grad=True)
        if use_module:
            y = nn.BCELoss(C(w, device), reduction=reduction)(cx, ct)
            ty = torch.nn.BCELoss(torch.tensor(w), reduction=reduction)(tx, tt)
        else:
            y = F.binary_cross_entropy(cx, ct, reduction=reduction)
            ty = torch.nn.functional.binary_cross_entropy(tx, tt, reduction=reduction)
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), **tol(x))
        g = np.linspace(1.0, 2.0, ty.numel()).astype(dt).reshape(ty.shape)
        y.backward(C(g, device))
        ty.backward(torch.tensor(g))
        assert np.isfinite(cx.grad.numpy()).all()
        np.testing.assert_allclose(cx.grad.numpy(), tx.grad.numpy(), **tol(x))
        # the target's gradient is -logit(x): infinite at 0 and 1 in torch too
        np.testing.assert_allclose(ct.grad.numpy(), tt.grad.numpy(), **tol(x))
    # inside (0, 1): gradients of gradients (create_graph=True) as torch's
    inside = (slice(4, 8),)
    check(lambda p, q: F.binary_cross_entropy(p, q, reduction=reduction),
          lambda p, q: torch.nn.functional.binary_cross_entropy(p, q, reduction=reduction),
          [x[inside], t[inside]], device, rng, second=True)


def _reassigned(lib, ones, device):
    """A model whose first child, first parameter and first buffer are reassigned, and whose
    emptied parameter slot is filled again, built with torch.nn or cltensor.nn."""
    m = lib.Sequential(lib.Linear(2, 3, **device), lib.ReLU(), lib.Linear(3, 1, **device))
    m.scale = lib.Parameter(ones(1))
    m.shift = lib.Parameter(ones(1))
    m.register_buffer("first", ones(1))
    m.register_buffer("second", ones(1))
    m[0] = lib.Linear(2, 3, **device)
    setattr(m, "1", lib.Tanh())                        # as model.conv1 = nn.Conv2d(...)
    m.scale = lib.Parameter(ones(1))
    m.first = ones(1)
    m.register_buffer("first", ones(1))
    m.shift = None
    m.shift = lib.Parameter(ones(1))
    m[0].weight = lib.Parameter(ones(3, 2))
    return m


def test_reassignment_keeps_the_order(device):
    """Reassigning a child, parameter or buffer keeps its place, as torch's (scripts slice
    list(model.children())[:-1])."""
    torch = pytest.importorskip("torch")
    ours = _reassigned(nn, lambda *s: cltensor.ones(s, device=device), dict(device=device))
    theirs = _reassigned(torch.nn, lambda *s: torch.ones(s), {})
    for listing in ("named_children", "named_parameters", "named_buffers"):
        assert [n for n, _ in getattr(ours, listing)()] == [
            n for n, _ in getattr(theirs, listing)()], listing
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert list(ours.children())[:-1][0] is ours[0]
