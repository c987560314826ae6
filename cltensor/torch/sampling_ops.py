"""Sampling ops on the opencl device: grid_sampler_2d (F.grid_sample) and EmbeddingBag's
_embedding_bag, forward and backward, composed from cltensor's indexing ops (index_select,
index_add, scatter_add: deterministic, no atomics).

grid_sampler_2d follows torch's CPU kernel (aten/src/ATen/native/cpu/GridSamplerKernel.cpp):
each output reads its taps (1 nearest, 2 x 2 bilinear, 4 x 4 bicubic) as rows of C values from
the channels-last input with a zero pixel appended, where out-of-bounds taps point; its backward
adds the weighted output gradients into those rows (index_add) and takes the grid's gradient
from the weights' derivatives, with torch's rules for the padding modes."""
import torch

from .. import dtypes as dt
from ..autograd.namespace import arange, argmax, cat, full, searchsorted, stack, tensor, where
from ..autograd.namespace import zeros, zeros_like
from ..composed.searching import bincount
from ._backend import TO_NUMPY, aten, np_dtype, unwrap, wrap
from .fallback import cpu_fallback
from .math_ops import finish, meta_result, operand, with_out

_aten = torch.ops.aten
BILINEAR, NEAREST, BICUBIC = 0, 1, 2
ZEROS, BORDER, REFLECTION = 0, 1, 2
_A = -0.75  # the cubic convolution's constant, as torch's bicubic modes


# ---- grid_sampler_2d ---------------------------------------------------------------------------
def _per_axis(values, like):
    """Per-axis constants (x's, y's) as a (1, 2, 1, 1) tensor to broadcast over coordinates."""
    return tensor(values, dtype=like.dtype, device=like.device).reshape(1, 2, 1, 1)


def _reflect(x, sizes, align):
    """torch's reflection of coordinates (N, 2, T, P) into [low, low + span] per axis (value,
    gradient sign); align_corners over a side of 1 has no span: value 0, sign 0."""
    low = 0.0 if align else -0.5
    twice = [2.0 * (s - 1) if align else 2.0 * s for s in sizes]
    dead = [t == 0 for t in twice]
    d = x - low if low else x
    a = d.abs()
    span = _per_axis([t or 1.0 for t in twice], x)
    extra = a - (a / span).trunc() * span
    other = span - extra
    more = extra > other
    value = where(more, other, extra)
    sign = where(more ^ (d < 0), -1.0, 1.0)
    value = value + low if low else value
    if any(dead):
        live = _per_axis([0.0 if k else 1.0 for k in dead], x)
        value, sign = value * live, sign * live
    return value, sign


def _padded(x, sizes, padding, align, slope=False):
    """Coordinates (N, 2, T, P) under border or reflection padding: clipped to
    [0, size - 1], reflected first for reflection; with slope, (value, gradient multiplier:
    zero where the clip holds the coordinate at an edge, edges included, as torch)."""
    sign = None
    if padding == REFLECTION:
        x, sign = _reflect(x, sizes, align)
    top = _per_axis([float(s - 1) for s in sizes], x)
    value = where(x > 0.0, x, 0.0).clamp(max=top)  # NaN to 0, as torch's CPU kernel
    if not slope:
        return value
    inside = ((value > 0.0) & (value < top)).to(x.dtype)
    return value, inside if sign is None else inside * sign


def _cubic(t, slope=False):
    """The 4 cubic convolution weights of taps -1, 0, 1, 2 at fractions t, stacked on dim 2,
    or with slope their derivatives by t."""
    if slope:
        near = lambda s: (3 * (_A + 2) * s - 2 * (_A + 3)) * s
        far = lambda s: (3 * _A * s - 10 * _A) * s + 8 * _A
        return cat([far(t + 1.0), near(t), -near(1.0 - t), -far(2.0 - t)], 2)
    near = lambda s: ((_A + 2) * s - (_A + 3)) * s * s + 1
    far = lambda s: ((_A * s - 5 * _A) * s + 8 * _A) * s - 4 * _A
    return cat([far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)], 2)


