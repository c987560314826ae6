"""autocast: ops of torch's autocast lists run in float16/bfloat16 or in float32 inside the
block. Installed from above (cltensor.amp): the public functions and tensor methods of the op
lists are wrapped once; outside an autocast block a wrapper only reads a thread-local flag."""
import functools
import threading

from .. import dtypes as dt
from ..tensor import ClTensor
from . import mixed

# torch scripts write "cuda" or "cpu"; every one of them means the tensors' OpenCL device here
DEVICE_TYPES = ("opencl", "cuda", "cpu", "xpu", "mps")
LOW, FP32 = "low", "fp32"


class _State(threading.local):
    def __init__(self):
        self.stack = []     # (enabled, dtype) of the open autocast blocks, innermost last
        self.busy = False   # inside a wrapped op: the ops it calls run as written


_state = _State()


def _current_dtype():
    if not _state.stack or _state.busy:
        return None
    enabled, dtype = _state.stack[-1]
    return dtype if enabled else None


def is_autocast_enabled(device_type=None):
    return bool(_state.stack) and _state.stack[-1][0]


def get_autocast_dtype(device_type="opencl"):
    """The innermost block's dtype, else torch's default for the device type."""
    return _state.stack[-1][1] if _state.stack else _default_dtype(device_type)


def _default_dtype(device_type):
    return dt.bfloat16 if device_type == "cpu" else dt.float16


def _as_dtype(dtype):
    if dt.is_torch_dtype(dtype):  # torch.bfloat16 in a torch script
        return dt.as_dtype(str(dtype).rsplit(".", 1)[-1])
    return dt.as_dtype(dtype)


class autocast:  # noqa: N801  (torch's name)
    """Inside the block (or the decorated function), matmul, linear, convolutions and the
    batched products run in `dtype`; softmax, log_softmax, the losses, layer and group norm,
    sum, mean, prod, cumsum, logsumexp, norm, exp, log and pow in float32; other ops in the
    widest type of their inputs (their own promotion).

    Args:
        device_type: "opencl", or "cuda"/"cpu" as torch scripts write it (the same here).
        dtype: cltensor.float16 or cltensor.bfloat16 (torch's dtypes are taken too); default
            bfloat16 for "cpu", float16 otherwise, as torch.
        enabled: False runs the block as written (also inside an enabled block).
        cache_enabled: accepted; casts are not cached.

    Example:
        with cltensor.autocast("opencl", dtype=cltensor.bfloat16):
            loss = loss_fn(model(x), y)     # float32 loss from bfloat16 GEMMs
        scaler.scale(loss).backward()       # backward outside the block, as in torch
    """

    def __init__(self, device_type="opencl", dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str) or device_type.split(":")[0] not in DEVICE_TYPES:
            raise ValueError(f"autocast: device_type must be one of {', '.join(DEVICE_TYPES)}, "
                             f"got {device_type!r}")
        dtype = _default_dtype(device_type) if dtype is None else _as_dtype(dtype)
        if dtype not in dt.HALF_TYPES:
            raise ValueError(f"autocast: dtype must be cltensor.float16 or cltensor.bfloat16, "
                             f"got {dtype}")
        self.device = device_type
        self.fast_dtype = dtype
        self._enabled = bool(enabled)

    def __enter__(self):
        _state.stack.append((self._enabled, self.fast_dtype))
        return self

    def __exit__(self, *exc):
        _state.stack.pop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)
        return run


def _cast(x, target):
    """x cast to target when it is a floating tensor other than float64 (torch's eligible
    ones); lists and tuples of tensors (cat, stack) elementwise."""
    if isinstance(x, ClTensor):
        d = x.dtype
        return x.to(target) if d.is_floating_point and d is not dt.float64 and d is not target \
            else x
    if isinstance(x, (list, tuple)) and any(isinstance(t, ClTensor) for t in x):
        return type(x)(_cast(t, target) for t in x)
    return x


def _wrap_linear(fn, policy):
    """linear's wrapper: float32 parameters are read as they are (amp/mixed.py), the other
    cases cast as every op of the list."""
    cast = _wrap(fn, policy)

    @functools.wraps(fn)
    def run(input, weight, bias=None, *, relu=False):
        dtype = _current_dtype()
        if dtype is None or not mixed.applies(input, weight, bias):
            return cast(input, weight, bias, relu=relu)
        _state.busy = True
        try:
            return mixed.linear(input, weight, bias, relu, dtype)
        finally:
            _state.busy = False
    run.autocast_policy = policy
    return run


def _wrap(fn, policy):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        dtype = _current_dtype()
        if dtype is None:
            return fn(*args, **kwargs)
        target = dtype if policy == LOW else dt.float32
        args = [_cast(a, target) for a in args]
        kwargs = {k: _cast(v, target) for k, v in kwargs.items()}
        _state.busy = True
        try:
            return fn(*args, **kwargs)
        finally:
            _state.busy = False
    run.autocast_policy = policy
    return run


# (policy, names in the cltensor namespace, tensor methods, names in nn.functional)
OP_LISTS = (
    (LOW, ("matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm"),
     ("matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "baddbmm"),
     ("linear", "bilinear", "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d",
      "prelu")),
    (FP32, ("softmax", "log_softmax", "sum", "mean", "prod", "cumsum", "logsumexp", "norm",
            "exp", "log", "pow"),
     ("softmax", "log_softmax", "sum", "mean", "prod", "cumsum", "logsumexp", "norm", "exp",
      "log", "pow", "__pow__"),
     ("softmax", "log_softmax", "layer_norm", "group_norm", "cross_entropy", "nll_loss",
      "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
      "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss", "gaussian_nll_loss",
      "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
      "multilabel_soft_margin_loss", "cosine_embedding_loss", "multi_margin_loss",
      "multilabel_margin_loss", "triplet_margin_loss")),
)


def install(namespace, functional):
    """Wrap the op lists' functions in `namespace` (cltensor), ClTensor's methods and
    `functional` (cltensor.nn.functional); idempotent."""
    for policy, names, methods, fnames in OP_LISTS:
        for owner, listed in ((namespace, names), (ClTensor, methods), (functional, fnames)):
            for name in listed:
                fn = getattr(owner, name)
                if getattr(fn, "autocast_policy", None) is None:
                    wrap = _wrap_linear if (owner, name) == (functional, "linear") else _wrap
                    setattr(owner, name, wrap(fn, policy))
