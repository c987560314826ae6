"""Count distributions, as torch.distributions' Poisson and Binomial: samples from random.cl's
per-element samplers (cltensor.poisson, cltensor.binomial), log_prob, mean, mode, variance."""
from ..autograd import no_grad
from ..random import binomial, poisson
from .bernoulli import _one_of, clamp_probs
from .distribution import Distribution, broadcast_all

__all__ = ["Binomial", "Poisson"]


def _integral(value):
    return value == value.floor()


class Poisson(Distribution):
    """Poisson(rate): counts k with probability rate^k exp(-rate) / k!.

    Example:
        d = Poisson(cltensor.tensor([0.5, 20.0])); d.sample((3,)).shape   # (3, 2)
    """

    def __init__(self, rate, validate_args=None):
        self.rate, = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)
        self._check(self.rate >= 0, "rate >= 0")

    mean = variance = property(lambda self: self.rate)
    mode = property(lambda self: self.rate.floor())

    def sample(self, sample_shape=()):
        with no_grad():
            return poisson(self.rate.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        value = self._value(value, self.rate)
        self._check((value >= 0) & _integral(value), "non-negative integer values")
        return value.xlogy(self.rate) - self.rate - (value + 1).lgamma()


class Binomial(Distribution):
    """Binomial(total_count=1, probs=None, logits=None): successes in total_count trials.

    Example:
        d = Binomial(10, probs=cltensor.tensor([0.1, 0.9])); d.mean   # [1., 9.]
    """

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits, "Binomial")
        self.total_count, given = broadcast_all(total_count, probs if logits is None else logits)
        self.total_count = self.total_count.to(given.dtype)
        super().__init__(given.shape, validate_args=validate_args)
        self._check((self.total_count >= 0) & _integral(self.total_count),
                    "a non-negative integer total_count")
        if logits is None:
            self._check((given >= 0) & (given <= 1), "probs in [0, 1]")
            self.probs = given
            p = clamp_probs(given)
            self.logits = p.log() - (-p).log1p()
        else:
            self.logits, self.probs = given, given.sigmoid()

    mean = property(lambda self: self.total_count * self.probs)
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))
    mode = property(lambda self: ((self.total_count + 1) * self.probs).floor()
                    .clamp(max=self.total_count))

    def sample(self, sample_shape=()):
        with no_grad():
            shape = self._extended_shape(sample_shape)
            return binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        value = self._value(value, self.probs)
        n = self.total_count
        self._check((value >= 0) & (value <= n) & _integral(value), "integer values in [0, n]")
        log_choose = (n + 1).lgamma() - (value + 1).lgamma() - (n - value + 1).lgamma()
        # log p^k (1 - p)^(n - k) = k l - n log(1 + e^l), stable in the logits l
        softplus = self.logits.clamp(min=0) + (-self.logits.abs()).exp().log1p()
        return log_choose + value * self.logits - n * softplus
