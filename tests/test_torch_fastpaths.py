"""The "opencl" kernels' per-signature memos (Meta results, convolution and pooling plans): taken
for a signature seen before, so torch's checks and cltensor's parameter set-up run once; every
other signature (strided, broadcast, mixed dtypes, other devices) still goes through them, with
CPU torch's values."""
import numpy as np
import pytest

# torch (skipping when it is missing or too old) and the fixture making `device` opencl:0
from test_torch_device import ct, ocl, torch  # noqa: F401

import cltensor
from cltensor.torch import conv_ops, math_ops, nn_ops

pytestmark = pytest.mark.usefixtures("ocl")
OCL = "opencl"
F = torch.nn.functional


def _close(got, want):
    assert got.device.type == OCL and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-5,
                               atol=1e-5)


def _refuse(*args, **kwargs):
    raise AssertionError("the general path ran")


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_meta_checks_run_once_per_signature(monkeypatch):
    x, y = _randn(3, 4), _randn(3, 4, seed=1)
    xd, yd = x.to(OCL), y.to(OCL)
    _close(xd + yd, x + y)  # remembered
    monkeypatch.setattr(math_ops, "check_devices", _refuse)
    _close(xd + yd, x + y)  # the same signature: no check, no Meta pass
    with pytest.raises(AssertionError, match="general path"):
        xd + yd[:1]  # broadcast: another signature, checked


def test_meta_memo_keeps_the_device_check_and_scalar_types():
    xd = torch.arange(6).reshape(2, 3).to(OCL)
    _close(xd + xd, torch.arange(6).reshape(2, 3) * 2)
    with pytest.raises(RuntimeError, match="same device"):
        xd + torch.ones(2, 3, dtype=torch.int64)  # same shapes, a CPU operand
    # 1, 1.0 and True hash alike; each keeps its own promotion
    for scalar in (1, 1.0, True):
        _close(xd + scalar, torch.arange(6).reshape(2, 3) + scalar)


def test_signatures_of_lists_keep_their_element_types():
    """Lists of plain values are keyed by value and type (1, 1.0 and True promote apart);
    lists holding tensors by each tensor's metadata; and a list of ints stays its own key."""
    sig = math_ops.signature
    assert len({sig([1, 2]), sig([1.0, 2.0]), sig([True, 2]), sig((1, 2))}) == 4
    assert sig([1, None]) != sig([1, 0]) and sig([1, 2]) == sig([1, 2])
    a, b = torch.zeros(2, 3).to(OCL), torch.zeros(3, 2).to(OCL).t()
    assert sig([a]) != sig([b]) and sig([a, None]) == sig([torch.ones(2, 3).to(OCL), None])
    # int lists and float scalar lists on an int tensor: each keeps its own result dtype
    xi = torch.arange(4, dtype=torch.int64).reshape(2, 2)
    for scalars in ([1, 2], [1.5, 2.0]):
        got = torch._foreach_add([xi.to(OCL), xi.to(OCL)], scalars)
        for g, want in zip(got, torch._foreach_add([xi, xi], scalars)):
            _close(g, want)


def test_meta_memo_keeps_in_place_out_and_mixed_dtype_rules():
    x, y = _randn(2, 3), _randn(2, 3, seed=1)
    xi = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    xd, yd, xid = x.to(OCL), y.to(OCL), xi.to(OCL)
    for _ in range(2):  # a failing check is never remembered: it raises every time
        with pytest.raises(RuntimeError, match="can't be cast|not possible"):
            xid.add_(yd)
    _close(xid + yd, xi + y)  # int32 + float32 promotes, as on the CPU
    out = torch.empty(2, 3, device=OCL)
    for _ in range(2):
        torch.add(xd, yd, out=out)
        _close(out, x + y)
    xd.mul_(yd)
    _close(xd, x * y)


def _conv_operands(seed=0):
    return _randn(2, 3, 7, 7, seed=seed), _randn(4, 3, 3, 3, seed=seed + 1), _randn(4, seed=seed)


