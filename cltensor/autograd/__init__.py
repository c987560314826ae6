"""Autograd for ClTensor: torch's API (requires_grad, backward, grad, no_grad, Function).

The ops below (cltensor/ops) know nothing of gradients. `install()` wraps each differentiable
op, as a cltensor function and a ClTensor method: when grad mode is on and an input requires
grad the call goes through the op's Function (functions/, one module per ops module),
otherwise straight to the op.
In-place ops bump their storage's version (saved tensors check it) and, on a tensor in a graph,
record the out-of-place op and take over its history.
"""
import functools
import inspect

from ..ops import indexing
from ..tensor import _is_basic_key
from . import functions as F
from .engine import (RAW, Function, Node, _check_out, backward, enable_grad,  # noqa: F401
                     grad, is_grad_enabled, needs_grad, no_grad, once_differentiable,
                     set_grad_enabled, wrap_function, zero_grads)



def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False):
    """Accumulate d self / d leaf into every leaf's .grad (see cltensor.autograd.backward)."""
    backward(self, gradient, retain_graph, create_graph)


# ClTensor's methods of autograd itself (installed by namespace.py, listed in methods.py)
TENSOR_METHODS = {"backward": _tensor_backward}
FUNCTIONS = {
    "add": F.Add, "sub": F.Sub, "rsub": F.Rsub, "mul": F.Mul, "div": F.Div, "_rdiv": F.Rdiv,
    "pow": F.Pow, "_rpow": F.Rpow, "clamp": F.Clamp, "maximum": F.Maximum, "minimum": F.Minimum,
    "where": F.Where, "matmul": F.Matmul, "mm": F.Matmul, "bmm": F.Matmul, "mv": F.Matmul,
    "dot": F.Matmul, "addmm": F.Addmm, "baddbmm": F.Baddbmm, "clone": F.Clone,
    "_cast": F.Cast, "_move": F.ToDevice, "permute": F.Permute, "expand": F.Expand, **F.UNARY,
    **F.BINARY, "logit": F.Logit, "nan_to_num": F.NanToNum,
    "sum": F.Sum, "mean": F.Mean, "prod": F.Prod, "amax": F.Amax, "amin": F.Amin,
    "cumsum": F.Cumsum, "cumprod": F.Cumprod, "logcumsumexp": F.Logcumsumexp, "norm": F.Norm,
    "pad": F.Pad, "flip": F.Flip, "roll": F.Roll, "repeat": F.Repeat,
    "tril": F.Tril, "triu": F.Triu, "diag": F.Diag,
    "index_select": F.IndexSelect, "gather": F.Gather, "scatter": F.Scatter,
    "scatter_add": F.ScatterAdd, "scatter_reduce": F.ScatterReduce,
    "masked_fill": F.MaskedFill, "masked_select": F.MaskedSelect,
    "masked_scatter": F.MaskedScatter,
    "index_add": F.IndexAdd, "index_copy": F.IndexCopy, "index_fill": F.IndexFill,
}
# view methods: Function(x, method_name, *args)
VIEWS = {"view": F.Reshape, "reshape": F.Reshape, "squeeze": F.Reshape, "unsqueeze": F.Reshape,
         "narrow": F.Slice, "select": F.Slice, "unfold": F.Slice, "diagonal": F.Slice,
         "_basic_index": F.Slice}
ALIASES = {"subtract": "sub", "multiply": "mul", "divide": "div", "true_divide": "div",
           "negative": "neg", "clip": "clamp"}


def wrap_view(name, raw, fn_cls):
    sig = inspect.signature(raw)

    @functools.wraps(raw)
    def op(self, *args, **kwargs):
        if not needs_grad((self,)):
            return raw(self, *args, **kwargs)
        bound = sig.bind(self, *args, **kwargs)
        return fn_cls.apply(self, name, *bound.args[1:])
    return op


def wrap_composite(raw, composite):
    """raw normally; a composition of differentiable ops when a gradient is needed."""
    @functools.wraps(raw)
    def op(*args, **kwargs):
        if needs_grad(args, kwargs):
            _check_out(raw.__name__, kwargs)
            return composite(*args, **kwargs)
        return raw(*args, **kwargs)
    return op


