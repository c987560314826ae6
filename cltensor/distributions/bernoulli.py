"""The Bernoulli distribution, as torch.distributions.Bernoulli."""

from .. import dtypes as dt
from ..autograd import no_grad
from .distribution import Distribution, broadcast_all

__all__ = ["Bernoulli"]


def _one_of(probs, logits, name):
    if (probs is None) == (logits is None):
        raise ValueError(f"{name}: give exactly one of probs or logits")


def clamp_probs(probs):
    """probs kept within [eps, 1 - eps] of their dtype, so their logits stay finite."""
    eps = float(dt.finfo(probs.dtype).eps)
    return probs.clamp(eps, 1 - eps)


def _bce_with_logits(logits, target):
    """-(target log sigmoid(logits) + (1 - target) log sigmoid(-logits)), elementwise and
    stable: max(l, 0) - l t + log1p(exp(-|l|))."""
    return logits.clamp(min=0) - logits * target + (-logits.abs()).exp().log1p()


class Bernoulli(Distribution):
    """Bernoulli(probs=None, logits=None): 1 with probability probs (sigmoid(logits)), else 0."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits, "Bernoulli")
        given, = broadcast_all(probs if logits is None else logits)
        super().__init__(given.shape, validate_args=validate_args)
        if logits is None:
            self.probs = given
            self._check((given >= 0) & (given <= 1), "probs in [0, 1]")
            p = clamp_probs(given)
            self.logits = p.log() - (-p).log1p()
        else:
            self.logits = given
            self._check(given == given, "real logits (not NaN)")
            self.probs = given.sigmoid()

    mean = property(lambda self: self.probs)
    variance = property(lambda self: self.probs * (1 - self.probs))
    mode = property(lambda self: (self.probs > 0.5).to(self.probs.dtype))

    def sample(self, sample_shape=()):
        with no_grad():
            return self.probs.expand(self._extended_shape(sample_shape)).bernoulli()

    def log_prob(self, value):
        value = self._value(value, self.logits)
        self._check((value == 0) | (value == 1), "values 0 or 1")
        return -_bce_with_logits(self.logits, value)

    def entropy(self):
        return _bce_with_logits(self.logits, self.probs)
