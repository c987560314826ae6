"""Autograd: gradients of tensor ops by finite differences, and the engine's rules."""
import numpy as np
import pytest

import cltensor as ct
from cltensor.testing import assert_close, gradcheck


@pytest.fixture
def f64(device):
    if not device.has_fp64:
        pytest.skip(f"{device} has no float64: finite-difference checks need it")
    return lambda a: ct.from_numpy(np.asarray(a, np.float64), device=device).requires_grad_()


def _r(rng, *shape, positive=False):
    a = rng.uniform(-1.5, 1.5, size=shape)
    return np.abs(a) + 0.3 if positive else a


UNARY_POS = ["log", "sqrt", "rsqrt", "reciprocal", "log1p", "log2", "log10"]
UNARY = ["exp", "expm1", "sin", "cos", "tanh", "sigmoid", "square", "abs", "relu", "neg", "tan",
         "sinh", "cosh", "asin", "acos", "atan", "erf", "erfc", "exp2"]


def test_unary_gradients(device, rng, f64):
    for name in UNARY + UNARY_POS:
        a = _r(rng, 3, 4, positive=name in UNARY_POS)
        x = f64(a * 0.6 if name in ("asin", "acos") else a)  # inside (-1, 1)
        gradcheck(getattr(ct, name), [x])
        gradcheck(lambda t: getattr(t, name)(), [x])


def test_gradcheck_fails_on_wrong_or_nan_gradients(device, rng, f64):
    """The finite-difference check itself: a wrong gradient and NaN on either side fail."""
    x = f64(_r(rng, 2, 3))

    class Wrong(ct.Function):
        @staticmethod
        def forward(ctx, t, scale):
            ctx.scale = scale
            return t * 2

        @staticmethod
        def backward(ctx, g):
            return g * ctx.scale, None
    assert gradcheck(lambda t: Wrong.apply(t, 2.0), [x])
    with pytest.raises(AssertionError, match="gradcheck: input 0"):
        gradcheck(lambda t: Wrong.apply(t, 3.0), [x])
    with pytest.raises(AssertionError, match="gradcheck: input 0"):
        gradcheck(lambda t: Wrong.apply(t, float("nan")), [x])
    with pytest.raises(AssertionError, match="gradcheck: input 0"):
        gradcheck(ct.asin, [x * 3])  # outside asin's domain: NaN both ways


def test_binary_gradients_with_broadcast_and_scalars(device, rng, f64):
    a, b = f64(_r(rng, 3, 1, 4)), f64(_r(rng, 5, 1) + 3)
    p = f64(_r(rng, 3, 1, 4, positive=True))
    cases = [
        lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
        lambda a, b: ct.add(a, b, alpha=2.5), lambda a, b: ct.sub(a, b, alpha=-0.5),
        lambda a, b: 2 - a * b, lambda a, b: 3 / b + a, lambda a, b: a ** 3 + b ** 2,
        lambda a, b: ct.maximum(a, b) + ct.minimum(a, b * 0.5),
        lambda a, b: ct.where(a > 0, a, b), lambda a, b: ct.where(b > 3, 2.0, a * b),
        lambda a, b: a.clamp(-0.5, 0.7) * b, lambda a, b: ct.clamp(a, min=b - 3.5),
        lambda a, b: a.rsub(b),
    ]
    for fn in cases:
        gradcheck(fn, [a, b])
    gradcheck(lambda p, b: p ** (b - 3), [p, b])
    gradcheck(lambda p: 2.0 ** p, [p])


def test_view_gradients(device, rng, f64):
    x = f64(_r(rng, 2, 3, 4))
    cases = [
        lambda x: x.view(6, 4) * 2, lambda x: x.reshape(4, -1).T, lambda x: x.permute(2, 0, 1),
        lambda x: x.transpose(0, 2)[1:, ::2], lambda x: x[:, None, 1:2].expand(2, 5, 1, 4),
        lambda x: x.unsqueeze(0).squeeze(), lambda x: x.flatten(1), lambda x: x[..., -1],
        lambda x: x.narrow(1, 1, 2), lambda x: x.select(2, 3), lambda x: x.unfold(2, 2, 1),
        lambda x: x.contiguous() + x.mT.contiguous().mT, lambda x: x[1][2],
        lambda x: x.clone() * x,
    ]
    for fn in cases:
        gradcheck(fn, [x])


