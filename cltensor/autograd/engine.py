"""The autograd engine: grad mode, Function/ctx, graph nodes, the reverse pass, and
wrap_function, which sends an op through its Function when a gradient is needed.

A Function's `apply` runs `forward` without recording, then, when grad mode is on and an input
requires grad, gives the outputs a `grad_fn` Node holding the ctx and edges to the inputs' nodes
(an AccumulateGrad node for a leaf). `backward` sorts the graph topologically from the roots and
runs each node's `backward` once, after all its consumers, summing the gradients that meet.
"""
import contextlib
import functools
import inspect
import sys
import threading
import weakref

from .. import dtypes as dt
from ..creation import ones_like
from ..ops.elementwise import sum_of
from ..tensor import ClTensor

_state = threading.local()
RAW = {}  # op or method name -> the op before autograd wrapped it (Functions call these)


def is_grad_enabled():
    return getattr(_state, "enabled", True)


def _set_enabled(mode):
    _state.enabled = bool(mode)


class set_grad_enabled(contextlib.ContextDecorator):
    """Turn gradient recording on or off, as a call, a context manager or a decorator."""

    def __init__(self, mode):
        self.prev = is_grad_enabled()
        self.mode = bool(mode)
        _set_enabled(self.mode)

    def __enter__(self):
        _set_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        _set_enabled(self.prev)
        return False


class no_grad(contextlib.ContextDecorator):
    """Context manager and decorator: ops inside record no graph.

    Example:
        with cltensor.no_grad():
            w -= lr * w.grad
    """

    def __enter__(self):
        self.prev = is_grad_enabled()
        _set_enabled(False)
        return self

    def __exit__(self, *exc):
        _set_enabled(self.prev)
        return False


class enable_grad(no_grad):
    def __enter__(self):
        self.prev = is_grad_enabled()
        _set_enabled(True)
        return self


class Context:
    """What a Function's forward leaves for its backward."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = None
        self._versions = None
        self._indices = ()
        self._released = False
        self._outputs = None  # saved index -> (weakref to the node, output index): see _unlink

    def save_for_backward(self, *tensors):
        self._saved = tensors
        self._versions = tuple(None if t is None else t.storage.version for t in tensors)

    @property
    def saved_tensors(self):
        if self._released:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved "
                "tensors after they have already been freed). Specify retain_graph=True when "
                "calling .backward() or autograd.grad() the first time.")
        if self._saved is None:
            return ()
        for t, v in zip(self._saved, self._versions):
            if t is not None:
                _check_version(t, v)
        if self._outputs is None:
            return self._saved
        return tuple(_relinked(t, *self._outputs[i]) if i in self._outputs else t
                     for i, t in enumerate(self._saved))

    def save_indices(self, *tensors):
        """Index and mask tensors (non-tensors skipped) that backward reads from ctx attributes:
        checked for in-place changes before backward runs, as saved tensors are."""
        self._indices = tuple((t, t.storage.version) for t in tensors if hasattr(t, "storage"))

    def check_indices(self):
        for t, v in self._indices:
            _check_version(t, v)

    def _unlink(self, node, outs):
        """Keep saved outputs without their grad_fn (the node that holds this ctx), so that a
        graph nobody runs backward through is freed at once, not by the cycle collector
        (torch's SavedVariable does the same)."""
        where = {id(o): i for i, o in enumerate(outs)}
        hits = {i: where[id(t)] for i, t in enumerate(self._saved or ())
                if t is not None and id(t) in where}
        if not hits:
            return
        ref = weakref.ref(node)
        self._outputs = {i: (ref, k) for i, k in hits.items()}
        self._saved = tuple(t.detach() if i in hits else t for i, t in enumerate(self._saved))

    def release(self):
        self._saved = None
        self._released = True

    def keep_values_of(self, storage):
        """Save copies in place of the saved tensors that view `storage`, which an in-place op
        is about to overwrite (torch saves the original value of a tensor an in-place op
        changes where its backward needs it)."""
        if not self._saved or not any(t is not None and t.storage is storage for t in self._saved):
            return
        self._saved = tuple(t.clone() if t is not None and t.storage is storage else t
                            for t in self._saved)
        self._versions = tuple(None if t is None else t.storage.version for t in self._saved)


def _check_version(t, version):
    if t.storage.version != version:
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: a tensor of shape {t.shape} is at version "
            f"{t.storage.version}; expected version {version} instead")


