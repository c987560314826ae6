"""cltensor.distributions against torch.distributions: log_prob, entropy, mean, variance and
cdf on the same parameters; sample shapes and frequencies; rsample's gradient; bad parameters."""
import numpy as np
import pytest
import torch
import torch.distributions as TD

import cltensor as ct
from cltensor import distributions as D


def _both(arr, device):
    arr = np.asarray(arr, dtype=np.float32)
    return ct.from_numpy(arr, device=device), torch.from_numpy(arr)


def _close(ours, theirs, tol=1e-6):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=tol, atol=tol)


def test_normal_as_torch(device):
    (loc, tloc), (scale, tscale) = _both([0.0, 1.0, -2.0], device), _both([1.0, 0.5, 2.0], device)
    value, tvalue = _both([[0.3, 1.2, -1.0], [2.0, 0.0, 0.0]], device)
    ours, theirs = D.Normal(loc, scale), TD.Normal(tloc, tscale)
    for name in ("mean", "variance", "stddev"):
        _close(getattr(ours, name), getattr(theirs, name))
    _close(ours.log_prob(value), theirs.log_prob(tvalue))
    _close(ours.cdf(value), theirs.cdf(tvalue))
    _close(ours.entropy(), theirs.entropy())
    _close(D.Normal(0.0, 2.0).log_prob(1.0), TD.Normal(0.0, 2.0).log_prob(torch.tensor(1.0)))


def test_normal_samples_and_rsample_gradient(device):
    loc = ct.from_numpy(np.array([1.0, -3.0], np.float32), device=device).requires_grad_()
    d = D.Normal(loc, 2.0)
    assert d.batch_shape == (2,) and d.sample((4, 5)).shape == (4, 5, 2)
    assert not d.sample().requires_grad
    x = d.rsample((20000,))
    np.testing.assert_allclose(x.numpy().mean(0), [1.0, -3.0], atol=0.08)
    np.testing.assert_allclose(x.numpy().std(0), [2.0, 2.0], rtol=0.03)
    x.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [20000.0, 20000.0])


def test_uniform_as_torch(device):
    (low, tlow), (high, thigh) = _both([0.0, 1.0], device), _both([3.0, 1.5], device)
    ours, theirs = D.Uniform(low, high), TD.Uniform(tlow, thigh)
    value, tvalue = _both([2.0, 1.25], device)
    _close(ours.log_prob(value), theirs.log_prob(tvalue))
    for name in ("mean", "variance", "stddev"):
        _close(getattr(ours, name), getattr(theirs, name))
    _close(ours.entropy(), theirs.entropy())
    _close(ours.cdf(value), theirs.cdf(tvalue))
    x = ours.sample((5000,)).numpy()
    assert ((x >= [0.0, 1.0]) & (x < [3.0, 1.5])).all()
    with pytest.raises(ValueError, match="support"):  # torch: "Expected value argument ..."
        ours.log_prob(_both([4.0, 1.25], device)[0])


@pytest.mark.parametrize("given", ["probs", "logits"])
def test_bernoulli_as_torch(device, given):
    values = [0.0, 0.3, 1.0] if given == "probs" else [0.3, -2.0, 5.0]
    param, tparam = _both(values, device)
    ours, theirs = D.Bernoulli(**{given: param}), TD.Bernoulli(**{given: tparam})
    value, tvalue = _both([1.0, 0.0, 1.0], device)
    _close(ours.log_prob(value), theirs.log_prob(tvalue), 1e-5)
    _close(ours.entropy(), theirs.entropy(), 1e-5)
    _close(ours.mean, theirs.mean)
    _close(ours.variance, theirs.variance)
    x = ours.sample((4000,)).numpy()
    assert x.shape == (4000, 3) and set(np.unique(x)) <= {0.0, 1.0}
    np.testing.assert_allclose(x.mean(0), theirs.probs.numpy(), atol=0.04)


