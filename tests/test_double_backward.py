"""Double backward (create_graph=True) through nn.functional and the convolutions, in float64.

Each case is an op y = f(x, ...) written once for both libraries (fn(F, *inputs, *consts), F
being cltensor's or torch's nn.functional). Its first derivatives, of sum(v y + y^2 / 2) (so
that the backward is differentiated both through its saved tensors and through the incoming
gradient), are differentiated again: along a random direction against central finite
differences of the first-order (kernel) gradient, which needs no torch; and second and third
derivatives against torch's. Inputs keep away from kinks (relu at 0, a shrink at +-lambd).
"""
from types import SimpleNamespace

import numpy as np
import pytest

import cltensor
import cltensor.nn.functional as F
from cltensor.autograd.engine import Node
from cltensor.testing import assert_close, gradcheck

RTOL = 1e-10  # float64 results against torch's, and the recorded gradient against the kernels'
FD_EPS, FD_RTOL = 1e-5, 1e-6


@pytest.fixture
def cl(device):
    if not device.has_fp64:
        pytest.skip(f"{device} has no float64: the derivative checks need it")

    def tensor(a, requires_grad=False):
        if not isinstance(a, np.ndarray):
            return a
        t = cltensor.from_numpy(a, device=device)
        return t.requires_grad_() if requires_grad else t
    return SimpleNamespace(F=F, autograd=cltensor.autograd, tensor=tensor,
                           numpy=lambda t: t.numpy(), is_torch=False)


@pytest.fixture
def th():
    torch = pytest.importorskip("torch")

    def tensor(a, requires_grad=False):
        return torch.tensor(a, requires_grad=requires_grad) if isinstance(a, np.ndarray) else a
    return SimpleNamespace(F=torch.nn.functional, autograd=torch.autograd, tensor=tensor,
                           numpy=lambda t: t.detach().numpy(), is_torch=True)


def case(name, fn, inputs, consts=(), ref=None):
    """fn(F, *inputs, *consts); ref(F, ...) stands for it on torch's side where given (torch
    lacks the double backward, or computes the op less exactly)."""
    return SimpleNamespace(name=name, fn=fn, inputs=inputs, consts=consts, ref=ref)


def _call(lib, c, xs):
    fn = c.ref if c.ref is not None and lib.is_torch else c.fn
    return fn(lib.F, *xs, *[lib.tensor(k) for k in c.consts])


def _loss(lib, y, v):
    return (y * lib.tensor(v) + 0.5 * y * y).sum()


def _dot(lib, grads, ws):
    return sum((g * lib.tensor(w)).sum() for g, w in zip(grads, ws) if g is not None)


def _numpy(lib, grads, like):
    return [np.zeros(a.shape) if g is None else lib.numpy(g) for g, a in zip(grads, like)]


# ---- inputs -------------------------------------------------------------------------------------

def away(rng, shape, kinks=(0.0,), low=-2.0, high=2.0, margin=0.15):
    """Uniform values at least `margin` from each kink (kinks at least 3 * margin apart)."""
    a = rng.uniform(low, high, shape)
    for k in kinks:
        near = np.abs(a - k) < margin
        a[near] = k + np.where(a[near] < k, -1, 1) * (margin + rng.uniform(0, margin, near.sum()))
    return a


def channels_last(x):
    if isinstance(x, cltensor.ClTensor):
        return x.contiguous(cltensor.channels_last)
    import torch
    return x.contiguous(memory_format=torch.channels_last)