def test_convolution_plan_is_taken_and_other_forms_checked(monkeypatch):
    x, w, b = _conv_operands()
    xd, wd, bd = x.to(OCL), w.to(OCL), b.to(OCL)
    want = F.conv2d(x, w, b, padding=1)
    _close(F.conv2d(xd, wd, bd, padding=1), want)
    monkeypatch.setattr(conv_ops, "meta_result", _refuse)
    monkeypatch.setattr(conv_ops, "make_params", _refuse)
    _close(F.conv2d(xd, wd, bd, padding=1), want)  # planned: no checks, no parameter set-up
    strided = xd.transpose(2, 3)
    for form in (lambda: F.conv2d(strided, wd, bd, padding=1),
                 lambda: F.conv2d(xd, wd, bd, padding=1, stride=2),
                 lambda: F.conv2d(xd.double(), wd.double(), bd.double(), padding=1)):
        with pytest.raises(AssertionError, match="general path"):
            form()
    monkeypatch.undo()
    _close(F.conv2d(strided, wd, bd, padding=1), F.conv2d(x.transpose(2, 3), w, b, padding=1))
    _close(F.conv2d(xd.double(), wd.double(), bd.double(), stride=2),
           F.conv2d(x.double(), w.double(), b.double(), stride=2))
    with pytest.raises(RuntimeError, match="same device"):
        F.conv2d(xd, w, bd, padding=1)  # a CPU weight: another signature, torch's error


def test_convolution_backward_plan_is_taken(monkeypatch):
    x, w, b = (t.requires_grad_() for t in _conv_operands(2))
    leaves = [t.detach().to(OCL).requires_grad_() for t in (x, w, b)]
    F.conv2d(*leaves, padding=1).square().sum().backward()
    monkeypatch.setattr(conv_ops, "make_params", _refuse)
    for t in leaves:
        t.grad = None
    F.conv2d(*leaves, padding=1).square().sum().backward()  # the plan's parameters
    F.conv2d(x, w, b, padding=1).square().sum().backward()
    for got, want in zip(leaves, (x, w, b)):
        _close(got.grad, want.grad)
    with pytest.raises(AssertionError, match="general path"):  # not planned: set up
        F.conv2d(leaves[0][:, :, 1:], leaves[1], None).sum().backward()


def test_max_pool_plans_are_taken_with_torchs_values(monkeypatch):
    x = _randn(2, 3, 9, 9, seed=3).requires_grad_()
    xd = x.detach().to(OCL).requires_grad_()
    F.max_pool2d(xd, 3, 2, 1).sum().backward()
    monkeypatch.setattr(nn_ops, "meta_result", _refuse)
    monkeypatch.setattr(nn_ops.pool, "window", _refuse)
    xd.grad = None
    got = F.max_pool2d(xd, 3, 2, 1)
    (got * got).sum().backward()
    want = F.max_pool2d(x, 3, 2, 1)
    (want * want).sum().backward()
    _close(got, want)
    _close(xd.grad, x.grad)
    with pytest.raises(AssertionError, match="general path"):
        F.max_pool2d(xd, 3, 2, 1, ceil_mode=True)
    monkeypatch.undo()
    _close(F.max_pool2d(xd[..., ::2], 2, ceil_mode=True), F.max_pool2d(x[..., ::2], 2, ceil_mode=True))


def test_pointwise_and_products_skip_cltensors_autograd_layer(monkeypatch):
    from cltensor.autograd import engine
    x, y, m = _randn(3, 4), _randn(3, 4, seed=1), _randn(4, 5, seed=2)
    xd, yd, md = x.to(OCL), y.to(OCL), m.to(OCL)
    monkeypatch.setattr(engine, "needs_grad", _refuse)  # what cltensor's autograd layer asks
    got = [torch.add(xd, yd, alpha=2), torch.relu(xd), xd.mm(md), xd.sum(1), torch.cat([xd, yd]),
           xd.index_select(1, torch.tensor([2, 0]).to(OCL))]
    monkeypatch.undo()
    for g, want in zip(got, [torch.add(x, y, alpha=2), torch.relu(x), x.mm(m), x.sum(1),
                             torch.cat([x, y]), x.index_select(1, torch.tensor([2, 0]))]):
        _close(g, want)


