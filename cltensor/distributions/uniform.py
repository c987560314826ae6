"""The continuous uniform distribution, as torch.distributions.Uniform."""
from ..random import rand
from .distribution import Distribution, broadcast_all

__all__ = ["Uniform"]


class Uniform(Distribution):
    """Uniform(low, high): independent uniforms on [low, high) of the broadcast shape."""

    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, validate_args=validate_args)
        self._check(self.low < self.high, "low < high")

    mean = property(lambda self: (self.low + self.high) / 2)
    variance = property(lambda self: (self.high - self.low) ** 2 / 12)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = rand(shape, dtype=self.low.dtype, device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        value = self._value(value, self.low)
        inside = (self.low <= value) & (value < self.high)
        self._check(inside, "values in the support [low, high)")
        return inside.to(self.low.dtype).log() - (self.high - self.low).log()

    def entropy(self):
        return (self.high - self.low).log()

    def cdf(self, value):
        value = self._value(value, self.low)
        return ((value - self.low) / (self.high - self.low)).clamp(0, 1)