class _Taps:
    """The taps of grid sampling along both axes at once (x's on dim 1 index 0, y's index 1):
    int64 positions `taps` (N, 2, T, P) and their in-bounds mask `ok`, their `weights` (None
    for nearest) and, given slopes, the weights' derivatives by the grid value."""

    def __init__(self, grid, sizes, mode, padding, align, slopes):
        n, ho, wo, _ = grid.shape
        g = grid.reshape(n, ho * wo, 2).permute(0, 2, 1).unsqueeze(2)  # (N, 2, 1, P)
        scale = _per_axis([(s - 1) / 2 if align else s / 2 for s in sizes], g)
        x = (g + 1.0) * scale if align else (g + 1.0) * scale - 0.5  # torch's unnormalize
        mult = scale
        if padding != ZEROS and mode != BICUBIC:
            if slopes:
                x, pad_slope = _padded(x, sizes, padding, align, True)
                mult = pad_slope * scale
            else:
                x = _padded(x, sizes, padding, align)
        self.weights = self.slopes = None
        if mode == NEAREST:
            taps = x.round()
        else:
            base = x.floor()
            offsets = (0.0, 1.0) if mode == BILINEAR else (-1.0, 0.0, 1.0, 2.0)
            taps = base + tensor(offsets, dtype=x.dtype, device=x.device).reshape(1, 1, -1, 1)
            t = x - base
            self.weights = cat([1.0 - t, t], 2) if mode == BILINEAR else _cubic(t)
            if slopes:
                self.slopes = cat([-mult, mult], 2) if mode == BILINEAR else _cubic(t, True) * mult
            if mode == BICUBIC and padding != ZEROS:  # bicubic pads each tap
                taps = _padded(taps, sizes, padding, align)
        self.ok = (taps >= 0.0) & (taps < _per_axis([float(s) for s in sizes], taps))
        self.taps = where(self.ok, taps, 0.0).to(dt.int64)


def _sampling(shape, grid, mode, padding, align, slopes=False):
    """(the rows of _planes() each tap reads, flat, (N * Ty * Tx * P), the _Taps)."""
    n, _, h, w = shape
    tp = _Taps(grid, (w, h), mode, padding, align, slopes)
    (tx, ty), (okx, oky) = tp.taps.unbind(1), tp.ok.unbind(1)
    first = arange(n, device=grid.device).reshape(n, 1, 1, 1) * (h * w + 1)
    rows = where(oky.unsqueeze(2) & okx.unsqueeze(1), ty.unsqueeze(2) * w + tx.unsqueeze(1),
                 h * w) + first
    return rows.reshape(-1), tp


def _planes(x):
    """x (N, C, H, W) as rows of C values (N * (H * W + 1), C), channels-last, each image's
    followed by a zero row (its row H * W) where out-of-bounds taps point."""
    n, c, h, w = x.shape
    zero = zeros(n, 1, c, dtype=x.dtype, device=x.device)
    return cat([x.permute(0, 2, 3, 1).reshape(n, h * w, c), zero], 1).reshape(-1, c)


def _tap_weights(tp, p):
    """Each tap's weight (N, Ty * Tx, P, 1): the product of its axes'."""
    wx, wy = tp.weights.unbind(1)
    return (wy.unsqueeze(2) * wx.unsqueeze(1)).reshape(wx.shape[0], -1, p, 1)


