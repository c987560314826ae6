"""Operators the "opencl" device composes from cltensor's kernels, against CPU torch: dot, vdot,
addbmm, nansum, aminmax, logit (and its backward), index_copy, masked_scatter,
repeat_interleave, isin, tril/triu_indices, weight norm, renorm, nn.Embedding's max_norm and
scale_grad_by_freq; in-place and out= forms, gradients, torch's errors."""
import numpy as np
import pytest

# torch (skipping when it is missing or too old) and the fixtures making `device` opencl:0
from test_torch_device import device_only, ocl, torch  # noqa: F401

pytestmark = pytest.mark.usefixtures("ocl", "device_only")
OCL = "opencl"
F = torch.nn.functional
NAN = float("nan")


@pytest.fixture(autouse=True)
def _no_fallback(monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")


def _randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _same(got, want, tol=1e-5):
    assert got.device.type == OCL and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.detach().cpu().double().numpy(),
                               want.detach().double().numpy(), rtol=tol, atol=tol)


def _both(fn, *tensors, tol=1e-5, grad=False):
    """fn on CPU tensors and on their opencl copies: values (and input gradients) agree."""
    cpu = [t.clone().requires_grad_(grad) for t in tensors]
    dev = [t.to(OCL).requires_grad_(grad) for t in tensors]
    want, got = fn(*cpu), fn(*dev)
    _same(got, want, tol)
    if grad:
        g = _randn(*want.shape, seed=9, dtype=want.dtype)
        want.backward(g)
        got.backward(g.to(OCL))
        for a, b in zip(dev, cpu):
            _same(a.grad, b.grad, tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_products(dtype):
    v, u = _randn(9, dtype=dtype), _randn(9, seed=1, dtype=dtype)
    _both(torch.dot, v, u, grad=True)
    _both(torch.vdot, v, u)
    _both(lambda a, b: torch.dot(a[::2], b[:5]), v, u, grad=True)  # strided
    c, b1, b2 = _randn(3, 4, dtype=dtype), _randn(2, 3, 5, dtype=dtype), _randn(2, 5, 4, dtype=dtype)
    _both(lambda c, a, b: torch.addbmm(c, a, b, beta=0.5, alpha=-2), c, b1, b2, grad=True)
    got = c.to(OCL)
    got.addbmm_(b1.to(OCL), b2.to(OCL))
    _same(got, c.clone().addbmm_(b1, b2))
    out = torch.empty((), dtype=dtype, device=OCL)
    torch.dot(v.to(OCL), u.to(OCL), out=out)
    _same(out, torch.dot(v, u))
    with pytest.raises(RuntimeError, match="dtype|same"):
        torch.dot(v.to(OCL), u.to(OCL, torch.float16))
    with pytest.raises(RuntimeError, match="inconsistent tensor size"):
        torch.dot(v.to(OCL), u[:4].to(OCL))


def test_nansum_and_aminmax():
    x = _randn(4, 5)
    x[1, 2] = x[3, 0] = NAN
    for fn in (torch.nansum, lambda t: torch.nansum(t, 1), lambda t: torch.nansum(t, (0,), True),
               lambda t: torch.nansum(t, dtype=torch.float64), torch.nanmean,
               lambda t: torch.nanmean(t, 0)):
        _both(fn, x)
    ints = torch.arange(12).reshape(3, 4)
    _both(lambda t: torch.nansum(t, 1), ints)
    y = _randn(4, 5, seed=3)
    for kwargs in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
        got, want = torch.aminmax(y.to(OCL), **kwargs), torch.aminmax(y, **kwargs)
        _same(got.min, want.min)
        _same(got.max, want.max)
    with pytest.raises(RuntimeError):
        torch.aminmax(torch.empty(0, 3, device=OCL), dim=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_logit(dtype):
    """16-bit against CPU torch in float32 (torch's CPU kernel clamps in 16 bits)."""
    x = torch.tensor([-0.5, 0.0, 1e-4, 0.3, 0.5, 0.9, 1.0, 1.5, NAN], dtype=torch.float64)
    ref = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    tol = 1e-2 if ref != dtype else 1e-6
    for eps in (None, 0.01):
        a = x.to(dtype).to(ref).clone().requires_grad_()  # the 16-bit values, in float32
        b = x.to(OCL, dtype).requires_grad_()
        ya, yb = torch.logit(a, eps), torch.logit(b, eps)
        ya.backward(torch.full_like(ya, 0.5))
        yb.backward(torch.full_like(yb, 0.5))
        np.testing.assert_allclose(yb.detach().cpu().double().numpy(),
                                   ya.detach().to(dtype).double().numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(b.grad.cpu().double().numpy(),
                                   a.grad.to(dtype).double().numpy(), rtol=tol, atol=tol)


def test_index_copy_and_masked_scatter():
    x, src = _randn(5, 4), _randn(3, 4, seed=1)
    index = torch.tensor([4, 0, 2])
    _both(lambda a, s: a.index_copy(0, index.to(a.device), s), x, src, grad=True)
    _both(lambda a, s: a.index_copy(1, torch.tensor([3, 0], device=a.device), s),
          x, _randn(2, 5, seed=2).t())  # a transposed source
    got = x.to(OCL)
    got.index_copy_(0, index.to(OCL), src.to(OCL))
    _same(got, x.clone().index_copy_(0, index, src))
    mask = torch.tensor([[True, False, True, False]] * 5)
    many = _randn(20, seed=4)
    _both(lambda a, s: a.masked_scatter(mask.to(a.device), s), x, many, grad=True)
    _both(lambda a, s: a.masked_scatter(mask[0].to(a.device), s), x, many)  # a broadcast mask
    got = x.to(OCL)
    got.masked_scatter_(mask.to(OCL), many.to(OCL))
    _same(got, x.clone().masked_scatter_(mask, many))
    with pytest.raises(RuntimeError):
        x.to(OCL).masked_scatter_(mask.to(OCL), many[:3].to(OCL))  # too few source elements
    with pytest.raises(RuntimeError):
        x.to(OCL).index_copy(0, torch.tensor([0.0, 1.0], device=OCL), src[:2].to(OCL))


def test_repeat_interleave_isin_and_triangles():
    r = torch.tensor([2, 0, 3, 1])
    _same(torch.repeat_interleave(r.to(OCL)), torch.repeat_interleave(r))
    x = _randn(4, 3)
    _both(lambda t: torch.repeat_interleave(t, r.to(t.device), dim=0), x, grad=True)
    _both(lambda t: torch.repeat_interleave(t, 2, dim=1), x)
    with pytest.raises(RuntimeError, match="negative"):
        torch.repeat_interleave(torch.tensor([1, -1], device=OCL))
    e = torch.tensor([[1.0, 2.5, NAN], [4.0, -1.0, 2.5]])
    t = torch.tensor([2.5, NAN, 4.0, 7.0])
    for invert in (False, True):
        _same(torch.isin(e.to(OCL), t.to(OCL), invert=invert), torch.isin(e, t, invert=invert))
        _same(torch.isin(e.to(OCL), 2.5, invert=invert), torch.isin(e, 2.5, invert=invert))
        _same(torch.isin(4.0, t.to(OCL), invert=invert), torch.isin(4.0, t, invert=invert))
    ints = torch.tensor([3, 1, 4, 1, 5])
    _same(torch.isin(ints.to(OCL), torch.tensor([1, 5], device=OCL)),
          torch.isin(ints, torch.tensor([1, 5])))
    _same(torch.isin(ints.to(OCL), torch.tensor([], dtype=torch.int64, device=OCL)),
          torch.isin(ints, torch.tensor([], dtype=torch.int64)))
    for args in ((4, 4), (3, 5, 1), (5, 3, -2), (0, 3)):
        _same(torch.tril_indices(*args, device=OCL), torch.tril_indices(*args))
        _same(torch.triu_indices(*args, device=OCL), torch.triu_indices(*args))
    _same(torch.tril_indices(3, 3, device=OCL, dtype=torch.int32),
          torch.tril_indices(3, 3, dtype=torch.int32))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_weight_norm_and_renorm(dim):
    v, g = _randn(4, 3, 2), _randn(4, 1, 1, seed=1) if dim == 0 else None
    if dim == 1:
        g = _randn(1, 3, 1, seed=1)
    if dim == -1:
        g = _randn(1, 1, 2, seed=1)
    _both(lambda a, b: torch._weight_norm(a, b, dim), v, g, grad=True)
    lin = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 2))
    x = _randn(5, 3, seed=5)
    want = lin(x)
    _same(lin.to(OCL)(x.to(OCL)), want)
    x = _randn(3, 4, 2, seed=6) * 3
    for p, d, maxnorm in ((2, 0, 1.0), (1, 1, 2.0), (3.0, 2, 5.0)):
        _both(lambda t: torch.renorm(t, p, d, maxnorm), x, grad=True)
    got = x.to(OCL)
    got.renorm_(2, 0, 1.0)
    _same(got, x.clone().renorm_(2, 0, 1.0))


def test_embedding_max_norm_and_scale_grad_by_freq():
    idx = torch.tensor([[1, 3, 1], [0, 3, 3]])
    for kwargs in ({"max_norm": 1.0}, {"max_norm": 0.5, "norm_type": 1.0},
                   {"scale_grad_by_freq": True}, {"scale_grad_by_freq": True, "padding_idx": 3}):
        cpu = torch.nn.Embedding(5, 4, **kwargs)
        dev = torch.nn.Embedding(5, 4, **kwargs)
        dev.load_state_dict(cpu.state_dict())
        dev = dev.to(OCL)
        want, got = cpu(idx), dev(idx.to(OCL))
        _same(got, want)
        _same(dev.weight.detach(), cpu.weight.detach())  # max_norm renormalises in place
        want.square().sum().backward()
        got.square().sum().backward()
        _same(dev.weight.grad, cpu.weight.grad)


def test_out_forms():
    """Each out= form writes CPU torch's values into the given tensor (resized from empty)."""
    x = _randn(3, 4)
    calls = [
        lambda t, out: torch.vdot(t[0], t[0], out=out),
        lambda t, out: torch.addbmm(t, t.new_ones(2, 3, 5) * 0.5, t.new_ones(2, 5, 4), out=out),
        lambda t, out: torch.nansum(t, 1, out=out),
        lambda t, out: torch.logit(t.sigmoid(), out=out),
        lambda t, out: torch.ops.aten.logit_backward.grad_input(t, t.sigmoid(), None,
                                                               grad_input=out),
        lambda t, out: torch.renorm(t, 2, 0, 1.0, out=out),
        lambda t, out: torch.index_copy(t, 0, torch.tensor([2, 0], device=t.device),
                                        t[:2] * 3, out=out),
        lambda t, out: torch.isin(t, t[0], out=out),
        lambda t, out: torch.isin(t, 1.5, out=out),
        lambda t, out: torch.isin(2.0, t, out=out),
    ]
    for call in calls:
        dtype = torch.bool if call in calls[-3:] else torch.float32
        want = torch.empty(0, dtype=dtype)
        call(x, want)
        got = torch.empty(0, dtype=dtype, device=OCL)
        assert call(x.to(OCL), got) is got
        _same(got, want)
