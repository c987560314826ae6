"""The base of cltensor.distributions, as torch.distributions.Distribution: shapes, sample
under no_grad from rsample, parameter and value checks (on by default, as torch's)."""
from ..autograd import no_grad
from ..creation import as_tensor
from ..ops.elementwise import broadcast_shapes
from ..tensor import ClTensor

__all__ = ["Distribution", "broadcast_all", "set_default_validate_args"]

_validate_default = [True]


def set_default_validate_args(value):
    """Whether distributions check their parameters and log_prob's values (True, as torch)."""
    _validate_default[0] = bool(value)


def broadcast_all(*values):
    """The values as tensors of one broadcast shape: numbers take the first tensor's dtype
    and device (float32 on the default device when there is none)."""
    like = next((v for v in values if isinstance(v, ClTensor)), None)
    kw = {} if like is None else {"dtype": like.dtype, "device": like.device}
    tensors = []
    for v in values:
        if not isinstance(v, (ClTensor, int, float)) or isinstance(v, bool):
            raise TypeError(f"expected a tensor or a number, got {type(v).__name__}")
        tensors.append(v if isinstance(v, ClTensor) else as_tensor(float(v), **kw))
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t.expand(shape) for t in tensors)


class Distribution:
    """batch_shape independent distributions over event_shape values."""

    has_rsample = False

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape, self._event_shape = tuple(batch_shape), tuple(event_shape)
        self._validate_args = _validate_default[0] if validate_args is None else validate_args

    batch_shape = property(lambda self: self._batch_shape)
    event_shape = property(lambda self: self._event_shape)
    stddev = property(lambda self: self.variance.sqrt())

    def _extended_shape(self, sample_shape=()):
        if isinstance(sample_shape, int):
            sample_shape = (sample_shape,)
        return tuple(sample_shape) + self._batch_shape + self._event_shape

    def sample(self, sample_shape=()):
        """A sample of shape sample_shape + batch_shape + event_shape, out of the graph."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sampler "
                                  f"(rsample); use sample()")

    def sample_n(self, n):
        return self.sample((n,))

    def _check(self, ok, what):
        """Raise ValueError naming `what` unless every element of the bool tensor `ok` holds."""
        if self._validate_args and not bool(ok.all()):
            raise ValueError(f"{type(self).__name__}: expected {what}")

    def _value(self, value, like):
        if not isinstance(value, ClTensor):
            value = as_tensor(value, dtype=like.dtype, device=like.device)
        return value

    def __repr__(self):
        return f"{type(self).__name__}(batch_shape={self._batch_shape}, " \
               f"event_shape={self._event_shape})"
