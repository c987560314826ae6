"""Operators of the "opencl" device beyond the common layers, against CPU torch with nothing run
through the CPU fallback: fractional_max_pool2d / 3d and adaptive_max_pool3d with their indices
(cltensor/torch/volume_ops.py), matrix_exp, geqrf and householder_product
(cltensor/torch/matrix_ops.py), forward and backward."""
import re

import pytest

# torch (skipping when it is missing or too old) and the fixtures making `device` opencl:0
from test_torch_device import ct, device_only, ocl, torch  # noqa: F401
from torch.nn import functional as F  # noqa: E402

pytestmark = pytest.mark.usefixtures("ocl", "device_only")
OCL = "opencl"
TOL = {torch.float64: (1e-12, 1e-12), torch.float32: (1e-5, 1e-6), torch.float16: (2e-3, 2e-3),
       torch.bfloat16: (1e-2, 1e-2)}


def _data(shape, dtype=torch.float64, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _uniform(shape, dtype, seed=2):
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _check_pool(fn, x, dtype):
    """fn(x) -> (values, int64 indices) on opencl against CPU torch: values and indices exactly
    (a max takes an input element), x's gradient to the rounding of its sums."""
    want_x = x.detach().to(dtype).clone().requires_grad_()
    got_x = want_x.detach().to(OCL).requires_grad_()
    (want, want_i), (got, got_i) = fn(want_x), fn(got_x)
    assert got.device.type == OCL and got.dtype == want.dtype and got_i.dtype == torch.int64
    assert torch.equal(got_i.cpu(), want_i)
    torch.testing.assert_close(got.cpu(), want.detach(), rtol=0, atol=0, equal_nan=True)
    g = _data(want.shape, dtype, seed=1)
    want.backward(g)
    got.backward(g.to(OCL))
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(got_x.grad.cpu(), want_x.grad, rtol=rtol, atol=atol)


# (input shape, kernel_size, output_size): uneven H and W (a swapped sample order shows),
# unbatched, a window the whole plane, outputs of 1 along one dim, windows overlapping
FRACTIONAL = [((2, 3, 9, 11), (2, 3), (4, 5)), ((3, 7, 8), 2, (6, 3)),
              ((1, 2, 5, 5), (5, 5), (1, 1)), ((2, 2, 10, 7), 3, (8, 1)),
              ((2, 3, 6, 9, 11), (2, 2, 3), (4, 5, 5)), ((3, 5, 7, 6), 2, (3, 1, 4))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", FRACTIONAL)
def test_fractional_max_pool(case, dtype):
    """fractional_max_pool2d (or 3d, by the output's dims) given torch's samples."""
    shape, k, size = case
    pool = F.fractional_max_pool2d if len(size) == 2 else F.fractional_max_pool3d
    batched = len(shape) == len(size) + 2
    n, c = shape[:2] if batched else (1, shape[0])
    samples = _uniform((n, c, len(size)), dtype)
    _check_pool(lambda x: pool(x, k, output_size=size, return_indices=True,
                               _random_samples=samples.to(x.device)), _data(shape), dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fractional_max_pool2d_16_bit_windows(dtype):
    """torch places the windows of 16-bit inputs with 16-bit arithmetic (its rounding moves
    some of bfloat16's here)."""
    samples = _uniform((2, 3, 2), dtype)
    _check_pool(lambda x: F.fractional_max_pool2d(
        x, 3, output_size=(17, 13), return_indices=True,
        _random_samples=samples.to(x.device)), _data((2, 3, 37, 41)), dtype)


def test_fractional_max_pool_nan_ties_and_out_forms():
    """A NaN wins its window (the last one, as torch's CPU kernel), equal values keep the
    first, and the out= forms write poisoned outputs whole."""
    x = torch.zeros(1, 2, 6, 7, dtype=torch.float64)
    x[0, 0, 1, 1] = x[0, 0, 1, 2] = float("nan")
    samples = _uniform((1, 2, 2), torch.float64)
    args = ((3, 2), (3, 4), samples)
    want = torch.ops.aten.fractional_max_pool2d(x, *args)
    out = torch.full(want[0].shape, 7.0, dtype=torch.float64, device=OCL)
    idx = torch.full(want[1].shape, -5, dtype=torch.int64, device=OCL)
    torch.ops.aten.fractional_max_pool2d.output(x.to(OCL), *args[:2], samples.to(OCL),
                                                output=out, indices=idx)
    assert torch.equal(idx.cpu(), want[1])
    torch.testing.assert_close(out.cpu(), want[0], rtol=0, atol=0, equal_nan=True)
    g = _data(want[0].shape)
    want_gx = torch.ops.aten.fractional_max_pool3d_backward(
        g.unsqueeze(2), x.unsqueeze(2), (1, 3, 2), (1, 3, 4), want[1])
    gx = torch.full(x.unsqueeze(2).shape, float("nan"), dtype=torch.float64, device=OCL)
    torch.ops.aten.fractional_max_pool3d_backward.grad_input(
        g.unsqueeze(2).to(OCL), x.unsqueeze(2).to(OCL), (1, 3, 2), (1, 3, 4),
        want[1].to(OCL), grad_input=gx)
    torch.testing.assert_close(gx.cpu(), want_gx, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("size", [(3, 4, 5), (6, 9, 10), (1, 2, 3), (4, 4, 4)])
def test_adaptive_max_pool3d(size, dtype):
    """Windows of uneven sizes, overlapping (6 of 7 on D), of one element (9 and 10 of 9 and
    10) and of the whole volume along D; a NaN wins its windows."""
    x = _data((2, 3, 7, 9, 10))
    x[0, 1, 2, 3, 4] = float("nan")
    _check_pool(lambda v: F.adaptive_max_pool3d(v, size, return_indices=True), x, dtype)


def test_adaptive_max_pool3d_unbatched_and_out_forms():
    x = _data((3, 5, 4, 6))
    want, want_i = torch.ops.aten.adaptive_max_pool3d(x, (2, 3, 4))
    out = torch.full(want.shape, float("nan"), dtype=torch.float64, device=OCL)
    idx = torch.full(want.shape, -5, dtype=torch.int64, device=OCL)
    torch.ops.aten.adaptive_max_pool3d.out(x.to(OCL), (2, 3, 4), out=out, indices=idx)
    assert torch.equal(idx.cpu(), want_i)
    torch.testing.assert_close(out.cpu(), want, rtol=0, atol=0)
    g = _data(want.shape, seed=3)
    want_gx = torch.ops.aten.adaptive_max_pool3d_backward(g, x, want_i)
    gx = torch.full(x.shape, float("nan"), dtype=torch.float64, device=OCL)
    torch.ops.aten.adaptive_max_pool3d_backward.grad_input(g.to(OCL), x.to(OCL), idx,
                                                          grad_input=gx)
    torch.testing.assert_close(gx.cpu(), want_gx, rtol=1e-12, atol=1e-12)


def _norm_close(got, want, tol):
    """got (opencl) against want, norm-relative: exponentials span magnitudes."""
    assert got.device.type == OCL and got.dtype == want.dtype and got.shape == want.shape
    err = (got.cpu().double() - want.double()).norm() / want.double().norm()
    assert err <= tol, err


MEXP_TOL = {torch.float64: 1e-13, torch.float32: 1e-5}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape, scale", [((4, 4), 0.1), ((3, 5, 5), 1.0), ((2, 2, 3, 3), 6.0),
                                          ((1, 1), 3.0)])
def test_matrix_exp_and_its_gradient(shape, scale, dtype):
    """Norms below and above the first scaling, a batch whose matrices take different numbers
    of squarings (one scaled down 100 times more), against float64 CPU torch."""
    A = _data(shape) * scale
    if A.dim() > 2:
        A.view(-1, *shape[-2:])[0] *= 0.01
    want_x = A.clone().requires_grad_()
    got_x = A.to(dtype).to(OCL).requires_grad_()
    want, got = torch.matrix_exp(want_x), torch.matrix_exp(got_x)
    _norm_close(got, want.detach().to(dtype), MEXP_TOL[dtype])
    g = _data(shape, seed=1)
    want.backward(g)
    got.backward(g.to(dtype).to(OCL))
    _norm_close(got_x.grad, want_x.grad.to(dtype), 4 * MEXP_TOL[dtype])


def test_matrix_exp_out_and_empty():
    A = _data((2, 3, 3))
    out = torch.full((2, 3, 3), float("nan"), dtype=torch.float64, device=OCL)
    torch.ops.aten.linalg_matrix_exp.out(A.to(OCL), out=out)
    _norm_close(out, torch.linalg.matrix_exp(A), 1e-13)
    assert torch.matrix_exp(torch.empty(0, 2, 2, device=OCL)).shape == (0, 2, 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (2, 3, 6, 2), (1, 1)])
def test_geqrf_and_householder_product(shape, dtype):
    """geqrf's reflectors and tau, then householder_product of them (all and all but the
    last reflector) and its gradient, against CPU torch; the results' strides are torch's."""
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-12,
                                                                         "atol": 1e-12}
    A = _data(shape, dtype)
    want, got = torch.geqrf(A), torch.geqrf(A.to(OCL))
    for w, g in zip(want, got):
        assert g.device.type == OCL and g.stride() == w.stride()
        torch.testing.assert_close(g.cpu(), w, **tol)
    if shape[-2] < shape[-1]:
        return
    a, tau = want
    for k in (tau.shape[-1], tau.shape[-1] - 1):
        want_x = (a.clone().requires_grad_(), tau[..., :k].clone().requires_grad_())
        got_x = [x.detach().to(OCL).requires_grad_() for x in want_x]
        want_q = torch.linalg.householder_product(*want_x)
        got_q = torch.linalg.householder_product(*got_x)
        assert got_q.stride() == want_q.stride()
        torch.testing.assert_close(got_q.cpu(), want_q.detach(), **tol)
        g = _data(want_q.shape, dtype, seed=1)
        want_q.backward(g)
        got_q.backward(g.to(OCL))
        for w, x in zip(want_x, got_x):  # (none for an empty tau)
            assert (x.grad is None) == (w.grad is None)
            if w.grad is not None:
                torch.testing.assert_close(x.grad.cpu(), w.grad, rtol=10 * tol["rtol"],
                                           atol=10 * tol["atol"])