def _relinked(t, node_ref, index):
    """A saved output given back with its grad_fn (for create_graph=True)."""
    node = node_ref()
    if node is None:
        return t
    v = t.detach()
    v.requires_grad = True
    v.grad_fn = node
    v._output_nr = index
    return v


class Node:
    """A recorded op: its Function, ctx, and one edge per forward input (None: no gradient).
    Nodes are numbered in the order they are recorded (Node.recorded: how many so far)."""

    tensor_hooks = None  # output index -> {id: hook} (ClTensor.register_hook)
    recorded = 0

    def __init__(self, fn_cls, ctx, edges, n_outputs):
        Node.recorded += 1
        self.number = Node.recorded
        self.fn_cls = fn_cls
        self.ctx = ctx
        self.next_functions = edges
        self.n_outputs = n_outputs
        self.retained = {}  # output index -> tensor whose .grad is kept (retain_grad)

    def name(self):
        return self.fn_cls.__name__ + "Backward"

    def __repr__(self):
        return f"<{self.name()}>"

    def apply(self, grads):
        if self.ctx._released:
            _ = self.ctx.saved_tensors  # raises the 'backward twice' error
        self.ctx.check_indices()
        out = self.fn_cls.backward(self.ctx, *grads)
        return out if isinstance(out, tuple) else (out,)


class AccumulateGrad:
    """The node of a leaf tensor: gradients reaching it are summed into `tensor.grad`."""

    n_outputs = 1
    next_functions = ()

    def __init__(self, tensor):
        self.tensor = tensor

    def name(self):
        return "AccumulateGrad"

    @property
    def tensor_hooks(self):
        hooks = self.tensor.__dict__.get("_grad_hooks")
        return {0: hooks} if hooks else None

    def post_accumulate(self):
        for hook in list((self.tensor.__dict__.get("_post_accumulate_hooks") or {}).values()):
            hook(self.tensor)

    def accumulate(self, grad, owned=False):
        """Add grad into tensor.grad. owned: no tensor outside this backward holds grad, so
        its storage may become .grad as it is when no other tensor shares it (torch steals
        such a gradient too); otherwise .grad gets a copy and never aliases another tensor."""
        t = self.tensor
        assert grad.shape == t.shape, f"gradient of shape {grad.shape} for a leaf of shape {t.shape}"
        # NOTE: grad's references: the engine's slot list, this argument, getrefcount's
        owned = owned and sys.getrefcount(grad) <= 3
        if grad.dtype != t.dtype:
            grad = grad.to(t.dtype)
        if t.grad is not None:
            t.grad = t.grad + grad.detach()
        elif owned and _sole_view(grad) and not is_grad_enabled():
            t.grad = grad.detach()
        else:
            t.grad = grad.detach().clone()


def _sole_view(t):
    """t is contiguous, spans its whole storage, and no other tensor refers to that storage."""
    # NOTE: the storage's references: t's attribute and getrefcount's argument
    return (t.offset == 0 and t.storage.nbytes == t.numel() * t.dtype.itemsize
            and t.is_contiguous() and sys.getrefcount(t.storage) == 2)


def _edge(t):
    """The node that a gradient w.r.t. tensor t flows into, with t's output index."""
    if t.grad_fn is not None:
        return (t.grad_fn, t._output_nr)
    if t.requires_grad:
        acc = t.__dict__.get("_accumulator")
        if acc is None:
            acc = t._accumulator = AccumulateGrad(t)
        return (acc, 0)
    return None


