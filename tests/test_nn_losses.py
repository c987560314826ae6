"""cltensor.nn.functional's losses: cross entropy (class indices and probabilities, weights,
ignore_index, label smoothing), nll, mse, binary cross entropy (also with logits), l1, smooth
l1, huber and kl_div against float64 numpy references and torch, every reduction, odd
layouts, gradients by finite differences, and bad input."""
import math
import warnings

import numpy as np
import pytest

import cltensor
import cltensor.nn.functional as F
from cltensor import nn
from cltensor.testing import assert_close, gradcheck, random_array
from test_nn_functional import lanes  # noqa: F401 (a fixture)
from test_nn_functional import F32, T, ref_cross_entropy, ref_log_softmax, strided_views


# ---- numpy references ---------------------------------------------------------------------------

def ref_bce_logits(x, t, w=None, pw=None):
    x, t = x.astype(np.float64), t.astype(np.float64)
    lw = 1 + (pw - 1) * t if pw is not None else 1
    loss = (1 - t) * x + lw * (np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0))
    return loss * (w if w is not None else 1)


def _reduce(loss, reduction):
    return {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction]


# ---- losses -------------------------------------------------------------------------------------

CE_CASES = [{}, {"weight": True}, {"ignore_index": 2}, {"label_smoothing": 0.2},
            {"weight": True, "ignore_index": 0, "label_smoothing": 0.1}]


def _ce_args(rng, device, case, C, dtype=np.float32):
    w = random_array(rng, (C,), low=0.5, high=2).astype(dtype) if case.get("weight") else None
    kw = {"ignore_index": case.get("ignore_index", -100),
              "label_smoothing": case.get("label_smoothing", 0.0)}
    return w, (T(w, device) if w is not None else None), kw