def activation_cases(rng):
    x = away(rng, (2, 3, 4))
    def one(name, f, kinks, ref=None, **kw):  # an input of its own, away from the kinks
        return case(name, f, [away(rng, (2, 3, 4), kinks, **kw)], ref=ref)
    return [
        case("relu", lambda F, x: F.relu(x), [x]),
        case("leaky_relu", lambda F, x: F.leaky_relu(x, 0.2), [x]),
        case("elu", lambda F, x: F.elu(x, 1.3), [x]),
        one("hardtanh", lambda F, x: F.hardtanh(x, -1.0, 1.5), (-1.0, 1.5), low=-3, high=3),
        case("sigmoid", lambda F, x: F.sigmoid(x), [x]),
        case("tanh", lambda F, x: F.tanh(x), [x]),
        case("gelu", lambda F, x: F.gelu(x), [x]),
        case("gelu tanh", lambda F, x: F.gelu(x, approximate="tanh"), [x]),
        case("silu", lambda F, x: F.silu(x), [x]),
        case("mish", lambda F, x: F.mish(x), [x]),
        one("softplus", lambda F, x: F.softplus(x, 2.0, 1.0), (0.5,)),  # both sides of threshold
        one("hardswish", lambda F, x: F.hardswish(x), (-3.0, 3.0), low=-4.5, high=4.5),
        one("hardsigmoid", lambda F, x: F.hardsigmoid(x), (-3.0, 3.0), low=-4.5, high=4.5,
            ref=lambda F, x: (x + 3).clamp(0, 6) / 6),  # torch has no double backward for it
        case("selu", lambda F, x: F.selu(x), [x]),
        case("celu", lambda F, x: F.celu(x, 0.7), [x],
             ref=lambda F, x: F.elu(x / 0.7) * 0.7),  # torch's celu gradient is off by 1e-9
        case("logsigmoid", lambda F, x: F.logsigmoid(x), [x]),
        case("softsign", lambda F, x: F.softsign(x), [x]),
        case("tanhshrink", lambda F, x: F.tanhshrink(x), [x]),
        one("softshrink", lambda F, x: F.softshrink(x, 0.6), (-0.6, 0.6)),
        one("hardshrink", lambda F, x: F.hardshrink(x, 0.6), (-0.6, 0.6)),
        one("threshold", lambda F, x: F.threshold(x, 0.5, -2.0), (0.5,)),
        one("relu6", lambda F, x: F.relu6(x * 4), (0.0, 1.5)),
    ]


def softmax_cases(rng):
    x = rng.uniform(-2, 2, (2, 3, 4))
    return [case("softmax", lambda F, x: F.softmax(x, 1), [x]),
            case("softmax last", lambda F, x: F.softmax(x, -1), [x]),
            case("log_softmax", lambda F, x: F.log_softmax(x, 0), [x]),
            case("log_softmax 1-d", lambda F, x: F.log_softmax(x, 0), [x[0, 0]])]


def pool_cases(rng):
    x = rng.standard_normal((2, 3, 5, 6))
    return [
        case("max_pool2d", lambda F, x: F.max_pool2d(x, 3, 2, 1), [x]),
        case("max_pool2d ceil dilation",
             lambda F, x: F.max_pool2d(x, 2, (2, 1), 1, (1, 2), ceil_mode=True), [x]),
        case("max_pool2d unbatched", lambda F, x: F.max_pool2d(x, 2), [x[0]]),
        case("max_pool2d indices", lambda F, x: F.max_pool2d(x, 2, return_indices=True)[0], [x]),
        case("adaptive_max_pool2d", lambda F, x: F.adaptive_max_pool2d(x, (2, 4)), [x]),
        case("avg_pool2d", lambda F, x: F.avg_pool2d(x, 3, 2, 1), [x]),
        case("avg_pool2d ceil no pad count",
             lambda F, x: F.avg_pool2d(x, 2, 2, 1, ceil_mode=True, count_include_pad=False), [x]),
        case("avg_pool2d divisor", lambda F, x: F.avg_pool2d(x, (3, 2), 1, (1, 0),
                                                             divisor_override=4), [x]),
        case("adaptive_avg_pool2d", lambda F, x: F.adaptive_avg_pool2d(x, (3, 4)), [x]),
        case("pools channels_last", lambda F, x: F.max_pool2d(channels_last(x), 2) +
             F.avg_pool2d(channels_last(x), 2), [x]),
    ]


def interpolate_cases(rng):
    x = rng.standard_normal((2, 2, 3, 4))
    return [
        case("nearest", lambda F, x: F.interpolate(x, size=(5, 7)), [x]),
        case("nearest-exact", lambda F, x: F.interpolate(x, scale_factor=1.7,
                                                         mode="nearest-exact"), [x]),
        case("bilinear", lambda F, x: F.interpolate(x, scale_factor=(2, 1.5), mode="bilinear"),
             [x]),
        case("bilinear corners", lambda F, x: F.interpolate(x, size=(4, 6), mode="bilinear",
                                                            align_corners=True), [x]),
        case("bicubic", lambda F, x: F.interpolate(x, size=(5, 3), mode="bicubic"), [x]),
        case("area", lambda F, x: F.interpolate(x, size=(2, 3), mode="area"), [x]),
        case("linear 1-d", lambda F, x: F.interpolate(x, size=7, mode="linear"), [x[:, :, 0]]),
    ]