def grid_sample(x, grid, mode, padding, align):
    """torch's grid_sampler_2d of ClTensors x (N, C, H, W) and grid (N, Ho, Wo, 2), computed
    as its CPU kernel does: (N, C, Ho, Wo). Each tap's C values are one row of _planes(), all
    read by one index_select."""
    n, c = x.shape[:2]
    ho, wo = grid.shape[1:3]
    p = ho * wo
    rows, tp = _sampling(x.shape, grid, mode, padding, align)
    vals = _planes(x).index_select(0, rows).reshape(n, -1, p, c)
    res = vals.reshape(n, p, c) if mode == NEAREST else (vals * _tap_weights(tp, p)).sum(1)
    return res.permute(0, 2, 1).reshape(n, c, ho, wo)


def grid_sample_backward(grad, x, grid, mode, padding, align, need_input, need_grid):
    """(the input's gradient or None, the grid's) of grid_sample(), as torch's CPU kernel
    computes them: each output's gradient times each tap's weight added to the tap's pixel
    (index_add of rows: deterministic), and the grid's from the weights' derivatives
    (zeros for nearest)."""
    n, c, h, w = x.shape
    ho, wo = grid.shape[1:3]
    p = ho * wo
    need_grid = need_grid and mode != NEAREST
    rows, tp = _sampling(x.shape, grid, mode, padding, align, slopes=need_grid)
    g_rows = grad.permute(0, 2, 3, 1).reshape(n, 1, p, c)
    gx = None
    if need_input:
        parts = g_rows if mode == NEAREST else g_rows * _tap_weights(tp, p)
        gx = zeros(n * (h * w + 1), c, dtype=x.dtype, device=x.device).index_add(
            0, rows, parts.reshape(-1, c))
        gx = gx.reshape(n, h * w + 1, c)[:, :h * w].permute(0, 2, 1).reshape(n, c, h, w)
    if not need_grid:
        return gx, zeros_like(grid)
    taps = tp.taps.shape[2]
    vals = _planes(x).index_select(0, rows).reshape(n, taps, taps, p, c)
    dots = (vals * g_rows.unsqueeze(1)).sum(4)  # (N, Ty, Tx, P)
    (wx, wy), (sx, sy) = tp.weights.unbind(1), tp.slopes.unbind(1)
    gg_x = (dots * (wy.unsqueeze(2) * sx.unsqueeze(1))).sum((1, 2))
    gg_y = (dots * (sy.unsqueeze(2) * wx.unsqueeze(1))).sum((1, 2))
    return gx, stack([gg_x, gg_y], 2).reshape(n, ho, wo, 2)


_SCALAR_NAMES = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half",
                 torch.bfloat16: "BFloat16"}


def _check_grid(input, grid):
    """torch's checks of grid_sampler_2d's operands (GridSamplerUtils.h, with its messages):
    its Meta kernel raises other errors or none."""
    sizes = lambda t: list(t.shape)
    if input.dim() and grid.dim() and input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {sizes(input)} and grid with sizes "
                           f"{sizes(grid)}")
    if grid.dim() and grid.shape[-1] != input.dim() - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.dim() - 2} in "
                           f"last dimension, but got grid with sizes {sizes(grid)}")
    for i in range(2, input.dim()):
        if input.shape[i] <= 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial "
                               f"dimensions, but input has sizes {sizes(input)} with dimension "
                               f"{i} being empty")
    if input.dim() != 4 or grid.dim() != 4:
        raise RuntimeError(f"grid_sampler(): expected 4D input and grid with same number of "
                           f"dimensions, but got input with sizes {sizes(input)} and grid with "
                           f"sizes {sizes(grid)}")
    if input.dtype != grid.dtype:
        names = [_SCALAR_NAMES.get(t.dtype, str(t.dtype)) for t in (input, grid)]
        raise RuntimeError(f"expected scalar type {names[0]} but found {names[1]}")


def _computing(t, op):
    """The dtype grid sampling computes in: float32 for 16-bit inputs."""
    return dt.compute_dtype(np_dtype(t.dtype, op))


