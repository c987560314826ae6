"""cltensor.nn.utils, as torch.nn.utils: gradient clipping (clip_grad) and the packing of
variable-length sequences for the recurrent layers (rnn)."""
from . import rnn  # noqa: F401
from .clip_grad import clip_grad_norm_, clip_grad_value_  # noqa: F401

__all__ = ["clip_grad_norm_", "clip_grad_value_", "rnn"]
