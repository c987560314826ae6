"""cltensor.nn.functional: linear, the activations, layer and group norm, softmax and
log_softmax, local response norm, batch norm, dropout, flatten, cat and one_hot against
float64 numpy references, gradients by finite differences, odd layouts and sizes, bad input;
launches cut along the outer dim, double backward, and every layer op and loss against torch
where it is installed. Pooling, the losses and embedding have files of their own
(test_nn_pooling.py, test_nn_losses.py, test_nn_embedding.py), which import the helpers and
references here."""
import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cltensor
import cltensor.nn.functional as F
from cltensor.ops import norm as norm_ops
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


# ---- dropout, one_hot, flatten, cat -------------------------------------------------------------

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


# ---- launches cut along the outer dim, double backward ------------------------------------------

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