@aten("grid_sampler_2d")
def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    args = (input, grid, interpolation_mode, padding_mode, align_corners)
    _check_grid(input, grid)
    out = meta_result(_aten.grid_sampler_2d.default, args, {})
    if out.numel() == 0:
        return finish(zeros(*out.shape, dtype=TO_NUMPY[out.dtype], device=unwrap(input).device),
                      out)
    dtype = _computing(input, "grid_sampler_2d")
    res = grid_sample(operand(input, dtype), operand(grid, dtype), interpolation_mode,
                      padding_mode, bool(align_corners))
    return finish(res, out)


@aten("grid_sampler_2d_backward")
def grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
                             align_corners, output_mask):
    """(grad_input or None, grad_grid): torch's CPU kernel leaves grad_input out unless
    output_mask asks for it, and always gives grad_grid (zeros for nearest)."""
    args = (grad_output, input, grid, interpolation_mode, padding_mode, align_corners,
            output_mask)
    _check_grid(input, grid)
    want = [*input.shape[:2], *grid.shape[1:3]]
    if list(grad_output.shape) != want:  # torch's newer check (the CPU kernel would misread)
        raise ValueError(f"grid_sampler(): expected grad_output to have sizes {want} but got "
                         f"grad_output with sizes {list(grad_output.shape)}")
    gx_meta, gg_meta = meta_result(_aten.grid_sampler_2d_backward.default, args, {})
    dtype = _computing(input, "grid_sampler_2d_backward")
    x, g, gout = (operand(t, dtype) for t in (input, grid, grad_output))
    if gout.numel() == 0:  # no output (an empty grid, batch or channels): zero gradients
        return ((finish(zeros_like(x), gx_meta) if output_mask[0] else None),
                finish(zeros_like(g), gg_meta))
    gx, gg = grid_sample_backward(gout, x, g, interpolation_mode, padding_mode,
                                  bool(align_corners), bool(output_mask[0]),
                                  bool(output_mask[1]))
    return (finish(gx, gx_meta) if output_mask[0] else None), finish(gg, gg_meta)


with_out("grid_sampler_2d.out", grid_sampler_2d)


# ---- _embedding_bag ----------------------------------------------------------------------------
SUM, MEAN, MAX = 0, 1, 2


def _check_bag_types(weight, indices, offsets, mode):
    """torch's CPU checks of the arguments' kinds, made before its Meta kernel's (their
    messages differ)."""
    for t, name in ((indices, "indices"), (offsets, "offsets")):
        if t.dtype not in (torch.int64, torch.int32):
            got = _SCALAR_NAMES.get(t.dtype, str(t.dtype).replace("torch.", "").capitalize())
            raise RuntimeError(f"Expected tensor for argument #1 '{name}' to have one of the "
                               f"following scalar types: Long, Int; but got torch.{got}Tensor "
                               f"instead (while checking arguments for embedding_bag)")
    if weight.dim() != 2:
        raise RuntimeError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                           f"{weight.dim()}")
    if mode not in (SUM, MEAN, MAX):
        raise RuntimeError("`mode` must be sum, mean, or max.")


def _check_bag_arguments(weight, indices, offsets, include_last_offset):
    """torch's CPU checks that its Meta kernel leaves out; returns the bags' starts as ints."""
    if indices.dim() != 1 or offsets.dim() != 1:
        raise RuntimeError(f"embedding_bag: expected 1-d indices and offsets, got "
                           f"{indices.dim()}-d and {offsets.dim()}-d")
    n, rows = indices.numel(), weight.shape[0]
    idx = unwrap(indices)
    outside = (idx < 0) | (idx >= rows)
    if n and bool(outside.any()):  # the first one named, as the CPU's
        at = int(argmax(outside.to(dt.int32)))
        raise RuntimeError(f"Index {at} of input takes value {int(idx[at])} which is not in the "
                           f"valid range [0, {rows})")
    # NOTE: the offsets are read on the host (one small read): a bad one would put entries in
    # the wrong bags without any error
    starts = unwrap(offsets).tolist()
    if include_last_offset:
        if not starts:
            raise RuntimeError("include_last_offset: number of offset should be at least 1")
        starts = starts[:-1]
    if starts and starts[0] != 0:
        raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                           f"has to start from position 0. However, got {starts[0]}")
    if starts and starts[-1] > n:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but got "
                           f"offsets[-1] of {starts[-1]}")
    if any(b < a for a, b in zip(starts, starts[1:])):
        raise RuntimeError(f"embedding_bag: offsets must be non-decreasing, got {starts}")
    return starts


