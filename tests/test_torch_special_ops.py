"""Special functions on the "opencl" device (cltensor/torch/special_ops.py): torch.special's
i0e, i1, i1e, ndtri, entr, erfcx and log_ndtr, torch.polygamma and torch.frexp, values and
gradients against CPU torch, and torch.poisson's draws (their moments, their repeatability
under torch.manual_seed), with nothing run through the CPU fallback."""
import math

import pytest

# torch (skipping when it is missing or too old) and the fixtures making `device` opencl:0
from test_torch_device import ct, device_only, ocl, torch  # noqa: F401

pytestmark = pytest.mark.usefixtures("ocl", "device_only")
OCL = "opencl"
S = torch.special
TOL = {torch.float64: (1e-10, 1e-12), torch.float32: (2e-5, 1e-6),
       torch.bfloat16: (2e-2, 1e-2)}


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")


def _data(shape, seed=0, scale=3.0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen, dtype=torch.float64) * scale


def _check(fn, x, dtype=torch.float64, grad=True, tol=None):
    """fn(x) and x's gradient on opencl against CPU torch."""
    want_x = x.to(dtype).clone().requires_grad_(grad)
    got_x = want_x.detach().to(OCL).requires_grad_(grad)
    want, got = fn(want_x), fn(got_x)
    rtol, atol = tol or TOL[dtype]
    assert got.device.type == OCL and got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want.detach(), rtol=rtol, atol=atol)
    if grad:
        g = _data(want.shape, seed=1, scale=1.0).to(dtype)
        want.backward(g)
        got.backward(g.to(OCL))
        torch.testing.assert_close(got_x.grad.cpu(), want_x.grad, rtol=rtol, atol=atol)


# (function, its inputs: the real line, or its domain)
FUNCTIONS = {"i0e": (S.i0e, _data(23)), "i1": (S.i1, _data(23)), "i1e": (S.i1e, _data(23)),
             "erfcx": (S.erfcx, _data(23)), "log_ndtr": (S.log_ndtr, _data(23, scale=6.0)),
             "ndtri": (S.ndtri, _data(23).sigmoid()), "entr": (S.entr, _data(23).abs() + 1e-3)}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_special_functions(name, dtype):
    fn, x = FUNCTIONS[name]
    _check(fn, x, dtype)
    _check(fn, x.reshape(23, 1).expand(23, 3).t(), dtype, grad=False)  # a strided view


