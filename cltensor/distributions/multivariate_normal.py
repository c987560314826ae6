"""The multivariate normal distribution, as torch.distributions.MultivariateNormal.

NOTE: the differentiable cholesky and triangular_solve are reached as tensor methods: the
linalg module imports the package root, which imports this one."""
import math

from ..ops.ranges import eye
from ..ops.elementwise import broadcast_shapes
from ..random import randn
from ..tensor import ClTensor
from .distribution import Distribution

__all__ = ["MultivariateNormal"]


def _matrix(value, name):
    if not isinstance(value, ClTensor) or value.ndim < 2 or value.shape[-1] != value.shape[-2]:
        raise ValueError(f"MultivariateNormal: {name} must be a tensor of square matrices "
                         f"(..., k, k), got {getattr(value, 'shape', type(value).__name__)}")
    return value


class MultivariateNormal(Distribution):
    """MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None, scale_tril=None):
    normals over k-vectors, given exactly one of the (..., k, k) matrices; loc is (..., k).

    Example:
        d = MultivariateNormal(cltensor.zeros(2), cltensor.eye(2)); d.log_prob(d.sample((4,)))
    """

    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        given = [(n, m) for n, m in (("covariance_matrix", covariance_matrix),
                                     ("precision_matrix", precision_matrix),
                                     ("scale_tril", scale_tril)) if m is not None]
        if len(given) != 1:
            raise ValueError("MultivariateNormal: give exactly one of covariance_matrix, "
                             "precision_matrix or scale_tril")
        name, matrix = given[0]
        matrix = _matrix(matrix, name)
        if not isinstance(loc, ClTensor) or loc.ndim < 1 or loc.shape[-1] != matrix.shape[-1]:
            raise ValueError(f"MultivariateNormal: loc must be a tensor (..., "
                             f"{matrix.shape[-1]}), got {getattr(loc, 'shape', loc)!r}")
        batch = broadcast_shapes(loc.shape[:-1], matrix.shape[:-2])
        k = matrix.shape[-1]
        super().__init__(batch, (k,), validate_args=validate_args)
        self.loc = loc.expand(batch + (k,))
        self.scale_tril = self._tril(name, matrix).expand(batch + (k, k))

    def _tril(self, name, matrix):
        if name == "scale_tril":
            self._check(matrix.diagonal(dim1=-2, dim2=-1) > 0, "scale_tril with a positive "
                        "diagonal")
            return matrix
        self._check((matrix - matrix.transpose(-1, -2)).abs().max() <= 1e-6 * (
            1 + matrix.abs().max()), f"a symmetric {name}")
        if name == "covariance_matrix":
            return matrix.cholesky()
        # the covariance's factor from the precision's: P = U U^T with U upper (a Cholesky
        # factor of P flipped), so cov = U^-T U^-1 and U^-T is lower
        upper_inv_t = matrix.flip((-2, -1)).cholesky().flip((-2, -1)).transpose(-1, -2)
        identity = eye(matrix.shape[-1], dtype=matrix.dtype, device=matrix.device)
        return identity.expand(matrix.shape).triangular_solve(upper_inv_t, upper=False)[0]

    mean = mode = property(lambda self: self.loc)
    covariance_matrix = property(lambda self: self.scale_tril @ self.scale_tril.transpose(-1, -2))
    variance = property(lambda self: (self.scale_tril ** 2).sum(-1))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self.scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self.scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        value = self._value(value, self.loc)
        diff = value - self.loc
        shape = diff.shape[:-1]
        tril = self.scale_tril.expand(shape + self.scale_tril.shape[-2:])
        z = diff.unsqueeze(-1).triangular_solve(tril, upper=False)[0].squeeze(-1)
        k = self._event_shape[0]
        return -0.5 * (k * math.log(2 * math.pi) + (z ** 2).sum(-1)) - self._half_log_det()

    def entropy(self):
        k = self._event_shape[0]
        return 0.5 * k * (1 + math.log(2 * math.pi)) + self._half_log_det()