def _offset2bag(offsets, count, n, device):
    """The int64 bag of each of the n indices: the last of the first `count` offsets <= it."""
    if n == 0 or count == 0:
        return zeros(n, dtype=dt.int64, device=device)
    starts = unwrap(offsets)[:count].to(dt.int64)
    return searchsorted(starts, arange(n, device=device), right=True) - 1


def _bag_parts(indices, offsets, padding_idx, count):
    """(indices as int64, each index's bag, its bag with padding entries moved to a spare bag
    `count`, padding mask or None)."""
    idx = unwrap(indices).to(dt.int64)
    bag = _offset2bag(offsets, count, idx.shape[0], idx.device)
    if padding_idx < 0:
        return idx, bag, bag, None
    pad = idx == padding_idx
    return idx, bag, where(pad, count, bag), pad


def _fast_sum(weight, per_sample_weights, mode, padding_idx):
    """torch's CPU fast path of mode sum (float32 and 16-bit weights, no padding_idx), which
    leaves offset2bag empty."""
    return (mode == SUM and padding_idx < 0 and weight.dtype in (torch.float32, torch.float16,
                                                                 torch.bfloat16)
            and weight.stride(1) == 1
            and (per_sample_weights is None or per_sample_weights.stride(0) == 1))


def _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1,
                   forward_only=False):
    """(output, offset2bag, bag_size, max_indices) as torch's CPU kernel gives them: bag_size
    counts each bag's entries other than padding_idx (zeros in mode sum), max_indices is the
    weight row of each maximum (mode max, 0 in an empty bag), else bag_size."""
    op = _aten._embedding_bag_forward_only if forward_only else _aten._embedding_bag
    args = (weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
            include_last_offset, padding_idx)
    _check_bag_types(weight, indices, offsets, mode)
    out_meta = meta_result(op.default, args, {})[0]
    starts = _check_bag_arguments(weight, indices, offsets, include_last_offset)
    count = len(starts)
    index_dtype = TO_NUMPY[torch.promote_types(indices.dtype, offsets.dtype)]
    w = unwrap(weight)
    dtype = dt.compute_dtype(w.dtype)
    w = w.to(dtype)
    idx, bag, spare, pad = _bag_parts(indices, offsets, padding_idx, count)
    rows = w.index_select(0, idx)
    if per_sample_weights is not None:
        rows = rows * operand(per_sample_weights, dtype).unsqueeze(1)
    if mode != SUM:  # mode sum's bag_size is zeros, as the CPU's
        counts = bincount(spare, minlength=count + 1)  # the spare bag's count last
        sizes = counts[:count]
    out = zeros(count + 1, w.shape[1], dtype=dtype, device=w.device)
    if mode == MAX:
        longest = max((b - a for a, b in zip(starts, starts[1:] + [idx.shape[0]])), default=0)
        bag_max = _dense_max if 0 < count * longest <= 2 * idx.shape[0] else _scattered_max
        out, max_indices = bag_max(rows, idx, bag, spare, pad, starts, counts, longest)
    else:
        out = out.index_add(0, spare, rows)
        if mode == MEAN:
            out = out / counts.to(dtype).clamp(min=1).unsqueeze(1)
    out = finish(out[:count], out_meta)
    if mode == SUM:
        length = count + 1 if forward_only and include_last_offset else count
        sizes = max_indices = zeros(length, dtype=index_dtype, device=w.device)
    elif mode == MEAN:  # a copy of bag_size, as the CPU's
        max_indices = sizes.clone()
    o2b = bag[:0] if _fast_sum(weight, per_sample_weights, mode, padding_idx) else bag
    return (out, wrap(o2b.to(index_dtype)), wrap(sizes.to(index_dtype)),
            wrap(max_indices.to(index_dtype)))


