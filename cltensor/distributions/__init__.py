"""cltensor.distributions, as torch.distributions: Normal, Uniform, Bernoulli, Categorical,
MultivariateNormal, Independent, Gamma, Beta, Dirichlet, Poisson and Binomial (sample, rsample
where torch has it and cltensor has the gradient, log_prob, entropy, mean, variance), and
kl_divergence between two of a kind, on any device."""
from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .gamma import Beta, Dirichlet, Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .poisson import Binomial, Poisson
from .uniform import Uniform

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Dirichlet", "Distribution", "Gamma",
           "Independent", "MultivariateNormal", "Normal", "Poisson", "Uniform", "kl_divergence",
           "register_kl"]
