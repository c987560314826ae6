"""cltensor.nn.utils, as torch.nn.utils: gradient clipping (clip_grad), the packing of
variable-length sequences for the recurrent layers (rnn) and parameters as one flat vector
(convert_parameters)."""
from . import rnn  # noqa: F401
from .clip_grad import clip_grad_norm_, clip_grad_value_  # noqa: F401
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "rnn",
           "vector_to_parameters"]