@pytest.mark.parametrize("given", ["probs", "logits"])
def test_categorical_as_torch(device, given):
    values = [[0.2, 0.3, 0.5], [1.0, 1.0, 8.0]] if given == "probs" else [[0.1, -1.0, 2.0],
                                                                           [0.0, 0.0, 0.0]]
    param, tparam = _both(values, device)
    ours, theirs = D.Categorical(**{given: param}), TD.Categorical(**{given: tparam})
    _close(ours.probs, theirs.probs)
    _close(ours.entropy(), theirs.entropy(), 1e-5)
    index = np.array([[0, 2], [1, 1], [2, 0]])
    _close(ours.log_prob(ct.from_numpy(index, device=device)),
           theirs.log_prob(torch.from_numpy(index)), 1e-5)
    _close(ours.log_prob(ct.from_numpy(np.array([2]), device=device)),
           theirs.log_prob(torch.tensor([2])), 1e-5)
    x = ours.sample((6000,)).numpy()
    assert x.shape == (6000, 2)
    freq = np.stack([(x == k).mean(0) for k in range(3)], -1)
    np.testing.assert_allclose(freq, theirs.probs.numpy(), atol=0.03)
    assert ours.sample().shape == (2,)


def test_bad_parameters_and_values(device):
    with pytest.raises(ValueError, match="scale > 0"):
        D.Normal(0.0, _both([1.0, -1.0], device)[0])
    with pytest.raises(ValueError, match="low < high"):
        D.Uniform(1.0, 1.0)
    with pytest.raises(ValueError, match="probs in"):
        D.Bernoulli(probs=_both([1.5], device)[0])
    with pytest.raises(ValueError, match="exactly one"):
        D.Categorical()
    with pytest.raises(ValueError, match="values in"):
        D.Categorical(probs=_both([0.5, 0.5], device)[0]).log_prob(2)
    with pytest.raises(TypeError, match="tensor or a number"):
        D.Normal("0", 1.0)
    assert D.Normal(0.0, -1.0, validate_args=False).scale.item() == -1.0


@pytest.mark.parametrize("given", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal_as_torch(device, rng, given):
    a = rng.standard_normal((2, 3, 3))
    cov = a @ a.transpose(0, 2, 1) + np.eye(3)
    matrix = np.linalg.cholesky(cov) if given == "scale_tril" else cov
    (loc, tloc), (m, tm) = _both(rng.standard_normal((2, 3)), device), _both(matrix, device)
    ours = D.MultivariateNormal(loc, **{given: m})
    theirs = TD.MultivariateNormal(tloc, **{given: tm})
    assert ours.batch_shape == (2,) and ours.event_shape == (3,)
    value, tvalue = _both(rng.standard_normal((4, 2, 3)), device)
    _close(ours.log_prob(value), theirs.log_prob(tvalue), 2e-5)
    _close(ours.entropy(), theirs.entropy(), 2e-5)
    for name in ("scale_tril", "covariance_matrix", "variance", "mean"):
        _close(getattr(ours, name), getattr(theirs, name), 2e-5)


def test_multivariate_normal_samples(device):
    cov = np.array([[2.0, 0.6], [0.6, 1.0]], np.float32)
    loc = ct.from_numpy(np.array([1.0, -1.0], np.float32), device=device).requires_grad_()
    d = D.MultivariateNormal(loc, ct.from_numpy(cov, device=device))
    x = d.rsample((20000,))
    np.testing.assert_allclose(x.detach().numpy().mean(0), [1.0, -1.0], atol=0.05)
    np.testing.assert_allclose(np.cov(x.detach().numpy().T), cov, atol=0.08)
    x.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [20000.0, 20000.0])
    with pytest.raises(ValueError, match="exactly one"):
        D.MultivariateNormal(loc)
    with pytest.raises(ValueError, match="square"):
        D.MultivariateNormal(loc, ct.ones(2, 3, device=device))
    with pytest.raises(ValueError, match="symmetric"):
        D.MultivariateNormal(loc, ct.from_numpy(np.array([[1.0, 0.5], [0.0, 1.0]], np.float32),
                                                device=device))


