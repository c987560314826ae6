"""The in-place forms composed of out-of-place ops (addcmul_, clamp_min_, cumsum_, addmv_,
fill_diagonal_, ...) and of the views (t_, transpose_, squeeze_, ...). cltensor/composed_methods.py binds
them as ClTensor methods, each recorded for autograd with IN_PLACE[name], its out-of-place twin."""
from .. import dtypes as dt
from ..autograd import is_grad_enabled
from ..tensor import ClTensor
from . import contract
from .composed import (addcdiv, addcmul, clamp_max, clamp_min, float_power, index_reduce, lerp,
                       ldexp, mvlgamma)

IN_PLACE = {}  # in-place method name -> its checked out-of-place op (autograd's twin)


def _in_place(op, name=None):
    """op's in-place method: self overwritten with op(self, ...), whose result must have self's
    shape and a dtype that casts to self's (torch's rule). cltensor/composed_methods.py records it for
    autograd with IN_PLACE[name] as its out-of-place twin."""
    name = name or op.__name__ + "_"

    def twin(self, *args, **kwargs):
        result = op(self, *args, **kwargs)
        if result.shape != self.shape:
            raise ValueError(f"{name}: the result's shape {result.shape} does not match the "
                             f"tensor's shape {self.shape}")
        if dt.category(result.dtype) > dt.category(self.dtype):
            raise TypeError(f"{name}: result type {result.dtype} can't be cast to the tensor's "
                            f"dtype {self.dtype}")
        return result

    def method(self, *args, **kwargs):
        return self.copy_(twin(self, *args, **kwargs))
    method.__name__ = twin.__name__ = name
    IN_PLACE[name] = twin
    return method


def _float_power_of_double(self, exponent):
    if self.dtype != dt.float64:
        raise TypeError(f"float_power_: the base has dtype {self.dtype} but the result is "
                        f"float64")
    return float_power(self, exponent)


def _scan(name):
    """cumsum or cumprod keeping self's dtype (cumsum_'s dtype must be self's, as torch)."""
    def scan(self, dim, dtype=None):
        if dtype is not None and dt.as_dtype(dtype) != self.dtype:
            raise TypeError(f"{name}_: dtype {dtype} must be the tensor's dtype {self.dtype}")
        return getattr(self, name)(dim)
    scan.__name__ = name
    return scan


def _diagonal_mask(x, wrap, op):
    """True on the main diagonal of x (all dims alike; a tall matrix's diagonal restarting
    every columns + 1 rows with wrap), as torch.Tensor.fill_diagonal_."""
    if x.ndim < 2:
        raise ValueError(f"{op}: expects a tensor of at least 2 dims, got {x.ndim}-d")
    if x.ndim > 2 and len(set(x.shape)) != 1:
        raise ValueError(f"{op}: all dimensions of input must be of equal length, got {x.shape}")
    mask = ClTensor.empty_on(x.shape, dt.bool_, x.device).fill_(False)
    n, step = min(x.shape), sum(mask.strides)
    mask.as_strided((n,), (step,), 0).fill_(True)
    h, w = x.shape[:2]
    if wrap and x.ndim == 2 and h > w + 1:
        mask.as_strided(((x.numel() + w) // step - n,), (step,), step * w).fill_(True)
    return mask


def _filled_diagonal(self, fill_value, wrap=False):
    return self.masked_fill(_diagonal_mask(self, wrap, "fill_diagonal_"), fill_value)


def _view_in_place(view):
    """The in-place form of a view method: self takes the view's shape, strides, offset and
    history (t_, squeeze_, ...); a leaf that requires grad refuses, as torch."""
    def method(self, *args, **kwargs):
        if self.requires_grad and self.grad_fn is None and is_grad_enabled():
            raise RuntimeError(f"a leaf Variable that requires grad is being used in an in-place "
                               f"operation ({view}_)")
        v = getattr(self, view)(*args, **kwargs)
        self.shape, self.strides, self.offset = v.shape, v.strides, v.offset
        if v.grad_fn is not None:
            self.grad_fn, self._output_nr = v.grad_fn, v._output_nr
        return self
    method.__name__ = view + "_"
    return method


TENSOR_METHODS = {f.__name__: f for f in (
    _in_place(clamp_min), _in_place(clamp_max), _in_place(_scan("cumsum")),
    _in_place(_scan("cumprod")), _in_place(addcdiv), _in_place(addcmul), _in_place(lerp),
    *(_in_place(getattr(contract, n)) for n in ("addmv", "addr", "addbmm", "renorm")),
    _in_place(index_reduce), _in_place(mvlgamma), _in_place(ldexp),
    _in_place(_float_power_of_double, "float_power_"),
    _in_place(_filled_diagonal, "fill_diagonal_"),
    *(_view_in_place(v) for v in ("transpose", "t", "squeeze", "unsqueeze", "as_strided")))}
