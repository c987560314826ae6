"""Random sampling on "opencl" (random_ops.py): every sampler draws on the device (fallback in
error mode) with the distribution's range, mean and spread, in each dtype torch allows;
torch.manual_seed makes draws repeat; a torch.Generator draws what CPU torch draws; bad
arguments raise torch's RuntimeErrors."""
import math
import warnings

import pytest

# torch (skipping when it is missing or too old) and the fixtures making `device` opencl:0
from test_torch_device import device_only, ocl, torch  # noqa: F401

from cltensor.torch import CPUFallbackWarning

pytestmark = pytest.mark.usefixtures("ocl", "device_only")
OCL = "opencl"
N = 20000


@pytest.fixture(autouse=True)
def _no_fallback(monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")


def _mean_near(x, mean, std, n=N):
    """The sample mean within 6 standard errors of the distribution's."""
    got = x.double().mean().item()
    assert abs(got - mean) <= 6 * std / math.sqrt(n), (got, mean)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.int32, torch.int64, torch.bool])
def test_bernoulli_forms(dtype):
    x = torch.empty(N, dtype=dtype, device=OCL)
    assert x.bernoulli_(0.3) is x
    h = x.cpu()
    assert h.dtype == dtype and set(h.double().unique().tolist()) <= {0.0, 1.0}
    _mean_near(h, 0.3, math.sqrt(0.21))
    p = torch.cat([torch.zeros(N // 2), torch.full((N // 2,), 0.8)]).to(OCL)
    h = x.bernoulli_(p).cpu().double()
    assert h[:N // 2].sum().item() == 0
    _mean_near(h[N // 2:], 0.8, 0.4, N // 2)
    x.bernoulli_(torch.tensor(1.0))  # a CPU probability of 0 dims
    assert x.cpu().double().min().item() == 1.0
    if dtype.is_floating_point:
        probs = torch.cat([torch.zeros(10), torch.ones(10), torch.full((N,), 0.5)]).to(dtype)
        draws = torch.bernoulli(probs.to(OCL)).cpu()
        assert draws.dtype == dtype and draws[:10].sum() == 0 and draws[10:20].sum() == 10
        _mean_near(draws[20:], 0.5, 0.5)
        _mean_near(torch.ones(N, dtype=dtype, device=OCL).bernoulli(0.25).cpu(), 0.25,
                   math.sqrt(0.1875))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int32,
                                   torch.int64])
def test_random_integers(dtype):
    x = torch.empty(N, dtype=dtype, device=OCL)
    h = x.random_(-5, 7).cpu().double()
    assert h.min().item() == -5 and h.max().item() == 6 and torch.equal(h, h.round())
    h = x.random_(4).cpu().double()
    assert set(h.unique().tolist()) == {0.0, 1.0, 2.0, 3.0}
    h = x.random_().cpu().double()
    top = {torch.float16: 2 ** 11, torch.float32: 2 ** 24, torch.float64: 2 ** 53,
           torch.int32: 2 ** 31 - 1, torch.int64: 2 ** 63 - 1}[dtype]
    assert h.min().item() >= 0 and h.max().item() <= top and h.max().item() > top / 4
    h = x.random_(3, None).cpu().double()
    assert h.min().item() >= 3 and h.max().item() > top / 4
    r = torch.randint(-3, 3, (N,), device=OCL, dtype=dtype).cpu()
    assert r.dtype == dtype and set(r.double().unique().tolist()) == set(range(-3, 3))
    b = torch.empty(100, dtype=torch.bool, device=OCL).random_().cpu()
    assert b.any() and not b.all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_continuous_fills(dtype):
    x = torch.empty(N, dtype=dtype, device=OCL)
    rel = 0.02 if dtype in (torch.float16, torch.bfloat16) else 0.0
    h = x.exponential_(2.0).cpu().double()
    assert h.min().item() >= 0
    _mean_near(h, 0.5 * (1 + rel), 0.5)
    h = x.geometric_(0.25).cpu().double()
    assert h.min().item() == 1 and torch.equal(h, h.round())
    _mean_near(h, 4.0, math.sqrt(0.75) / 0.25)
    h = x.log_normal_(0.0, 0.5).cpu().double()
    assert h.min().item() > 0
    _mean_near(h, math.exp(0.125), math.sqrt((math.exp(0.25) - 1) * math.exp(0.25)))
    h = x.cauchy_(1.0, 2.0).cpu().double()
    q = torch.quantile(h.float(), torch.tensor([0.25, 0.5, 0.75])).tolist()
    assert abs(q[0] + 1) < 0.15 and abs(q[1] - 1) < 0.1 and abs(q[2] - 3) < 0.15, q
    _mean_near(x.normal_(3.0, 2.0).cpu(), 3.0, 2.0)
    h = x.uniform_(-1.0, 3.0).cpu().double()
    assert h.min().item() >= -1 and h.max().item() <= 3
    _mean_near(h, 1.0, 4 / math.sqrt(12))


def test_normal_with_tensor_parameters():
    mean = torch.cat([torch.zeros(N), torch.full((N,), 10.0)]).to(OCL)
    std = torch.cat([torch.ones(N), torch.full((N,), 0.5)]).to(OCL)
    for draws in (torch.normal(mean, std), torch.normal(mean, 1.0), torch.normal(2.0, std)):
        assert draws.device.type == OCL and draws.shape == (2 * N,)
    h = torch.normal(mean, std).cpu()
    _mean_near(h[:N], 0.0, 1.0)
    _mean_near(h[N:], 10.0, 0.5)
    assert abs(h[N:].std().item() - 0.5) < 0.02
    h = torch.normal(2.0, std).cpu()
    _mean_near(h[N:], 2.0, 0.5)
    h16 = torch.normal(mean.half(), 2.0).cpu()
    assert h16.dtype == torch.float16
    _mean_near(h16[N:].float(), 10.0, 2.0)


def test_randperm_and_multinomial():
    for n, dtype in ((0, torch.int64), (1, torch.int64), (1000, torch.int64), (50, torch.float32)):
        p = torch.randperm(n, device=OCL, dtype=dtype).cpu()
        assert p.dtype == dtype and torch.equal(p.sort().values, torch.arange(n, dtype=dtype))
    probs = torch.tensor([[0.0, 1.0, 3.0, 0.0], [5.0, 0.0, 0.0, 5.0]], device=OCL)
    picks = torch.multinomial(probs, 2).cpu()
    assert picks.dtype == torch.int64 and picks.shape == (2, 2)
    assert sorted(picks[0].tolist()) == [1, 2] and sorted(picks[1].tolist()) == [0, 3]
    many = torch.multinomial(probs, N, replacement=True).cpu()
    assert set(many[0].unique().tolist()) == {1, 2}
    _mean_near((many[0] == 2).double(), 0.75, math.sqrt(0.1875))
    one_row = torch.multinomial(torch.tensor([1.0, 1.0, 2.0], device=OCL).half(), 3)
    assert sorted(one_row.cpu().tolist()) == [0, 1, 2]


def test_seed_repeats_and_a_generator_draws_as_cpu_torch(monkeypatch):
    draws = []
    for _ in range(2):
        torch.manual_seed(7)
        x = torch.empty(64, device=OCL)
        draws.append(torch.cat([x.bernoulli_(0.5), x.clone().random_(10),
                                torch.randint(0, 9, (64,), device=OCL).float(),
                                torch.randperm(64, device=OCL).float()]).cpu())
    assert torch.equal(*draws)
    monkeypatch.delenv("CLTENSOR_TORCH_FALLBACK")  # a CPU generator draws on the CPU
    gen = [torch.Generator().manual_seed(3) for _ in range(2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CPUFallbackWarning)
        got = torch.empty(32, device=OCL).exponential_(generator=gen[0]).cpu()
    want = torch.empty(32).exponential_(generator=gen[1])
    assert torch.equal(got, want)


def test_bad_arguments_raise_torchs_errors():
    x = torch.zeros(3, device=OCL)
    for call, match in [
        (lambda: x.bernoulli_(1.5), "p_in >= 0"),
        (lambda: torch.zeros(3, device=OCL, dtype=torch.bool).random_(5), "bool"),
        (lambda: torch.zeros(3, device=OCL, dtype=torch.int64).exponential_(), "floating"),
        (lambda: x.exponential_(-1.0), "lambda"),
        (lambda: x.geometric_(0.0), "geometric_"),
        (lambda: x.random_(5, 2), "from"),
        (lambda: torch.multinomial(torch.rand(2, 3, device=OCL), 5), "categories|samples"),
        (lambda: torch.multinomial(torch.tensor([[-1.0, 2.0]], device=OCL), 1),
         "non-negative|negative"),
        (lambda: torch.normal(torch.zeros(3, device=OCL), -1.0), "std"),
        (lambda: torch.normal(torch.zeros(3, device=OCL), -torch.ones(3, device=OCL)), "std"),
    ]:
        with pytest.raises(RuntimeError, match=match):
            call()


def test_distributions_with_tensor_parameters_sample_on_the_device():
    """torch.distributions' Gamma, Beta, Dirichlet, Binomial and Poisson draw on the device
    (no fallback) with their means; the out= forms write; a torch.Generator takes the CPU."""
    torch.manual_seed(1)
    a = torch.tensor([0.5, 2.0, 9.0], device=OCL)
    d = torch.distributions
    gamma = d.Gamma(a, torch.full_like(a, 2.0)).sample((N,))
    beta = d.Beta(a, a.flip(0)).sample((N,))
    dirichlet = d.Dirichlet(a).sample((N,))
    binom = d.Binomial(torch.tensor([10.0, 50.0], device=OCL),
                       torch.tensor([0.3, 0.8], device=OCL)).sample((N,))
    for x in (gamma, beta, dirichlet, binom):
        assert x.device.type == OCL and x.dtype == torch.float32
    _mean_near(gamma[:, 1], 1.0, math.sqrt(2.0) / 2)
    assert abs(beta[:, 0].double().mean().item() - 0.5 / 9.5) < 0.01
    assert torch.allclose(dirichlet.sum(-1).cpu(), torch.ones(N), atol=1e-5)
    assert torch.allclose(dirichlet.double().mean(0).cpu(), (a / a.sum()).double().cpu(),
                          atol=0.01)
    _mean_near(binom[:, 1], 40.0, math.sqrt(8.0))
    out = torch.full((4,), float("nan"), device=OCL)
    torch.ops.aten._standard_gamma.out(torch.ones(4, device=OCL), out=out)
    assert bool((out.cpu() > 0).all())
    torch.ops.aten.binomial.out(torch.full((4,), 5.0, device=OCL), torch.ones(4, device=OCL),
                                out=out)
    assert torch.equal(out.cpu(), torch.full((4,), 5.0))
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        torch.binomial(torch.ones(3, dtype=torch.long, device=OCL), torch.ones(3, device=OCL))
    with pytest.raises(RuntimeError, match="positive"):
        torch._standard_gamma(torch.tensor([-1.0], device=OCL))


def test_distribution_samplers_with_a_generator_draw_as_cpu_torch(monkeypatch):
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "warn")
    a = torch.tensor([0.5, 2.0, 9.0])
    want = torch._standard_gamma(a, generator=torch.Generator().manual_seed(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CPUFallbackWarning)
        got = torch._standard_gamma(a.to(OCL), generator=torch.Generator().manual_seed(3))
    assert torch.equal(got.cpu(), want)
