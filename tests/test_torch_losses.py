"""Losses on the "opencl" device (cltensor/torch/loss_ops.py): mse, smooth L1, Huber, binary
cross entropy and cross entropy over images (nll_loss2d), forward and backward, each reduction,
against CPU torch in float64, with nothing run through the CPU fallback."""
import pytest

from test_torch_device import ct, ocl, torch  # noqa: F401
from torch.nn import functional as F  # noqa: E402

pytestmark = pytest.mark.usefixtures("ocl")
REDUCTIONS = ("mean", "sum", "none")


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")


def _check(fn, *args, grads=(0,)):
    """fn on CPU and on opencl (float64), its value and the gradients of the args in `grads`."""
    gen = torch.Generator().manual_seed(0)
    sides = []
    for device in ("cpu", "opencl"):
        xs = [x.detach().to(device).requires_grad_(i in grads) for i, x in enumerate(args)]
        out = fn(*xs)
        out.backward(torch.randn(out.shape, generator=gen.manual_seed(1), dtype=out.dtype,
                                 device="cpu").to(device))
        sides.append((out, [x.grad for i, x in enumerate(xs) if i in grads]))
    (want, want_grads), (got, got_grads) = sides
    assert got.device.type == "opencl"
    torch.testing.assert_close(got.cpu(), want, rtol=1e-10, atol=1e-12)
    for g, w in zip(got_grads, want_grads):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-10, atol=1e-12)


def _randn(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape)),
                       dtype=torch.float64)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_regression_losses(reduction):
    x, t = _randn(3, 4), _randn(3, 4) * 2
    _check(lambda a, b: F.mse_loss(a, b, reduction=reduction), x, t, grads=(0, 1))
    for beta in (0.5, 0.0):
        _check(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=beta), x, t,
               grads=(0, 1))
    _check(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=0.7), x, t, grads=(0, 1))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction):
    p = torch.tensor([[0.0, 1.0, 0.5, 0.2], [0.9, 0.01, 0.3, 0.7]], dtype=torch.float64)
    t = torch.tensor([[1.0, 0.0, 0.5, 0.0], [1.0, 1.0, 0.25, 0.7]], dtype=torch.float64)
    w = torch.tensor([0.5, 2.0, 1.0, 0.0], dtype=torch.float64)
    _check(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction), p, t)
    _check(lambda a, b, c: F.binary_cross_entropy(a, b, c.expand(2, 4), reduction=reduction),
           p, t, w)


@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan")])
def test_binary_cross_entropy_refuses_non_probabilities(bad):
    x = torch.tensor([0.5, bad], device="opencl")
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(x, torch.ones(2, device="opencl"))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_over_images(reduction):
    """(N, C, H, W) scores reach nll_loss2d (and (N, C, L) too, reshaped by torch)."""
    scores, target = _randn(2, 3, 4, 5), torch.randint(0, 3, (2, 4, 5))
    target[0, 0, 0] = -100  # ignore_index
    weight = torch.tensor([0.2, 1.0, 3.0], dtype=torch.float64)
    _check(lambda s, t: F.cross_entropy(s, t, reduction=reduction), scores, target)
    _check(lambda s, t, w: F.cross_entropy(s, t, weight=w, reduction=reduction), scores, target,
           weight)
    _check(lambda s, t: F.cross_entropy(s, t, reduction=reduction), _randn(2, 3, 7),
           torch.randint(0, 3, (2, 7)))
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(scores.to("opencl"), (target + 5).to("opencl"))


OUT_FORMS = [("mse_loss", "out", ()), ("smooth_l1_loss", "out", (0.5,)),
             ("huber_loss", "out", (0.7,)), ("binary_cross_entropy", "out", (None,)),
             ("mse_loss_backward", "grad_input", ()), ("smooth_l1_loss_backward", "grad_input", (0.5,)),
             ("huber_loss_backward", "out", (0.7,)),
             ("binary_cross_entropy_backward", "grad_input", (None,))]


@pytest.mark.parametrize("name,overload,params", OUT_FORMS, ids=[f[0] for f in OUT_FORMS])
def test_out_forms(name, overload, params):
    """The out= overloads write the functional form's result into the given tensor."""
    x = torch.rand(3, 4, dtype=torch.float64) * 0.9 + 0.05
    t = torch.rand(3, 4, dtype=torch.float64)
    backward = name.endswith("_backward")
    # the reduction (none) precedes the other parameters, except in binary_cross_entropy's
    head = (torch.randn(3, 4, dtype=torch.float64),) if backward else ()
    args = (*head, x, t, *params, 0) if "binary" in name else (*head, x, t, 0, *params)
    op = getattr(torch.ops.aten, name)
    want = op.default(*args)
    key = "grad_input" if overload == "grad_input" or backward else "out"
    out = torch.full((3, 4), float("nan"), dtype=torch.float64, device="opencl")
    got = getattr(op, overload)(*[a.to("opencl") if isinstance(a, torch.Tensor) else a
                                  for a in args], **{key: out})
    assert got is out
    torch.testing.assert_close(out.cpu(), want, rtol=1e-10, atol=1e-12)


