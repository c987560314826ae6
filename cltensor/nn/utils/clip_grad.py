"""torch.nn.utils' gradient clipping: the gradients of parameters scaled or clamped in place."""
import math
import numbers

from ...autograd import no_grad
from ...autograd.namespace import norm, stack, tensor
from .convert_parameters import tensor_list

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _grads(parameters, op):
    return [p.grad for p in tensor_list(parameters, op) if p.grad is not None]


def _real(value, name, op):
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be a real number, got {type(value).__name__}")
    return float(value)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients in place so that their total norm is at most max_norm.

    The total norm is the norm_type-norm of all gradients together (of the per-tensor norms);
    each gradient is multiplied by min(1, max_norm / (total + 1e-6)), as torch does.

    Args:
        parameters: a tensor or an iterable of tensors; those without .grad are skipped.
        max_norm: the largest total norm left.
        norm_type: p of the p-norm (a real number, or inf for the largest magnitude).
        error_if_nonfinite: raise when the total norm is nan or inf (else the gradients take
            the non-finite scale, as in torch).
        foreach: accepted for torch's signature; unused.

    Returns:
        The total norm before clipping, a 0-d tensor on the first gradient's device.

    Example:
        >>> loss.backward()
        >>> nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        >>> opt.step()
    """
    grads = _grads(parameters, "clip_grad_norm_")
    max_norm = _real(max_norm, "max_norm", "clip_grad_norm_")
    norm_type = _real(norm_type, "norm_type", "clip_grad_norm_")
    if not grads:
        return tensor(0.0)
    first = grads[0]
    with no_grad():
        norms = [norm(g, norm_type).to(device=first.device, dtype=first.dtype)
                 for g in grads]
        total = norm(stack(norms), norm_type)
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the "
                               f"gradients is non-finite ({total.item()}), so it cannot be "
                               f"clipped; pass error_if_nonfinite=False to scale anyway")
        scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale.to(device=g.device, dtype=g.dtype))
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient in place to [-clip_value, clip_value].

    Example:
        >>> nn.utils.clip_grad_value_(model.parameters(), 0.5)
    """
    clip_value = _real(clip_value, "clip_value", "clip_grad_value_")
    with no_grad():
        for g in _grads(parameters, "clip_grad_value_"):
            g.clamp_(-clip_value, clip_value)
