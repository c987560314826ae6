"""The normal distribution, as torch.distributions.Normal."""
import math

from ..random import randn
from .distribution import Distribution, broadcast_all

__all__ = ["Normal"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


class Normal(Distribution):
    """Normal(loc, scale): independent normals of the broadcast shape of loc and scale.

    Example:
        d = Normal(cltensor.zeros(3), 2.0); x = d.rsample((5,)); d.log_prob(x)   # (5, 3)
    """

    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)
        self._check(self.scale > 0, "scale > 0")

    mean = mode = property(lambda self: self.loc)
    variance = property(lambda self: self.scale ** 2)
    stddev = property(lambda self: self.scale)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        value = self._value(value, self.loc)
        return -((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log() - _LOG_SQRT_2PI

    def entropy(self):
        return self.scale.log() + (0.5 + _LOG_SQRT_2PI)

    def cdf(self, value):
        value = self._value(value, self.loc)
        return 0.5 * (1 + ((value - self.loc) / (self.scale * math.sqrt(2))).erf())
