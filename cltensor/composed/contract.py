"""Products and contractions composed of matmul and other tensor ops, with torch's names and
semantics: einsum, tensordot, inner, vdot, kron, cross, addmv, addr, addbmm, matrix_power,
chain_matmul, dist, cdist and renorm.

They call tensor methods, so they are differentiable through the ops they use. cltensor's
__init__.py exports them as functions and cltensor/composed_methods.py binds them as ClTensor methods.
Every contraction runs as one batched matmul over permuted, reshaped operands.
"""
import math
import numbers
import string
import warnings

from .. import dtypes as dt
from ..autograd.namespace import eye, stack, where
from ..ops.elementwise import broadcast_shapes
from ..tensor import _norm_dim
from .arrange import _tensors
from .composed import _check_tensor

__all__ = ["einsum", "tensordot", "inner", "vdot", "kron", "cross", "addmv", "addr", "addbmm",
           "matrix_power", "chain_matmul", "dist", "cdist", "renorm"]


def _check_tensors(op, **named):
    for name, x in named.items():
        _check_tensor(x, name, op)


def _tensor_list(op, args, what):
    """The tensors of *args, also given as one list (arrange._tensors); at least one."""
    args = _tensors(args, op, what)
    if not args:
        raise ValueError(f"{op}: must provide at least one {what}")
    return args


# ---- contraction of two operands by labels ----------------------------------------------------

def _contract(a, la, b, lb, keep):
    """a (labels la) times b (labels lb), summed over the labels of both that `keep` lacks:
    one batched matmul. Returns (result, its labels). Labels of one operand alone that `keep`
    lacks must have been summed out before."""
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    only_a = [c for c in la if c not in lb]
    only_b = [c for c in lb if c not in la]
    size = {}
    for t, labels in ((a, la), (b, lb)):
        for c, n in zip(labels, t.shape):
            if size.get(c, 1) != 1 and n not in (1, size[c]):
                raise ValueError(f"einsum: operands do not broadcast: label {c!r} has sizes "
                                 f"{size[c]} and {n}")
            if size.get(c, 1) == 1:  # a size 1 broadcasts to any size, 0 included
                size[c] = n
    a = _arranged(a, la, batch + only_a + summed, size, batch + summed)
    b = _arranged(b, lb, batch + summed + only_b, size, batch + summed)
    nb, m, k, n = (math.prod(size[c] for c in cs) for cs in (batch, only_a, summed, only_b))
    out = a.reshape(nb, m, k).matmul(b.reshape(nb, k, n))
    labels = batch + only_a + only_b
    return out.reshape(tuple(size[c] for c in labels)), labels


def _arranged(t, labels, order, size, expand):
    """t permuted to `order`, its size-1 dims among `expand` broadcast to `size`."""
    t = t.permute(*[labels.index(c) for c in order])
    want = tuple(size[c] if c in expand else n for c, n in zip(order, t.shape))
    return t.expand(*want) if want != tuple(t.shape) else t


def _reduce_alone(t, labels, keep):
    """t summed over the labels that `keep` lacks (those of this operand alone)."""
    gone = [i for i, c in enumerate(labels) if c not in keep]
    if gone:
        t = t.sum(dim=tuple(gone))
    return t, [c for c in labels if c in keep]


def _diagonals(t, labels):
    """t with each label repeated within it taken along its diagonal (a view), once."""
    labels = list(labels)
    while len(set(labels)) < len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        i = labels.index(c)
        j = labels.index(c, i + 1)
        if t.shape[i] != t.shape[j]:
            raise ValueError(f"einsum: subscript {c} is repeated for operand {tuple(t.shape)} "
                             f"but the sizes don't match, {t.shape[i]} != {t.shape[j]}")
        t = t.diagonal(0, i, j)  # the diagonal becomes the last dim
        labels = [x for k, x in enumerate(labels) if k not in (i, j)] + [c]
    return t, labels


# ---- einsum's equation ------------------------------------------------------------------------

_LETTERS = set(string.ascii_letters)


