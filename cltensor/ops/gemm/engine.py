"""The engine: a product's strides folded into a Problem, the plug-ins asked, the family
chosen (or an xgemm plan replayed) and run; gemm_into and gemm_sum_into."""
import math

import numpy as np

from ... import backends, caches, program
from ... import dtypes as dt
from ...program import Replay, remember
from .. import elementwise as ew
from . import choice, kit, packed
from .bench import _timed, timed_packed, timed_plan
from .choice import family_of
from .direct import rowaxpy_applies, rowdot_applies, run_direct, run_rowaxpy, run_rowdot, run_tiled
from .kit import PROVIDERS, Operand, Problem, epilogue_args, reads_as_computed
from .packed import run_packed
from .xgemm import XOperand, XPlan, _prepared, launch_xgemm, layout_key, prepare
from .planning import _candidates, _ranked, ranking, xgemm_candidates


def run_xgemm(p, entry, epi):
    own, extra = xgemm_candidates(p.device, entry, p.dtype.itemsize)
    if not own and not extra:
        if entry.get("strict"):
            raise RuntimeError(f"xgemm: no parameter set of the entry fits {p.device}")
        return run_tiled(p, entry, epi)
    plan = timed_plan(p, entry, own) if backends.benchmark and own else None
    if plan is None:
        for params, splits in ranking(p, entry, own, extra):
            plan = prepare(p, params, splits)
            if plan is not None:
                break
            if entry.get("strict"):
                raise RuntimeError(f"xgemm: {params} does not fit {p.device}'s registers")
        else:
            return run_tiled(p, entry, epi)
        if not plan.copies:
            remember(_recipes, (choice.FORCE_FAMILY,) + layout_key(p),
                     (entry, plan.params, plan.kernel, plan.xa[1:], plan.xb[1:], plan.splits))
    launch_xgemm(p, plan, epi)


# (FORCE_FAMILY, layout_key) -> (entry, params, kernel, XOperand fields of A and B, splits):
# the estimate's in-place xgemm plan of a product, which gemm_into replays for the same
# layout and entry without choosing the family and the set again (tens of microseconds of
# host time a product; benchmark mode's timed choices are not kept here)
_recipes = caches.register("ops.gemm.recipes", {})


def replayed_plan(p, entry):
    """The XPlan p ran with last time with this entry and layout (an in-place xgemm plan),
    reading p's tensors; None when there is none."""
    hit = _recipes.get((choice.FORCE_FAMILY,) + layout_key(p))
    if hit is None or hit[0] is not entry:
        return None
    _, params, kernel, xa, xb, splits = hit
    return XPlan(params, kernel, XOperand(p.a.t, *xa), XOperand(p.b.t, *xb), (), splits)


def clear_plans():
    """Forget the recorded launches of products (gemm_into's plans)."""
    _plans.clear()


def clear_cache():
    """Forget benchmark mode's timings, the estimate's rankings, the fitting sets and the
    decided plans."""
    _timed.clear()
    _ranked.clear()
    _candidates.clear()
    _prepared.clear()
    _recipes.clear()
    _plans.clear()


RUNNERS = {"direct": run_direct, "tiled": run_tiled, "packed": run_packed,
           "xgemm": run_xgemm, "rowdot": run_rowdot, "rowaxpy": run_rowaxpy}


def _merged_stride(sizes, strides):
    """The one stride that walks dims `sizes` in row-major order, or None if there is none."""
    dims = [(n, s) for n, s in zip(sizes, strides) if n != 1]
    for (_, s0), (n1, s1) in zip(dims, dims[1:]):
        if s0 != s1 * n1:
            return None
    return dims[-1][1] if dims else 0


def _fold_batch(batch, m, strides):
    """(batch, M, K) @ (K, N) with B shared by all batches becomes one (batch*M, K) @ (K, N)
    when A's, Ci's and Co's batch and row dims each merge into one row stride."""
    if not batch or any(s != 0 and n != 1 for n, s in zip(batch, strides[1])):
        return batch, m, strides
    sizes = tuple(batch) + (m,)
    folded = []
    for k, st in enumerate(strides):
        if k == 1:
            folded.append(st[-2:])
            continue
        row = _merged_stride(sizes, st[:-1])
        if row is None:
            return batch, m, strides
        folded.append([row, st[-1]])
    return (), m * math.prod(batch), folded


@caches.lru_cache(maxsize=4096)
def batch_layout(batch, m, strides, foldable):
    """(M, collapsed batch shape, (batch strides, row stride, column stride) per operand) of
    operands with these strides (a, b, c_in, c_out); memoized, as every product asks.
    foldable: no row bias (folded batches would change which bias row a row gets)."""
    strides = [list(st) for st in strides]
    if foldable:
        batch, m, strides = _fold_batch(batch, m, strides)
    bshape, bstrides = ew.collapse(batch, [st[:-2] for st in strides])
    if len(bshape) > ew.MAX_DIMS:
        raise ValueError(f"gemm: at most {ew.MAX_DIMS} non-mergeable batch dims are "
                         f"supported, got {len(bshape)} (batch shape {tuple(batch)})")
    return m, tuple(bshape), tuple((bst, st[-2], st[-1]) for st, bst in zip(strides, bstrides))