def test_matmul_gradients(device, rng, f64):
    a, b = f64(_r(rng, 3, 4)), f64(_r(rng, 4, 5))
    v = f64(_r(rng, 4))
    ba, bb = f64(_r(rng, 2, 3, 4)), f64(_r(rng, 1, 4, 2))
    gradcheck(lambda a, b: a @ b, [a, b])
    gradcheck(lambda a, b: ct.mm(a.T.T, b), [a, b])
    gradcheck(lambda a, v: a @ v, [a, v])
    gradcheck(lambda v, b: v @ b, [v, b])
    gradcheck(lambda v: ct.dot(v, v * 2), [v])
    gradcheck(lambda x, y: x @ y, [ba, bb])
    gradcheck(lambda x, y: ct.bmm(x, y.expand(2, 4, 2)), [ba, bb])
    c = f64(_r(rng, 5))
    gradcheck(lambda c, a, b: ct.addmm(c, a, b, beta=0.5, alpha=2.0), [c, a, b])
    gradcheck(lambda a, v: ct.outer(v, a[0]), [a, v])


def test_accumulation_and_leaf_semantics(device):
    x = ct.tensor([1.0, 2.0, 3.0], device=device).requires_grad_()
    assert x.is_leaf and x.grad is None
    (x * 2).sum().backward()
    (x * x).sum().backward()
    assert_close(x.grad, [2 + 2, 2 + 4, 2 + 6])
    y = x * 3
    assert not y.is_leaf and y.requires_grad and y.grad_fn is not None
    assert "MulBackward" in repr(y.grad_fn)
    d = y.detach()
    assert not d.requires_grad and d.storage is y.storage
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad_(False)
    with pytest.raises(TypeError, match="floating point"):
        ct.tensor([1, 2], device=device).requires_grad_()
    with pytest.raises(RuntimeError, match="scalar outputs"):
        y.backward()
    with pytest.raises(ValueError, match="does not match"):
        y.backward(ct.ones(2, device=device))
    with pytest.raises(RuntimeError, match="does not require grad"):
        ct.ones(2, device=device).sum().backward()


