"""cltensor.nn.functional: every layer op and loss against float64 numpy references, gradients by
finite differences, odd layouts and sizes, bad input; and against torch where it is installed."""
import functools
import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cltensor
import cltensor.nn.functional as F
from cltensor import nn
from cltensor.ops import norm as norm_ops
from cltensor.ops import pool as pool_ops
from cltensor.ops import softmax as softmax_ops
from cltensor.testing import assert_close, gradcheck, random_array

F32 = {"rtol": 2e-5, "atol": 2e-6}


def T(a, device, requires_grad=False):
    t = cltensor.from_numpy(np.array(a), device=device)
    return t.requires_grad_() if requires_grad else t


def strided_views(a, device):
    """(name, tensor) pairs holding a's values in different layouts."""
    out = [("contiguous", T(a, device))]
    order = list(range(a.ndim))[::-1]
    inverse = list(np.argsort(order))
    out.append(("permuted", T(a.transpose(order), device).permute(inverse)))
    big = np.zeros((a.shape[0] * 2,) + a.shape[1:], a.dtype)
    big[::2] = a
    out.append(("step-sliced", T(big, device)[::2]))
    pad = np.concatenate([np.zeros((1,) + a.shape[1:], a.dtype), a])
    out.append(("offset", T(pad, device)[1:]))
    if a.ndim == 4:
        out.append(("channels_last", T(a, device).contiguous(cltensor.channels_last)))
    return out


def grad_of(fn, x, g=None):
    """x's gradient of fn(x) for the output gradient g (default ones), as numpy."""
    y = fn(x)
    y.backward(cltensor.ones_like(y) if g is None else g)
    return x.grad.numpy()


# ---- numpy references ---------------------------------------------------------------------------

def ref_pool_size(n, k, s, p, d, ceil):
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    return out


def ref_max_pool(x, k, s, p, d, ceil):
    N, C, H, W = x.shape
    OH, OW = (ref_pool_size(n, k[i], s[i], p[i], d[i], ceil) for i, n in enumerate((H, W)))
    y = np.empty((N, C, OH, OW))
    idx = np.empty((N, C, OH, OW), np.int64)
    for oh in range(OH):
        for ow in range(OW):
            hs = [oh * s[0] - p[0] + a * d[0] for a in range(k[0])]
            ws = [ow * s[1] - p[1] + b * d[1] for b in range(k[1])]
            pos = [(h, w) for h in hs for w in ws if 0 <= h < H and 0 <= w < W]
            vals = np.stack([x[:, :, h, w] for h, w in pos], -1)
            arg = vals.argmax(-1)
            y[:, :, oh, ow] = vals.max(-1)
            flat = np.array([h * W + w for h, w in pos])
            idx[:, :, oh, ow] = flat[arg]
    return y, idx


def ref_avg_pool(x, k, s, p, ceil, include_pad, divisor=None):
    N, C, H, W = x.shape
    OH, OW = (ref_pool_size(n, k[i], s[i], p[i], 1, ceil) for i, n in enumerate((H, W)))
    y = np.empty((N, C, OH, OW))
    for oh in range(OH):
        for ow in range(OW):
            h0, w0 = oh * s[0] - p[0], ow * s[1] - p[1]
            h1, w1 = min(h0 + k[0], H + p[0]), min(w0 + k[1], W + p[1])
            padded = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, H), min(w1, W)
            div = divisor or (padded if include_pad else (h1 - h0) * (w1 - w0))
            y[:, :, oh, ow] = x[:, :, h0:h1, w0:w1].sum((2, 3)) / div
    return y


def ref_adaptive_avg_pool(x, out):
    H, W = x.shape[2:]
    y = np.empty(x.shape[:2] + out)
    for oh in range(out[0]):
        for ow in range(out[1]):
            h0, h1 = oh * H // out[0], -(-(oh + 1) * H // out[0])
            w0, w1 = ow * W // out[1], -(-(ow + 1) * W // out[1])
            y[:, :, oh, ow] = x[:, :, h0:h1, w0:w1].mean((2, 3))
    return y


def ref_log_softmax(x, axis):
    x = np.asarray(x, np.float64)
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


def ref_lrn(x, size, alpha, beta, k):
    x = x.astype(np.float64)
    C = x.shape[1]
    sq = x * x
    acc = np.zeros_like(x)
    for c in range(C):
        lo, hi = max(c - size // 2, 0), min(c + (size - 1) // 2, C - 1)
        acc[:, c] = sq[:, lo:hi + 1].sum(1)
    return x / (k + alpha / size * acc) ** beta


def ref_batch_norm(x, w, b, eps):
    x = x.astype(np.float64)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean, var = x.mean(axes), x.var(axes)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    return y * w.reshape(shape) + b.reshape(shape), mean, var


def ref_cross_entropy(x, t, w, ignore, eps, reduction, log_probs=False):
    """Class-index cross entropy (nll_loss when log_probs) as torch defines it."""
    x = np.asarray(x, np.float64)
    C = x.shape[0] if x.ndim == 1 else x.shape[1]
    rows = x.reshape(1, C) if x.ndim == 1 else np.moveaxis(x, 1, -1).reshape(-1, C)
    lp = rows if log_probs else ref_log_softmax(rows, -1)
    tt = np.asarray(t).reshape(-1)
    w = np.ones(C) if w is None else np.asarray(w, np.float64)
    valid = tt != ignore
    safe = np.where(valid, tt, 0)
    wt = w[safe] * valid
    per_row = (1 - eps) * -wt * lp[np.arange(len(tt)), safe]
    per_row += eps / C * -(lp * w).sum(-1) * valid
    if reduction == "none":
        return per_row.reshape(np.shape(t))
    with np.errstate(invalid="ignore"):  # everything ignored: nan, as torch
        return per_row.sum() if reduction == "sum" else per_row.sum() / wt.sum()


def ref_bce_logits(x, t, w=None, pw=None):
    x, t = x.astype(np.float64), t.astype(np.float64)
    lw = 1 + (pw - 1) * t if pw is not None else 1
    loss = (1 - t) * x + lw * (np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0))
    return loss * (w if w is not None else 1)


def _reduce(loss, reduction):
    return {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction]


# ---- linear -------------------------------------------------------------------------------------

@pytest.mark.parametrize("in_shape", [(5,), (3, 5), (2, 3, 5)])
def test_linear_forward(device, rng, in_shape):
    x, w, b = (random_array(rng, s) for s in (in_shape, (4, 5), (4,)))
    assert_close(F.linear(T(x, device), T(w, device), T(b, device)), x @ w.T + b, **F32)
    assert_close(F.linear(T(x, device), T(w, device)), x @ w.T, **F32)


def test_linear_gradients(device, rng):
    x, w, b = (T(rng.standard_normal(s), device, True) for s in ((2, 3, 4), (5, 4), (5,)))
    assert gradcheck(F.linear, [x, w, b])


def test_linear_bad_input(device, rng):
    x, w = T(random_array(rng, (3, 5)), device), T(random_array(rng, (4, 6)), device)
    with pytest.raises(ValueError, match="has 5 features"):
        F.linear(x, w)
    with pytest.raises(ValueError, match="bias must have shape"):
        F.linear(x, T(random_array(rng, (4, 5)), device), T(random_array(rng, (3,)), device))
    with pytest.raises(ValueError, match="weight must be 2-d"):
        F.linear(x, T(random_array(rng, (5,)), device))


# ---- activations --------------------------------------------------------------------------------

ACTIVATIONS = {
    "relu": (F.relu, lambda x: np.maximum(x, 0)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), lambda x: np.where(x > 0, x, 0.1 * x)),
    "elu": (lambda x: F.elu(x, 0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x))),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 0.8), lambda x: np.clip(x, -0.5, 0.8)),
    "sigmoid": (F.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "tanh": (F.tanh, np.tanh),
    "relu6": (F.relu6, lambda x: np.clip(x, 0, 6)),
    "gelu": (F.gelu, lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2)))),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    "silu": (F.silu, lambda x: x / (1 + np.exp(-x))),
    "mish": (F.mish, lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    "softplus": (lambda x: F.softplus(x, 2.0, 1.5),
                 lambda x: np.where(2 * x > 1.5, x, np.log1p(np.exp(2 * x)) / 2)),
    "hardswish": (F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6),
    "selu": (F.selu, lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x))),
    "celu": (lambda x: F.celu(x, 0.6), lambda x: np.where(x > 0, x, 0.6 * np.expm1(x / 0.6))),
    "logsigmoid": (F.logsigmoid, lambda x: -np.log1p(np.exp(-x))),
    "softsign": (F.softsign, lambda x: x / (1 + abs(x))),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x)),
    "softshrink": (lambda x: F.softshrink(x, 0.7),
                   lambda x: np.where(x > 0.7, x - 0.7, np.where(x < -0.7, x + 0.7, 0))),
    "hardshrink": (lambda x: F.hardshrink(x, 0.7), lambda x: np.where(abs(x) > 0.7, x, 0)),
    "threshold": (lambda x: F.threshold(x, 0.3, -2.0), lambda x: np.where(x > 0.3, x, -2.0)),
    "glu": (lambda x: F.glu(x[..., :4], -1), lambda x: x[..., :2] / (1 + np.exp(-x[..., 2:4]))),
}
SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805


def _erf(x):
    return np.vectorize(math.erf)(x)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_forward_and_gradient(device, rng, name):
    fn, ref = ACTIVATIONS[name]
    a = random_array(rng, (3, 4, 5)) * 4  # past the kinks at +-3 and softplus's threshold
    for layout, x in strided_views(a, device):
        assert_close(fn(x), ref(a.astype(np.float64)), **F32), layout
    x64 = T(rng.standard_normal((3, 7)), device, True)
    assert gradcheck(fn, [x64])