def norm_cases(rng):
    x = rng.standard_normal((3, 4, 2, 3))
    w, b = rng.uniform(0.5, 1.5, 4), rng.standard_normal(4)
    stats = [rng.standard_normal(4), rng.uniform(0.5, 2.0, 4)]
    fresh = [np.zeros(4), np.ones(4)]
    return [
        case("local_response_norm", lambda F, x: F.local_response_norm(x, 3, 0.5, 0.75, 1.5),
             [x]),
        case("local_response_norm even 3-d",
             lambda F, x: F.local_response_norm(x, 2, 0.3, 0.6, 1.0), [x[:, :, 0]]),
        case("batch_norm train", lambda F, x, w, b, m, v: F.batch_norm(x, m, v, w, b, True),
             [x, w, b], fresh),
        case("batch_norm train no affine", lambda F, x, m, v: F.batch_norm(x, m, v, None,
                                                                           None, True),
             [x], fresh),
        case("batch_norm 2-d", lambda F, x, w: F.batch_norm(x, None, None, w, None, True),
             [x[:, :, 0, 0], w]),
        case("batch_norm eval", lambda F, x, w, b, m, v: F.batch_norm(x, m, v, w, b, False),
             [x, w, b], stats),
        case("batch_norm eval no affine", lambda F, x, m, v: F.batch_norm(x, m, v),
             [x], stats),
        case("layer_norm", lambda F, x, w: F.layer_norm(x, (2, 3), w), [x, w[:3] + w[:2, None]]),
        case("group_norm", lambda F, x, w, b: F.group_norm(x, 2, w, b), [x, w, b]),
    ]


def loss_cases(rng):
    x = rng.standard_normal((4, 5))
    t = np.array([1, 0, 4, 2])
    cw = rng.uniform(0.5, 2.0, 5)
    out = []
    for red in ("mean", "sum", "none"):
        out += [
            case(f"cross_entropy {red}", lambda F, x, t, w, red=red: F.cross_entropy(
                x, t, w, ignore_index=0, reduction=red, label_smoothing=0.2), [x], [t, cw]),
            case(f"nll_loss {red}", lambda F, x, t, w, red=red: F.nll_loss(
                x, t, w, ignore_index=0, reduction=red), [x], [t, cw]),
            case(f"mse_loss {red}", lambda F, x, t, red=red: F.mse_loss(x, t, reduction=red),
                 [x, rng.standard_normal((4, 5))]),
            case(f"bce_with_logits {red}", lambda F, x, t, w, pw, red=red:
                 F.binary_cross_entropy_with_logits(x, t, w, reduction=red, pos_weight=pw),
                 [x, rng.uniform(0, 1, (4, 5))], [rng.uniform(0.5, 2, (4, 5)), cw]),
        ]
    x4, t4 = rng.standard_normal((2, 3, 2, 2)), rng.integers(0, 3, (2, 2, 2))
    return out + [
        case("cross_entropy plain 4-d", lambda F, x, t: F.cross_entropy(x, t), [x4], [t4]),
        case("cross_entropy 1-d", lambda F, x, t: F.cross_entropy(x, t, label_smoothing=0.1),
             [x[0]], [np.array(3)]),
        case("nll_loss 4-d", lambda F, x, t: F.nll_loss(x, t, reduction="sum"), [x4], [t4]),
        case("bce_with_logits plain", lambda F, x, t: F.binary_cross_entropy_with_logits(x, t),
             [x, rng.uniform(0, 1, (4, 5))]),
        case("mse_loss broadcast", lambda F, x, t: F.mse_loss(x, t.expand(4, 5)),
             [x, rng.standard_normal((1, 5))]),
    ]