def test_backward_twice_and_retain_graph(device):
    x = ct.tensor([0.5, 1.5], device=device).requires_grad_()
    y = ct.exp(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert_close(x.grad, 2 * np.exp([0.5, 1.5]), rtol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_no_grad_and_set_grad_enabled(device):
    x = ct.ones(3, device=device).requires_grad_()
    with ct.no_grad():
        y = x * 2
    assert not y.requires_grad and y.grad_fn is None
    with ct.set_grad_enabled(False):
        assert not (x + 1).requires_grad
    assert (x + 1).requires_grad

    @ct.no_grad()
    def f(t):
        return t * 3
    assert not f(x).requires_grad
    with ct.no_grad():
        with ct.enable_grad():
            assert (x * 1).requires_grad


def test_inplace_rules(device):
    x = ct.tensor([1.0, -2.0, 3.0], device=device).requires_grad_()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1)
    with ct.no_grad():
        x.mul_(2)  # allowed without recording
    assert_close(x, [2, -4, 6])
    # in-place on a non-leaf records the op and keeps gradients flowing
    y = x * 1
    y.relu_()
    y.mul_(3)
    y.sum().backward()
    assert_close(x.grad, [3, 0, 3])
    # a saved tensor modified in place is caught at backward
    x.grad = None
    z = x * 1
    w = z * z
    z.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        w.sum().backward()
    # setitem into a tensor that does not require grad makes it part of the graph
    buf = ct.zeros(2, 3, device=device)
    buf[1] = x * 2
    assert buf.requires_grad
    buf.sum().backward()
    assert_close(x.grad, [2, 2, 2])
    # setitem over part of a graph tensor: the overwritten part gets no gradient
    x.grad = None
    u = x * 1
    u[0] = 5.0
    (u * u).sum().backward()
    assert_close(x.grad, [0, -8, 12])


def test_inplace_ops_whose_backward_needs_the_input(device):
    """An in-place op on a graph tensor whose gradient needs the value it overwrites (sin_,
    pow_, clamp_, atan2_, mul_ by itself, a composite like logit_) gets the out-of-place op's
    gradients, first and second order: the op's own nodes keep a copy of the old value. A
    node recorded before the in-place op still refuses to backward through it."""
    try:
        import torch
    except ImportError:
        torch = None
    dtype = ct.float64 if device.has_fp64 else ct.float32
    x0 = np.array([0.3, -0.7, 1.1, 0.45])
    other = ct.tensor([0.5, -1.5, 2.0, -0.25], dtype=dtype, device=device)
    cases = {"sin": (lambda y: y.sin_(), lambda y: y.sin()),
             "pow": (lambda y: y.pow_(3), lambda y: y.pow(3)),
             "clamp": (lambda y: y.clamp_(min=-0.5), lambda y: y.clamp(min=-0.5)),
             "atan2": (lambda y: y.atan2_(other), lambda y: y.atan2(other)),
             "mul self": (lambda y: y.mul_(y), lambda y: y * y),
             "logit": (lambda y: y.sigmoid_().logit_(), lambda y: y.sigmoid().logit())}
    for name, (inplace, plain) in cases.items():
        grads = []
        for f in (inplace, plain):
            x = ct.tensor(x0, dtype=dtype, device=device).requires_grad_()
            y = x * 2
            out = f(y)
            (g,) = ct.autograd.grad((out * out).sum(), x, create_graph=True)
            (gg,) = ct.autograd.grad(g.sum(), x)
            grads.append((out.numpy(), g.detach().numpy(), gg.numpy()))
        for what, a, b in zip(("value", "gradient", "second gradient"), *grads):
            assert_close(a, b, rtol=1e-6, atol=1e-9), (name, what)
        if torch is not None:  # and torch's, from its out-of-place op
            tx = torch.tensor(x0, requires_grad=True)
            t_other = torch.tensor(other.numpy().astype(np.float64))
            tout = {"sin": torch.sin, "pow": lambda y: y ** 3,
                    "clamp": lambda y: y.clamp(min=-0.5), "atan2": lambda y: y.atan2(t_other),
                    "mul self": lambda y: y * y,
                    "logit": lambda y: y.sigmoid().logit()}[name](tx * 2)
            (tg,) = torch.autograd.grad((tout * tout).sum(), tx, create_graph=True)
            (tgg,) = torch.autograd.grad(tg.sum(), tx)
            for what, a, b in zip(("gradient", "second gradient"), grads[0][1:], (tg, tgg)):
                assert_close(a, b.detach().numpy(), rtol=1e-5, atol=1e-8), (name, what)
    x = ct.tensor(x0, dtype=dtype, device=device).requires_grad_()
    y = x * 2
    z = y.sin()  # saved y before the in-place op: modified afterwards, as torch refuses
    y.sin_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_autograd_grad_and_create_graph(device):
    x = ct.tensor([0.3, -0.7, 1.1], device=device).requires_grad_()
    y = (x ** 3).sum()
    (g,) = ct.autograd.grad(y, x, create_graph=True)
    assert_close(g, 3 * np.array([0.3, -0.7, 1.1]) ** 2, rtol=1e-6)
    assert x.grad is None  # grad() returns rather than accumulates
    g.sum().backward()
    assert_close(x.grad, 6 * np.array([0.3, -0.7, 1.1]), rtol=1e-6)
    with pytest.raises(RuntimeError, match="not used"):
        ct.autograd.grad((x * 2).sum(), [x, ct.ones(1, device=device).requires_grad_()])


def test_saved_output_keeps_its_history_under_create_graph(device):
    # exp saves its output; the second derivative flows through that saved output
    x = ct.tensor([0.3, -0.7, 1.1], device=device).requires_grad_()
    (g,) = ct.autograd.grad(x.exp().sum(), x, create_graph=True)
    g.sum().backward()
    assert_close(x.grad, np.exp([0.3, -0.7, 1.1]), rtol=1e-6)
    # sigmoid's second derivative: s(1 - s)(1 - 2s), through the saved s twice
    x.grad = None
    (g,) = ct.autograd.grad(x.sigmoid().sum(), x, create_graph=True)
    g.sum().backward()
    s = 1 / (1 + np.exp(-np.array([0.3, -0.7, 1.1])))
    assert_close(x.grad, s * (1 - s) * (1 - 2 * s), rtol=1e-5)


def test_leaf_grads_never_alias_other_tensors(device):
    a = ct.tensor([1.0, 2.0, 3.0], device=device).requires_grad_()
    b = ct.tensor([4.0, 5.0, 6.0], device=device).requires_grad_()
    g = ct.tensor([0.5, -1.0, 2.0], device=device)
    (a + b).backward(g)  # add hands the same gradient to both leaves
    a.grad.add_(1.0)
    assert_close(b.grad, [0.5, -1.0, 2.0])
    assert_close(g, [0.5, -1.0, 2.0])
    b.grad = None
    b.backward(g)  # the user's gradient reaches the leaf as it is
    b.grad.mul_(3.0)
    assert_close(g, [0.5, -1.0, 2.0])
    x = ct.tensor([[1.0, 2.0], [3.0, 4.0]], device=device).requires_grad_()
    y = x.reshape(4)
    y.retain_grad()
    (y * y).sum().backward()  # x's gradient is a view of y's
    x.grad.zero_()
    assert_close(y.grad, [2, 4, 6, 8])


def test_leaf_gradient_is_not_copied(device):
    """A gradient nothing else holds becomes .grad as it is (torch steals it too): backward
    launches the same kernels as autograd.grad, which accumulates nothing."""
    x = ct.randn(4, 5, device=device)
    w = ct.randn(5, 3, device=device).requires_grad_()
    with ct.profile() as returned:
        ct.autograd.grad((x @ w).relu().sum(), w)
    with ct.profile() as accumulated:
        (x @ w).relu().sum().backward()
    assert sum(c for _, c, _, _ in accumulated.table()) == sum(c for _, c, _, _ in returned.table())
    assert_close(w.grad, ct.autograd.grad((x @ w).relu().sum(), w)[0].numpy(), rtol=1e-6)


def test_retain_grad_for_non_leaf(device):
    x = ct.tensor([1.0, 2.0], device=device).requires_grad_()
    y = x * 2
    y.retain_grad()
    (y * y).sum().backward()
    assert_close(y.grad, [4, 8])
    assert_close(x.grad, [8, 16])


def test_tensor_hooks(device):
    """A hook sees the gradient w.r.t. its tensor and may replace it (leaf: before .grad takes
    it; non-leaf: before it flows on), hooks run in registration order, retain_grad keeps the
    hooked value, autograd.grad returns it, and remove() or a with block takes a hook out."""
    x = ct.tensor([1.0, 2.0], device=device).requires_grad_()
    seen = []
    hx = x.register_hook(lambda g: seen.append(("x", g.numpy().tolist())))
    x.register_hook(lambda g: g * 10)
    y = x * 2
    y.retain_grad()
    y.register_hook(lambda g: seen.append(("y", g.numpy().tolist())) or g + 1)
    y.register_hook(lambda g: g * 3)
    (y * y).sum().backward()
    # dL/dy = 2y = [4, 8] -> +1 -> *3 = [15, 27]; dL/dx = 2 * that = [30, 54] -> *10
    assert seen == [("y", [4.0, 8.0]), ("x", [30.0, 54.0])]
    assert_close(y.grad, [15, 27])
    assert_close(x.grad, [300, 540])
    hx.remove()
    (gx,) = ct.autograd.grad((x * x).sum(), [x])
    assert_close(gx, [20, 40])  # the remaining hook (*10) applies to autograd.grad too
    assert len(seen) == 2
    z = ct.tensor([1.0, -1.0], device=device).requires_grad_()
    with z.register_hook(lambda g: g * 0):
        (z * 5).sum().backward()
    (z * 5).sum().backward()
    assert_close(z.grad, [5, 5])


def test_tensor_hook_errors_and_post_accumulate(device):
    x = ct.tensor([1.0, 2.0], device=device)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        x.register_hook(lambda g: g)
    x.requires_grad_()
    with pytest.raises(TypeError, match="expected a callable"):
        x.register_hook(None)
    with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on "
                                           "non-leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    h = x.register_hook(lambda g: g[:1])
    with pytest.raises(RuntimeError, match=r"gradient's shape \(2,\), got \(1,\)"):
        (x * 2).sum().backward()
    h.remove()
    grads = []
    x.register_post_accumulate_grad_hook(lambda t: grads.append(t.grad.numpy().tolist()))
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    assert grads == [[2.0, 2.0], [5.0, 5.0]]  # each after its accumulation


def test_custom_function(device, rng, f64):
    class Cube(ct.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x * x * x * scale

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * ctx.scale * g, None

    x = f64(_r(rng, 4))
    gradcheck(lambda t: Cube.apply(t, 2.0), [x])
    y = Cube.apply(x, 1.0)
    assert y.grad_fn.name() == "CubeBackward"


def test_dtype_and_device_moves_are_differentiable(device, rng, f64):
    x = f64(_r(rng, 3))
    (x.float() * 2).double().sum().backward()
    assert x.grad.dtype == ct.float64
    assert_close(x.grad, [2, 2, 2])
    x.grad = None
    twin = ct.Device(device.index + "-twin", device.cl_device)
    y = (x.to(twin) * 3).sum()
    y.backward()
    assert x.grad.device is device
    assert_close(x.grad, [3, 3, 3])


def test_out_argument_with_grad_raises(device):
    x = ct.ones(2, device=device).requires_grad_()
    with pytest.raises(RuntimeError, match="out="):
        ct.add(x, 1, out=ct.empty(2, device=device))


def test_reduction_gradients(device, rng, f64):
    x = f64(_r(rng, 3, 4, 2))
    p = f64(_r(rng, 3, 4, positive=True))
    z = f64(np.array([[1.0, 0.0, 2.0], [0.5, -1.5, 0.0]]))  # zeros for prod
    cases = [
        (lambda x: x.sum(), x), (lambda x: x.sum(1), x), (lambda x: x.sum((0, 2), keepdim=True), x),
        (lambda x: x.mean(), x), (lambda x: x.mean(-1), x), (lambda x: x.prod(1), x),
        (lambda x: x.prod(), p), (lambda x: x.prod(1), z), (lambda x: x.prod(), z),
        (lambda x: x.max(), x), (lambda x: x.min(dim=1).values, x),
        (lambda x: x.max(0, keepdim=True)[0], x), (lambda x: x.amax((0, 1)), x),
        (lambda x: x.amin(-1, keepdim=True), x), (lambda x: x.var(1), x),
        (lambda x: x.std(), x), (lambda x: x.var(0, correction=0), x),
        (lambda x: x.norm(), x), (lambda x: x.norm(dim=1), x), (lambda x: x.norm(p=1), x),
        (lambda x: x.norm(p=3, dim=0), x), (lambda x: x.norm(p=float("inf")), x),
        (lambda x: ct.logsumexp(x, 1), x), (lambda x: ct.logsumexp(x, (0, 2), keepdim=True), x),
        (lambda x: x.cumsum(1), x), (lambda x: x.cumprod(0), p),
    ]
    for fn, arg in cases:
        gradcheck(fn, [arg])


def test_ties_share_the_gradient(device):
    x = ct.tensor([1.0, 3.0, 3.0, 2.0], device=device).requires_grad_()
    x.max().backward()
    assert_close(x.grad, [0, 0.5, 0.5, 0])
    y = ct.tensor([[1.0, 3.0, 3.0]], device=device).requires_grad_()
    y.max(dim=1).values.sum().backward()  # torch: the gradient goes to the index returned
    assert_close(y.grad, [[0, 1, 0]])


def test_shape_op_gradients(device, rng, f64):
    a, b = f64(_r(rng, 2, 3)), f64(_r(rng, 2, 1))
    c = f64(_r(rng, 2, 3))
    gradcheck(lambda a, b: ct.cat([a, b, a * 2], dim=1), [a, b])
    gradcheck(lambda a, c: ct.stack([a, c], dim=1), [a, c])
    gradcheck(lambda a: sum(p.sum() * (i + 1) for i, p in enumerate(a.split([1, 2], dim=1))), [a])
    gradcheck(lambda a: a.chunk(2, dim=0)[1] * 3, [a])
    gradcheck(lambda a: ct.pad(a, (1, 2, 0, 1), value=0.5), [a])
    gradcheck(lambda a: ct.pad(a, (-1, 1)), [a])
    gradcheck(lambda a: a.flip(1) * c, [a])
    gradcheck(lambda a: a.repeat(2, 1, 3), [a])
    gradcheck(lambda a: a.roll(1, 1), [a])


def test_indexing_gradients(device, rng, f64):
    x = f64(_r(rng, 4, 3))
    idx = ct.tensor([2, 0, 2, 3], device=device)
    mask = ct.from_numpy(np.array([[True, False, True], [False, False, True],
                                   [True, True, False], [False, True, False]]), device=device)
    src = f64(_r(rng, 2, 3))
    cases = [
        lambda x: x[idx], lambda x: x[:, [0, 2]], lambda x: x[mask], lambda x: x[idx, 1:],
        lambda x: x[[0, 3], [1, 1]], lambda x: ct.index_select(x, 1, idx[:2]),
        lambda x: x.gather(1, ct.tensor([[0, 0], [1, 2], [2, 1], [0, 2]], device=device)),
        lambda x: x.masked_fill(mask, 0.25), lambda x: x.masked_select(mask),
        lambda x: x.scatter(0, ct.tensor([[1, 2, 3]], device=device), 7.0),
    ]
    for fn in cases:
        gradcheck(fn, [x])
    sidx = ct.tensor([[0, 1, 3], [3, 2, 0]], device=device)
    gradcheck(lambda x, s: x.scatter_add(0, sidx, s), [x, src])
    gradcheck(lambda x, s: x.scatter(0, sidx, s), [x, src])

    def put(x, s):
        y = x * 1
        y[idx[:2]] = s
        return y
    gradcheck(put, [x, src])
    gradcheck(lambda x, s: ct.index_put(x, (idx[:2],), s, accumulate=True), [x, src])


def test_tril_triu_diag_gradients(device, rng, f64):
    x, batch, v = f64(_r(rng, 3, 4)), f64(_r(rng, 2, 3, 3)), f64(_r(rng, 3))
    cases = [(lambda x: x.tril(), x), (lambda x: x.tril(-1), x), (lambda x: ct.tril(x, 2), x),
             (lambda x: x.triu(), x), (lambda x: x.triu(1), x), (lambda x: ct.triu(x, -2), x),
             (lambda b: b.tril(1) * b.triu(-1).mT, batch),
             (lambda v: ct.diag(v), v), (lambda v: ct.diag(v, 2), v), (lambda v: v.diag(-1), v),
             (lambda x: ct.diag(x), x), (lambda x: x.diag(1), x), (lambda x: ct.diag(x.T, -2), x)]
    for fn, arg in cases:
        gradcheck(fn, [arg])

    def inplace(x):  # on a graph tensor: records tril (triu) and takes over its history
        y = x * 2
        return y.tril_(-1).triu_(-1) * x
    gradcheck(inplace, [x])
    assert (x * 1).tril_().grad_fn.name() == "TrilBackward"


def _grad_of(fn):
    """x -> the gradient of sum(fn(x) ** 3), recorded (create_graph=True): gradcheck on it
    checks fn's second derivatives by finite differences of its first (torch's gradgradcheck)."""
    def first(x):
        with ct.enable_grad():
            x = x if x.requires_grad else x.detach().requires_grad_()
            (g,) = ct.autograd.grad((fn(x) ** 3).sum(), x, create_graph=True)
        return g
    return first


def test_double_backward_through_views_pad_and_triangles(device, rng, f64):
    """Views' backward (zeros with the gradient in the viewed place), pad's and the triangles'
    record their own graph under create_graph=True, as torch's do."""
    x = f64(_r(rng, 3, 4))
    cases = [
        lambda x: x[1:, ::2], lambda x: x[None, -1], lambda x: x.narrow(1, 1, 2),
        lambda x: x.select(0, 2), lambda x: x.diagonal(1), lambda x: x.unfold(1, 2, 1),
        lambda x: x.chunk(2, 1)[1], lambda x: ct.pad(x, (1, -1, 0, 2)),
        lambda x: ct.nn.functional.pad(x[None], (2, 1), mode="reflect"),
        lambda x: x.tril(-1) + x.triu(2), lambda x: ct.diag(x, 1), lambda x: ct.diag(x[0], -1),
        lambda x: x.prod(1),
    ]
    for fn in cases:
        gradcheck(_grad_of(fn), [x])
    gradcheck(_grad_of(_grad_of(lambda x: x[1:, ::2])), [x])  # third order


def test_norm_gradients_at_zero_entries_match_torch(device, f64):
    """Tensor.norm's gradient where entries or whole norms are 0 (NaN before, from |0|^(p-2)):
    torch's values for every p, and no gradient for p = 0 (a count)."""
    torch = pytest.importorskip("torch")
    x = np.array([[0.0, 1.0, -2.0, 0.5], [0.0, 0.0, 0.0, 0.0], [3.0, -3.0, 0.0, 1.0]])
    for p in (0.5, 1, 1.5, 2, 3, -1, float("inf"), -float("inf")):
        a, b = f64(x).requires_grad_(), torch.tensor(x, requires_grad=True)
        (a.norm(p, 1) * f64(np.arange(1.0, 4.0))).sum().backward()
        (b.norm(p, 1) * torch.arange(1.0, 4.0, dtype=torch.float64)).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=0,
                                   err_msg=f"p={p}")
    a = f64(x).requires_grad_()
    a.norm(0, 1).sum().backward()
    assert a.grad is None


@pytest.mark.parametrize("k", [2, 3, 4, 5, 8])
def test_sum_of_adds_in_order(device, rng, f64, poisoned_bytes, k):
    """sum_of (few launches for many operands) gives ((t0 + t1) + t2) + ... bit for bit,
    contiguous, strided and broadcast views alike."""
    from cltensor.ops.elementwise import sum_of
    dtype = np.float64 if f64 else np.float32
    arrays = [rng.standard_normal((6, 129)) * 10.0 ** rng.integers(-3, 4) for _ in range(k)]
    ts = [ct.from_numpy(a.astype(dtype), device=device) for a in arrays]
    ts[1] = ct.from_numpy(arrays[1].T.astype(dtype), device=device).t()
    ts[-1] = ct.from_numpy(arrays[-1][:1].astype(dtype), device=device).expand(6, 129)
    want = ts[0]
    for t in ts[1:]:
        want = want + t
    np.testing.assert_array_equal(sum_of(ts).numpy(), want.numpy())


def test_gradients_of_many_uses_summed_in_few_launches(device, rng, poisoned_bytes, monkeypatch):
    """A tensor used six times (X * X twice) gets one gradient, their sum (float64 reference,
    and bit for bit the sum added one by one), from two launches rather than five; under
    create_graph the sum is recorded and differentiable."""
    from cltensor.autograd import engine
    x = rng.standard_normal(40)
    X = ct.from_numpy(x.astype(np.float32), device=device).requires_grad_()
    grads, launches = [], []
    for fused in (engine._FUSED_SUM_DTYPES, ()):
        monkeypatch.setattr(engine, "_FUSED_SUM_DTYPES", fused)
        X.grad = None
        y = (X * 2.0 + X.exp() + X.sin() + X * X + X.tanh()).sum()
        with ct.profile() as prof:
            y.backward()
        grads.append(X.grad.numpy())
        launches.append(len(prof.records()))
    want = 2 + np.exp(x) + np.cos(x) + 2 * x + 1 / np.cosh(x) ** 2
    assert_close(grads[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(grads[0], grads[1])
    assert launches[0] == launches[1] - 3, launches
    monkeypatch.undo()
    X.grad = None
    (g,) = ct.autograd.grad((X * X + X * 3.0 + X.sin()).sum(), X, create_graph=True)
    (gg,) = ct.autograd.grad(g.sum(), X)
    assert_close(gg.numpy(), 2.0 - np.sin(x), rtol=1e-5, atol=1e-5)