def test_activation_inplace(device, rng):
    a = random_array(rng, (4, 6))
    x = T(a, device)
    assert F.leaky_relu(x, 0.2, inplace=True) is x
    assert_close(x, np.where(a > 0, a, 0.2 * a), **F32)
    # in a graph: the result takes over the input's history, and the gradient is right
    leaf = T(rng.standard_normal((4, 6)), device, True)
    h = leaf * 2
    out = F.elu(h, 0.5, inplace=True)
    assert out is h
    out.sum().backward()
    v = leaf.detach().numpy() * 2
    assert_close(leaf.grad, 2 * np.where(v > 0, 1, 0.5 * np.exp(v)), rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        F.relu(T(a, device, True), inplace=True)


def test_hardtanh_gradient_at_the_bounds(device):
    x = T(np.array([-1.0, -0.5, 0.0, 1.0, 2.0]), device, True)
    assert_close(grad_of(F.hardtanh, x), [0, 1, 1, 0, 0])


def test_shrink_threshold_and_selu_gradients_at_the_kinks(device):
    """torch's conventions: no gradient on the closed interval [-lambd, lambd] or at the
    threshold; SELU's at 0 from its negative branch."""
    def x():
        return T(np.array([-0.5, 0.5, 0.0, 0.6, -0.6]), device, True)
    assert_close(grad_of(lambda v: F.softshrink(v, 0.5), x()), [0, 0, 0, 1, 1])
    assert_close(grad_of(lambda v: F.hardshrink(v, 0.5), x()), [0, 0, 0, 1, 1])
    assert_close(grad_of(lambda v: F.threshold(v, 0.5, 9.0), x()), [0, 0, 0, 1, 0])
    assert_close(grad_of(F.selu, x()), [SELU_SCALE * SELU_ALPHA * np.exp(-0.5), SELU_SCALE,
                                      SELU_SCALE * SELU_ALPHA, SELU_SCALE,
                                      SELU_SCALE * SELU_ALPHA * np.exp(-0.6)], rtol=1e-12)


def test_activation_bad_input(device):
    ints = cltensor.tensor([1, -2], device=device)
    assert F.relu(ints).tolist() == [1, 0]
    with pytest.raises(TypeError, match="floating point"):
        F.leaky_relu(ints)
    with pytest.raises(ValueError, match="must not exceed"):
        F.hardtanh(cltensor.zeros(2, device=device), 1.0, -1.0)
    with pytest.raises(TypeError, match="negative_slope must be a real number"):
        F.leaky_relu(cltensor.zeros(2, device=device), "0.1")
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        F.gelu(cltensor.zeros(2, device=device), approximate="erf")
    with pytest.raises(ValueError, match="beta must be nonzero"):
        F.softplus(cltensor.zeros(2, device=device), beta=0)
    with pytest.raises(TypeError, match="floating point"):
        F.silu(ints)
    zeros = cltensor.zeros(2, 3, device=device)
    with pytest.raises(ValueError, match="celu: alpha must be nonzero"):
        F.celu(zeros, alpha=0)
    with pytest.raises(ValueError, match="softshrink: lambd must be at least 0, got -1.0"):
        F.softshrink(zeros, -1)
    with pytest.raises(ValueError, match=r"glu: the halved dim 1 must have an even size, got 3 "
                                         r"\(input shape \(2, 3\)\)"):
        F.glu(zeros, 1)
    with pytest.raises(ValueError, match="glu: input must have at least 1 dim"):
        F.glu(cltensor.tensor(1.0, device=device))
    with pytest.raises(IndexError, match="glu: dimension out of range"):
        F.glu(zeros, 2)
    with pytest.raises(TypeError, match="threshold: value must be a real number"):
        F.threshold(zeros, 0.5, None)


def test_new_activations_in_place(device, rng):
    a = random_array(rng, (4, 6)) * 4
    for fn in (F.silu, F.mish, F.hardswish, F.hardsigmoid, F.relu6, F.selu,
               functools.partial(F.celu, alpha=0.5),
               functools.partial(F.threshold, threshold=0.2, value=-1.0)):
        x = T(a, device)
        assert fn(x, inplace=True) is x
        assert_close(x, fn(T(a, device)), rtol=0, atol=0)
    leaf = T(rng.standard_normal((4, 6)), device, True)
    h = leaf * 2
    assert F.silu(h, inplace=True) is h
    h.sum().backward()
    v = leaf.detach().numpy() * 2
    s = 1 / (1 + np.exp(-v))
    assert_close(leaf.grad, 2 * s * (1 + v * (1 - s)), rtol=1e-12, atol=1e-12)


# ---- layer norm, group norm ---------------------------------------------------------------------

def _normalize_ref(a, axes, eps):
    a = a.astype(np.float64)
    mean = a.mean(axis=axes, keepdims=True)
    return (a - mean) / np.sqrt(a.var(axis=axes, keepdims=True) + eps)


def test_layer_and_group_norm(device, rng):
    a = random_array(rng, (3, 6, 4, 5)) * 3 + 1
    w, b = random_array(rng, (4, 5)), random_array(rng, (5,))
    for layout, x in strided_views(a, device):
        y = F.layer_norm(x, (4, 5), T(w, device), None, eps=1e-4)
        assert_close(y, _normalize_ref(a, (2, 3), 1e-4) * w, **F32), layout
        y = F.group_norm(x, 3, T(random_array(rng, (6,)) * 0 + 2, device), T(a[0, :, 0, 0], device))
        ref = _normalize_ref(a.reshape(3, 3, -1), 2, 1e-5).reshape(a.shape)
        assert_close(y, ref * 2 + a[0, :, 0, 0][:, None, None], **F32), layout
    assert_close(F.layer_norm(T(a, device), 5, bias=T(b, device)),
                 _normalize_ref(a, 3, 1e-5) + b, **F32)
    x64 = T(rng.standard_normal((2, 4, 3)), device, True)
    w64, b64 = (T(rng.standard_normal(s), device, True) for s in ((4,), (4,)))
    assert gradcheck(lambda x, w, b: F.group_norm(x, 2, w, b), [x64, w64, b64])
    assert gradcheck(lambda x: F.layer_norm(x, (4, 3)), [x64])
    empty = F.layer_norm(cltensor.zeros(0, 3, device=device), 3)
    assert empty.shape == (0, 3)
    # one value per group: x - mean is 0, the output the bias, and no gradient reaches x
    x1 = T(rng.standard_normal((3, 4)), device, True)
    b1 = T(rng.standard_normal(4), device, True)
    y = F.group_norm(x1, 4, None, b1)
    assert_close(y, np.broadcast_to(b1.detach().numpy(), (3, 4)), rtol=0, atol=1e-10)
    y.sum().backward()
    assert_close(x1.grad, np.zeros((3, 4)), rtol=0, atol=1e-9)
    assert_close(b1.grad, np.full(4, 3.0))


def test_layer_and_group_norm_bad_input(device):
    x = cltensor.zeros(2, 6, 3, device=device)
    with pytest.raises(ValueError, match=r"normalized_shape=\(6,\), expected input with shape "
                                         r"\(\*, 6\), got input of shape \(2, 6, 3\)"):
        F.layer_norm(x, 6)
    with pytest.raises(ValueError, match=r"weight must have shape \(3,\), got \(6,\)"):
        F.layer_norm(x, 3, cltensor.ones(6, device=device))
    with pytest.raises(ValueError, match="normalized_shape must be a positive int"):
        F.layer_norm(x, ())
    with pytest.raises(ValueError, match=r"divisible by num_groups, but got input of shape "
                                         r"\(2, 6, 3\) and num_groups=4"):
        F.group_norm(x, 4)
    with pytest.raises(ValueError, match=r"bias must have shape \(6,\)"):
        F.group_norm(x, 3, None, cltensor.zeros(3, device=device))
    with pytest.raises(TypeError, match="floating point"):
        F.group_norm(cltensor.zeros(2, 6, dtype=cltensor.int32, device=device), 3)


# ---- softmax ------------------------------------------------------------------------------------

@pytest.fixture(params=["item-per-row", "group-per-row"])
def lanes(request, monkeypatch):
    """Run on the CPU's path, and on the GPU's work-group-per-row path (with few lanes)."""
    if request.param == "group-per-row":
        monkeypatch.setitem(softmax_ops.TUNING, "cpu", {"lanes": 8, "min_row": 1, "group": 64})
    return request.param


@pytest.mark.parametrize("log", [False, True])
def test_softmax_forward(device, rng, lanes, log):
    a = random_array(rng, (3, 5, 13), low=-6, high=6)
    fn = F.log_softmax if log else F.softmax
    for dim in (0, 1, 2, -1):
        expected = ref_log_softmax(a, dim)
        expected = expected if log else np.exp(expected)
        for layout, x in strided_views(a, device):
            assert_close(fn(x, dim=dim), expected, **F32), (layout, dim)


def test_softmax_float64_and_long_rows(device, rng, lanes):
    if not device.has_fp64:
        pytest.skip("no float64 on this device")
    a = rng.standard_normal((2, 1000)) * 10
    assert_close(F.log_softmax(T(a, device), 1), ref_log_softmax(a, 1), rtol=1e-12, atol=1e-12)


def test_softmax_numerics(device, lanes):
    big = np.array([[1000.0, 1001.0, 999.0], [-1e4, -1e4 + 1, -1e4 + 2]], np.float32)
    assert_close(F.softmax(T(big, device), 1), np.exp(ref_log_softmax(big, 1)), **F32)
    inf = np.float32(np.inf)
    x = np.array([[-inf, 0.0, 1.0], [-inf, -inf, -inf], [0.0, np.nan, 1.0]], np.float32)
    out = F.log_softmax(T(x, device), 1).numpy()
    assert out[0, 0] == -np.inf
    assert_close(out[0, 1:], ref_log_softmax(x[0, 1:], 0), **F32)
    assert np.isnan(out[1]).all() and np.isnan(out[2]).all()
    sm = F.softmax(T(x, device), 1).numpy()
    assert sm[0, 0] == 0 and np.isnan(sm[1]).all()


def test_long_float32_sums_are_compensated(device, rng):
    """In float32, log_softmax, softmax, its gradient and cross entropy (with label smoothing)
    over 100000 classes, and batch and layer norm over 131072 elements per channel: within a
    few float32 roundings of float64. On CPUs one work-item sums a whole row or a chunk of
    thousands, and plain float32 sums were 7e-3 (cross entropy) and 2.6e-5 (batch norm) off."""
    logits = rng.uniform(-2, 0, (3, 100000)).astype(np.float32)
    logits[:, 0] = 12
    ref = ref_log_softmax(logits, 1)
    X = T(logits, device, True)
    assert_close(F.log_softmax(X, 1), ref, rtol=1e-6, atol=0)
    y = F.softmax(X, 1)
    assert_close(y, np.exp(ref), rtol=1e-5, atol=0)
    (y[:, :1] * 1).sum().backward()  # d p_0 / d x_j = p_0 ([j == 0] - p_j)
    p = np.exp(ref)
    assert_close(X.grad, p[:, :1] * ((np.arange(p.shape[1]) == 0) - p), rtol=1e-5, atol=1e-11)
    target = T(np.zeros(3, np.int64), device)
    for eps in (0.0, 0.1):
        want = -((1 - eps) * ref[:, 0] + eps * ref.mean(1)).mean()
        got = F.cross_entropy(T(logits, device), target, label_smoothing=eps)
        assert_close(got, want, rtol=1e-5, atol=0)
    a = (rng.standard_normal((8, 2, 128, 128)) * 2 + 3).astype(np.float32)
    want = ref_batch_norm(a, np.ones(2), np.zeros(2), 1e-5)[0]
    assert_close(F.batch_norm(T(a, device), None, None, training=True), want, rtol=0,
                 atol=2e-6 * np.abs(want).max())
    rows = a.reshape(2, -1)
    want = (rows - rows.mean(1, keepdims=True, dtype=np.float64)) / \
        np.sqrt(rows.var(1, keepdims=True, dtype=np.float64) + 1e-5)
    assert_close(F.layer_norm(T(rows, device), rows.shape[1:]), want, rtol=0,
                 atol=2e-6 * np.abs(want).max())


def test_large_pooling_windows_stay_accurate(device, rng):
    """Average pooling over a whole 512 x 512 plane (adaptive, to 1 x 1) and with a 64 x 64
    window, in float32: within 2e-6 of float64 (windows are summed by rows; one float32 sum of
    262144 elements was 6e-6 off)."""
    a = rng.uniform(0, 1, (1, 2, 512, 512)).astype(np.float32)
    want = a.astype(np.float64).mean((2, 3), keepdims=True)
    assert_close(F.adaptive_avg_pool2d(T(a, device), 1), want, rtol=2e-6, atol=0)
    want = a.astype(np.float64).reshape(1, 2, 8, 64, 8, 64).mean((3, 5))
    assert_close(F.avg_pool2d(T(a, device), 64), want, rtol=2e-6, atol=0)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_gradients(device, rng, lanes, log):
    fn = F.log_softmax if log else F.softmax
    x = T(rng.standard_normal((2, 3, 4)), device, True)
    for dim in (0, 1, 2):
        assert gradcheck(lambda t, dim=dim: fn(t, dim), [x])
    # a broadcast (stride 0) output gradient: d/dx of sum(softmax) is 0
    y = F.softmax(x, 1)
    y.sum().backward()
    assert_close(x.grad, np.zeros(x.shape), atol=1e-12)


def test_softmax_shapes_and_errors(device, rng):
    x0 = cltensor.tensor(3.0, device=device)
    assert F.softmax(x0, 0).item() == 1.0
    assert F.softmax(cltensor.zeros(0, 4, device=device), 1).shape == (0, 4)
    a = random_array(rng, (2, 3))
    assert_close(F.softmax(T(a, device), -1, dtype=cltensor.float64),
                 np.exp(ref_log_softmax(a, 1)), rtol=1e-6)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        F.softmax(T(a, device))
    with pytest.raises(IndexError, match="out of range"):
        F.softmax(T(a, device), 2)
    with pytest.raises(TypeError, match="floating point"):
        F.log_softmax(cltensor.tensor([1, 2], device=device), 0)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_softmax_and_cross_entropy_property(device, data):
    """Random shapes, dims and layouts (permuted, sliced) against numpy."""
    nd = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 7), min_size=nd, max_size=nd)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    a = random_array(rng, shape, low=-5, high=5)
    order = data.draw(st.permutations(range(nd)))
    x = T(a.transpose(order), device).permute(list(np.argsort(order)))
    if data.draw(st.booleans()) and shape[0] > 1:
        a, x = a[::2], x[::2]
    dim = data.draw(st.integers(-nd, nd - 1))
    assert_close(F.log_softmax(x, dim), ref_log_softmax(a, dim), rtol=1e-5, atol=1e-5)
    if nd >= 2:
        t = rng.integers(0, a.shape[1], size=a.shape[:1] + a.shape[2:])
        assert_close(F.cross_entropy(x, T(t, device), reduction="none"),
                     ref_cross_entropy(a, t, None, -100, 0.0, "none"), rtol=1e-5, atol=1e-5)