class Function:
    """A differentiable op: subclass with static `forward(ctx, ...)` and `backward(ctx, *grads)`.

    backward gets one gradient per forward output (None for an output no gradient reached) and
    returns one per forward argument (None for non-tensors or inputs that need none). Call it
    as `MyFn.apply(*args)`; forward runs without recording a graph.

    Example:
        class Square(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return 2 * x * grad
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a Function subclass must define backward")

    @classmethod
    def apply(cls, *args, **kwargs):
        needs = tuple([isinstance(a, ClTensor) and a.requires_grad for a in args])
        prev = is_grad_enabled()
        record = prev and any(needs)
        ctx = Context(needs)
        _state.enabled = False  # forward records nothing (no_grad, inlined)
        try:
            out = cls.forward(ctx, *args, **kwargs)
        finally:
            _state.enabled = prev
        if not record:
            return out
        outs = out if isinstance(out, tuple) else (out,)
        edges = tuple(_edge(a) if n else None for a, n in zip(args, needs))
        node = Node(cls, ctx, edges, len(outs))
        for i, o in enumerate(outs):
            if isinstance(o, ClTensor) and o.is_floating_point():
                o.requires_grad = True
                o.grad_fn = node
                o._output_nr = i
        ctx._unlink(node, outs)
        return out


def _topological_order(roots):
    """Nodes reachable from roots, each before every node it sends gradients to."""
    order, seen = [], set()
    for root in roots:
        stack = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            for e in node.next_functions:
                if e is not None and id(e[0]) not in seen:
                    stack.append((e[0], False))
    order.reverse()
    return order


def run_backward(tensors, grads, retain_graph=False, inputs=None):
    """Propagate `grads` from `tensors` back through the graph.

    With `inputs`, return the gradients w.r.t. those tensors instead of accumulating into .grad.
    """
    roots, pending = [], {}
    for t, g in zip(tensors, grads):
        e = _edge(t)
        if e is None:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a "
                               "grad_fn")
        roots.append(e[0])
        _add_grad(pending, e, g)
    wanted = None if inputs is None else {id(_edge(x)[0]): i for i, x in enumerate(inputs)
                                          if _edge(x) is not None}
    results = [None] * (0 if inputs is None else len(inputs))
    for node in _topological_order(roots):
        gs = pending.pop(id(node), None)
        if gs is None:
            continue
        if any(g.__class__ is _Sum for g in gs):
            gs = [_total(g) if g.__class__ is _Sum else g for g in gs]
        if node.tensor_hooks:
            gs = _hooked(node.tensor_hooks, gs)
        if wanted is not None and id(node) in wanted:
            results[wanted[id(node)]] = gs[_output_index(inputs[wanted[id(node)]])]
            if isinstance(node, AccumulateGrad):
                continue
        if isinstance(node, AccumulateGrad):
            if inputs is None:
                node.accumulate(gs[0], owned=all(g is not gs[0] for g in grads))
                node.post_accumulate()
            continue
        for i, t in node.retained.items():
            if gs[i] is not None and inputs is None:
                t.grad = gs[i].detach() if t.grad is None else t.grad + gs[i].detach()
        in_grads = node.apply(gs)
        if not retain_graph:
            node.ctx.release()
        for e, g in zip(node.next_functions, in_grads):
            if e is not None and g is not None:
                _add_grad(pending, e, g)
        in_grads = g = None  # NOTE: the pending slots alone hold the gradients (accumulate)
    return results


def _hooked(hooks, gs):
    """gs after the tensor hooks ({output index: {id: hook}}): a hook's result other than None
    replaces the gradient it was given, and the next hook gets that."""
    gs = list(gs)
    for i, registry in hooks.items():
        for hook in list(registry.values()):
            if gs[i] is None:
                break
            result = hook(gs[i])
            if result is not None:
                if not isinstance(result, ClTensor) or result.shape != gs[i].shape:
                    got = result.shape if isinstance(result, ClTensor) else type(result).__name__
                    raise RuntimeError(f"a tensor hook must return None or a tensor of the "
                                       f"gradient's shape {gs[i].shape}, got {got}")
                gs[i] = result
    return gs


def _output_index(t):
    return t._output_nr if t.grad_fn is not None else 0


class _Sum(list):
    """The gradients that reached one output of a node, in order, until the node runs."""


def _add_grad(pending, edge, g):
    node, idx = edge
    slots = pending.setdefault(id(node), [None] * node.n_outputs)
    held = slots[idx]
    if held is None:
        slots[idx] = g
    elif held.__class__ is _Sum:
        held.append(g)
    else:
        slots[idx] = _Sum((held, g))


# the gradients' dtypes summed in one launch: their sums run in their own type, so each
# addition rounds as it would alone (16-bit ones sum in float32)
_FUSED_SUM_DTYPES = (dt.float32, dt.float64)


def _total(parts):
    """The sum of a node output's gradients in the order they came: in few launches (a
    tensor used by several ops, an inception module's input) where nothing records it and
    they agree in shape, dtype and device, else one addition each."""
    first = parts[0]
    if (not is_grad_enabled() and first.dtype in _FUSED_SUM_DTYPES and
            all(p.__class__ is ClTensor and p.shape == first.shape and p.dtype is first.dtype
                and p.device is first.device for p in parts)):
        return sum_of(parts)
    return functools.reduce(lambda a, b: a + b, parts)


def backward(tensor, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Compute d tensor / d leaves and accumulate it into each leaf's .grad."""
    if gradient is None:
        if tensor.numel() != 1:
            raise RuntimeError(f"grad can be implicitly created only for scalar outputs; "
                               f"got a tensor of shape {tensor.shape}: pass a gradient")
        gradient = ones_like(tensor)
    elif gradient.shape != tensor.shape:
        raise ValueError(f"backward: gradient of shape {gradient.shape} does not match the "
                         f"tensor's shape {tensor.shape}")
    retain = create_graph if retain_graph is None else retain_graph
    with set_grad_enabled(create_graph):
        run_backward([tensor], [gradient], retain_graph=retain)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """The gradients of outputs w.r.t. inputs, returned rather than accumulated (torch.autograd.grad)."""
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif not isinstance(grad_outputs, (list, tuple)):
        grad_outputs = [grad_outputs]
    gs = []
    for o, g in zip(outputs, grad_outputs):
        if g is None:
            if o.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            g = ones_like(o)
        gs.append(g)
    retain = create_graph if retain_graph is None else retain_graph
    with set_grad_enabled(create_graph):
        res = run_backward(outputs, gs, retain_graph=retain, inputs=inputs)
    for i, r in enumerate(res):
        if r is None and not allow_unused:
            raise RuntimeError(f"input {i} was not used in the graph; pass allow_unused=True")
    return tuple(res)