def _dense_max(rows, idx, bag, spare, pad, starts, counts, longest):
    """(each bag's maximum (B, D), the weight row of its first maximum) for bags of similar
    lengths: the rows laid out as (B, longest, D), -inf where a bag is shorter or an entry is
    padding, and one max over dim 1 (its index: the first maximum); empty bags give 0, 0."""
    count, width, n = len(starts), rows.shape[1], idx.shape[0]
    first = tensor(starts, dtype=dt.int64, device=rows.device)
    slot = arange(n, device=rows.device) - first.index_select(0, bag) + bag * longest
    if pad is not None:  # padding entries go to a spare slot past the bags'
        slot = where(pad, count * longest, slot)
    dense = full((count * longest + 1, width), float("-inf"), dtype=rows.dtype,
                 device=rows.device).index_copy(0, slot, rows)
    values, at = dense[:count * longest].reshape(count, longest, width).max(1)
    filled = (counts[:count] > 0).unsqueeze(1)
    picks = idx.index_select(0, where(filled, at + first.unsqueeze(1), 0).reshape(-1))
    return (where(filled, values, 0.0),
            where(filled, picks.reshape(count, width), 0))


def _scattered_max(rows, idx, bag, spare, pad, starts, counts, longest):
    """_dense_max()'s results for bags of any lengths, by scatter_reduce over the entries (no
    padded layout: one long bag among many short ones would make it large)."""
    count, width, n = len(starts), rows.shape[1], idx.shape[0]
    expand = spare.unsqueeze(1).expand(*rows.shape)
    out = zeros(count + 1, width, dtype=rows.dtype, device=rows.device).scatter_reduce(
        0, expand, rows, "amax", include_self=False)
    # the first entry of each bag holding its maximum, and its weight row
    first = where(rows == out.index_select(0, spare),
                  arange(n, device=rows.device).unsqueeze(1), n)
    at = full((count + 1, width), n, dtype=dt.int64, device=rows.device).scatter_reduce(
        0, expand, first, "amin")
    picks = cat([idx, zeros(1, dtype=dt.int64, device=rows.device)])
    return out[:count], picks.index_select(0, at.reshape(-1)).reshape(at.shape)[:count]


@aten("_embedding_bag")
def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    return _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                          per_sample_weights, include_last_offset, padding_idx)


@aten("_embedding_bag_forward_only")
def embedding_bag_forward_only(weight, indices, offsets, scale_grad_by_freq=False, mode=0,
                               sparse=False, per_sample_weights=None, include_last_offset=False,
                               padding_idx=-1):
    return _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                          per_sample_weights, include_last_offset, padding_idx, True)


def _dense_backward(grad, idx, bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq,
                    mode, per_sample_weights, padding_idx):
    """The weight's gradient (num_weights, D) in the dtype of grad, summed by index_add /
    scatter_add (deterministic); padding_idx's row gets none."""
    g = unwrap(grad)
    dtype = dt.compute_dtype(g.dtype)
    g = g.to(dtype)
    width = g.shape[1]
    spare = num_weights  # a row past the weight's, dropped at the end
    if mode == MAX:
        sizes = unwrap(bag_size).to(dt.int64).unsqueeze(1)
        rows = where(sizes > 0, unwrap(maximum_indices).to(dt.int64), spare)
        gw = zeros(num_weights + 1, width, dtype=dtype, device=g.device)
        return gw.scatter_add(0, rows, g)[:num_weights]
    per_entry = g.index_select(0, bag)
    if mode == MEAN:
        sizes = unwrap(bag_size).to(dtype).clamp(min=1)
        per_entry = per_entry / sizes.index_select(0, bag).unsqueeze(1)
    if per_sample_weights is not None:
        per_entry = per_entry * operand(per_sample_weights, dtype).unsqueeze(1)
    if scale_grad_by_freq:
        counts = bincount(idx, minlength=num_weights).to(dtype)
        per_entry = per_entry / counts.index_select(0, idx).unsqueeze(1)
    target = idx if padding_idx < 0 else where(idx == padding_idx, spare, idx)
    gw = zeros(num_weights + 1, width, dtype=dtype, device=g.device)
    return gw.index_add(0, target, per_entry)[:num_weights]


