"""The gamma family, as torch.distributions' Gamma, Beta and Dirichlet: samples from random.cl's
gamma sampler (Marsaglia and Tsang), log_prob, entropy, mean, mode and variance. No rsample:
cltensor has no reparameterized gamma gradient (sample() draws out of the graph)."""
from ..autograd import no_grad
from ..autograd.namespace import stack
from ..random import _sample_dirichlet, _standard_gamma
from .distribution import Distribution, broadcast_all

__all__ = ["Beta", "Dirichlet", "Gamma"]


def _lbeta(c):
    """log B(c) over the last dim: sum lgamma(c_k) - lgamma(sum c_k)."""
    return c.lgamma().sum(-1) - c.sum(-1).lgamma()


class Gamma(Distribution):
    """Gamma(concentration, rate): density x^(k - 1) exp(-rate x) rate^k / Gamma(k), x > 0.

    Example:
        d = Gamma(cltensor.tensor([0.5, 2.0]), 1.0); d.sample((4,)).shape   # (4, 2)
    """

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.rate.shape, validate_args=validate_args)
        self._check(self.concentration > 0, "concentration > 0")
        self._check(self.rate > 0, "rate > 0")

    mean = property(lambda self: self.concentration / self.rate)
    mode = property(lambda self: ((self.concentration - 1) / self.rate).clamp(min=0))
    variance = property(lambda self: self.concentration / self.rate ** 2)

    def sample(self, sample_shape=()):
        with no_grad():
            shape = self._extended_shape(sample_shape)
            return _standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)

    def log_prob(self, value):
        value = self._value(value, self.rate)
        self._check(value > 0, "values > 0")
        k, r = self.concentration, self.rate
        return k * r.log() + (k - 1) * value.log() - r * value - k.lgamma()

    def entropy(self):
        k = self.concentration
        return k - self.rate.log() + k.lgamma() + (1 - k) * k.digamma()


class Dirichlet(Distribution):
    """Dirichlet(concentration): distributions over the simplex of the last dim's K categories.

    Example:
        d = Dirichlet(cltensor.tensor([0.5, 1.0, 3.0])); d.sample().sum()   # 1
    """

    def __init__(self, concentration, validate_args=None):
        if concentration.ndim < 1:
            raise ValueError("Dirichlet: concentration must have at least one dim")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args)
        self._check(concentration > 0, "concentration > 0")

    mean = property(lambda self: self.concentration / self.concentration.sum(-1, keepdim=True))

    @property
    def mode(self):
        c = (self.concentration - 1).clamp(min=0)
        return c / c.sum(-1, keepdim=True)

    @property
    def variance(self):
        c = self.concentration
        c0 = c.sum(-1, keepdim=True)
        return c * (c0 - c) / (c0 ** 2 * (c0 + 1))

    def sample(self, sample_shape=()):
        with no_grad():
            return _sample_dirichlet(self.concentration.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        value = self._value(value, self.concentration)
        self._check((value >= 0) & (value <= 1), "values in the simplex")
        return ((self.concentration - 1) * value.log()).sum(-1) - _lbeta(self.concentration)

    def entropy(self):
        c = self.concentration
        k, c0 = c.shape[-1], c.sum(-1)
        return _lbeta(c) + (c0 - k) * c0.digamma() - ((c - 1) * c.digamma()).sum(-1)


class Beta(Distribution):
    """Beta(concentration1, concentration0): density x^(a - 1) (1 - x)^(b - 1) / B(a, b) on (0, 1),
    a = concentration1, b = concentration0; drawn as the first part of a Dirichlet (a, b).

    Example:
        d = Beta(2.0, cltensor.tensor([1.0, 5.0])); d.mean   # [0.667, 0.286]
    """

    def __init__(self, concentration1, concentration0, validate_args=None):
        a, b = broadcast_all(concentration1, concentration0)
        self._dirichlet = Dirichlet(stack([a, b], -1), validate_args=validate_args)
        self.concentration1, self.concentration0 = a, b
        super().__init__(a.shape, validate_args=validate_args)

    mean = property(lambda self: self.concentration1 / (self.concentration1 +
                                                         self.concentration0))
    mode = property(lambda self: self._dirichlet.mode[..., 0])
    variance = property(lambda self: self._dirichlet.variance[..., 0])

    def sample(self, sample_shape=()):
        return self._dirichlet.sample(sample_shape)[..., 0]

    def log_prob(self, value):
        value = self._value(value, self.concentration1)
        self._check((value >= 0) & (value <= 1), "values in [0, 1]")
        return self._dirichlet.log_prob(stack([value, 1 - value], -1))

    def entropy(self):
        return self._dirichlet.entropy()