def conv_cases(rng):
    x = rng.standard_normal((2, 4, 6, 5))
    r = rng.standard_normal
    return [
        case("conv2d", lambda F, x, w, b: F.conv2d(x, w, b, 1, 1), [x, r((3, 4, 3, 3)), r(3)]),
        case("conv2d stride dilation groups", lambda F, x, w, b: F.conv2d(
            x, w, b, 2, (1, 0), (1, 2), 2), [x, r((6, 2, 3, 2)), r(6)]),
        case("conv2d 1x1 unbatched", lambda F, x, w: F.conv2d(x, w), [x[0], r((5, 4, 1, 1))]),
        case("conv2d channels_last", lambda F, x, w: F.conv2d(channels_last(x), w, None, 1, 1),
             [x, r((3, 4, 3, 3))]),
        case("conv_transpose2d", lambda F, x, w, b: F.conv_transpose2d(x, w, b, 2, 1, 1),
             [x, r((4, 3, 3, 3)), r(3)]),
        case("conv_transpose2d groups dilation", lambda F, x, w: F.conv_transpose2d(
            x, w, None, (2, 1), (0, 1), 0, 2, 2), [x, r((4, 1, 2, 3))]),
    ]


def conv_algo_cases(rng):
    """cltensor's algorithms and its fused relu (torch's side: the plain op)."""
    x, w = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3))
    return [
        case(f"conv2d {algo}", lambda F, x, w, algo=algo: F.conv2d(x, w, padding=1, algo=algo),
             [x, w], ref=lambda F, x, w: F.conv2d(x, w, padding=1))
        for algo in ("im2col", "winograd")] + [
        case("conv2d fused relu", lambda F, x, w: F.conv2d(x, w, padding=1, relu=True), [x, w],
             ref=lambda F, x, w: F.relu(F.conv2d(x, w, padding=1)))]


FAMILIES = {"activations": activation_cases, "softmax": softmax_cases, "pooling": pool_cases,
            "interpolate": interpolate_cases, "normalization": norm_cases, "losses": loss_cases,
            "convolution": conv_cases, "convolution algorithms": conv_algo_cases}


# ---- checks -------------------------------------------------------------------------------------

def check_recorded(cl, c, rng):
    """First-order backward records no graph; under create_graph=True the same gradient comes
    with a grad_fn, and differentiating it along a random direction d agrees with central
    differences of the first-order gradient: <r, (g(x + eps d) - g(x - eps d)) / (2 eps)>."""
    v = rng.standard_normal(_call(cl, c, [cl.tensor(a) for a in c.inputs]).shape)
    d = [rng.standard_normal(a.shape) for a in c.inputs]
    r = [rng.standard_normal(a.shape) for a in c.inputs]

    def first(arrays, create_graph=False):
        xs = [cl.tensor(a, True) for a in arrays]
        loss = _loss(cl, _call(cl, c, xs), v)
        before = Node.recorded
        gs = cl.autograd.grad(loss, xs, create_graph=create_graph, allow_unused=True)
        if not create_graph:
            assert Node.recorded == before and all(g is None or g.grad_fn is None for g in gs), \
                f"{c.name}: first-order backward recorded a graph"
        return xs, gs

    _, plain = first(c.inputs)
    xs, recorded = first(c.inputs, create_graph=True)
    assert recorded[0].grad_fn is not None, f"{c.name}: the recorded gradient has no grad_fn"
    for got, want in zip(_numpy(cl, recorded, c.inputs), _numpy(cl, plain, c.inputs)):
        assert_close(got, want, rtol=RTOL, atol=1e-13)
    second = cl.autograd.grad(_dot(cl, recorded, r), xs, allow_unused=True)
    analytical = sum(float((h * e).sum()) for h, e in zip(_numpy(cl, second, c.inputs), d))
    shifted = [first([a + s * FD_EPS * e for a, e in zip(c.inputs, d)])[1] for s in (1, -1)]
    plus, minus = (_numpy(cl, gs, c.inputs) for gs in shifted)
    numerical = sum(float(((p - m) * w).sum()) for p, m, w in zip(plus, minus, r)) / (2 * FD_EPS)
    scale = max(abs(numerical), np.sqrt(sum(float((h * h).sum()) for h in
                                            _numpy(cl, second, c.inputs))))
    assert abs(analytical - numerical) <= FD_RTOL * scale + 1e-9, \
        f"{c.name}: second derivative {analytical!r} vs finite differences {numerical!r}"


def derivatives(lib, c, v, u, order):
    """[first, second, ...]: the gradients (over the inputs) of sum(v y + y^2 / 2), then each
    of the next the gradient of sum(u * the one before)."""
    xs = [lib.tensor(a, True) for a in c.inputs]
    scalar = _loss(lib, _call(lib, c, xs), v)
    out = []
    for k in range(order):
        grads = lib.autograd.grad(scalar, xs, create_graph=k + 1 < order, allow_unused=True)
        if k + 1 < order and not lib.is_torch:
            assert grads[0].grad_fn is not None, f"{c.name}: order {k + 1} has no grad_fn"
        out.append(_numpy(lib, grads, c.inputs))
        scalar = _dot(lib, grads, u)
    return out