# ---- margin losses over classes ----------------------------------------------------------------
def _scores(dtype=torch.float64):
    return _randn(5, 7).to(dtype)


_CLASSES = torch.tensor([3, 0, 6, 6, 2])
# each row's target classes, ended by its first -1 (a class repeated, none listed, all listed)
_LABELS = torch.tensor([[3, 0, -1, 1, 2, 2, 2], [1, 1, -1, 0, 0, 0, 0], [6, 5, 4, 3, 2, 1, 0],
                        [-1, 2, 3, 0, 0, 0, 0], [2, 4, -1, 5, 0, 0, 0]])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss(reduction, p):
    w = _randn(7).abs() + 0.1
    for margin, weight in ((1.0, None), (0.7, w)):
        _check(lambda a, t: F.multi_margin_loss(a, t, p, margin,
                                                None if weight is None else weight.to(a.device),
                                                reduction=reduction), _scores(), _CLASSES)
    _check(lambda a, t: F.multi_margin_loss(a, t, p, reduction=reduction), _scores()[1],
           _CLASSES[1])  # one sample: (C,) scores and a 0-d target


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_margin_loss(reduction):
    _check(lambda a, t: F.multilabel_margin_loss(a, t, reduction=reduction), _scores(), _LABELS)
    _check(lambda a, t: F.multilabel_margin_loss(a, t, reduction=reduction), _scores()[0],
           _LABELS[0])


def test_margin_losses_float32_empty_batch_and_is_target():
    x, w = _scores(torch.float32), torch.rand(7, generator=torch.Generator().manual_seed(3))
    for fn in (lambda a: F.multi_margin_loss(a, _CLASSES.to(a.device), 2, 0.5, w.to(a.device)),
               lambda a: F.multilabel_margin_loss(a, _LABELS.to(a.device))):
        want_x, got_x = x.clone().requires_grad_(), x.to("opencl").requires_grad_()
        want, got = fn(want_x), fn(got_x)
        want.backward(), got.backward()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got_x.grad.cpu(), want_x.grad, rtol=1e-5, atol=1e-6)
    empty = torch.zeros(0, 7, dtype=torch.float64)
    _check(lambda a, t: F.multi_margin_loss(a, t, reduction="none"), empty,
           _CLASSES[:0])
    _check(lambda a, t: F.multilabel_margin_loss(a, t, reduction="none"), empty, _LABELS[:0])
    loss, is_target = torch.ops.aten.multilabel_margin_loss_forward(x.to("opencl"),
                                                                     _LABELS.to("opencl"), 1)
    want_loss, want_is_target = torch.ops.aten.multilabel_margin_loss_forward(x, _LABELS, 1)
    assert torch.equal(is_target.cpu(), want_is_target)


def test_margin_losses_out_forms():
    x, ocl_x = _scores(), _scores().to("opencl")
    t, lab = _CLASSES.to("opencl"), _LABELS.to("opencl")
    nan = lambda *shape: torch.full(shape, float("nan"), dtype=torch.float64, device="opencl")
    aten = torch.ops.aten
    out = nan()
    aten.multi_margin_loss.out(ocl_x, t, 2, 0.5, None, 2, out=out)
    torch.testing.assert_close(out.cpu(), aten.multi_margin_loss(x, _CLASSES, 2, 0.5, None, 2))
    g, gx = torch.tensor(0.7, dtype=torch.float64), nan(5, 7)
    aten.multi_margin_loss_backward.grad_input(g.to("opencl"), ocl_x, t, 1, 1.0, None, 1,
                                               grad_input=gx)
    torch.testing.assert_close(gx.cpu(), aten.multi_margin_loss_backward(g, x, _CLASSES, 1, 1.0))
    out, marks = nan(5), nan(5, 7)
    aten.multilabel_margin_loss_forward.output(ocl_x, lab, 0, output=out, is_target=marks)
    want, want_marks = aten.multilabel_margin_loss_forward(x, _LABELS, 0)
    torch.testing.assert_close(out.cpu(), want)
    assert torch.equal(marks.cpu(), want_marks)
    gx = nan(5, 7)
    aten.multilabel_margin_loss_backward.grad_input(g.to("opencl"), ocl_x, lab, 2, marks,
                                                    grad_input=gx)
    torch.testing.assert_close(gx.cpu(), aten.multilabel_margin_loss_backward(
        g, x, _LABELS, 2, want_marks))


def test_margin_losses_refuse_bad_targets():
    x = _scores().to("opencl")
    with pytest.raises(RuntimeError, match="target out of range"):
        F.multi_margin_loss(x, torch.tensor([0, 1, 7, 2, 2]).to("opencl"))
    with pytest.raises(RuntimeError, match="'target' is out of range"):
        F.multilabel_margin_loss(x, torch.full((5, 7), 7).to("opencl"))
    with pytest.raises(RuntimeError):
        F.multi_margin_loss(x, _CLASSES[:3].to("opencl"))
