"""kl_divergence(p, q) and register_kl, as torch.distributions': KL(p || q) for the pairs of
distributions with a closed form here, each the batch's elementwise divergence."""
import math

from ..autograd.functions import _where
from .bernoulli import Bernoulli
from .categorical import Categorical
from .independent import Independent
from .normal import Normal
from .uniform import Uniform

__all__ = ["kl_divergence", "register_kl"]

_KL = {}  # (type of p, type of q) -> fn(p, q)


def register_kl(type_p, type_q):
    """Decorator: fn(p, q) computes KL(p || q) for p of type_p and q of type_q."""
    def register(fn):
        _KL[type_p, type_q] = fn
        return fn
    return register


def kl_divergence(p, q):
    """KL(p || q), of the batch shape of p and q (broadcast).

    Raises:
        NotImplementedError for a pair with no registered formula.
    """
    fn = next((_KL[a, b] for a in type(p).__mro__ for b in type(q).__mro__ if (a, b) in _KL),
              None)
    if fn is None:
        raise NotImplementedError(f"kl_divergence: no formula for {type(p).__name__} || "
                                  f"{type(q).__name__}; register one with register_kl")
    return fn(p, q)


def _softplus(x):
    return x.clamp(min=0) + (-x.abs()).exp().log1p()


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale) ** 2
    t1 = ((p.loc - q.loc) / q.scale) ** 2
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    inside = (q.low <= p.low) & (p.high <= q.high)
    ratio = ((q.high - q.low) / (p.high - p.low)).log()
    return _where(inside, ratio, math.inf)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    # p log(p/q) + (1-p) log((1-p)/(1-q)) from logits; 0 log 0 = 0, p > 0 = q gives inf
    t1 = p.probs * (_softplus(-q.logits) - _softplus(-p.logits))
    t1 = _where(p.probs == 0, 0.0, _where(q.probs == 0, math.inf, t1))
    t2 = (1 - p.probs) * (_softplus(q.logits) - _softplus(p.logits))
    t2 = _where(p.probs == 1, 0.0, _where(q.probs == 1, math.inf, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _where(p.probs == 0, 0.0, _where(q.probs == 0, math.inf, t))
    return t.sum(-1)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("kl_divergence: Independent distributions that reinterpret "
                                  "different numbers of batch dims")
    return p._summed(kl_divergence(p.base_dist, q.base_dist))