def check_torch(cl, th, c, rng, order=2):
    v = rng.standard_normal(_call(th, c, [th.tensor(a) for a in c.inputs]).shape)
    u = [rng.standard_normal(a.shape) for a in c.inputs]
    got, want = derivatives(cl, c, v, u, order), derivatives(th, c, v, u, order)
    for k, (gs, ws) in enumerate(zip(got, want)):
        for i, (g, w) in enumerate(zip(gs, ws)):
            scale = max(np.abs(w).max(), 1.0)
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=RTOL * scale,
                                       err_msg=f"{c.name}: order {k + 1}, input {i}")


# ---- tests --------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_recorded_backward_by_finite_differences(cl, rng, family):
    for c in FAMILIES[family](rng):
        check_recorded(cl, c, rng)


@pytest.mark.parametrize("family", FAMILIES)
def test_second_derivatives_match_torch(cl, th, rng, family):
    for c in FAMILIES[family](rng):
        check_torch(cl, th, c, rng)


def _batch_norm_ref(F, x, w, b, m, v):
    """Training batch norm as tensor ops. NOTE: torch's own batch_norm (and layer_norm) gives
    other third derivatives than this composite (torch 2.x; the second ones agree)."""
    dims, shape = (0, 2, 3), (1, -1, 1, 1)
    c = x - x.mean(dims, keepdim=True)
    y = c * ((c * c).mean(dims, keepdim=True) + 1e-5).rsqrt()
    return y * w.reshape(shape) + b.reshape(shape)


def test_third_derivatives_match_torch(cl, th, rng):
    x = rng.standard_normal((2, 3, 2, 2))
    picked = {"sigmoid", "mish", "gelu tanh", "softplus", "softmax", "log_softmax",
              "local_response_norm", "batch_norm train", "cross_entropy mean",
              "bce_with_logits sum", "conv2d stride dilation groups",
              "conv_transpose2d groups dilation"}  # NOTE: torch fails with an output_padding
    cases = [c for family in FAMILIES.values() for c in family(rng) if c.name in picked]
    assert len(cases) == len(picked)
    for c in cases:
        if c.name == "batch_norm train":
            c.ref = _batch_norm_ref
    cases.append(case("sigmoid of max_pool2d", lambda F, x: F.sigmoid(F.max_pool2d(x, 2, 1)),
                      [x]))
    for c in cases:
        check_torch(cl, th, c, rng, order=3)


def _seeded(fn, *args):
    cltensor.manual_seed(7)
    return fn(*args)


def dropout_cases(device, rng):
    """The mask is fixed (the same seed each call): torch's side multiplies by it."""
    x = rng.uniform(0.5, 2.0, (3, 4, 2, 2)) * rng.choice([-1, 1], (3, 4, 2, 2))
    cases = []
    for name, op in (("dropout", F.dropout), ("dropout2d", F.dropout2d)):
        pattern = _seeded(op, cltensor.ones(x.shape, dtype=cltensor.float64, device=device), 0.4)
        assert 0 < (pattern.numpy() == 0).sum() < x.size
        cases.append(case(name, lambda F, x, m, op=op: _seeded(op, x, 0.4), [x],
                          [pattern.numpy()], ref=lambda F, x, m: x * m))
    return cases


def test_dropout_by_finite_differences(cl, rng, device):
    for c in dropout_cases(device, rng):
        check_recorded(cl, c, rng)


def test_dropout_matches_torch(cl, th, rng, device):
    for c in dropout_cases(device, rng):
        check_torch(cl, th, c, rng)