@pytest.mark.parametrize("case", CE_CASES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_forward(device, rng, lanes, case, reduction):  # noqa: F811
    for shape in ((6, 5), (3, 5, 2, 3), (5,)):
        a = random_array(rng, shape, low=-4, high=4)
        tshape = shape[:1] + shape[2:] if len(shape) > 1 else ()
        t = rng.integers(0, 5, size=tshape)
        w, wt, kw = _ce_args(rng, device, case, 5)
        expected = ref_cross_entropy(a, t, w, kw["ignore_index"], kw["label_smoothing"],
                                     reduction)
        for layout, x in strided_views(a, device) if len(shape) > 1 else [("1-d", T(a, device))]:
            out = F.cross_entropy(x, T(t, device), wt, reduction=reduction, **kw)
            assert_close(out, expected, rtol=1e-5, atol=1e-5), (layout, shape)


def test_cross_entropy_gradients(device, rng, lanes):  # noqa: F811
    for case in CE_CASES:
        for reduction in ("mean", "none"):
            x = T(rng.standard_normal((4, 3, 2)), device, True)
            t = T(np.array([[0, 2], [1, 1], [2, 0], [0, 1]]), device)
            _, wt, kw = _ce_args(rng, device, case, 3, np.float64)
            def fn(v, t=t, wt=wt, reduction=reduction, kw=kw):
                return F.cross_entropy(v, t, wt, reduction=reduction, **kw)
            assert gradcheck(fn, [x])


def test_cross_entropy_numerics_and_ignore(device):
    x = T(np.array([[1000.0, 0.0, -1000.0], [5.0, 5.0, 5.0]], np.float32), device)
    t = T(np.array([0, 1]), device)
    assert_close(F.cross_entropy(x, t, reduction="none"), [0.0, math.log(3)], rtol=1e-6)
    assert_close(F.cross_entropy(x, t, label_smoothing=0.3, reduction="none"),
                 ref_cross_entropy(x.numpy(), [0, 1], None, -100, 0.3, "none"), rtol=1e-5)
    all_ignored = F.cross_entropy(x, T(np.array([-100, -100]), device))
    assert np.isnan(all_ignored.item())
    assert F.cross_entropy(x, T(np.array([-100, -100]), device), reduction="sum").item() == 0


def test_cross_entropy_probability_targets(device, rng):
    x = T(rng.standard_normal((4, 3, 2)), device, True)
    p = rng.random((4, 3, 2))
    p /= p.sum(1, keepdims=True)
    w = rng.random(3) + 0.5
    for reduction in ("mean", "sum", "none"):
        out = F.cross_entropy(x, T(p, device), T(w, device), reduction=reduction,
                              label_smoothing=0.1)
        q = p * 0.9 + 0.1 / 3
        loss = -(ref_log_softmax(x.detach().numpy(), 1) * q * w.reshape(1, 3, 1)).sum(1)
        expected = loss if reduction == "none" else loss.sum() / (8 if reduction == "mean" else 1)
        assert_close(out, expected, rtol=1e-12)
    pt = T(p, device, True)
    assert gradcheck(lambda v, q: F.cross_entropy(v, q), [x, pt])


def test_cross_entropy_bad_input(device, rng):
    x = T(random_array(rng, (3, 5)), device)
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        F.cross_entropy(x, T(np.array([1, 2, 7]), device))
    with pytest.raises(IndexError, match="Target -1 is out of bounds"):
        F.nll_loss(x, T(np.array([1, -1, 0]), device))
    with pytest.raises(ValueError, match=r"batch_size \(3\) to match target batch_size \(2\)"):
        F.cross_entropy(x, T(np.array([1, 2]), device))
    with pytest.raises(ValueError, match="Expected target size"):
        F.cross_entropy(T(random_array(rng, (3, 5, 2)), device), T(np.zeros((3, 3), int), device))
    with pytest.raises(TypeError, match="int64"):
        F.cross_entropy(x, T(np.array([1, 2, 3], np.int32), device))
    with pytest.raises(TypeError, match="int64"):
        F.cross_entropy(x, T(random_array(rng, (3, 4)), device))
    with pytest.raises(ValueError, match=r"weight must have shape \(5,\)"):
        F.cross_entropy(x, T(np.array([1, 2, 3]), device), T(np.ones(4, np.float32), device))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.cross_entropy(x, T(np.array([1, 2, 3]), device), reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing must be between"):
        F.cross_entropy(x, T(np.array([1, 2, 3]), device), label_smoothing=1.5)
    with pytest.raises(RuntimeError, match="derivative for 'weight'"):
        F.cross_entropy(x, T(np.array([1, 2, 3]), device), T(np.ones(5, np.float32), device,
                                                             True))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(device, rng, reduction):
    a = ref_log_softmax(random_array(rng, (4, 5, 3)), 1).astype(np.float32)
    t = rng.integers(0, 5, size=(4, 3))
    t[0, 0] = 3
    w = random_array(rng, (5,), low=0.5, high=2)
    expected = ref_cross_entropy(a, t, w, 3, 0.0, reduction, log_probs=True)
    for layout, x in strided_views(a, device):
        out = F.nll_loss(x, T(t, device), T(w, device), ignore_index=3, reduction=reduction)
        assert_close(out, expected, **F32), layout
    x = T(rng.standard_normal((4, 5, 3)), device, True)
    assert gradcheck(lambda v: F.nll_loss(v, T(t, device), T(w.astype(np.float64), device),
                                          ignore_index=3, reduction=reduction), [x])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(device, rng, reduction):
    a, b = random_array(rng, (4, 6)), random_array(rng, (4, 6))
    expected = _reduce((a.astype(np.float64) - b) ** 2, reduction)
    for layout, x in strided_views(a, device):
        assert_close(F.mse_loss(x, T(b, device), reduction=reduction), expected, **F32), layout
    x, y = (T(rng.standard_normal((3, 4)), device, True) for _ in range(2))
    assert gradcheck(lambda u, v: F.mse_loss(u, v, reduction=reduction), [x, y])
    yb = T(rng.standard_normal((4,)), device, True)
    with pytest.warns(UserWarning, match="different to the input size"):
        assert gradcheck(lambda u, v: F.mse_loss(u, v, reduction=reduction), [x, yb])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_with_logits(device, rng, reduction):
    a = random_array(rng, (5, 4), low=-30, high=30)
    a[0, :2] = [-100.0, 100.0]
    t = rng.random((5, 4)).astype(np.float32)
    w, pw = random_array(rng, (5, 1), low=0.5, high=2), random_array(rng, (4,), low=0.5, high=3)
    for weights in ((None, None), (w, None), (w, pw)):
        args = [T(v, device) if v is not None else None for v in weights]
        expected = _reduce(ref_bce_logits(a, t, *weights), reduction)
        for layout, x in strided_views(a, device):
            out = F.binary_cross_entropy_with_logits(x, T(t, device), args[0], reduction=reduction,
                                                     pos_weight=args[1])
            assert_close(out, expected, rtol=1e-5, atol=1e-5), layout
    x, y = T(rng.standard_normal((3, 4)) * 3, device, True), T(rng.random((3, 4)), device, True)
    w64, pw64 = T(rng.random((3, 1)) + 0.5, device), T(rng.random(4) + 0.5, device)
    assert gradcheck(lambda u, v: F.binary_cross_entropy_with_logits(
        u, v, w64, reduction=reduction, pos_weight=pw64), [x, y])
    assert gradcheck(lambda u: F.binary_cross_entropy_with_logits(u, y.detach()), [x])


def test_pointwise_loss_bad_input(device, rng):
    x = T(random_array(rng, (3, 4)), device)
    with pytest.raises(ValueError, match="Target size .* must be the same as input size"):
        F.binary_cross_entropy_with_logits(x, T(random_array(rng, (3, 1)), device))
    with pytest.raises(ValueError, match="does not broadcast"):
        F.binary_cross_entropy_with_logits(x, x, pos_weight=T(random_array(rng, (3,)), device))
    with pytest.raises(TypeError, match="dtype"):
        F.mse_loss(x, cltensor.zeros(3, 4, dtype=cltensor.int32, device=device))
    with pytest.raises(ValueError, match="cannot be broadcast"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        F.mse_loss(x, T(random_array(rng, (2, 4)), device))
    with pytest.raises(RuntimeError, match="derivative for 'pos_weight'"):
        F.binary_cross_entropy_with_logits(x, x, pos_weight=T(np.ones(4, np.float32), device,
                                                              True))


# ---- l1, smooth l1, huber, bce, kl -------------------------------------------------------------

def _loss_data(rng, dtype):
    x, t = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    p, q = rng.uniform(0.01, 0.99, (4, 5)), rng.uniform(0, 1, (4, 5))
    lp, tp = np.log(rng.dirichlet(np.ones(5), 4)), rng.dirichlet(np.ones(5), 4)
    return [a.astype(dtype) for a in (x, t, p, q, lp, tp)]


LOSS_REFS = {  # name: (kwargs, operands (indices into _loss_data), elementwise numpy reference)
    "l1_loss": ({}, (0, 1), lambda x, t: np.abs(x - t)),
    "smooth_l1_loss": (dict(beta=0.7), (0, 1), lambda x, t: np.where(
        np.abs(x - t) < 0.7, 0.5 * (x - t) ** 2 / 0.7, np.abs(x - t) - 0.35)),
    "huber_loss": (dict(delta=0.6), (0, 1), lambda x, t: np.where(
        np.abs(x - t) <= 0.6, 0.5 * (x - t) ** 2, 0.6 * (np.abs(x - t) - 0.3))),
    "binary_cross_entropy": ({}, (2, 3), lambda p, q: -(q * np.log(p) + (1 - q) * np.log(1 - p))),
    "kl_div": ({}, (4, 5), lambda lp, tp: tp * (np.log(tp) - lp)),
}


@pytest.mark.filterwarnings("ignore:.*reduction.*mean")  # kl_div's, as torch's
@pytest.mark.parametrize("name", LOSS_REFS)
def test_more_losses_against_numpy(device, rng, name):
    kwargs, which, ref = LOSS_REFS[name]
    data = _loss_data(rng, np.float32)
    a, b = (data[i] for i in which)
    want = ref(a.astype(np.float64), b.astype(np.float64))
    x, t = (T(v, device) for v in (a, b))
    fn = getattr(F, name)
    assert_close(fn(x, t, reduction="none", **kwargs), want, **F32)
    assert_close(fn(x, t, reduction="sum", **kwargs), want.sum(), rtol=1e-5)
    assert_close(fn(x, t, **kwargs), want.mean(), rtol=1e-5)
    if device.has_fp64:
        data = _loss_data(rng, np.float64)
        x64 = T(data[which[0]], device, True)
        assert gradcheck(lambda v: fn(v, T(data[which[1]], device), **kwargs), [x64])


@pytest.mark.filterwarnings("ignore:.*reduction.*mean")
def test_more_losses_against_torch(device, rng):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF
    dtype = np.float64 if device.has_fp64 else np.float32
    tol = {"rtol": 1e-10, "atol": 1e-12} if dtype == np.float64 else F32
    data = _loss_data(rng, dtype)
    w = rng.uniform(0.5, 2, (5,)).astype(dtype)
    cases = [(name, kw, which) for name, (kw, which, _) in LOSS_REFS.items()]
    cases += [("smooth_l1_loss", dict(beta=0.0), (0, 1)),
              ("kl_div", dict(reduction="batchmean"), (4, 5)),
              ("kl_div", dict(reduction="sum", log_target=True), (4, 4))]
    for name, kwargs, which in cases:
        for reduction in ("mean", "sum", "none"):
            kw = dict(dict(reduction=reduction), **kwargs)
            ours = [T(data[i], device, True) for i in which]
            theirs = [torch.tensor(data[i], requires_grad=True) for i in which]
            y, ty = getattr(F, name)(*ours, **kw), getattr(TF, name)(*theirs, **kw)
            assert_close(y, ty.detach().numpy(), **tol)
            g = rng.standard_normal(ty.shape).astype(dtype)
            y.backward(T(g, device))
            ty.backward(torch.tensor(g))
            for a, t in zip(ours, theirs):
                assert_close(a.grad, t.grad.numpy(), **tol), (name, kw)
    p, q = T(data[2], device, True), T(data[3], device)
    y = F.binary_cross_entropy(p, q, T(w, device))
    ty = TF.binary_cross_entropy(torch.tensor(data[2]), torch.tensor(data[3]), torch.tensor(w))
    assert_close(y, ty.numpy(), **tol)


def test_more_losses_edges_and_bad_input(device, rng):
    zero_one = T(np.array([0.0, 1.0, 1.0, 0.0], np.float32), device)
    target = T(np.array([1.0, 0.0, 1.0, 0.0], np.float32), device)
    # log(0) clamped to -100, as torch: two wrong certain answers cost 100 each
    assert_close(F.binary_cross_entropy(zero_one, target, reduction="sum"), 200.0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.binary_cross_entropy(T(np.array([1.5], np.float32), device), T(np.ones(1, np.float32),
                                                                           device))
    with pytest.raises(ValueError, match="Target size"):
        F.binary_cross_entropy(zero_one, target[:2])
    with pytest.raises(ValueError, match="beta must be non-negative"):
        F.smooth_l1_loss(zero_one, target, beta=-1)
    with pytest.raises(ValueError, match="delta must be positive"):
        F.huber_loss(zero_one, target, delta=-1)
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.l1_loss(zero_one, target, reduction="avg")
    with pytest.warns(UserWarning, match="will be broadcast"):
        F.l1_loss(zero_one, target[:1])
    # kl_div: a zero target contributes 0, not NaN
    lp = T(np.log(np.array([[0.5, 0.5]], np.float32)), device)
    assert_close(F.kl_div(lp, T(np.array([[1.0, 0.0]], np.float32), device), reduction="sum"),
                 np.log(2.0), rtol=1e-6)
    losses = [(nn.L1Loss(), F.l1_loss), (nn.SmoothL1Loss(beta=0.5), None),
              (nn.HuberLoss(delta=2.0), None), (nn.BCELoss(reduction="sum"), None),
              (nn.KLDivLoss(reduction="batchmean", log_target=False), None)]
    assert losses[2][0].delta == 2.0 and losses[4][0].reduction == "batchmean"
    assert_close(losses[0][0](zero_one, target), F.l1_loss(zero_one, target).numpy())
    assert_close(losses[3][0](zero_one, target), 200.0)
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        nn.L1Loss(reduction="batchmean")
