"""Where ClTensor's methods come from, beyond those written on the class (tensor.py) and
Python's operators (operators.py); in the order they are installed:

1. the kernel ops' TENSOR_METHODS tables (ops/pointwise.py, reduce.py, shape.py, indexing/,
   matmul.py, ranges.py, random.py, sort.py), then wrapped by autograd.install() (the
   differentiable ones: autograd.FUNCTIONS, VIEWS): autograd/namespace.py;
2. the composed ops' tables (COMPOSED below), bound as they are, since they call the wrapped
   methods; their in-place forms (ops/inplace.py) recorded for autograd with their
   out-of-place twins;
3. torch's other names for the same ops (ALIASES), with their in-place forms;
4. nn's methods (softmax, log_softmax, hardshrink, prelu): nn/methods.py.

This module also holds cltensor's functions that are methods here (METHOD_FUNCTIONS:
torch.relu_(x) is x.relu_()) and the aliases that name functions (torch.absolute is
torch.abs); cltensor/__init__.py re-exports them.
"""
from . import autograd, linalg
from .autograd import namespace
from .ops import arrange, composed, contract, inplace, searching
from .tensor import ClTensor

COMPOSED = (composed, inplace, searching, arrange, contract, linalg)
# root functions from the composed ops' modules (cltensor/__init__.py's re-exports)
_COMPOSED_FUNCTIONS = (arrange, composed, contract, searching)
METHOD_FUNCTIONS = (
    "abs_", "acos_", "acosh_", "addmv_", "as_strided_", "asin_", "asinh_", "atan_", "atanh_",
    "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "erf_",
    "erfc_", "exp2_", "exp_", "expm1_", "fill_", "floor_", "frac_", "gcd_", "i0_", "lcm_",
    "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_", "rad2deg_",
    "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_",
    "square_", "tan_", "tanh_", "trunc_", "xlogy_", "zero_", "adjoint", "clone", "conj",
    "conj_physical", "detach", "detach_", "is_complex", "is_conj", "is_floating_point",
    "is_neg", "is_nonzero", "is_same_size", "is_signed", "numel", "resolve_conj", "resolve_neg")
# alias -> target: a tensor method with its in-place form, and a function where the target is one
ALIASES = {"absolute": "abs", "arccos": "acos", "arcsin": "asin", "arctan": "atan",
           "arccosh": "acosh", "arcsinh": "asinh", "arctanh": "atanh", "fix": "trunc",
           "negative": "neg", "subtract": "sub", "multiply": "mul", "divide": "div",
           "true_divide": "div", "greater": "gt", "greater_equal": "ge", "less": "lt",
           "less_equal": "le", "not_equal": "ne", "swapdims": "swapaxes", "unsafe_chunk": "chunk",
           "unsafe_split": "split", "unsafe_split_with_sizes": "split_with_sizes"}


def _attach_composed():
    for module in COMPOSED:
        for name, fn in module.TENSOR_METHODS.items():
            setattr(ClTensor, name, fn)
    for name, twin in inplace.IN_PLACE.items():
        setattr(ClTensor, name, autograd.wrap_inplace(name, getattr(ClTensor, name), twin))


def _functions():
    """{name: function} of the method functions and the aliases of cltensor's functions."""
    known = {name: getattr(namespace, name) for name in namespace.__all__}
    for module in _COMPOSED_FUNCTIONS:
        known.update((name, getattr(module, name)) for name in module.__all__)
    made = {name: getattr(ClTensor, name) for name in METHOD_FUNCTIONS}
    known.update(made)
    for alias, target in ALIASES.items():
        for a, t in ((alias, target), (alias + "_", target + "_")):
            if hasattr(ClTensor, t):
                setattr(ClTensor, a, getattr(ClTensor, t))
            if t in known:
                made[a] = known[a] = known[t]
    ClTensor.swapaxes_ = ClTensor.swapdims_ = ClTensor.transpose_
    return made


_attach_composed()
_made = _functions()
globals().update(_made)
__all__ = sorted(_made)
del _made