def _launches(fn):
    """fn's result and the names of the kernels it launched."""
    with cltensor.profile() as prof:
        res = fn()
    return res, [name for name, *_ in prof.events]


# (in-place or out= call, CPU dtypes of self and the operand, launches): same and mixed dtypes
# (an operand of another dtype is cast first: one launch more), a comparison written into a
# float tensor (true as 1, not a vector compare's -1), 16-bit self
IN_PLACE = [
    (lambda x, y: x.add_(y, alpha=2), torch.float32, torch.float32, 1),
    (lambda x, y: x.mul_(y), torch.float32, torch.float64, 2),
    (lambda x, y: x.sub_(y), torch.float64, torch.float32, 2),
    (lambda x, y: x.lt_(y), torch.float32, torch.float32, 1),
    (lambda x, y: x.div_(y), torch.float16, torch.float32, 2),
    (lambda x, y: torch.maximum(x, y, out=x), torch.bfloat16, torch.bfloat16, 1),
    (lambda x, y: torch.mul(y, 3, out=x), torch.float32, torch.float32, 1),
    (lambda x, y: x.bitwise_xor_(y), torch.int32, torch.int32, 1),
    (lambda x, y: x.clamp_(max=y), torch.float32, torch.float32, 1),
    (lambda x, y: x.addcmul_(y, y, value=-0.5), torch.float32, torch.float32, 1),
    (lambda x, y: x.addcdiv_(x, y, value=3), torch.float64, torch.float64, 1),
    (lambda x, y: x.lerp_(y, 0.3), torch.bfloat16, torch.bfloat16, 1),
    (lambda x, y: torch.lerp(x, y, 0.5, out=x), torch.float16, torch.float16, 1),
    (lambda x, y: x.lerp_(y, (y / 8).sigmoid()), torch.float32, torch.float32, 3),
]


@pytest.mark.parametrize("case", range(len(IN_PLACE)))
def test_in_place_and_out_forms_write_in_one_launch(case):
    """An in-place or out= pointwise op writes its result straight into the tensor, converted to
    its dtype, in one kernel launch (no result tensor copied in), with CPU torch's values."""
    fn, xdt, ydt, launches = IN_PLACE[case]
    shape = (33, 70)  # more than one vector, with a tail
    x = (_randn(*shape) * 8).to(xdt)
    y = (_randn(*shape, seed=1) * 8).to(ydt)
    if not xdt.is_floating_point:
        y = y + 1
    xd, yd = x.to(OCL), y.to(OCL)
    fn(xd, yd)  # builds the kernels
    xd = x.to(OCL)
    res, names = _launches(lambda: fn(xd, yd))
    want = fn(x.clone(), y)
    assert res is xd and len(names) == launches, names
    tol = 1e-2 if xdt in (torch.float16, torch.bfloat16) else 1e-5
    np.testing.assert_allclose(xd.cpu().double().numpy(), want.double().numpy(), rtol=tol,
                               atol=tol)


def test_in_place_through_views_and_out_of_another_shape():
    """A strided view written in place leaves the rest of its storage; an out= tensor of
    another shape is resized and filled; an operand overlapping the written view reads the
    values from before the write."""
    base = _randn(6, 8)
    bd = base.to(OCL)
    y = _randn(6, 4, seed=2)
    bd[:, ::2].mul_(y.to(OCL))
    want = base.clone()
    want[:, ::2].mul_(y)
    _close(bd, want)
    out = torch.empty(0, device=OCL)
    torch.add(bd, 1.5, out=out)
    _close(out, want + 1.5)
    x = _randn(5, 5)
    xd = x.to(OCL)
    xd.add_(xd.t())  # reads every element before any is written, as torch's copy does
    _close(xd, x + x.t())