# plan_key -> (tuning entry, Replay or None): the launches of the last product with that key,
# replayed with the next one's buffers (None: they read buffers a replay cannot know)
_plans = caches.register("ops.gemm.plans", {})


def tensor_layouts(tensors):
    """(layouts, distinct buffers) of tensors (None allowed): each one's shape, strides,
    offset, dtype and the role of its buffer (which tensors share one), and the buffers in
    their roles' order."""
    bufs, parts = [], []
    for t in tensors:
        if t is None:
            parts.append(None)
            continue
        buf, role = t.storage.buf, len(bufs)
        for i, seen in enumerate(bufs):
            if seen is buf:
                role = i
                break
        else:
            bufs.append(buf)
        parts.append((t.shape, t.strides, t.offset, t.dtype, role))
    return tuple(parts), bufs


def plan_key(tensors, alpha, beta, relu, tf32=False):
    """(key, distinct buffers) of a product: everything that decides its launches but the
    buffers (tensor_layouts, the scalars, device, flags and plug-ins), and the buffers in their
    roles' order."""
    parts, bufs = tensor_layouts(tensors)
    key = (tensors[2].storage.device, parts, alpha, type(alpha), beta, type(beta), relu,
           backends.allow_tf32 or tf32, kit.generation)
    return key, bufs


def gemm_into(a, b, c_out, c_in=None, alpha=1, beta=0, row_bias=None, col_bias=None,
              relu=False, entry=None, tf32=False):
    """c_out = act(alpha * a @ b + beta * c_in + biases), in place, with no checks.

    The low-level product under every op: a is (*batch, M, K), b (*batch, K, N), c_out and c_in
    (*batch, M, N), any strides (0 broadcasts in a, b and c_in); c_in may be c_out itself; the
    biases are 1-d (M and N). Callers validate and avoid overlaps (see gemm()). `entry`
    replaces the database's entry (the tuner's candidates). The providers in PROVIDERS (the plug-ins
    that serve the device) are asked first, unless `entry` or FORCE_FAMILY is set. tf32=True
    lets them multiply float32 operands in TF32 whatever backends.allow_tf32 says: for callers
    whose results are rounded coarser than that anyway.

    A product with the same plan_key as an earlier one with the same tuning entry replays that
    one's launches (plans are not kept for `entry`, FORCE_FAMILY or benchmark mode).
    """
    args = (a, b, c_out, c_in, alpha, beta, row_bias, col_bias, relu, tf32)
    if entry is not None or choice.FORCE_FAMILY is not None or backends.benchmark:
        return _gemm_into(*args, entry)
    key, bufs = plan_key((a, b, c_out, c_in, row_bias, col_bias), alpha, beta, relu, tf32)
    return planned(key, bufs, c_out, a.dtype, lambda: _gemm_into(*args, None))


def planned(key, bufs, c_out, a_dtype, decide):
    """decide() (which writes c_out and returns it), or the launches it made for the last call
    with this key and the same tuning entry (A's 16-bit type's, else C's compute type's)
    replayed with `bufs` in their roles."""
    current = choice.entry_for(c_out.device, entry_type(a_dtype, dt.compute_dtype(c_out.dtype)))
    hit = _plans.get(key)
    if hit is not None and hit[0] is current:
        if hit[1] is None:
            return decide()
        hit[1](c_out.device, bufs)  # NOTE: the roles are bufs' indexes
        return c_out
    with program.record() as launches:
        decide()
    remember(_plans, key, (current, Replay.make(launches, dict(enumerate(bufs)))))
    return c_out


def _gemm_into(a, b, c_out, c_in, alpha, beta, row_bias, col_bias, relu, tf32, entry):
    """gemm_into, deciding every launch."""
    batch, (m, k), n = c_out.shape[:-2], a.shape[-2:], b.shape[-1]
    assert a.shape[:-2] == b.shape[:-2] == batch and b.shape[-2] == k, "gemm: shapes disagree"
    if m == 0 or n == 0 or 0 in batch:
        return c_out
    tensors = (a, b, c_out if c_in is None else c_in, c_out)
    m, bshape, layouts = batch_layout(batch, m, tuple(t.strides for t in tensors),
                                       row_bias is None)
    ops = [Operand(t, *lay) for t, lay in zip(tensors, layouts)]
    bias = row_bias if row_bias is not None else col_bias
    assert (c_in is None or c_in.dtype == c_out.dtype) and (
        row_bias is None or col_bias is None or row_bias.dtype == col_bias.dtype), \
        "gemm: C's input and output share one storage type, and so do the biases"
    p = Problem(c_out.device, dt.compute_dtype(c_out.dtype), m, n, k, bshape, *ops,
                tr=None if bias is None else bias.dtype, tf32=tf32)
    # NOTE: the tuner's candidates (entry) and a forced family measure the portable kernels;
    # a plug-in sees 16-bit tensors only where it says it reads them (reads_16bit)
    if entry is None and choice.FORCE_FAMILY is None:
        plain = reads_as_computed(p)
        for lookup in PROVIDERS:
            for plugin in lookup(p.device):
                if (plain or getattr(plugin, "reads_16bit", False)) and plugin.gemm(
                        p, alpha, beta, c_in is not None, row_bias, col_bias, relu):
                    return c_out
    replayed = entry is None and not backends.benchmark
    timed = entry is None and backends.benchmark  # never the tuner's candidates
    entry = entry or choice.entry_for(p.device, storage_of(p))
    plan = replayed_plan(p, entry) if replayed and _recipes else None
    fam = "xgemm"
    if plan is None:
        fam = _family(p, entry)
        if fam == "packed":
            moves = packed.moves(p, entry["packed"])
            if moves:
                pt = transposed(p)
                if packed.moves(pt, entry["packed"]) < moves:
                    p, row_bias, col_bias = pt, col_bias, row_bias
            if timed:
                entry = timed_packed(p, entry)
    epi = epilogue_args(p, alpha, beta, c_in is not None, row_bias, col_bias, relu)
    if plan is not None:
        launch_xgemm(p, plan, epi)
    else:
        RUNNERS[fam](p, entry, epi)
    return c_out


