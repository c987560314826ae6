"""torch.optim's fused steps (`fused=True`) on cltensor's optimizer kernels (cl_kernels/optim.cl):
one launch per parameter, no per-element Python work. The fused steps' own gradient scaling
(grad_scale, found_inf) runs through the CPU fallback; GradScaler's unscale and scale update
run here."""
import numpy as np
import torch

import cltensor

from ..amp import kernels as amp_kernels
from ..optim import fused
from ._backend import aten, unwrap
from .fallback import cpu_fallback

_aten = torch.ops.aten


def _number(v):
    return float(v.item()) if isinstance(v, torch.Tensor) else float(v)


def _steps(state_steps):
    """The step counts (torch keeps one device tensor per parameter), read in one transfer."""
    if not state_steps:
        return []
    flat = cltensor.cat([unwrap(s).reshape(1).to(cltensor.float64) for s in state_steps])
    return np.asarray(flat.numpy()).tolist()


def _checked(name, params, *lists):
    for other in lists:
        if other and len(other) != len(params):
            raise RuntimeError(f"{name}: expected as many tensors in each list as parameters "
                               f"({len(params)}), got {len(other)}")


def _adam(decoupled):
    name = "_fused_adamw_" if decoupled else "_fused_adam_"
    packet = getattr(_aten, name)

    def kernel(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1,
               beta2, weight_decay, eps, amsgrad, maximize, grad_scale=None, found_inf=None):
        args = (self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps)
        if grad_scale is not None or found_inf is not None:
            overload = packet.tensor_lr if isinstance(lr, torch.Tensor) else packet.default
            return cpu_fallback(overload, *args, lr=lr, beta1=beta1, beta2=beta2,
                                weight_decay=weight_decay, eps=eps, amsgrad=amsgrad,
                                maximize=maximize, grad_scale=grad_scale, found_inf=found_inf)
        _checked(name, self, grads, exp_avgs, exp_avg_sqs, state_steps,
                 max_exp_avg_sqs if amsgrad else [])
        lr = _number(lr)
        base = (fused.ADAM_AMSGRAD if amsgrad else 0) | (fused.ADAM_MAXIMIZE if maximize else 0)
        if weight_decay != 0:
            base |= fused.ADAM_DECOUPLED if decoupled else fused.ADAM_DECAY
        for i, step in enumerate(_steps(state_steps)):
            scalars = (1 - beta1, beta2, 1 - beta2, eps, weight_decay, 1 - lr * weight_decay,
                       -lr / (1 - beta1 ** step), (1 - beta2 ** step) ** 0.5)
            vmax = unwrap(max_exp_avg_sqs[i]) if amsgrad else None
            fused.adam_step(unwrap(self[i]), unwrap(grads[i]), unwrap(exp_avgs[i]),
                            unwrap(exp_avg_sqs[i]), vmax, scalars, base)
    aten(name)(kernel)
    aten(f"{name}.tensor_lr")(kernel)


_adam(decoupled=False)
_adam(decoupled=True)


def fused_sgd(self, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening,
              nesterov, maximize, is_first_step, grad_scale=None, found_inf=None):
    if grad_scale is not None or found_inf is not None:
        overload = _aten._fused_sgd_.tensor_lr if isinstance(lr, torch.Tensor) else _aten._fused_sgd_.default
        return cpu_fallback(overload, self, grads, momentum_buffer_list, weight_decay=weight_decay,
                            momentum=momentum, lr=lr, dampening=dampening, nesterov=nesterov,
                            maximize=maximize, is_first_step=is_first_step,
                            grad_scale=grad_scale, found_inf=found_inf)
    _checked("_fused_sgd_", self, grads, momentum_buffer_list)
    flags = (fused.SGD_MAXIMIZE if maximize else 0) | (fused.SGD_DECAY if weight_decay else 0)
    if momentum != 0:
        flags |= fused.SGD_MOMENTUM | (fused.SGD_NESTEROV if nesterov else 0) | \
            (fused.SGD_FIRST if is_first_step else 0)
    lr = _number(lr)
    for i, (p, g) in enumerate(zip(self, grads)):
        buf = unwrap(momentum_buffer_list[i]) if momentum != 0 else None
        fused.sgd_step(unwrap(p), unwrap(g), buf, lr, momentum, dampening, weight_decay, flags)


aten("_fused_sgd_")(fused_sgd)
aten("_fused_sgd_.tensor_lr")(fused_sgd)


# ---- GradScaler (torch.amp.GradScaler("opencl")) ---------------------------------------------
@aten("_amp_foreach_non_finite_check_and_unscale_")
def amp_unscale(self, found_inf, inv_scale):
    """Every gradient times inv_scale, found_inf set to 1 where one held an infinity or NaN
    (amp.cl, several gradients per launch)."""
    grads = [unwrap(g) for g in self]
    if grads:
        amp_kernels.unscale_and_check(grads, _number(inv_scale), unwrap(found_inf))


@aten("_amp_update_scale_")
def amp_update_scale(self, growth_tracker, found_inf, scale_growth_factor, scale_backoff_factor,
                     growth_interval):
    """torch's rule: back off after inf/NaN gradients, grow after growth_interval clean steps."""
    scale, tracker = unwrap(self), unwrap(growth_tracker)
    if _number(found_inf):
        scale.mul_(scale_backoff_factor)
        tracker.fill_(0)
    elif int(_number(growth_tracker)) + 1 == growth_interval:
        scale.mul_(scale_growth_factor)
        tracker.fill_(0)
    else:
        tracker.add_(1)
    return self