# ---- pooling ------------------------------------------------------------------------------------

# (kernel, stride, padding, dilation, ceil_mode): AlexNet's overlap, GoogLeNet's ceil_mode, ...
POOLS = [((2, 2), (2, 2), (0, 0), (1, 1), False),
         ((3, 3), (2, 2), (0, 0), (1, 1), False),
         ((3, 3), (2, 2), (1, 1), (1, 1), True),
         ((3, 3), (1, 1), (1, 1), (1, 1), False),
         ((3, 3), (3, 3), (0, 0), (1, 1), True),
         ((2, 3), (1, 2), (1, 0), (2, 1), True)]


@pytest.mark.parametrize("k,s,p,d,ceil", POOLS)
def test_max_pool2d_forward(device, rng, k, s, p, d, ceil):
    a = random_array(rng, (2, 3, 9, 11))
    y_ref, idx_ref = ref_max_pool(a, k, s, p, d, ceil)
    for layout, x in strided_views(a, device):
        y, idx = F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
        assert_close(y, y_ref), layout
        assert idx.dtype == cltensor.int64
        assert_close(idx, idx_ref), layout
    cl = F.max_pool2d(T(a, device).contiguous(cltensor.channels_last), k, s, p, d, ceil)
    assert cl.is_contiguous(cltensor.channels_last)


@pytest.mark.parametrize("k,s,p,ceil", [(3, 1, 1, False), (3, 2, 0, True), (3, 2, 1, False),
                                        (2, 2, 0, False)])
def test_max_pool2d_large_launches(device, rng, fp_dtypes, k, s, p, ceil):
    """Launches of more than pool.BAKE_MIN_TAPS taps, which build the window into the kernel
    (on CPUs: rows computed 8 outputs at a time from vector loads, pool.cl VECTOR_ROWS), with
    rows of 61 (a scalar remainder), ties, one NaN, and an input view that starts unaligned."""
    from cltensor.ops import pool
    for dtype in fp_dtypes:
        full = np.round(random_array(rng, (2, 16, 48, 62), dtype) * 4) / 4  # many ties
        full[1, 2, 20, 31] = np.nan
        a = full[..., 1:]
        x = T(full, device)[..., 1:]
        y, idx = F.max_pool2d(x, k, s, p, ceil_mode=ceil, return_indices=True)
        assert y.numel() * k * k >= pool.BAKE_MIN_TAPS
        y_ref, idx_ref = ref_max_pool(np.nan_to_num(a, nan=-np.inf), (k, k), (s, s), (p, p),
                                      (1, 1), ceil)
        has_nan = ref_max_pool(np.isnan(a).astype(np.float64), (k, k), (s, s), (p, p), (1, 1),
                               ceil)[0] > 0
        got, got_idx = y.numpy(), idx.numpy()
        assert (np.isnan(got) == has_nan).all() and has_nan.any()
        assert (got_idx[has_nan] == 20 * 61 + 30).all()
        assert_close(got[~has_nan], y_ref[~has_nan])
        assert (got_idx[~has_nan] == idx_ref[~has_nan]).all(), dtype


@pytest.mark.parametrize("k,s,p,d,ceil", [c for c in POOLS if c[3] == (1, 1)])
@pytest.mark.parametrize("include_pad", [True, False])
def test_avg_pool2d_forward(device, rng, k, s, p, d, ceil, include_pad):
    a = random_array(rng, (2, 3, 9, 11))
    expected = ref_avg_pool(a, k, s, p, ceil, include_pad)
    for layout, x in strided_views(a, device):
        y = F.avg_pool2d(x, k, s, p, ceil_mode=ceil, count_include_pad=include_pad)
        assert_close(y, expected, **F32), layout
    y = F.avg_pool2d(T(a, device), k, s, p, ceil, include_pad, divisor_override=5)
    assert_close(y, ref_avg_pool(a, k, s, p, ceil, include_pad, divisor=5), **F32)


@pytest.mark.parametrize("out", [(1, 1), (3, 5), (4, 4), (9, 11), (13, 2)])
def test_adaptive_avg_pool2d_forward(device, rng, out):
    a = random_array(rng, (2, 3, 9, 11))
    for layout, x in strided_views(a, device):
        assert_close(F.adaptive_avg_pool2d(x, out), ref_adaptive_avg_pool(a, out), **F32), layout
    y = F.adaptive_avg_pool2d(T(a[0], device), (out[0], None))
    assert_close(y, ref_adaptive_avg_pool(a, (out[0], 11))[0], **F32)


@pytest.mark.parametrize("k,s,p,d,ceil", POOLS[1:3] + POOLS[5:])
def test_pool_gradients(device, rng, k, s, p, d, ceil):
    x = T(rng.standard_normal((1, 2, 5, 6)), device, True)
    assert gradcheck(lambda t: F.max_pool2d(t, k, s, p, d, ceil), [x])
    assert gradcheck(lambda t: F.avg_pool2d(t, k, s, p, ceil, count_include_pad=False), [x])
    assert gradcheck(lambda t: F.avg_pool2d(t, k, s, p, ceil, divisor_override=3), [x])


def test_adaptive_avg_pool2d_gradient(device, rng):
    x = T(rng.standard_normal((1, 2, 5, 7)), device, True)
    for out in ((2, 3), (5, 7), (3, 4)):
        assert gradcheck(lambda t, out=out: F.adaptive_avg_pool2d(t, out), [x])


def test_pool_backward_layouts(device, rng):
    """Gradients of channels_last, 3-d and sliced inputs against the contiguous result; the
    output gradient of a sum is broadcast (stride 0)."""
    a = random_array(rng, (2, 3, 8, 7))
    g = random_array(rng, (2, 3, 4, 4))
    fns = [lambda t: F.max_pool2d(t, 3, 2, 1), lambda t: F.avg_pool2d(t, 3, 2, 1),
           lambda t: F.adaptive_avg_pool2d(t, (4, 4))]
    for fn in fns:
        ref = grad_of(fn, T(a, device, True), T(g, device))
        for layout, x in strided_views(a, device):
            leaf = x.detach().requires_grad_()
            assert_close(grad_of(fn, leaf, T(g, device)), ref, **F32), layout
        x3 = T(a[1], device, True)
        assert_close(grad_of(fn, x3, T(g[1], device)), ref[1], **F32)
    _, idx = ref_max_pool(a, (2, 2), (2, 2), (0, 0), (1, 1), False)
    expected = np.zeros(a.shape).reshape(2, 3, -1)
    np.put_along_axis(expected, idx.reshape(2, 3, -1), 1.0, axis=2)
    x = T(a, device, True)
    F.max_pool2d(x, 2).sum().backward()
    assert_close(x.grad, expected.reshape(a.shape))