def _bags_of(offset2bag, offsets, n):
    """offset2bag as int64, made from the offsets where torch's fast path left it empty."""
    if offset2bag is not None and offset2bag.numel() == n:
        return unwrap(offset2bag).to(dt.int64)
    return _offset2bag(offsets, offsets.numel(), n, unwrap(offsets).device)


@aten("_embedding_bag_backward")
def embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices,
                           num_weights, scale_grad_by_freq, mode, sparse, per_sample_weights,
                           padding_idx=-1):
    args = (grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights,
            scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx)
    if sparse:  # sparse gradients have no opencl form
        return cpu_fallback(_aten._embedding_bag_backward.default, *args)
    idx = unwrap(indices).to(dt.int64)
    bag = _bags_of(offset2bag, offsets, idx.shape[0])
    gw = _dense_backward(grad, idx, bag, bag_size, maximum_indices, num_weights,
                         scale_grad_by_freq, mode, per_sample_weights, padding_idx)
    return wrap(gw.to(np_dtype(grad.dtype, "_embedding_bag_backward")))


@aten("_embedding_bag_dense_backward")
def embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices,
                                 num_weights, scale_grad_by_freq, mode, per_sample_weights,
                                 padding_idx=-1):
    idx = unwrap(indices).to(dt.int64)
    if mode != MAX and offset2bag.numel() != idx.shape[0]:
        raise RuntimeError(f"_embedding_bag_dense_backward: offset2bag holds {offset2bag.numel()} "
                           f"bags for {idx.shape[0]} indices")
    bag = unwrap(offset2bag).to(dt.int64) if mode != MAX else None
    gw = _dense_backward(grad, idx, bag, bag_size, maximum_indices, num_weights,
                         scale_grad_by_freq, mode, per_sample_weights, padding_idx)
    return wrap(gw.to(np_dtype(grad.dtype, "_embedding_bag_dense_backward")))


@aten("_embedding_bag_per_sample_weights_backward")
def embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode,
                                              padding_idx=-1):
    """Each index's weight gradient: its bag's output gradient dotted with its weight row (zero
    for padding_idx)."""
    if mode != SUM:
        raise RuntimeError("embedding_bag_backward: per_sample_weights only supported for "
                           "mode='sum'")
    g = unwrap(grad)
    dtype = dt.compute_dtype(g.dtype)
    idx = unwrap(indices).to(dt.int64)
    bag = _bags_of(offset2bag, offsets, idx.shape[0])
    rows = unwrap(weight).to(dtype).index_select(0, idx)
    res = (g.to(dtype).index_select(0, bag) * rows).sum(1)
    if padding_idx >= 0:
        res = where(idx == padding_idx, 0.0, res)
    return wrap(res.to(np_dtype(grad.dtype, "_embedding_bag_per_sample_weights_backward")))


# the aten overloads registered here, all tested in tests/test_torch_sampling_ops.py
OPS = ("grid_sampler_2d", "grid_sampler_2d.out", "grid_sampler_2d_backward", "_embedding_bag",
       "_embedding_bag_forward_only", "_embedding_bag_backward", "_embedding_bag_dense_backward",
       "_embedding_bag_per_sample_weights_backward")
