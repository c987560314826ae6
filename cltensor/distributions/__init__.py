"""cltensor.distributions, as torch.distributions: Normal, Uniform, Bernoulli, Categorical,
MultivariateNormal and Independent (sample, rsample where torch has it, log_prob, entropy, mean,
variance), and kl_divergence between two of a kind, on any device."""
from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .independent import Independent
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .uniform import Uniform

__all__ = ["Bernoulli", "Categorical", "Distribution", "Independent", "MultivariateNormal",
           "Normal", "Uniform", "kl_divergence", "register_kl"]
