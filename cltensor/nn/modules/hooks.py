"""Module.__call__ with hooks (torch.nn.Module's): forward pre-hooks, forward hooks, and full
backward (pre-)hooks, which two identity Functions around the module's tensors deliver:

    inputs -> _InputGrads -> forward -> forward hooks -> _OutputGrads -> outputs

In backward, _OutputGrads gets the gradients of the outputs (grad_output), runs the backward
pre-hooks on them and keeps them; _InputGrads gets the gradients of the inputs (grad_input) and
runs the backward hooks, whose results replace grad_input. A module none of whose inputs
requires grad gets its backward hooks called from _OutputGrads, with grad_input all None.
"""
from ...autograd import Function, is_grad_enabled
from ...tensor import ClTensor


def call(module, args, kwargs):
    """module(*args, **kwargs) through its hooks."""
    args, kwargs = _pre_hooks(module, args, kwargs)
    hooks = module.__dict__.get("_forward_hooks") or {}
    backward = _BackwardState(module, args) if _backward_hooked(module) else None
    if backward is not None:
        args = backward.wrap_inputs(args)
    try:
        out = module.forward(*args, **kwargs)
    except Exception:
        for hook, with_kwargs, always_call in list(hooks.values()):
            if always_call:
                _forward_hook(module, hook, with_kwargs, args, kwargs, None)
        raise
    for hook, with_kwargs, _ in list(hooks.values()):
        result = _forward_hook(module, hook, with_kwargs, args, kwargs, out)
        if result is not None:
            out = result
    return out if backward is None else backward.wrap_outputs(out)


def _pre_hooks(module, args, kwargs):
    for hook, with_kwargs in list((module.__dict__.get("_forward_pre_hooks") or {}).values()):
        if with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"forward pre-hook must return None or a tuple of "
                                       f"(new_args, new_kwargs), but got {result!r}")
                args, kwargs = result
                args = args if isinstance(args, tuple) else (args,)
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    return args, kwargs


def _forward_hook(module, hook, with_kwargs, args, kwargs, out):
    return hook(module, args, kwargs, out) if with_kwargs else hook(module, args, out)


def _backward_hooked(module):
    d = module.__dict__
    return is_grad_enabled() and bool(d.get("_backward_hooks") or d.get("_backward_pre_hooks"))


class _BackwardState:
    """One call's link between its outputs' gradients and its inputs'."""

    def __init__(self, module, args):
        self.module = module
        self.n_args = len(args)
        # positions of the tensor arguments that take a gradient
        self.graded = [i for i, a in enumerate(args) if isinstance(a, ClTensor) and a.requires_grad]
        self.grad_output = None

    def wrap_inputs(self, args):
        if not self.graded:
            return args
        wrapped = _InputGrads.apply(self, *[args[i] for i in self.graded])
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        args = list(args)
        for i, t in zip(self.graded, wrapped):
            args[i] = t
        return tuple(args)

    def wrap_outputs(self, out):
        single = isinstance(out, ClTensor)
        outs = (out,) if single else out
        if not isinstance(outs, tuple):
            return out  # NOTE: torch's hooks likewise see only a tensor or a tuple of them
        places = [i for i, o in enumerate(outs) if isinstance(o, ClTensor) and o.requires_grad]
        if not places:
            return out
        wrapped = _OutputGrads.apply(self, *[outs[i] for i in places])
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        outs = list(outs)
        for i, t in zip(places, wrapped):
            outs[i] = t
        return outs[0] if single else tuple(outs)

    def run_pre_hooks(self, grads):
        hooks = self.module.__dict__.get("_backward_pre_hooks") or {}
        for hook in list(hooks.values()):
            result = hook(self.module, grads)
            if result is not None:
                grads = _checked(result, grads, "backward pre-hook", "grad_output")
        return grads

    def run_hooks(self, grad_input):
        hooks = self.module.__dict__.get("_backward_hooks") or {}
        for hook in list(hooks.values()):
            result = hook(self.module, grad_input, self.grad_output)
            if result is not None:
                grad_input = _checked(result, grad_input, "backward hook", "grad_input")
        return grad_input


def _checked(result, grads, what, name):
    result = result if isinstance(result, tuple) else (result,)
    if len(result) != len(grads):
        raise RuntimeError(f"{what} returned {len(result)} values for {name}, expected "
                           f"{len(grads)}")
    for new, old in zip(result, grads):
        if new is not None and old is not None and new.shape != old.shape:
            raise RuntimeError(f"{what} returned a gradient of shape {new.shape} in {name}, "
                               f"expected {old.shape}")
    return result


class _Identity(Function):
    """Views of the tensors, recorded with the call's _BackwardState for backward."""

    @staticmethod
    def forward(ctx, state, *tensors):
        ctx.state = state
        return tuple(t.detach() for t in tensors)


class _InputGrads(_Identity):
    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        grad_input = [None] * state.n_args
        for i, g in zip(state.graded, grads):
            grad_input[i] = g
        grad_input = state.run_hooks(tuple(grad_input))
        return (None, *[grad_input[i] for i in state.graded])


class _OutputGrads(_Identity):
    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        grads = state.grad_output = state.run_pre_hooks(grads)
        if not state.graded:
            state.run_hooks((None,) * state.n_args)
        return (None, *grads)