def test_pool_offset_types(device, rng, monkeypatch):
    """pool.cl computes offsets in 32-bit ints when the buffers are small: the 64-bit build
    (forced) gives the same results, small and large (window baked) launches, every layout;
    and a size-1 dim's stride that no int holds is harmless."""
    pools = [lambda t: F.max_pool2d(t, 3, 2, 1), lambda t: F.avg_pool2d(t, 3, 1, 1),
             lambda t: F.adaptive_avg_pool2d(t, (4, 5))]
    cases = []
    for shape in ((2, 3, 9, 11), (2, 16, 48, 61), (2, 3, 9, 1)):  # W = 1: a size-1 dim
        a = random_array(rng, shape)
        for fn in pools:
            g = T(random_array(rng, fn(T(a, device)).shape), device)
            cases.append((a, fn, g, fn(T(a, device)).numpy(), grad_of(fn, T(a, device, True), g)))
    assert pool_ops._offset_type(T(cases[0][0], device)) == "int"
    monkeypatch.setattr(pool_ops, "INT_OFFSETS_BELOW", 0)
    assert pool_ops._offset_type(T(cases[0][0], device)) == "long"
    for a, fn, g, y, gx in cases:
        for layout, x in strided_views(a, device):
            leaf = x.detach().requires_grad_()
            assert np.array_equal(fn(leaf).numpy(), y), layout
            assert np.array_equal(grad_of(fn, leaf, g), gx), layout
    monkeypatch.undo()
    a, fn, _, y, _ = cases[0]
    x = T(a[:1], device)
    huge = cltensor.ClTensor(x.storage, x.shape, (2**40,) + x.strides[1:], 0, x.dtype)
    assert pool_ops._offset_type(huge) == "int"
    assert np.array_equal(fn(huge).numpy(), y[:1])


def test_max_pool2d_nan(device, rng):
    """NaN wins its windows (with the last NaN's position, as torch) and gets their gradient."""
    a = random_array(rng, (1, 1, 5, 5)).astype(np.float64)
    a[0, 0, 1, 1] = a[0, 0, 2, 2] = np.nan
    x = T(a, device, True)
    y, idx = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    y_ref, idx_ref = ref_max_pool(np.nan_to_num(a, nan=-np.inf), (3, 3), (2, 2), (1, 1), (1, 1),
                                  False)
    y_ref[0, 0, :2, :2] = np.nan
    idx_ref[0, 0, :2, :2] = [[6, 6], [6, 12]]
    assert_close(y, y_ref)
    assert_close(idx, idx_ref)
    y.backward(cltensor.ones_like(y))
    assert x.grad.numpy()[0, 0, 1, 1] == 3 and x.grad.numpy()[0, 0, 2, 2] == 1