def multiplies_16bit(device):
    """Whether a plug-in serving device multiplies 16-bit operands itself (tensor cores): there
    a product of two 16-bit operands runs far faster than one that mixes in a float32 one."""
    return any(getattr(pl, "reads_16bit", False) for lookup in PROVIDERS
               for pl in lookup(device))


def entry_type(a_dtype, compute):
    """The type a product's tuning entry is chosen for: A's 16-bit storage type, else the
    product's compute type."""
    return a_dtype if a_dtype in dt.HALF_TYPES else compute


def storage_of(p):
    """entry_type of problem p."""
    return entry_type(p.a.t.dtype, p.dtype)


def _family(p, entry):
    if choice.FORCE_FAMILY is None and p.dtype.kind == "f" and rowdot_applies(p, entry):
        return "rowdot"
    if choice.FORCE_FAMILY is None and p.dtype.kind == "f" and rowaxpy_applies(p, entry):
        return "rowaxpy"
    return family_of(p.device, p.dtype, entry, (p.m, p.n, p.k), p.nbatch)


def sums_batches(device, dtype):
    """Whether gemm_sum_into runs on this device and dtype: in one kernel, on the devices
    whose GEMM family is packed (CPUs). 16-bit dtypes go by their compute type (bfloat16's
    numpy view is uint16)."""
    dtype = dt.compute_dtype(dtype)
    fam = choice.FORCE_FAMILY or choice.entry_for(device, dtype)["family"]
    return fam == "packed" and np.dtype(dtype).kind == "f"


def gemm_sum_into(a, b, c_out):
    """c_out (*batch, M, N) = the sum over i of a[i] @ b[i], with no checks: a (S, *batch, M, K),
    b (S, *batch, K, N), any strides; on the devices sums_batches() names. One gemm_packed
    launch adds the S products of each tile in registers: a 1x1 convolution's weight gradient
    over the images of NCHW tensors, read in place, with no (C, N*H*W) copies."""
    if c_out.numel() == 0:
        return c_out
    if a.shape[0] == 0 or a.shape[-1] == 0:
        return c_out.zero_()  # a sum of no products
    if a.shape[0] == 1:
        return gemm_into(a[0], b[0], c_out)
    if choice.FORCE_FAMILY is not None or backends.benchmark:
        return _gemm_sum_into(a, b, c_out)
    key, bufs = plan_key((a, b, c_out), "sum", None, None)
    return planned(key, bufs, c_out, a.dtype, lambda: _gemm_sum_into(a, b, c_out))


def _gemm_sum_into(a, b, c_out):
    """gemm_sum_into of a sum over more than one product, deciding every launch."""
    batch, (m, k), n = a.shape[:-2], a.shape[-2:], b.shape[-1]
    c = c_out.expand(batch + (m, n))  # NOTE: batch stride 0 along the summed dim
    tensors = (a, b, c, c)
    m, bshape, layouts = batch_layout(batch, m, tuple(t.strides for t in tensors), False)
    ops = [Operand(t, *lay) for t, lay in zip(tensors, layouts)]
    p = Problem(c_out.device, dt.compute_dtype(c_out.dtype), m, n, k, bshape, *ops)
    assert bshape[0] == a.shape[0] and p.co.bstrides[0] == 0, "gemm_sum_into: batch collapsed"
    entry = choice.entry_for(p.device, storage_of(p))
    pt = transposed(p)
    if packed.moves(pt, entry["packed"], True) < packed.moves(p, entry["packed"], True):
        p = pt
    run_packed(p, entry, epilogue_args(p, 1, 0, False, None, None, False), summed=True)
    return c_out


def transposed(p):
    """The problem C^T = B^T @ A^T of the same product."""
    def t(op):
        return op._replace(rs=op.cs, cs=op.rs)
    return p._replace(m=p.n, n=p.m, a=t(p.b), b=t(p.a), ci=t(p.ci), co=t(p.co))