def _requires_grad(a):
    if isinstance(a, ClTensor):
        return a.requires_grad
    if isinstance(a, (list, tuple)):
        return any(_requires_grad(x) for x in a)
    return False


def needs_grad(args, kwargs=None):
    """True when grad mode is on and some tensor argument requires grad."""
    if not is_grad_enabled():
        return False
    for a in args:
        if a.requires_grad if isinstance(a, ClTensor) else _requires_grad(a):
            return True
    return any(_requires_grad(a) for a in kwargs.values()) if kwargs else False


def _check_out(name, kwargs):
    if kwargs.get("out") is not None:
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                           f"differentiation, but one of the arguments requires grad")


def wrap_function(name, raw, fn_cls):
    """raw(*args) unless a gradient is needed, then fn_cls.apply with the arguments bound."""
    sig = inspect.signature(raw)

    @functools.wraps(raw)
    def op(*args, **kwargs):
        if not needs_grad(args, kwargs):
            return raw(*args, **kwargs)
        _check_out(name, kwargs)
        bound = sig.bind(*args, **kwargs)
        bound.arguments.pop("out", None)
        return fn_cls.apply(*bound.args, **bound.kwargs)
    return op


def sum_to_shape(g, shape):
    """Sum a broadcast gradient back down to `shape`."""
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    # NOTE: a dim of size 1 needs no sum (a batch of one image's gradient is a reshape)
    dims = tuple(i for i in range(lead) if g.shape[i] != 1) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    out = g.sum(dim=dims, keepdim=True) if dims else g
    return out.reshape(shape) if lead or out.shape != tuple(shape) else out


def zero_grads(params, set_to_none=True):
    """Reset each tensor's .grad: to None, or to zeros in place with set_to_none=False
    (Module.zero_grad and Optimizer.zero_grad)."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            p.grad = p.grad.detach()
            p.grad.zero_()


def once_differentiable(fn):
    @functools.wraps(fn)
    def wrapper(ctx, *grads):
        with no_grad():
            return fn(ctx, *grads)
    return wrapper