def _parse(equation, operands):
    """(input label lists, output labels) with each ellipsis spelled as labels of its own."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum: {len(terms)} operand subscripts in {equation!r} but "
                         f"{len(operands)} operands were given")
    free = [c for c in string.ascii_letters[::-1] if c not in eq]  # labels for ellipsis dims
    ell = 0
    for term, t in zip(terms, operands):
        if "..." in term:
            ell = max(ell, t.ndim - (len(term) - 3))
    ell_labels = free[:ell][::-1]
    inputs = [_term_labels(term, t, ell_labels, equation) for term, t in zip(terms, operands)]
    if arrow:
        out = _term_labels(rhs, None, ell_labels, equation)
        seen = [c for term in inputs for c in term]
        for c in out:
            if c not in seen:
                raise ValueError(f"einsum: output subscript {c} does not appear in the equation "
                                 f"for any input operand")
            if out.count(c) > 1:
                raise ValueError(f"einsum: output subscript {c} appears more than once in the "
                                 f"output")
    else:  # implicit: the ellipsis dims, then the labels seen once, in alphabetical order
        counts = {}
        for term in terms:
            for c in term.replace("...", ""):
                counts[c] = counts.get(c, 0) + 1
        out = ell_labels + sorted(c for c, n in counts.items() if n == 1)
    return inputs, out


def _term_labels(term, t, ell_labels, equation):
    body = term.replace("...", "")
    bad = [c for c in body if c not in _LETTERS]
    if bad or term.count("...") > 1 or "." in body:
        raise ValueError(f"einsum: invalid subscripts {term!r} in {equation!r}: letters and at "
                         f"most one ellipsis")
    if t is None:
        head, _, tail = term.partition("...")
        return list(head) + (ell_labels if "..." in term else []) + list(tail)
    if "..." in term:
        n_ell = t.ndim - len(body)
        if n_ell < 0:
            raise ValueError(f"einsum: operand of {t.ndim} dims has too many subscripts {term!r}")
        head, _, tail = term.partition("...")
        return list(head) + ell_labels[len(ell_labels) - n_ell:] + list(tail)
    if len(body) != t.ndim:
        raise ValueError(f"einsum: the number of subscripts in {term!r} ({len(body)}) does not "
                         f"match the number of dimensions ({t.ndim}) of its operand")
    return list(body)


def einsum(equation, *operands):
    """Sums of products over labelled dims, as numpy.einsum / torch.einsum: "ij,jk->ik",
    implicit outputs, ellipses with broadcasting, repeated labels (diagonals). Operands also
    as one list. Contracted left to right, each pair one batched matmul.

    Example:
        >>> a, b = cltensor.ones(2, 3), cltensor.ones(3, 4)
        >>> cltensor.einsum("ij,jk->ik", a, b).shape
        (2, 4)
    """
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a string, got {type(equation).__name__}")
    operands = _tensor_list("einsum", operands, "operand")
    inputs, out = _parse(equation, operands)
    ts = []
    for i, (t, labels) in enumerate(zip(operands, inputs)):
        others = set(out).union(*[set(x) for j, x in enumerate(inputs) if j != i])
        ts.append(_reduce_alone(*_diagonals(t, labels), others))
    acc, acc_labels = ts[0]
    for i, (t, labels) in enumerate(ts[1:], start=1):
        rest = set(out).union(*[set(x) for _, x in ts[i + 1:]])
        acc, acc_labels = _contract(acc, acc_labels, t, labels, rest)
    acc, acc_labels = _reduce_alone(acc, acc_labels, set(out))
    if acc_labels != out:
        acc = acc.permute(*[acc_labels.index(c) for c in out])
    return acc


# ---- products -------------------------------------------------------------------------------

def tensordot(a, b, dims=2):
    """Sum over the last `dims` dims of a and the first `dims` of b, or over the dims listed
    as ([dims of a], [dims of b]).

    Example:
        >>> cltensor.tensordot(cltensor.ones(2, 3, 4), cltensor.ones(3, 4, 5)).shape
        (2, 5)
    """
    _check_tensors("tensordot", a=a, b=b)
    if isinstance(dims, numbers.Integral) and not isinstance(dims, bool):
        if not 0 <= dims <= min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: dims must be in [0, {min(a.ndim, b.ndim)}] for "
                             f"{a.ndim}-d and {b.ndim}-d operands, got {dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    elif isinstance(dims, (list, tuple)) and len(dims) == 2:
        da, db = ([d] if isinstance(d, numbers.Integral) else list(d) for d in dims)
        if len(da) != len(db):
            raise ValueError(f"tensordot: both dim lists should have the same length, got "
                             f"{len(da)} and {len(db)}")
        da = [_norm_dim(d, a.ndim, "tensordot") for d in da]
        db = [_norm_dim(d, b.ndim, "tensordot") for d in db]
    else:
        raise TypeError(f"tensordot: dims must be an int or a pair of dim lists, got {dims!r}")
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"tensordot: contracted dims {i} of a and {j} of b have sizes "
                             f"{a.shape[i]} and {b.shape[j]}")
    keep_a = [d for d in range(a.ndim) if d not in da]
    keep_b = [d for d in range(b.ndim) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    lhs = a.permute(*(keep_a + da)).reshape(math.prod(a.shape[d] for d in keep_a), k)
    rhs = b.permute(*(db + keep_b)).reshape(k, math.prod(b.shape[d] for d in keep_b))
    return lhs.matmul(rhs).reshape(tuple(a.shape[d] for d in keep_a) +
                                   tuple(b.shape[d] for d in keep_b))


def inner(input, other):
    """Sum over the last dims of both (a product when either is 0-d).

    Example:
        >>> cltensor.inner(cltensor.ones(2, 3), cltensor.ones(4, 3)).shape
        (2, 4)
    """
    _check_tensors("inner", input=input, other=other)
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise ValueError(f"inner: last dims of shapes {tuple(input.shape)} and "
                         f"{tuple(other.shape)} differ")
    return tensordot(input, other, ([-1], [-1]))


def vdot(input, other):
    """The dot product of two 1-d tensors (conjugating the first: the same for real ones)."""
    _check_tensors("vdot", input=input, other=other)
    if input.ndim != 1 or other.ndim != 1:
        raise ValueError(f"vdot: expected 1-d tensors, got {input.ndim}-d and {other.ndim}-d")
    return input.dot(other)


def kron(input, other):
    """The Kronecker product: out[i*s + j] = input[i] * other[j] along every dim.

    Example:
        >>> cltensor.kron(cltensor.ones(2, 1), cltensor.ones(1, 3)).shape
        (2, 3)
    """
    _check_tensors("kron", input=input, other=other)
    nd = max(input.ndim, other.ndim)
    sa = (1,) * (nd - input.ndim) + tuple(input.shape)
    sb = (1,) * (nd - other.ndim) + tuple(other.shape)
    a = input.reshape(tuple(x for n in sa for x in (n, 1)))
    b = other.reshape(tuple(x for n in sb for x in (1, n)))
    return (a * b).reshape(tuple(m * n for m, n in zip(sa, sb)))


def cross(input, other, dim=None):
    """The cross product of 3-vectors along dim (by default the first dim of size 3, as
    torch.cross; torch.linalg.cross's default is -1), the operands broadcast together."""
    _check_tensors("cross", input=input, other=other)
    shape = broadcast_shapes(input.shape, other.shape)
    if dim is None:
        dim = next((d for d, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise ValueError(f"cross: no dimension of size 3 in shape {tuple(shape)}")
        warnings.warn("cross: using the first dim of size 3 (pass dim= explicitly)",
                      UserWarning, stacklevel=2)
    dim = _norm_dim(dim, len(shape), "cross")
    if shape[dim] != 3:
        raise ValueError(f"cross: dimension {dim} does not have size 3 (shape {tuple(shape)})")
    a, b = input.expand(*shape), other.expand(*shape)
    a0, a1, a2 = (a.select(dim, i) for i in range(3))
    b0, b1, b2 = (b.select(dim, i) for i in range(3))
    return stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dim)


def _scaled_sum(op, input, product, beta, alpha):
    """beta * input + alpha * product (torch's rule: beta 0 ignores input, NaN included)."""
    for name, v in (("beta", beta), ("alpha", alpha)):
        if not isinstance(v, numbers.Number) or isinstance(v, bool):
            raise TypeError(f"{op}: {name} must be a number, got {type(v).__name__}")
    try:
        input = input.expand(*product.shape)
    except ValueError:
        raise ValueError(f"{op}: input of shape {tuple(input.shape)} does not broadcast to the "
                         f"product's shape {tuple(product.shape)}") from None
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return product + (input if beta == 1 else input * beta)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec); input broadcast to mat's rows."""
    _check_tensors("addmv", input=input, mat=mat, vec=vec)
    return _scaled_sum("addmv", input, mat.mv(vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)."""
    _check_tensors("addr", input=input, vec1=vec1, vec2=vec2)
    return _scaled_sum("addr", input, vec1.outer(vec2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * the sum over the batch of batch1[i] @ batch2[i]."""
    _check_tensors("addbmm", input=input, batch1=batch1, batch2=batch2)
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise ValueError(f"addbmm: batch1 and batch2 must be 3-d, got {batch1.ndim}-d and "
                         f"{batch2.ndim}-d")
    if batch1.shape[0] != batch2.shape[0]:
        raise ValueError(f"addbmm: batch1 and batch2 must have the same number of matrices, "
                         f"got {batch1.shape[0]} and {batch2.shape[0]}")
    b, n, k = batch1.shape
    m = batch2.shape[2]
    if batch2.shape[1] != k:
        raise ValueError(f"addbmm: shapes {tuple(batch1.shape)} and {tuple(batch2.shape)} "
                         f"cannot be multiplied ({k} != {batch2.shape[1]})")
    prod = batch1.permute(1, 0, 2).reshape(n, b * k).matmul(batch2.reshape(b * k, m))
    return _scaled_sum("addbmm", input, prod, beta, alpha)


def matrix_power(input, n):
    """input @ input @ ... (n times) over the last two (square) dims, by repeated squaring;
    n = 0 gives the identity, negative n the power -n of the inverse (cltensor.linalg.inv:
    LinAlgError for a singular input)."""
    _check_tensor(input, "input", "matrix_power")
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        raise TypeError(f"matrix_power: n must be an int, got {type(n).__name__}")
    if input.ndim < 2 or input.shape[-1] != input.shape[-2]:
        raise ValueError(f"matrix_power: expected a batch of square matrices, got shape "
                         f"{tuple(input.shape)}")
    if n == 0:
        one = eye(input.shape[-1], dtype=input.dtype, device=input.device)
        return one.expand(*input.shape).clone()
    result, base = None, input
    if n < 0:
        n, base = -n, input.inverse()
    while True:
        if n & 1:
            result = base if result is None else result.matmul(base)
        n >>= 1
        if not n:
            return result
        base = base.matmul(base)


def chain_matmul(*matrices):
    """The product of 2-d matrices, left to right (torch's deprecated chain_matmul)."""
    matrices = _tensor_list("chain_matmul", matrices, "matrix")
    for i, t in enumerate(matrices):
        if t.ndim != 2:
            raise ValueError(f"chain_matmul: expected 2-d matrices, matrix {i} is {t.ndim}-d")
    out = matrices[0]
    for t in matrices[1:]:
        out = out.mm(t)
    return out if len(matrices) > 1 else out.clone()


# ---- distances --------------------------------------------------------------------------------

def dist(input, other, p=2):
    """The p-norm of input - other (broadcast together)."""
    _check_tensors("dist", input=input, other=other)
    return (input - other).norm(p)


def _check_p(op, p):
    if not isinstance(p, numbers.Real) or isinstance(p, bool) or p < 0:
        raise ValueError(f"{op}: p must be a non-negative number, got {p!r}")


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M):
    (..., P, R). For p = 2 with more than 25 rows (or compute_mode "use_mm_for_euclid_dist")
    by matmul as torch: |a|^2 + |b|^2 - 2 a.b, clamped at 0 (less exact near 0)."""
    _check_tensors("cdist", x1=x1, x2=x2)
    _check_p("cdist", p)
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"cdist: expected (..., P, M) and (..., R, M) tensors with the same M, "
                         f"got {tuple(x1.shape)} and {tuple(x2.shape)}")
    if not dt.is_floating(x1.dtype) or x1.dtype != x2.dtype:
        raise TypeError(f"cdist: expected floating tensors of one dtype, got {x1.dtype} and "
                        f"{x2.dtype}")
    modes = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
             "donot_use_mm_for_euclid_dist")
    if compute_mode not in modes:
        raise ValueError(f"cdist: compute_mode must be one of {modes}, got {compute_mode!r}")
    use_mm = p == 2 and (compute_mode == modes[1] or compute_mode == modes[0] and
                         (x1.shape[-2] > 25 or x2.shape[-2] > 25))
    if use_mm:
        sq = ((x1 * x1).sum(-1).unsqueeze(-1) + (x2 * x2).sum(-1).unsqueeze(-2)
              - 2 * x1.matmul(x2.transpose(-1, -2)))
        return sq.clamp(min=0).sqrt()
    diff = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()
    if p == 0:
        return (diff != 0).to(x1.dtype).sum(-1)
    if math.isinf(p):
        return diff.amax(-1)
    if p == 1:
        return diff.sum(-1)
    return diff.pow(p).sum(-1).pow(1.0 / p)


def renorm(input, p, dim, maxnorm):
    """input with each slice along dim whose p-norm exceeds maxnorm scaled to norm maxnorm."""
    _check_tensor(input, "input", "renorm")
    _check_p("renorm", p)
    if p == 0:
        raise ValueError("renorm: p must be positive, got 0")
    if not isinstance(maxnorm, numbers.Real) or maxnorm < 0:
        raise ValueError(f"renorm: maxnorm must be a non-negative number, got {maxnorm!r}")
    dim = _norm_dim(dim, input.ndim, "renorm")
    others = tuple(d for d in range(input.ndim) if d != dim)
    norms = input.abs().pow(p).sum(dim=others, keepdim=True).pow(1.0 / p) if others else \
        input.abs()
    factor = where(norms > maxnorm, maxnorm / (norms + 1e-7), norms.new_ones(()))
    return input * factor


TENSOR_METHODS = {"tensordot": tensordot, "inner": inner, "vdot": vdot, "kron": kron,
                  "cross": cross, "addmv": addmv, "addr": addr, "addbmm": addbmm,
                  "matrix_power": matrix_power, "dist": dist, "renorm": renorm}