def wrap_inplace(name, raw, out_of_place):
    """An in-place method: bumps the storage version; in a graph, records out_of_place instead
    and gives self the result's history."""
    @functools.wraps(raw)
    def op(self, *args, **kwargs):
        if needs_grad((self,) + args, kwargs):
            if self.grad_fn is None and self.requires_grad:
                raise RuntimeError("a leaf Variable that requires grad is being used in an "
                                   f"in-place operation ({name})")
            if out_of_place is None:
                raise RuntimeError(f"{name}: this in-place operation does not support autograd")
            before = Node.recorded
            result = out_of_place(self, *args, **kwargs)
            _keep_saved_values(result.grad_fn, before, self.storage)
            with no_grad():
                RAW["copy_"](self, result)
            self.storage.version += 1
            self.grad_fn, self._output_nr = result.grad_fn, result._output_nr
            self.requires_grad = result.requires_grad
            return self
        out = raw(self, *args, **kwargs)
        self.storage.version += 1
        return out
    return op


def _keep_saved_values(node, before, storage):
    """The nodes recorded after number `before` that lead to `node` save copies of what they
    saved from `storage` (the in-place op's target, about to be overwritten)."""
    todo, seen = [node], set()
    while todo:
        node = todo.pop()
        if not isinstance(node, Node) or node.number <= before or id(node) in seen:
            continue
        seen.add(id(node))
        node.ctx.keep_values_of(storage)
        todo.extend(e[0] for e in node.next_functions if e is not None)


def _copy_out_of_place(self, src):
    if not hasattr(src, "shape"):
        return self * 0 + src
    return src.to(self.device).to(self.dtype).expand(self.shape).clone()


def _setitem_out_of_place(self, key, value):
    return F.IndexPut.apply(self, key, value)


def install(cltensor_ns, tensor_cls):
    """Wrap the differentiable ops in the cltensor namespace and as ClTensor methods."""
    RAW.update(cat_raw=cltensor_ns["cat"], getitem_raw=indexing.getitem,
               setitem_raw=indexing.setitem)
    for name, fn_cls in FUNCTIONS.items():
        raw = cltensor_ns[name] if name in cltensor_ns else getattr(tensor_cls, name)
        RAW[name] = raw
        wrapped = wrap_function(name, raw, fn_cls)
        _bind(cltensor_ns, tensor_cls, name, wrapped)
    for name, fn_cls in VIEWS.items():
        raw = getattr(tensor_cls, name)
        RAW[name] = raw
        setattr(tensor_cls, name, wrap_view(name, raw, fn_cls))
    for name, (raw_fn, composite) in F.composites(cltensor_ns, tensor_cls).items():
        RAW[name] = raw_fn
        _bind(cltensor_ns, tensor_cls, name, wrap_composite(raw_fn, composite))
    for alias, target in ALIASES.items():
        _bind(cltensor_ns, tensor_cls, alias, getattr(tensor_cls, target))
    tensor_cls.where = lambda self, condition, other: cltensor_ns["where"](condition, self, other)
    tensor_cls.__getitem__ = _wrap_getitem(tensor_cls.__getitem__)
    _install_inplace(tensor_cls)


def _wrap_getitem(raw):
    """Advanced indexing (tensors, lists, masks) records Index; basic keys go through the
    wrapped view method _basic_index."""
    @functools.wraps(raw)
    def getitem(self, key):
        key_t = key if isinstance(key, tuple) else (key,)
        if needs_grad((self,)) and not _is_basic_key(key_t):
            return F.Index.apply(self, key_t)
        return raw(self, key)
    return getitem


def _bind(ns, cls, name, fn):
    if name in ns and not name.startswith("_"):
        ns[name] = fn
    if hasattr(cls, name):
        setattr(cls, name, fn)


NOT_INPLACE = {"requires_grad_", "detach_"}
# in-place fills with no differentiable out-of-place twin (random draws): error in a graph
NO_TWIN = {"uniform_", "normal_", "bernoulli_", "exponential_", "random_"}


def _install_inplace(cls):
    RAW["copy_"] = cls.copy_
    RAW["__setitem__"] = cls.__setitem__
    special = {"copy_": _copy_out_of_place, "fill_": lambda self, v: self * 0 + v,
               "zero_": lambda self: self * 0, "__setitem__": _setitem_out_of_place}
    names = [n for n in dir(cls) if n.endswith("_") and not n.startswith("__")
             and n not in NOT_INPLACE] + ["__setitem__"]
    for name in names:
        raw = getattr(cls, name)
        twin = name[:-1]
        out_of_place = special.get(name)
        if out_of_place is None and name not in NO_TWIN and twin in RAW:
            out_of_place = getattr(cls, twin)  # the wrapped, differentiable twin
        setattr(cls, name, wrap_inplace(name, raw, out_of_place))