def test_special_functions_edges_integers_and_out():
    edges = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-300, 40.0],
                         dtype=torch.float64)
    for name in ("i0e", "i1", "i1e", "erfcx", "log_ndtr"):
        fn = FUNCTIONS[name][0]
        torch.testing.assert_close(fn(edges.to(OCL)).cpu(), fn(edges), equal_nan=True,
                                   rtol=1e-10, atol=0)
    probabilities = torch.tensor([0.0, 1.0, 0.5, 1e-300, float("nan")], dtype=torch.float64)
    torch.testing.assert_close(S.ndtri(probabilities.to(OCL)).cpu(), S.ndtri(probabilities),
                               equal_nan=True)
    torch.testing.assert_close(S.entr(edges.to(OCL)).cpu(), S.entr(edges), equal_nan=True)
    ints = torch.arange(-4, 5)
    got = S.i0e(ints.to(OCL))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), S.i0e(ints))
    out = torch.full((23,), float("nan"), dtype=torch.float64, device=OCL)
    S.erfcx(FUNCTIONS["erfcx"][1].to(OCL), out=out)
    torch.testing.assert_close(out.cpu(), S.erfcx(FUNCTIONS["erfcx"][1]), rtol=1e-10, atol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_polygamma(n, dtype):
    """NOTE: torch's CPU trigamma is off by up to 5e-10 (relative, against mpmath), cltensor's
    by 3e-16: float64 compares at 1e-9."""
    tol = (1e-9, 1e-12) if dtype == torch.float64 else None
    _check(lambda x: torch.polygamma(n, x), _data(19).abs() + 0.2, dtype, tol=tol)
    _check(lambda x: S.polygamma(n, x), -_data(19).abs() - 0.3, dtype, grad=False, tol=tol)


def test_polygamma_in_place_out_and_errors():
    x = _data(11).abs() + 0.5
    y = x.to(OCL)
    y.polygamma_(2)
    torch.testing.assert_close(y.cpu(), torch.polygamma(2, x), rtol=1e-9, atol=0)
    out = torch.full((11,), float("nan"), dtype=torch.float64, device=OCL)
    torch.polygamma(1, x.to(OCL), out=out)
    torch.testing.assert_close(out.cpu(), torch.polygamma(1, x), rtol=1e-9, atol=0)
    torch.testing.assert_close(torch.polygamma(0, x.to(OCL)).cpu(), torch.digamma(x))
    with pytest.raises(RuntimeError, match="does not support negative n"):
        torch.polygamma(-1, x.to(OCL))
    with pytest.raises(RuntimeError):
        torch.arange(3, device=OCL).polygamma_(1)  # a float result into an integer tensor


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_frexp(dtype):
    x = torch.cat([_data(17) * 1e3, torch.tensor([0.0, -0.0, 1.0, -0.5, 3.0, float("inf"),
                                                   float("nan")], dtype=torch.float64)]).to(dtype)
    mantissa, exponent = torch.frexp(x.to(OCL))
    want_m, want_e = torch.frexp(x)
    assert exponent.dtype == torch.int32 and mantissa.dtype == dtype
    assert torch.allclose(mantissa.cpu(), want_m, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(exponent.cpu(), want_e)
    m, e = torch.full_like(x, float("nan"), device=OCL), torch.full(x.shape, -9, device=OCL,
                                                                      dtype=torch.int32)
    torch.frexp(x.to(OCL), out=(m, e))
    assert torch.allclose(m.cpu(), want_m, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(e.cpu(), want_e)


RATES = [0.0, 0.3, 2.5, 9.9, 10.0, 40.0, 1e3]


@pytest.mark.parametrize("dtype, fp64", [(torch.float32, True), (torch.float64, True),
                                         (torch.float32, False)])
def test_poisson_moments(dtype, fp64, device, monkeypatch):
    """Each rate's sample mean within 5 standard errors of the rate, its variance within 10%
    (20000 draws), every draw a non-negative integer; also as on a device without float64."""
    monkeypatch.setattr(device, "has_fp64", fp64)
    count = 20000
    torch.manual_seed(5)
    draws = torch.poisson(torch.tensor(RATES, dtype=dtype).repeat(count, 1).to(OCL))
    assert draws.device.type == OCL and draws.dtype == dtype
    draws = draws.cpu().double()
    assert bool((draws >= 0).all()) and torch.equal(draws, draws.round())
    for rate, column in zip(RATES, draws.t()):
        if rate == 0:
            assert bool((column == 0).all())
            continue
        assert abs(column.mean().item() - rate) < 5 * math.sqrt(rate / count), rate
        assert abs(column.var().item() / rate - 1) < 0.1, rate


def test_poisson_repeats_under_the_seed_and_its_gradient_is_zero():
    rates = (_data((4, 5)).abs() * 4).to(OCL)
    torch.manual_seed(11)
    first = torch.poisson(rates)
    torch.manual_seed(11)
    assert torch.equal(torch.poisson(rates).cpu(), first.cpu())
    r = rates.clone().requires_grad_()
    torch.poisson(r).sum().backward()
    assert torch.equal(r.grad.cpu(), torch.zeros(4, 5, dtype=torch.float64))
    out = torch.full((4, 5), float("nan"), dtype=torch.float64, device=OCL)
    torch.ops.aten.poisson.out(rates * 0, out=out)
    assert torch.equal(out.cpu(), torch.zeros(4, 5, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.poisson(-rates)
    assert torch.poisson(torch.zeros(0, 3, device=OCL)).shape == (0, 3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_special_functions(dtype):
    """Computed in float32, rounded once: within two 16-bit steps of CPU torch (whose 16-bit
    kernels round some intermediates)."""
    x = _data(29, scale=2.0).to(dtype)
    cases = [(S.i0e, x), (S.i1, x), (S.i1e, x), (S.entr, x.abs()),
             (lambda v: torch.polygamma(1, v), x.abs() + 0.5)]
    for fn, v in cases:
        want, got = fn(v), fn(v.to(OCL))
        assert got.dtype == dtype
        torch.testing.assert_close(got.cpu(), want, rtol=2 * torch.finfo(dtype).eps,
                                   atol=1e-3)
