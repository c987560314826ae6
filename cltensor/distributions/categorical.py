"""The categorical distribution, as torch.distributions.Categorical."""
import math


from .. import dtypes as dt
from ..autograd import no_grad
from ..creation import as_tensor
from ..ops.elementwise import broadcast_shapes
from ..tensor import ClTensor
from .bernoulli import _one_of, clamp_probs
from .distribution import Distribution

__all__ = ["Categorical"]


class Categorical(Distribution):
    """Categorical(probs=None, logits=None): an index in [0, K) drawn with the (normalized)
    weights of the last dim of probs, or softmax(logits); the other dims are the batch."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits, "Categorical")
        given = probs if logits is None else logits
        if not isinstance(given, ClTensor) or given.ndim < 1:
            raise ValueError("Categorical: probs or logits must be a tensor of at least 1 dim")
        super().__init__(given.shape[:-1], validate_args=validate_args)
        if logits is None:
            self._check(given >= 0, "probs >= 0")
            self.probs = given / given.sum(-1, keepdim=True)
            self.logits = clamp_probs(self.probs).log()
        else:
            self._check(given == given, "real logits (not NaN)")
            self.logits = given - given.logsumexp(-1, keepdim=True)
            self.probs = self.logits.exp()
        self._num_events = given.shape[-1]

    param_shape = property(lambda self: self.probs.shape)
    mode = property(lambda self: self.probs.argmax(-1))

    def sample(self, sample_shape=()):
        if isinstance(sample_shape, int):
            sample_shape = (sample_shape,)
        n = math.prod(sample_shape)
        with no_grad():
            flat = self.probs.reshape(-1, self._num_events)
            drawn = flat.multinomial(n, True).transpose(0, 1)
            return drawn.reshape(tuple(sample_shape) + self._batch_shape)

    def log_prob(self, value):
        if not isinstance(value, ClTensor):
            value = as_tensor(value, device=self.logits.device)
        value = value.long()
        self._check((value >= 0) & (value < self._num_events),
                    f"values in [0, {self._num_events})")
        shape = broadcast_shapes(value.shape, self._batch_shape)
        logits = self.logits.expand(shape + (self._num_events,))
        index = value.expand(shape).reshape(shape + (1,))
        return logits.gather(-1, index).squeeze(-1)

    def entropy(self):
        low = float(dt.finfo(self.logits.dtype).min)
        return -(self.logits.clamp(min=low) * self.probs).sum(-1)