def test_pool_awkward_sizes(device, rng):
    for shape, k in (((1, 1, 1, 1), 1), ((3, 1, 7, 1), (3, 1)), ((1, 37, 3, 13), (1, 3)),
                     ((0, 2, 5, 5), 2)):
        a = random_array(rng, shape)
        kk = k if isinstance(k, tuple) else (k, k)
        y = F.max_pool2d(T(a, device), k, 1, ceil_mode=True)
        assert y.shape[:2] == shape[:2]
        if a.size:
            assert_close(y, ref_max_pool(a, kk, (1, 1), (0, 0), (1, 1), True)[0])
        z = F.avg_pool2d(T(a, device), k, 2, ceil_mode=True, count_include_pad=False)
        assert z.shape == shape[:2] + tuple(ref_pool_size(n, k_, 2, 0, 1, True)
                                            for n, k_ in zip(shape[2:], kk))
        if a.size:
            assert_close(z, ref_avg_pool(a, kk, (2, 2), (0, 0), True, False), **F32)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_pool_property(device, data):
    k = (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4)))
    s = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    p = (data.draw(st.integers(0, k[0] // 2)), data.draw(st.integers(0, k[1] // 2)))
    ceil = data.draw(st.booleans())
    hw = (data.draw(st.integers(k[0], 12)), data.draw(st.integers(k[1], 12)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    a = random_array(rng, (2, 3) + hw)
    x = T(a, device) if data.draw(st.booleans()) else \
        T(a, device).contiguous(cltensor.channels_last)
    assert_close(F.max_pool2d(x, k, s, p, 1, ceil), ref_max_pool(a, k, s, p, (1, 1), ceil)[0])
    assert_close(F.avg_pool2d(x, k, s, p, ceil), ref_avg_pool(a, k, s, p, ceil, True), **F32)


def test_pool_bad_input(device, rng):
    x = T(random_array(rng, (1, 2, 6, 6)), device)
    with pytest.raises(ValueError, match="3-d .* or 4-d"):
        F.max_pool2d(T(random_array(rng, (6, 6)), device), 2)
    with pytest.raises(ValueError, match="pad should be at most half"):
        F.max_pool2d(x, 3, padding=2)
    with pytest.raises(ValueError, match="pad should be at most half"):
        F.avg_pool2d(x, 2, padding=(0, 2))
    with pytest.raises(ValueError, match="stride must be greater than zero"):
        F.max_pool2d(x, 3, stride=0)
    with pytest.raises(ValueError, match="kernel_size must be greater than zero"):
        F.avg_pool2d(x, 0)
    with pytest.raises(ValueError, match="dilation must be greater than zero"):
        F.max_pool2d(x, 2, dilation=0)
    with pytest.raises(ValueError, match="too small"):
        F.max_pool2d(x, 7)
    with pytest.raises(ValueError, match="divisor_override"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(TypeError, match="floating point"):
        F.max_pool2d(cltensor.zeros(1, 1, 4, 4, dtype=cltensor.int32, device=device), 2)
    with pytest.raises(TypeError, match="pair of ints"):
        F.max_pool2d(x, (2, 2, 2))
    with pytest.raises(ValueError, match="output_size"):
        F.adaptive_avg_pool2d(x, 0)


# The kernel forms (pool.cl: rows/planes on CPUs, items on GPUs), each with its window geometry
# baked into the build and read at run time: (kernel, stride, padding, dilation, ceil_mode).
FORM_POOLS = [((3, 3), (2, 2), (0, 0), (1, 1), True),    # GoogLeNet's (AlexNet's: floor)
              ((3, 3), (2, 2), (1, 1), (1, 1), True),    # ceil_mode with padding
              ((3, 3), (1, 1), (1, 1), (1, 1), False),   # GoogLeNet's stride 1
              ((2, 3), (3, 4), (1, 1), (3, 2), True)]    # stride > kernel, dilation


@pytest.fixture(params=["rows", "items"])
def pool_form(request, device, monkeypatch):
    """Every kernel form on every device."""
    monkeypatch.setitem(pool_ops.FORM, "cpu" if device.is_cpu else "gpu", request.param)
    return request.param


def _poison_pool(device, *nbytes):
    """Leave NaN-filled blocks of these sizes in the memory pool, so that an output element a
    kernel forgets to write reads NaN (or a huge integer)."""
    held = [cltensor.full((max(n // 4, 1),), float("nan"), device=device) for n in nbytes]
    del held


def ref_max_pool_grad(x, g, k, s, p, d, ceil):
    """Max pooling in float64 with torch's rules (the first largest, or the last NaN; -inf where
    the window holds no input), its argmax (-1 there) and dL/dx for the output gradient g."""
    N, C, H, W = x.shape
    OH, OW = (ref_pool_size(n, k[i], s[i], p[i], d[i], ceil) for i, n in enumerate((H, W)))
    y, idx = np.full((N, C, OH, OW), -np.inf), np.full((N, C, OH, OW), -1)
    gx = np.zeros((N, C, H * W))
    for n, c, oh, ow in np.ndindex(N, C, OH, OW):
        pos = [(h, w) for h in range(oh * s[0] - p[0], oh * s[0] - p[0] + k[0] * d[0], d[0])
               for w in range(ow * s[1] - p[1], ow * s[1] - p[1] + k[1] * d[1], d[1])
               if 0 <= h < H and 0 <= w < W]
        if not pos:
            continue
        vals = np.array([x[n, c, h, w] for h, w in pos], np.float64)
        nan = np.flatnonzero(np.isnan(vals))
        best = nan[-1] if nan.size else int(np.argmax(vals))
        y[n, c, oh, ow], idx[n, c, oh, ow] = vals[best], pos[best][0] * W + pos[best][1]
        gx[n, c, idx[n, c, oh, ow]] += g[n, c, oh, ow]
    return y, idx, gx.reshape(x.shape)


def ref_avg_pool_grad(g, x_shape, k, s, p, ceil, include_pad, divisor):
    """dL/dx of ref_avg_pool in float64 for the output gradient g."""
    H, W = x_shape[2:]
    gx = np.zeros(x_shape)
    for oh, ow in np.ndindex(*g.shape[2:]):
        h0, w0 = oh * s[0] - p[0], ow * s[1] - p[1]
        h1, w1 = min(h0 + k[0], H + p[0]), min(w0 + k[1], W + p[1])
        padded = (h1 - h0) * (w1 - w0)
        h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, H), min(w1, W)
        div = divisor or (padded if include_pad else (h1 - h0) * (w1 - w0))
        gx[:, :, h0:h1, w0:w1] += g[:, :, oh:oh + 1, ow:ow + 1] / div
    return gx


def _check_max_pool_kernels(device, x, a, g, gn, k, s, p, d, ceil):
    y_ref, idx_ref, gx_ref = ref_max_pool_grad(a, gn, k, s, p, d, ceil)
    fields, out_hw = pool_ops.window("max_pool2d", x, k, s, p, d, ceil)
    _poison_pool(device, 4 * y_ref.size, 4 * y_ref.size)
    y, taps = pool_ops.max_pool2d(x, fields, out_hw, True)
    np.testing.assert_array_equal(y.numpy(), y_ref.astype(np.float32))
    assert taps.dtype == cltensor.uint8  # windows of up to 255 taps
    _poison_pool(device, 8 * y_ref.size)
    idx = pool_ops.max_pool2d_indices(taps, x.shape, fields)
    inside = idx_ref >= 0  # a window wholly in the padding has no argmax in torch's sense
    np.testing.assert_array_equal(idx.numpy()[inside], idx_ref[inside])
    _poison_pool(device, 4 * a.size)
    gx = pool_ops.max_pool2d_backward(g, taps, x.shape, pool_ops.layout_of(x), fields)
    assert gx.is_contiguous(pool_ops.layout_of(x))
    assert_close(gx, gx_ref, **F32)
    # torch's indices back to taps (max_pool2d_with_indices_backward): the same gradient
    back = pool_ops.max_pool2d_taps(idx, x.shape, fields)
    assert_close(pool_ops.max_pool2d_backward(g, back, x.shape, pool_ops.layout_of(x), fields),
                 gx_ref, **F32)


def _check_avg_pool_kernels(device, x, a, g, gn, k, s, p, ceil):
    fields, out_hw = pool_ops.window("avg_pool2d", x, k, s, p, 1, ceil)
    for include_pad, divisor in ((True, 0), (False, 0), (True, 5)):
        _poison_pool(device, 4 * gn.size)
        y = pool_ops.avg_pool2d(x, fields, out_hw, divisor, include_pad)
        assert_close(y, ref_avg_pool(a, k, s, p, ceil, include_pad, divisor), **F32)
        _poison_pool(device, 4 * a.size)
        gx = pool_ops.avg_pool2d_backward(g, x.shape, pool_ops.layout_of(x), fields, divisor,
                                          include_pad)
        assert_close(gx, ref_avg_pool_grad(gn, a.shape, k, s, p, ceil, include_pad, divisor),
                     **F32)


@pytest.mark.parametrize("baked", [True, False], ids=["baked", "generic"])
@pytest.mark.parametrize("k,s,p,d,ceil", FORM_POOLS)
def test_pool2d_kernel_forms(device, rng, pool_form, monkeypatch, baked, k, s, p, d, ceil):
    """Each form of the max and avg kernels, forward and backward, with the window geometry
    built in and read at run time, in every layout (a gradient of the input's layout kind),
    NaN included, on outputs poisoned first; avg pooling takes the geometry without dilation.
    The small inputs leave no output a window inside the input's columns (the rows form's inner
    span is empty: ceil_mode's last window overhangs a 2x2 input), and with dilation 1x1 and
    4x1 inputs leave max windows wholly in the padding (the 4x1 input's argmax there is torch's,
    h * W + w with w = W: an input of the next row, which must get no gradient)."""
    monkeypatch.setattr(pool_ops, "BAKE_MIN_TAPS", 0 if baked else 2**62)
    for shape in ((2, 3, 9, 11), (1, 2, 1, 1), (1, 2, 2, 2), (1, 2, 4, 1)):
        if min(ref_pool_size(n, k[i], s[i], p[i], d[i], ceil)
               for i, n in enumerate(shape[2:])) < 1:
            continue
        a = random_array(rng, shape)
        if a.size > 41:
            a.flat[[5, 40, 41]] = np.nan  # 40 and 41 share windows: the last NaN wins
        for dilation in dict.fromkeys((d, (1, 1))):  # max's geometry, then avg's
            out = tuple(ref_pool_size(n, k[i], s[i], p[i], dilation[i], ceil)
                        for i, n in enumerate(shape[2:]))
            gn = random_array(rng, shape[:2] + out)
            for (_, x), (_, g) in zip(strided_views(a, device), strided_views(gn, device)):
                if dilation == d:
                    _check_max_pool_kernels(device, x, a, g, gn, k, s, p, d, ceil)
                if dilation == (1, 1):
                    _check_avg_pool_kernels(device, x, a, g, gn, k, s, p, ceil)


# ---- local response norm ------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 2, 5])
def test_local_response_norm_forward(device, rng, size):
    a = random_array(rng, (2, 7, 3, 4))
    expected = ref_lrn(a, size, 1e-2, 0.75, 2.0)
    for layout, x in strided_views(a, device):
        assert_close(F.local_response_norm(x, size, 1e-2, 0.75, 2.0), expected, **F32), layout
    a3 = random_array(rng, (2, 6, 5))
    assert_close(F.local_response_norm(T(a3, device), 3), ref_lrn(a3, 3, 1e-4, 0.75, 1.0),
                 **F32)
    a5 = random_array(rng, (1, 4, 2, 3, 2))
    assert_close(F.local_response_norm(T(a5, device), 4, 0.1), ref_lrn(a5, 4, 0.1, 0.75, 1.0),
                 **F32)


def test_local_response_norm_gradient(device, rng):
    x = T(rng.standard_normal((2, 6, 2, 3)), device, True)
    for size in (2, 5):
        assert gradcheck(lambda t, n=size: F.local_response_norm(t, n, 0.5, 0.75, 1.5), [x])
    a = random_array(rng, (2, 5, 3, 3))
    fn = lambda t: F.local_response_norm(t, 3, 0.3)
    ref = grad_of(fn, T(a, device, True))
    leaf = T(a, device).contiguous(cltensor.channels_last).requires_grad_()
    assert_close(grad_of(fn, leaf), ref, **F32)


def test_local_response_norm_bad_input(device):
    with pytest.raises(ValueError, match="3D or higher"):
        F.local_response_norm(cltensor.ones(2, 3, device=device), 2)
    with pytest.raises(ValueError, match="size must be a positive int"):
        F.local_response_norm(cltensor.ones(1, 2, 3, device=device), 0)


# ---- batch norm ---------------------------------------------------------------------------------

@pytest.fixture(params=["item-per-chunk", "group-per-chunk"])
def bn_lanes(request, monkeypatch):
    """The CPU's path, and the GPU's path (lanes in a work-group, channels cut into chunks)."""
    if request.param == "group-per-chunk":
        monkeypatch.setitem(norm_ops.TUNING, "cpu", {"lanes": 4, "items_per_cu": 64,
                                                     "min_chunk": 7, "group": 64})
    return request.param


@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 5, 7)])
def test_batch_norm_training(device, rng, bn_lanes, shape):
    a = random_array(rng, shape) * 3 + 5
    w, b = random_array(rng, (3,)), random_array(rng, (3,))
    y_ref, mean, var = ref_batch_norm(a, w, b, 1e-5)
    count = a.size // 3
    for layout, x in strided_views(a, device):
        rm, rv = T(np.full(3, 0.5, np.float32), device), T(np.full(3, 2.0, np.float32), device)
        y = F.batch_norm(x, rm, rv, T(w, device), T(b, device), training=True, momentum=0.2)
        assert_close(y, y_ref, rtol=1e-4, atol=1e-5), layout
        assert_close(rm, 0.8 * 0.5 + 0.2 * mean, **F32)
        assert_close(rv, 0.8 * 2.0 + 0.2 * var * count / (count - 1), **F32)
    y = F.batch_norm(T(a, device), None, None, training=True)
    assert_close(y, ref_batch_norm(a, np.ones(3), np.zeros(3), 1e-5)[0], rtol=1e-4, atol=1e-5)


def test_batch_norm_eval(device, rng):
    a = random_array(rng, (2, 4, 3, 3))
    rm, rv = random_array(rng, (4,)), random_array(rng, (4,), low=0.5, high=2)
    w, b = random_array(rng, (4,)), random_array(rng, (4,))
    expected = (a - rm.reshape(1, 4, 1, 1)) / np.sqrt(rv.reshape(1, 4, 1, 1) + 1e-3) \
        * w.reshape(1, 4, 1, 1) + b.reshape(1, 4, 1, 1)
    for layout, x in strided_views(a, device):
        y = F.batch_norm(x, T(rm, device), T(rv, device), T(w, device), T(b, device), eps=1e-3)
        assert_close(y, expected, **F32), layout
    # running stats given as strided views are read in place and updated in place
    big = T(np.stack([rm, rm]).T.copy(), device)
    rvt = T(rv, device)
    F.batch_norm(T(a, device), big[:, 1], rvt, training=True)
    assert_close(big[:, 1], 0.9 * rm + 0.1 * ref_batch_norm(a, np.ones(4), np.zeros(4), 0)[1],
                 **F32)
    assert_close(big[:, 0], rm)


def test_batch_norm_gradients(device, rng, bn_lanes):
    x = T(rng.standard_normal((3, 2, 2, 3)) * 2 + 1, device, True)
    w, b = (T(rng.standard_normal(2), device, True) for _ in range(2))
    rm = T(np.zeros(2), device)
    rv = T(np.ones(2), device)
    assert gradcheck(lambda t, ww, bb: F.batch_norm(t, None, None, ww, bb, training=True),
                     [x, w, b], atol=1e-5)
    assert gradcheck(lambda t, ww, bb: F.batch_norm(t, rm, rv + 0.5, ww, bb), [x, w, b])
    x2 = T(rng.standard_normal((5, 3)), device, True)
    assert gradcheck(lambda t: F.batch_norm(t, None, None, training=True), [x2])
    a = random_array(rng, (4, 3, 2, 5))
    fn = lambda t: F.batch_norm(t, None, None, training=True)
    g = T(random_array(rng, a.shape), device)
    ref = grad_of(fn, T(a, device, True), g)
    leaf = T(a, device).contiguous(cltensor.channels_last).requires_grad_()
    assert_close(grad_of(fn, leaf, g), ref, rtol=1e-4, atol=1e-5)


def test_batch_norm_bad_input(device):
    x = cltensor.ones(4, 3, 2, device=device)
    rm, rv = cltensor.zeros(3, device=device), cltensor.ones(3, device=device)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(cltensor.ones(1, 3, device=device), rm, rv, training=True)
    with pytest.raises(ValueError, match="must be defined in evaluation mode"):
        F.batch_norm(x, None, None)
    with pytest.raises(ValueError, match=r"weight must have shape \(3,\)"):
        F.batch_norm(x, rm, rv, cltensor.ones(4, device=device))
    with pytest.raises(ValueError, match="both running_mean and running_var"):
        F.batch_norm(x, rm, None, training=True)
    with pytest.raises(TypeError, match="dtype"):
        F.batch_norm(x, rm.int(), rv)
    with pytest.raises(ValueError, match="at least 2 dims"):
        F.batch_norm(cltensor.ones(3, device=device), rm, rv)


# ---- dropout, embedding, flatten, cat -----------------------------------------------------------

def test_dropout(device, rng):
    x = T(random_array(rng, (200, 50), low=1, high=2), device)
    cltensor.manual_seed(7)
    a = F.dropout(x, 0.3).numpy()
    cltensor.manual_seed(7)
    b = F.dropout(x, 0.3).numpy()
    np.testing.assert_array_equal(a, b)
    kept = a != 0
    assert abs(1 - kept.mean() - 0.3) < 0.02
    assert_close(a[kept], x.numpy()[kept] / 0.7, **F32)
    assert not np.array_equal(F.dropout(x, 0.3).numpy(), a)
    assert F.dropout(x, 0.3, training=False) is x
    assert (F.dropout(x, 1.0).numpy() == 0).all()
    leaf = T(rng.standard_normal((30, 40)), device, True)
    y = F.dropout(leaf, 0.5)
    y.backward(cltensor.ones_like(y))
    mask = y.detach().numpy() != 0
    assert_close(leaf.grad, mask * 2.0)
    z = T(random_array(rng, (10,), low=1, high=2), device)
    assert F.dropout(z, 0.5, inplace=True) is z
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, 1.5)


@pytest.mark.parametrize("fn,shape", [(F.dropout1d, (40, 30, 7)), (F.dropout2d, (40, 30, 3, 4)),
                                      (F.dropout2d, (60, 3, 4)), (F.dropout3d, (40, 30, 2, 2, 3))])
def test_feature_dropout(device, rng, fn, shape):
    """Each channel's map is kept whole (scaled) or zeroed whole, with probability p; the
    gradient follows the same mask; eval and p = 0 leave the input alone."""
    spatial = {F.dropout1d: 1, F.dropout2d: 2, F.dropout3d: 3}[fn]
    cltensor.manual_seed(7)  # the masks, not the tests run before, decide the kept fraction
    a = random_array(rng, shape, low=1, high=2)
    x = T(a, device, True) if device.has_fp64 else T(a, device)
    y = fn(x, 0.3)
    out = y.detach().numpy()
    maps = out.reshape(-1, int(np.prod(shape[-spatial:])))
    kept = (maps != 0).all(1)
    assert ((maps == 0).all(1) | kept).all()  # whole maps
    assert abs(1 - kept.mean() - 0.3) < 0.06
    assert_close(maps[kept], a.reshape(maps.shape)[kept] / 0.7, **F32)
    if device.has_fp64:
        y.backward(cltensor.ones_like(y))
        assert_close(x.grad, (out != 0) / 0.7, rtol=1e-6)
    assert fn(x, 0.3, training=False) is x
    z = T(a, device)
    assert fn(z, 0.5, inplace=True) is z
    assert (((z.numpy() == 0) | np.isclose(z.numpy(), 2 * a)).all())
    if spatial == 1:
        with pytest.raises(ValueError, match="-d .* input, got shape"):
            fn(T(np.ones((2,) * (spatial + 3)), device), 0.5)
    else:  # as torch: other ranks warn and drop per (N, C) (test_torch_compat_misc.py)
        with pytest.warns(UserWarning, match="deprecated"):
            fn(T(np.ones((2,) * (spatial + 3)), device), 0.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        fn(x, -0.1)


def _adaptive_max_reference(a, oh, ow):
    n, c, h, w = a.shape
    y = np.empty((n, c, oh, ow))
    idx = np.empty((n, c, oh, ow), np.int64)
    for i in range(oh):
        h0, h1 = i * h // oh, -(-(i + 1) * h // oh)
        for j in range(ow):
            w0, w1 = j * w // ow, -(-(j + 1) * w // ow)
            win = a[:, :, h0:h1, w0:w1].reshape(n, c, -1)
            k = win.argmax(-1)
            y[:, :, i, j] = np.take_along_axis(win, k[..., None], -1)[..., 0]
            idx[:, :, i, j] = (h0 + k // (w1 - w0)) * w + w0 + k % (w1 - w0)
    return y, idx


def test_adaptive_max_pool2d(device, rng):
    """Values and argmax against a numpy reference on strided and channels_last inputs, down-
    and upsampling windows; the gradient by finite differences; NaN wins, as max_pool2d."""
    a = random_array(rng, (2, 3, 7, 9))
    for out in [(3, 4), (1, 1), (7, 9), (10, 12), (None, 2)]:
        oh, ow = (7 if out[0] is None else out[0]), out[1]
        want, want_idx = _adaptive_max_reference(a.astype(np.float64), oh, ow)
        for layout, x in strided_views(a, device):
            y, idx = F.adaptive_max_pool2d(x, out, return_indices=True)
            assert_close(y, want, rtol=0, atol=0), (out, layout)
            np.testing.assert_array_equal(idx.numpy(), want_idx)
    if device.has_fp64:
        x64 = T(rng.standard_normal((1, 2, 5, 6)), device, True)
        assert gradcheck(lambda t: F.adaptive_max_pool2d(t, (2, 4)), [x64])
    b = a.copy()
    b[0, 0, 1, 1] = np.nan
    y = F.adaptive_max_pool2d(T(b, device), 1).numpy()
    assert np.isnan(y[0, 0, 0, 0]) and not np.isnan(y[0, 1:]).any()
    assert F.adaptive_max_pool2d(T(a[0], device), 2).shape == (3, 2, 2)
    with pytest.raises(ValueError, match="output_size must hold positive ints"):
        F.adaptive_max_pool2d(T(a, device), (0, 2))


def test_embedding(device, rng):
    w = random_array(rng, (6, 3))
    idx = np.array([[1, 5, 1], [0, 1, 2]])
    assert_close(F.embedding(T(idx, device), T(w, device)), w[idx])
    assert_close(F.embedding(T(idx.astype(np.int32), device), T(w, device)), w[idx])
    wt = T(w.astype(np.float64), device, True)
    g = random_array(rng, (2, 3, 3)).astype(np.float64)
    F.embedding(T(idx, device), wt, padding_idx=-5).backward(T(g, device))
    expected = np.zeros((6, 3))
    np.add.at(expected, idx.ravel(), g.reshape(-1, 3))
    expected[1] = 0
    assert_close(wt.grad, expected, rtol=1e-12)
    wt = T(rng.standard_normal((4, 2)), device, True)
    assert gradcheck(lambda t: F.embedding(T(np.array([3, 0, 3]), device), t), [wt])
    with pytest.raises(TypeError, match="int32 or int64"):
        F.embedding(T(idx.astype(np.float32), device), T(w, device))
    with pytest.raises(ValueError, match="padding_idx must be within"):
        F.embedding(T(idx, device), T(w, device), padding_idx=6)
    with pytest.raises(IndexError):
        F.embedding(T(np.array([6]), device), T(w, device))


def ref_renorm(w, idx, max_norm, p):
    """torch's embedding_renorm_ in float64: the picked rows of norm above max_norm scaled."""
    w = w.astype(np.float64).copy()
    for i in np.unique(idx):
        norm = np.linalg.norm(w[i], p)
        if norm > max_norm:
            w[i] *= max_norm / (norm + 1e-7)
    return w


def test_embedding_max_norm_and_scale_grad_by_freq(device, rng):
    """max_norm rescales the picked rows of weight in place (norms 1, 2, inf; a repeated index;
    rows below the bound and rows not picked untouched), then looks them up; with
    scale_grad_by_freq each row's gradient is divided by how often the input picks it."""
    w = (random_array(rng, (7, 3)) * 3).astype(np.float64)
    w[5] *= 0.01  # picked, but already within every bound below
    idx = np.array([[1, 5, 1], [0, 6, 1]])
    for p in (2.0, 1.0, float("inf")):
        wt = T(w, device)
        out = F.embedding(T(idx, device), wt, max_norm=1.5, norm_type=p)
        want = ref_renorm(w, idx, 1.5, p)
        assert_close(wt, want, rtol=1e-12)  # in place, rows 2, 3, 4 as they were
        assert_close(out, want[idx], rtol=1e-12)
    wt = T(w, device, True)
    g = random_array(rng, (2, 3, 3)).astype(np.float64)
    F.embedding(T(idx.astype(np.int32), device), wt, padding_idx=6,
                scale_grad_by_freq=True).backward(T(g, device))
    want = np.zeros_like(w)
    np.add.at(want, idx.ravel(), g.reshape(-1, 3))
    want /= np.maximum(np.bincount(idx.ravel(), minlength=7), 1)[:, None]
    want[6] = 0
    assert_close(wt.grad, want, rtol=1e-12)


def test_embedding_options_against_torch(device, rng):
    torch = pytest.importorskip("torch")
    w = (random_array(rng, (6, 4)) * 2).astype(np.float64)
    idx = np.array([3, 0, 3, 5, 3])
    g = rng.standard_normal((5, 4))
    ours, theirs = T(w, device, True), torch.from_numpy(w.copy()).requires_grad_()
    out = F.embedding(T(idx, device), ours, max_norm=1.0, scale_grad_by_freq=True)
    ref = torch.nn.functional.embedding(torch.from_numpy(idx), theirs, max_norm=1.0,
                                        scale_grad_by_freq=True)
    assert_close(ours, theirs.detach().numpy(), rtol=1e-12)
    assert_close(out, ref.detach().numpy(), rtol=1e-12)
    out.backward(T(g, device))
    ref.backward(torch.from_numpy(g))
    assert_close(ours.grad, theirs.grad.numpy(), rtol=1e-12)


def test_embedding_bag_max_norm_and_scale_grad_by_freq(device, rng):
    """max_norm as embedding's, over the bags' indices; scale_grad_by_freq divides each row's
    gradient by its count in the whole input (torch 2.13 on the CPU divides the largest index's
    by the count of the index before it: [2, 2, 4] gives row 4 half its gradient)."""
    w = (random_array(rng, (6, 3)) * 3).astype(np.float64)
    idx, starts = EMBEDDING_BAGS[0]
    for mode in F.EMBEDDING_BAG_MODES:
        wt = T(w, device)
        got = F.embedding_bag(T(idx, device), wt, T(starts, device), max_norm=2.0,
                              norm_type=1.0, mode=mode, padding_idx=4)
        fixed = ref_renorm(w, idx, 2.0, 1.0)
        assert_close(wt, fixed, rtol=1e-12)
        assert_close(got, ref_embedding_bag(fixed, idx, starts, mode, padding_idx=4),
                     rtol=1e-12)
    counts = np.maximum(np.bincount(idx, minlength=6), 1)[:, None]
    bags = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(idx))))
    g = rng.standard_normal((len(starts), 3))
    for mode in ("sum", "mean"):
        wt = T(w, device, True)
        F.embedding_bag(T(idx, device), wt, T(starts, device), mode=mode,
                        scale_grad_by_freq=True).backward(T(g, device))
        per = g[bags] / (np.bincount(bags, minlength=len(starts))[bags, None]
                         if mode == "mean" else 1)
        want = np.zeros_like(w)
        np.add.at(want, idx, per)
        assert_close(wt.grad, want / counts, rtol=1e-12)


def ref_embedding_bag(w, idx, starts, mode, psw=None, padding_idx=None):
    """F.embedding_bag in float64 over a flat idx with bag starts (the last bag to the end)."""
    ends = list(starts[1:]) + [len(idx)]
    out = np.zeros((len(starts), w.shape[1]))
    for b, (s, e) in enumerate(zip(starts, ends)):
        keep = [j for j in range(s, e) if idx[j] != padding_idx]
        if not keep:
            continue
        rows = w[idx[keep]].astype(np.float64)
        if psw is not None:
            rows = rows * psw[keep, None]
        out[b] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    return out


EMBEDDING_BAGS = [  # (indices, offsets): an empty bag, a repeated index, one bag
    (np.array([1, 2, 4, 5, 4, 3, 0, 4]), np.array([0, 2, 2, 3, 5])),  # [4]: padding only
    (np.array([3, 3, 1]), np.array([0])),
]


def test_embedding_bag(device, rng):
    """Every mode against a float64 reference: 1-d input with offsets (with and without the
    last offset, an empty bag, a bag of padding only), 2-d input, per-sample weights,
    padding_idx; gradients by finite differences, weights' and per-sample weights'."""
    w = random_array(rng, (6, 3)).astype(np.float64)
    for (idx, starts), mode, pad in itertools.product(EMBEDDING_BAGS, F.EMBEDDING_BAG_MODES,
                                                      (None, 4)):
        got = F.embedding_bag(T(idx, device), T(w, device), T(starts, device), mode=mode,
                              padding_idx=pad)
        want = ref_embedding_bag(w, idx, starts, mode, padding_idx=pad)
        assert_close(got, want, rtol=1e-12)
        last = T(np.append(starts, len(idx)).astype(np.int32), device)
        assert_close(F.embedding_bag(T(idx.astype(np.int32), device), T(w, device), last,
                                     mode=mode, include_last_offset=True, padding_idx=pad),
                     want, rtol=1e-12)
        f32 = F.embedding_bag(T(idx, device), T(w.astype(np.float32), device), T(starts, device),
                              mode=mode, padding_idx=pad)
        assert f32.dtype == cltensor.float32
        assert_close(f32, want, rtol=1e-6, atol=1e-6)
    idx2 = rng.integers(0, 6, (4, 3))
    for mode in F.EMBEDDING_BAG_MODES:
        assert_close(F.embedding_bag(T(idx2, device), T(w, device), mode=mode),
                     ref_embedding_bag(w, idx2.ravel(), [0, 3, 6, 9], mode), rtol=1e-12)
    idx, starts = EMBEDDING_BAGS[0]
    psw = rng.standard_normal(len(idx))
    assert_close(F.embedding_bag(T(idx, device), T(w, device), T(starts, device), mode="sum",
                                 per_sample_weights=T(psw, device), padding_idx=4),
                 ref_embedding_bag(w, idx, starts, "sum", psw, 4), rtol=1e-12)
    wt, pt = T(w, device, True), T(psw, device, True)
    fixed = T(idx, device), T(starts, device)
    assert gradcheck(lambda a, b: F.embedding_bag(*fixed[:1], a, fixed[1], mode="sum",
                                                   per_sample_weights=b, padding_idx=4),
                     [wt, pt])
    for mode in ("mean", "max"):
        assert gradcheck(lambda a, m=mode: F.embedding_bag(fixed[0], a, fixed[1], mode=m,
                                                            padding_idx=4), [wt])
    wt.grad = None
    F.embedding_bag(*fixed[:1], wt, fixed[1], mode="mean", padding_idx=4).sum().backward()
    assert not wt.grad.numpy()[4].any()  # the padding row gets no gradient


def test_embedding_bag_against_torch(device, rng):
    torch = pytest.importorskip("torch")
    w = random_array(rng, (7, 4)).astype(np.float64)
    idx, starts = np.array([6, 0, 2, 2, 5, 1, 3]), np.array([0, 3, 3, 6])
    g = rng.standard_normal((4, 4))
    for mode in F.EMBEDDING_BAG_MODES:
        psw = rng.standard_normal(len(idx)) if mode == "sum" else None
        wt, ptw = T(w, device, True), torch.from_numpy(w).requires_grad_()
        pt = T(psw, device, True) if psw is not None else None
        ptp = torch.from_numpy(psw).requires_grad_() if psw is not None else None
        ours = F.embedding_bag(T(idx, device), wt, T(starts, device), mode=mode,
                               per_sample_weights=pt, padding_idx=2)
        theirs = torch.nn.functional.embedding_bag(
            torch.from_numpy(idx), ptw, torch.from_numpy(starts), mode=mode,
            per_sample_weights=ptp, padding_idx=2)
        assert_close(ours, theirs.detach().numpy(), rtol=1e-12)
        ours.backward(T(g, device))
        theirs.backward(torch.from_numpy(g))
        assert_close(wt.grad, ptw.grad.numpy(), rtol=1e-12, atol=1e-14)
        if psw is not None:
            assert_close(pt.grad, ptp.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_embedding_bag_bad_input(device, rng):
    w = T(random_array(rng, (6, 3)), device)
    i1, off = T(np.array([1, 2, 3]), device), T(np.array([0, 2]), device)
    cases = [
        (ValueError, "mode must be one of", lambda: F.embedding_bag(i1, w, off, mode="min")),
        (ValueError, "offsets must be None for a 2-d input",
         lambda: F.embedding_bag(i1.reshape(1, 3), w, off)),
        (ValueError, "a 1-d input needs offsets", lambda: F.embedding_bag(i1, w)),
        (ValueError, "input must be 1-d .with offsets. or 2-d",
         lambda: F.embedding_bag(i1.reshape(1, 1, 3), w)),
        (ValueError, r"offsets\[0\] must be 0",
         lambda: F.embedding_bag(i1, w, T(np.array([1, 2]), device))),
        (ValueError, "offsets must be non-decreasing",
         lambda: F.embedding_bag(i1, w, T(np.array([0, 2, 1]), device))),
        (ValueError, "at most the input's length 3",
         lambda: F.embedding_bag(i1, w, T(np.array([0, 4]), device))),
        (ValueError, "the last offset must be the input's length 3",
         lambda: F.embedding_bag(i1, w, off, include_last_offset=True)),
        (ValueError, "offsets must be a 1-d int32/int64 tensor",
         lambda: F.embedding_bag(i1, w, T(np.array([0.0]), device))),
        (ValueError, "offsets hold no bag for an input of 3",
         lambda: F.embedding_bag(i1, w, T(np.zeros(0, np.int64), device))),
        (ValueError, "per_sample_weights needs mode='sum'",
         lambda: F.embedding_bag(i1, w, off, per_sample_weights=T(np.ones(3, np.float32),
                                                                   device))),
        (ValueError, "per_sample_weights must have the input's shape",
         lambda: F.embedding_bag(i1, w, off, mode="sum",
                                 per_sample_weights=T(np.ones(2, np.float32), device))),
        (TypeError, "per_sample_weights must have weight's dtype",
         lambda: F.embedding_bag(i1, w, off, mode="sum",
                                 per_sample_weights=T(np.ones(3), device))),
        (TypeError, "indices must be int32 or int64",
         lambda: F.embedding_bag(T(np.array([1.0]), device), w, off)),
        (ValueError, "padding_idx must be within", lambda: F.embedding_bag(i1, w, off,
                                                                           padding_idx=6)),
        (IndexError, "index 6 is out of bounds", lambda: F.embedding_bag(
            T(np.array([6]), device), w, T(np.array([0]), device))),
        (IndexError, "index -1 is out of bounds", lambda: F.embedding_bag(
            T(np.array([[-1]]), device), w)),
        (NotImplementedError, "sparse gradients", lambda: F.embedding_bag(i1, w, off,
                                                                          sparse=True)),
        (ValueError, "max_norm must be a non-negative number", lambda: F.embedding_bag(
            i1, w, off, max_norm=-1.0)),
        (ValueError, "mode 'max' cannot scale gradients by frequency", lambda: F.embedding_bag(
            i1, w, off, mode="max", scale_grad_by_freq=True)),
        (NotImplementedError, "sparse gradients", lambda: F.embedding(i1, w, sparse=True)),
        (ValueError, "max_norm must be a non-negative number", lambda: F.embedding(
            i1, w, max_norm="1")),
        (TypeError, "ord must be a real number", lambda: F.embedding(i1, w, max_norm=1.0,
                                                                     norm_type="fro")),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()
    empty = F.embedding_bag(T(np.zeros(0, np.int64), device), w, T(np.zeros(0, np.int64),
                                                                    device))
    assert empty.shape == (0, 3)


def test_one_hot_is_exported_as_in_torch(device, rng):
    """torch.nn.functional.one_hot: cltensor.one_hot (tests/test_indexing.py tests it)."""
    assert F.one_hot is cltensor.one_hot
    idx = rng.integers(0, 5, (3, 4))
    np.testing.assert_array_equal(F.one_hot(T(idx, device), 7).numpy(),
                                  (idx[..., None] == np.arange(7)).astype(np.int64))


def test_flatten_and_cat(device, rng):
    a, b = random_array(rng, (2, 3, 4)), random_array(rng, (2, 5, 4))
    assert F.flatten(T(a, device), 1).shape == (2, 12)
    x, y = T(a.astype(np.float64), device, True), T(b.astype(np.float64), device, True)
    out = F.cat([x, y], 1)
    assert_close(out, np.concatenate([a, b], 1))
    out.sum().backward()
    assert_close(x.grad, np.ones(a.shape))
    assert_close(y.grad, np.ones(b.shape))


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
def test_cross_entropy_forward(device, rng, lanes, case, reduction):
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


def test_cross_entropy_gradients(device, rng, lanes):
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


def test_launches_split_along_the_outer_dim(device, rng, monkeypatch):
    """Launches with more work-groups along dim 1 or 2 than NVIDIA allows (65535, here 4) are
    cut into several with global offsets: same results."""
    a = random_array(rng, (5, 4, 9, 7))
    t = rng.integers(0, 4, size=(5, 9, 7))
    ops = [lambda x: F.max_pool2d(x, 3, 2, 1), lambda x: F.avg_pool2d(x, 2),
           lambda x: F.local_response_norm(x, 3), lambda x: F.batch_norm(x, None, None,
                                                                          training=True),
           lambda x: F.cross_entropy(x, T(t, device), reduction="none"),
           lambda x: F.nll_loss(x, T(t, device), reduction="none")]
    layouts = [T(a, device), T(a, device).contiguous(cltensor.channels_last)]

    def run():
        out = []
        for fn in ops:
            for x in layouts:
                leaf = x.detach().requires_grad_()
                y = fn(leaf)
                y.backward(T(np.random.default_rng(0).standard_normal(y.shape).astype(np.float32),
                             device))
                out += [y.numpy(), leaf.grad.numpy()]
        return out

    expected = run()
    monkeypatch.setattr(cltensor.program, "MAX_GROUPS", 4)
    for got, want in zip(run(), expected):
        assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_double_backward(device, rng):
    """Kernel backward passes record a graph under create_graph=True, with the first-order
    values (tests/test_double_backward.py checks every op); composed ones (linear) too."""
    x = T(rng.standard_normal((2, 3)), device, True)
    g = T(rng.standard_normal((2, 3)), device)
    (recorded,) = cltensor.autograd.grad(F.softmax(x, 1), x, g, create_graph=True)
    (plain,) = cltensor.autograd.grad(F.softmax(x, 1), x, g)
    assert recorded.grad_fn is not None and plain.grad_fn is None
    assert_close(recorded.detach(), plain.numpy(), rtol=1e-12, atol=1e-15)
    w = T(rng.standard_normal((4, 3)), device, True)
    (gx,) = cltensor.autograd.grad(F.linear(x, w).sum(), [x], create_graph=True)
    (gw,) = cltensor.autograd.grad((gx * gx).sum(), [w])
    assert_close(gw, 2 * np.tile(w.detach().numpy().sum(0), (4, 1)) * 2, rtol=1e-12)


# ---- against torch ------------------------------------------------------------------------------

def _torch_cases(torch, TF):
    """(name, cltensor fn, torch fn, input shapes); each fn takes the inputs as tensors."""
    lab = np.array([[0, 2], [1, -100], [2, 0]])
    return [
        ("max_pool2d", lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
         lambda x: TF.max_pool2d(x, 3, 2, 1, ceil_mode=True), [(2, 3, 9, 8)]),
        ("max_pool2d_dilated", lambda x: F.max_pool2d(x, (2, 3), (1, 2), (1, 1), (2, 1)),
         lambda x: TF.max_pool2d(x, (2, 3), (1, 2), (1, 1), (2, 1)), [(2, 3, 9, 8)]),
        ("avg_pool2d", lambda x: F.avg_pool2d(x, 3, 2, 1, True, False),
         lambda x: TF.avg_pool2d(x, 3, 2, 1, True, False), [(2, 3, 9, 8)]),
        ("avg_pool2d_divisor", lambda x: F.avg_pool2d(x, 2, 1, 1, divisor_override=3),
         lambda x: TF.avg_pool2d(x, 2, 1, 1, divisor_override=3), [(2, 3, 5, 6)]),
        ("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (4, 3)),
         lambda x: TF.adaptive_avg_pool2d(x, (4, 3)), [(2, 3, 9, 8)]),
        ("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (4, 3)),
         lambda x: TF.adaptive_max_pool2d(x, (4, 3)), [(2, 3, 9, 8)]),
        ("log_softmax", lambda x: F.log_softmax(x, 1), lambda x: TF.log_softmax(x, 1),
         [(3, 7, 4)]),
        ("softmax", lambda x: F.softmax(x, -1), lambda x: TF.softmax(x, -1), [(3, 7, 4)]),
        ("lrn", lambda x: F.local_response_norm(x, 5, 1e-2, 0.75, 2.0),
         lambda x: TF.local_response_norm(x, 5, 1e-2, 0.75, 2.0), [(2, 7, 3, 4)]),
        ("batch_norm", lambda x, w, b: F.batch_norm(x, None, None, w, b, True),
         lambda x, w, b: TF.batch_norm(x, None, None, w, b, True), [(4, 3, 2, 5), (3,), (3,)]),
        ("linear", F.linear, TF.linear, [(2, 3, 5), (4, 5), (4,)]),
        ("layer_norm", lambda x, w, b: F.layer_norm(x, (4, 5), w, b, 1e-3),
         lambda x, w, b: TF.layer_norm(x, (4, 5), w, b, 1e-3), [(3, 4, 5), (4, 5), (4, 5)]),
        ("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b),
         lambda x, w, b: TF.group_norm(x, 2, w, b), [(3, 4, 2, 5), (4,), (4,)]),
        ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), lambda x: TF.leaky_relu(x, 0.2),
         [(3, 4)]),
        ("elu", lambda x: F.elu(x, 0.5), lambda x: TF.elu(x, 0.5), [(3, 4)]),
        ("gelu", F.gelu, TF.gelu, [(3, 4)]),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"),
         lambda x: TF.gelu(x, approximate="tanh"), [(3, 4)]),
        ("silu", F.silu, TF.silu, [(3, 4)]),
        ("mish", F.mish, TF.mish, [(3, 4)]),
        ("softplus", lambda x: F.softplus(x, 0.5, 0.3), lambda x: TF.softplus(x, 0.5, 0.3),
         [(3, 4)]),
        ("hardswish", lambda x: F.hardswish(x * 8), lambda x: TF.hardswish(x * 8), [(3, 4)]),
        ("hardsigmoid", lambda x: F.hardsigmoid(x * 8), lambda x: TF.hardsigmoid(x * 8),
         [(3, 4)]),
        ("relu6", lambda x: F.relu6(x * 8 - 2), lambda x: TF.relu6(x * 8 - 2), [(3, 4)]),
        ("selu", F.selu, TF.selu, [(3, 4)]),
        ("celu", lambda x: F.celu(x, 1.7), lambda x: TF.celu(x, 1.7), [(3, 4)]),
        ("logsigmoid", lambda x: F.logsigmoid(x * 30), lambda x: TF.logsigmoid(x * 30),
         [(3, 4)]),
        ("softsign", F.softsign, TF.softsign, [(3, 4)]),
        ("tanhshrink", F.tanhshrink, TF.tanhshrink, [(3, 4)]),
        ("softshrink", lambda x: F.softshrink(x, 0.4), lambda x: TF.softshrink(x, 0.4), [(3, 4)]),
        ("hardshrink", lambda x: F.hardshrink(x, 0.4), lambda x: TF.hardshrink(x, 0.4), [(3, 4)]),
        ("threshold", lambda x: F.threshold(x, 0.1, 3.0), lambda x: TF.threshold(x, 0.1, 3.0),
         [(3, 4)]),
        ("glu", lambda x: F.glu(x, 0), lambda x: TF.glu(x, 0), [(4, 3)]),
        ("pad_reflect", lambda x: F.pad(x, (2, 1, 0, 1), mode="reflect"),
         lambda x: TF.pad(x, (2, 1, 0, 1), mode="reflect"), [(2, 3, 4)]),
        ("hardtanh", lambda x: F.hardtanh(x, -0.3, 0.6), lambda x: TF.hardtanh(x, -0.3, 0.6),
         [(3, 4)]),
        ("cross_entropy",
         lambda x, w: F.cross_entropy(x, cltensor.tensor(lab, device=x.device), w.detach(),
                                      label_smoothing=0.15),
         lambda x, w: TF.cross_entropy(x, torch.tensor(lab), w.detach(), label_smoothing=0.15),
         [(3, 4, 2), (4,)]),
        ("nll_loss",
         lambda x: F.nll_loss(x, cltensor.tensor(lab, device=x.device), reduction="sum"),
         lambda x: TF.nll_loss(x, torch.tensor(lab), reduction="sum"), [(3, 4, 2)]),
        ("mse_loss", F.mse_loss, TF.mse_loss, [(3, 4), (3, 4)]),
        ("bce_with_logits",
         lambda x, t, pw: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw.detach()),
         lambda x, t, pw: TF.binary_cross_entropy_with_logits(x, t, pos_weight=pw.detach()),
         [(3, 4), (3, 4), (4,)]),
    ]


def test_against_torch(device, rng):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF
    dtype = np.float64 if device.has_fp64 else np.float32
    tol = {"rtol": 1e-10, "atol": 1e-10} if dtype == np.float64 else {"rtol": 1e-4, "atol": 1e-5}
    for name, ours, theirs, shapes in _torch_cases(torch, TF):
        arrays = [rng.uniform(0.1, 1.0, s) if i and name == "bce_with_logits" else
                  rng.standard_normal(s) for i, s in enumerate(shapes)]
        arrays = [a.astype(dtype) for a in arrays]
        xs = [T(a, device, True) for a in arrays]
        ts = [torch.tensor(a, requires_grad=True) for a in arrays]
        y, ty = ours(*xs), theirs(*ts)
        assert_close(y, ty.detach().numpy(), **tol), name
        g = rng.standard_normal(ty.shape).astype(dtype)
        y.backward(T(g, device))
        ty.backward(torch.tensor(g))
        # NOTE: torch's CPU hardsigmoid gradient multiplies by the float32 1.0f / 6.0f, also in
        # float64 (a relative error of 3e-8), and its celu gradient scales by 1 / alpha rounded
        # likewise (2e-8); ours divides by 6 and by alpha
        grad_tol = dict(tol, rtol=1e-7) if name in ("hardsigmoid", "celu") else tol
        for x, t in zip(xs, ts):
            if t.grad is not None:
                assert_close(x.grad, t.grad.numpy(), **grad_tol), name


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