def test_geqrf_and_householder_product_out_forms():
    A = _data((2, 5, 3))
    a, tau = torch.geqrf(A)
    got_a = torch.full((1,), float("nan"), dtype=torch.float64, device=OCL)
    got_tau = torch.full((2, 3), float("nan"), dtype=torch.float64, device=OCL)
    torch.geqrf(A.to(OCL), out=(got_a, got_tau))
    torch.testing.assert_close(got_a.cpu(), a, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got_tau.cpu(), tau, rtol=1e-12, atol=1e-12)
    q = torch.full((2, 5, 3), float("nan"), dtype=torch.float64, device=OCL)
    torch.linalg.householder_product(a.to(OCL), tau.to(OCL), out=q)
    torch.testing.assert_close(q.cpu(), torch.linalg.householder_product(a, tau), rtol=1e-12,
                               atol=1e-12)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.geqrf(torch.ones(3, device=OCL))


_INT_POOLS = [
    lambda d: torch.ops.aten.fractional_max_pool2d(
        torch.ones(1, 2, 5, 5, dtype=torch.int64, device=d), (2, 2), (3, 3),
        torch.ones(1, 2, 2, dtype=torch.int64, device=d)),
    lambda d: torch.ops.aten.fractional_max_pool3d(
        torch.ones(1, 2, 5, 5, 5, dtype=torch.int64, device=d), (2, 2, 2), (3, 3, 3),
        torch.ones(1, 2, 3, dtype=torch.int64, device=d)),
    lambda d: torch.ops.aten.fractional_max_pool2d_backward(
        torch.ones(1, 2, 3, 3, dtype=torch.int64, device=d),
        torch.ones(1, 2, 5, 5, dtype=torch.int64, device=d), (2, 2), (3, 3),
        torch.zeros(1, 2, 3, 3, dtype=torch.int64, device=d)),
    lambda d: torch.ops.aten.adaptive_max_pool3d(
        torch.ones(1, 2, 5, 5, 5, dtype=torch.int32, device=d), (2, 2, 2)),
    lambda d: torch.ops.aten.adaptive_max_pool3d_backward(
        torch.ones(1, 2, 2, 2, 2, dtype=torch.int64, device=d),
        torch.ones(1, 2, 5, 5, 5, dtype=torch.int64, device=d),
        torch.zeros(1, 2, 2, 2, 2, dtype=torch.int64, device=d))]


@pytest.mark.parametrize("pool", _INT_POOLS)
def test_pools_refuse_integers_as_torch(pool):
    """torch's CPU kernels have no integer forms: the same error, not integer results."""
    with pytest.raises(NotImplementedError) as want:
        pool("cpu")
    with pytest.raises(NotImplementedError, match=re.escape(str(want.value))):
        pool(OCL)