@pytest.mark.parametrize("given", ["covariance_matrix", "precision_matrix"])
def test_multivariate_normal_gradients_as_torch(device, rng, given):
    dtype, tol = (ct.float64, 1e-10) if device.has_fp64 else (ct.float32, 1e-4)
    a = rng.standard_normal((3, 3))
    cov, loc, value = a @ a.T + np.eye(3), rng.standard_normal(3), rng.standard_normal((5, 3))
    m, mu = (ct.tensor(x, dtype=dtype, device=device, requires_grad=True) for x in (cov, loc))
    tm, tmu = (torch.tensor(x, requires_grad=True) for x in (cov, loc))
    D.MultivariateNormal(mu, **{given: m}).log_prob(
        ct.tensor(value, dtype=dtype, device=device)).sum().backward()
    TD.MultivariateNormal(tmu, **{given: tm}).log_prob(torch.tensor(value)).sum().backward()
    np.testing.assert_allclose(m.grad.numpy(), tm.grad.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(mu.grad.numpy(), tmu.grad.numpy(), rtol=tol, atol=tol)


def test_kl_divergence_as_torch(device):
    pairs = [
        (D.Normal, TD.Normal, ([0.0, 1.0, 2.0], [1.0, 0.5, 2.0]), ([0.5, 0.0, -1.0], [2.0, 1.0, 0.3])),
        (D.Uniform, TD.Uniform, ([0.0, 0.0], [1.0, 2.0]), ([-1.0, 0.5], [2.0, 3.0])),
        (D.Bernoulli, TD.Bernoulli, ([0.0, 0.3, 1.0, 0.5, 0.2],), ([0.4, 0.0, 1.0, 1.0, 0.9],)),
        (D.Categorical, TD.Categorical, ([[0.0, 0.3, 0.7], [0.2, 0.2, 0.6]],),
         ([[0.4, 0.0, 0.6], [0.1, 0.1, 0.8]],)),
    ]
    for ours, theirs, p_args, q_args in pairs:
        p, tp = zip(*(_both(a, device) for a in p_args))
        q, tq = zip(*(_both(a, device) for a in q_args))
        _close(D.kl_divergence(ours(*p), ours(*q)),
               TD.kl_divergence(theirs(*tp), theirs(*tq)), 1e-5)


def test_kl_divergence_gradient_and_registry(device):
    loc = ct.from_numpy(np.array([0.3, -1.0], np.float32), device=device).requires_grad_()
    tloc = torch.tensor([0.3, -1.0], requires_grad=True)
    D.kl_divergence(D.Normal(loc, 2.0), D.Normal(0.0, 1.0)).sum().backward()
    TD.kl_divergence(TD.Normal(tloc, 2.0), TD.Normal(0.0, 1.0)).sum().backward()
    _close(loc.grad, tloc.grad)
    with pytest.raises(NotImplementedError, match="register_kl"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Uniform(0.0, 1.0))

    class Shifted(D.Normal):  # a subclass finds its base's formula
        pass

    assert D.kl_divergence(Shifted(0.0, 1.0), D.Normal(0.0, 1.0)).item() == 0.0

    @D.register_kl(Shifted, D.Uniform)
    def _constant(p, q):
        return p.loc * 0 + 7.0

    assert D.kl_divergence(Shifted(0.0, 1.0), D.Uniform(0.0, 1.0)).item() == 7.0


def test_independent_as_torch(device, rng):
    (mu, tmu), (sigma, tsigma) = (_both(rng.standard_normal((4, 3)), device),
                                  _both(rng.uniform(0.5, 2.0, (4, 3)), device))
    ours, theirs = D.Independent(D.Normal(mu, sigma), 1), TD.Independent(TD.Normal(tmu, tsigma), 1)
    assert ours.batch_shape == (4,) and ours.event_shape == (3,) and ours.has_rsample
    value, tvalue = _both(rng.standard_normal((2, 4, 3)), device)
    _close(ours.log_prob(value), theirs.log_prob(tvalue), 1e-5)
    _close(ours.entropy(), theirs.entropy(), 1e-5)
    _close(ours.mean, theirs.mean)
    assert ours.rsample((5,)).shape == (5, 4, 3)
    other = D.Independent(D.Normal(mu * 0, sigma * 0 + 1), 1)
    _close(D.kl_divergence(ours, other),
           TD.kl_divergence(theirs, TD.Independent(TD.Normal(tmu * 0, tsigma * 0 + 1), 1)), 1e-5)
    assert D.Independent(D.Normal(mu, sigma), 2).log_prob(value).shape == (2,)
    with pytest.raises(ValueError, match=r"\[0, 2\]"):
        D.Independent(D.Normal(mu, sigma), 3)
    with pytest.raises(TypeError, match="Distribution"):
        D.Independent(mu, 1)


GAMMA_FAMILY = [
    ("Gamma", ([0.5, 2.0, 9.0], [1.0, 2.0, 0.5]), [[0.3, 1.5, 20.0], [2.0, 0.1, 9.0]]),
    ("Beta", ([0.5, 2.0, 9.0], [3.0, 1.0, 0.7]), [[0.3, 0.5, 0.99], [0.01, 0.9, 0.6]]),
    ("Dirichlet", ([[0.5, 2.0, 9.0], [1.0, 1.0, 3.0]],), [[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]]),
    ("Poisson", ([0.5, 2.0, 90.0],), [[0.0, 3.0, 85.0], [2.0, 0.0, 120.0]]),
    ("Binomial", ([10.0, 40.0, 3.0], [0.1, 0.5, 0.99]), [[0.0, 20.0, 3.0], [10.0, 1.0, 2.0]]),
]


@pytest.mark.parametrize("name, params, values", GAMMA_FAMILY, ids=[c[0] for c in GAMMA_FAMILY])
def test_gamma_and_count_distributions_as_torch(device, name, params, values):
    """log_prob, entropy (where torch has it), mean, mode and variance against torch's; the
    sample means within 5% (20000 draws), sample shapes and values in the support."""
    ours_params, torch_params = zip(*(_both(p, device) for p in params))
    if name == "Binomial":
        ours = D.Binomial(ours_params[0], probs=ours_params[1])
        theirs = TD.Binomial(torch_params[0], probs=torch_params[1])
    else:
        ours, theirs = getattr(D, name)(*ours_params), getattr(TD, name)(*torch_params)
    value, tvalue = _both(values, device)
    _close(ours.log_prob(value), theirs.log_prob(tvalue), tol=2e-5)
    for prop in ("mean", "variance", "mode"):
        _close(getattr(ours, prop), getattr(theirs, prop), tol=2e-5)
    if name not in ("Poisson", "Binomial"):
        _close(ours.entropy(), theirs.entropy(), tol=2e-5)
    ct.manual_seed(0)
    draws = ours.sample((20000,))
    assert draws.shape == (20000, *theirs.batch_shape, *theirs.event_shape)
    got = draws.numpy().astype(np.float64)
    np.testing.assert_allclose(got.mean(0), theirs.mean.numpy(), rtol=0.05, atol=0.01)
    if name in ("Beta", "Dirichlet"):
        assert ((got > 0) & (got <= 1)).all()  # float32 rounds draws near 1 to 1
    elif name in ("Poisson", "Binomial"):
        assert (got == np.round(got)).all() and (got >= 0).all()
    else:
        assert (got > 0).all()


def test_gamma_family_refuses_bad_parameters_and_values(device):
    t = lambda *v: ct.tensor(v, device=device)  # noqa: E731
    with pytest.raises(ValueError, match="concentration > 0"):
        D.Gamma(t(1.0, -1.0), 1.0)
    with pytest.raises(ValueError, match="rate >= 0"):
        D.Poisson(t(-0.5))
    with pytest.raises(ValueError, match="probs in"):
        D.Binomial(5, probs=t(1.5))
    with pytest.raises(ValueError, match="exactly one"):
        D.Binomial(5)
    with pytest.raises(ValueError, match="integer values"):
        D.Binomial(5, probs=t(0.5)).log_prob(t(6.0))
    with pytest.raises(ValueError, match="values > 0"):
        D.Gamma(2.0, 1.0).log_prob(t(-1.0))
    with pytest.raises(NotImplementedError, match="rsample"):
        D.Gamma(2.0, 1.0).rsample()