def test_full_finite_difference_jacobians(cl, rng):
    """gradcheck (every element perturbed) of the recorded gradient, for a few ops."""
    x = cl.tensor(rng.standard_normal((1, 2, 3, 3)), True)
    w = cl.tensor(rng.standard_normal((2, 2, 3, 3)), True)

    def grad_of(fn):
        def first(*xs):
            with cltensor.enable_grad():
                xs = [t if t.requires_grad else t.detach().requires_grad_() for t in xs]
                y = fn(*xs)
                return cltensor.autograd.grad((y * y * y).sum(), xs, create_graph=True)
        return first
    gradcheck(grad_of(lambda x, w: F.conv2d(x, w, padding=1)), [x, w])
    gradcheck(grad_of(lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1)), [x, w])
    gradcheck(grad_of(lambda x: F.log_softmax(F.avg_pool2d(x, 2, 1), 1)), [x])
    gradcheck(grad_of(lambda x: F.batch_norm(x, None, None, training=True)), [x])


def test_wgan_gradient_penalty_matches_torch(cl, th, rng):
    """A gradient penalty (WGAN-GP) through conv, batch norm, leaky relu and pooling: the
    penalty's parameter gradients against torch's."""
    x = rng.standard_normal((2, 2, 6, 6))
    w1, w2 = rng.standard_normal((4, 2, 3, 3)) * 0.5, rng.standard_normal((1, 4, 3, 3)) * 0.5

    def critic(F, x, w1, w2):
        h = F.leaky_relu(F.batch_norm(F.conv2d(x, w1, padding=1), None, None, training=True),
                         0.2)
        return F.adaptive_avg_pool2d(F.conv2d(F.max_pool2d(h, 2), w2, padding=1), 1).sum()

    def penalty(lib):
        xs = [lib.tensor(a, True) for a in (x, w1, w2)]
        (gx,) = lib.autograd.grad(critic(lib.F, *xs), xs[:1], create_graph=True)
        pen = ((gx * gx).sum() - 1) ** 2
        return [lib.numpy(g) for g in lib.autograd.grad(pen, xs[1:])]
    for got, want in zip(penalty(cl), penalty(th)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


KERNEL_BACKWARDS = [("conv.function", "backward"), ("ops.activation", "_backward"),
                    ("ops.pool", "max_pool2d_backward"), ("ops.pool", "avg_pool2d_backward"),
                    ("ops.softmax", "softmax_backward"), ("ops.resample", "upsample_backward"),
                    ("ops.norm", "batch_norm_backward"), ("ops.softmax", "xent_backward")]
RECORDED_BACKWARDS = [("nn.functional.pooling", "_scattered"),
                      ("nn.functional.normalization", "_batch_norm_grads"),
                      ("nn.functional.loss", "_target_weights"), ("conv.function", "recorded_grads")]


def test_first_order_backward_runs_the_kernels(cl, rng, monkeypatch):
    """Without create_graph the backward passes launch their kernels, as before: each launcher
    of KERNEL_BACKWARDS is called, none of the recorded forms (RECORDED_BACKWARDS, _Adjoint),
    and no node is recorded."""
    import importlib
    calls = set()

    def counted(name, raw):
        def launcher(*args, **kwargs):
            calls.add(name)
            return raw(*args, **kwargs)
        return launcher

    def forbidden(name):
        def recorded(*args, **kwargs):
            raise AssertionError(f"{name} ran in a first-order backward")
        return recorded

    for path, name in KERNEL_BACKWARDS:
        module = importlib.import_module(f"cltensor.{path}")
        monkeypatch.setattr(module, name, counted(name, getattr(module, name)))
    for path, name in RECORDED_BACKWARDS:
        monkeypatch.setattr(importlib.import_module(f"cltensor.{path}"), name, forbidden(name))
    monkeypatch.setattr(F._Adjoint, "apply", forbidden("_Adjoint.apply"))
    x = cl.tensor(rng.standard_normal((2, 3, 4, 4)), True)
    w = cl.tensor(rng.standard_normal((3, 3, 3, 3)), True)
    y = F.softmax(F.max_pool2d(F.gelu(F.conv2d(x, w, padding=1)), 2), 1)
    y = F.interpolate(F.avg_pool2d(y, 2, 1, 1), scale_factor=2, mode="bilinear")
    y = F.batch_norm(y, None, None, training=True)
    loss = F.cross_entropy(y.sum(3), cltensor.zeros((2, 6), dtype=cltensor.int64,
                                                    device=x.device))
    before = Node.recorded
    gx, gw = cltensor.autograd.grad(loss, [x, w])
    assert Node.recorded == before
    assert gx.grad_fn is None and gw.grad_fn is None and not gx.requires_grad
    assert calls == {name for _, name in KERNEL_BACKWARDS}
