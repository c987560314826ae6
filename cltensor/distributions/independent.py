"""Independent, as torch.distributions.Independent: some of a distribution's batch dims read as
event dims (a diagonal normal over vectors from a batch of scalar normals)."""
from .distribution import Distribution

__all__ = ["Independent"]


class Independent(Distribution):
    """The last reinterpreted_batch_ndims batch dims of base_distribution become event dims:
    log_prob and entropy sum over them.

    Example:
        d = Independent(Normal(mu, sigma), 1)   # mu, sigma (N, k): a batch of N k-vectors
    """

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        if not isinstance(base_distribution, Distribution):
            raise TypeError(f"Independent: expected a Distribution, got "
                            f"{type(base_distribution).__name__}")
        batch = base_distribution.batch_shape
        n = reinterpreted_batch_ndims
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= len(batch):
            raise ValueError(f"Independent: reinterpreted_batch_ndims must be an int in "
                             f"[0, {len(batch)}] (the base's batch dims), got {n!r}")
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, n
        super().__init__(batch[:len(batch) - n],
                         batch[len(batch) - n:] + base_distribution.event_shape,
                         validate_args=validate_args)

    has_rsample = property(lambda self: self.base_dist.has_rsample)
    mean = property(lambda self: self.base_dist.mean)
    variance = property(lambda self: self.base_dist.variance)

    def _summed(self, x):
        n = self.reinterpreted_batch_ndims
        return x.sum(tuple(range(-n, 0))) if n else x

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return self._summed(self.base_dist.log_prob(value))

    def entropy(self):
        return self._summed(self.base_dist.entropy())
