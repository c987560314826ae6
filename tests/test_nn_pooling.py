"""cltensor.nn.functional's pooling: max, average and adaptive (average and max) 2-d pooling
against float64 numpy references, forward and gradients: argmax indices, NaN, ceil_mode,
padding, dilation and divisor_override, every layout, awkward sizes, large windows and
launches, 32- and 64-bit offsets, each kernel form with its window geometry baked in or read
at run time on poisoned outputs, a property test, and bad input. test_fuzz.py uses the
references here too."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cltensor
import cltensor.nn.functional as F
from cltensor.ops import pool as pool_ops
from cltensor.testing import assert_close, gradcheck, random_array
from test_nn_functional import F32, T, grad_of, strided_views


# ---- numpy references ---------------------------------------------------------------------------

def ref_pool_size(n, k, s, p, d, ceil):
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    return out


def ref_max_pool(x, k, s, p, d, ceil):
    N, C, H, W = x.shape
    OH, OW = (ref_pool_size(n, k[i], s[i], p[i], d[i], ceil) for i, n in enumerate((H, W)))
    y = np.empty((N, C, OH, OW))
    idx = np.empty((N, C, OH, OW), np.int64)
    for oh in range(OH):
        for ow in range(OW):
            hs = [oh * s[0] - p[0] + a * d[0] for a in range(k[0])]
            ws = [ow * s[1] - p[1] + b * d[1] for b in range(k[1])]
            pos = [(h, w) for h in hs for w in ws if 0 <= h < H and 0 <= w < W]
            vals = np.stack([x[:, :, h, w] for h, w in pos], -1)
            arg = vals.argmax(-1)
            y[:, :, oh, ow] = vals.max(-1)
            flat = np.array([h * W + w for h, w in pos])
            idx[:, :, oh, ow] = flat[arg]
    return y, idx


def ref_avg_pool(x, k, s, p, ceil, include_pad, divisor=None):
    N, C, H, W = x.shape
    OH, OW = (ref_pool_size(n, k[i], s[i], p[i], 1, ceil) for i, n in enumerate((H, W)))
    y = np.empty((N, C, OH, OW))
    for oh in range(OH):
        for ow in range(OW):
            h0, w0 = oh * s[0] - p[0], ow * s[1] - p[1]
            h1, w1 = min(h0 + k[0], H + p[0]), min(w0 + k[1], W + p[1])
            padded = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, H), min(w1, W)
            div = divisor or (padded if include_pad else (h1 - h0) * (w1 - w0))
            y[:, :, oh, ow] = x[:, :, h0:h1, w0:w1].sum((2, 3)) / div
    return y


def ref_adaptive_avg_pool(x, out):
    H, W = x.shape[2:]
    y = np.empty(x.shape[:2] + out)
    for oh in range(out[0]):
        for ow in range(out[1]):
            h0, h1 = oh * H // out[0], -(-(oh + 1) * H // out[0])
            w0, w1 = ow * W // out[1], -(-(ow + 1) * W // out[1])
            y[:, :, oh, ow] = x[:, :, h0:h1, w0:w1].mean((2, 3))
    return y


# ---- pooling ------------------------------------------------------------------------------------

# (kernel, stride, padding, dilation, ceil_mode): AlexNet's overlap, GoogLeNet's ceil_mode, ...
POOLS = [((2, 2), (2, 2), (0, 0), (1, 1), False),
         ((3, 3), (2, 2), (0, 0), (1, 1), False),
         ((3, 3), (2, 2), (1, 1), (1, 1), True),
         ((3, 3), (1, 1), (1, 1), (1, 1), False),
         ((3, 3), (3, 3), (0, 0), (1, 1), True),
         ((2, 3), (1, 2), (1, 0), (2, 1), True)]


@pytest.mark.parametrize("k,s,p,d,ceil", POOLS)
def test_max_pool2d_forward(device, rng, k, s, p, d, ceil):
    a = random_array(rng, (2, 3, 9, 11))
    y_ref, idx_ref = ref_max_pool(a, k, s, p, d, ceil)
    for layout, x in strided_views(a, device):
        y, idx = F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
        assert_close(y, y_ref), layout
        assert idx.dtype == cltensor.int64
        assert_close(idx, idx_ref), layout
    cl = F.max_pool2d(T(a, device).contiguous(cltensor.channels_last), k, s, p, d, ceil)
    assert cl.is_contiguous(cltensor.channels_last)


@pytest.mark.parametrize("k,s,p,ceil", [(3, 1, 1, False), (3, 2, 0, True), (3, 2, 1, False),
                                        (2, 2, 0, False)])
def test_max_pool2d_large_launches(device, rng, fp_dtypes, k, s, p, ceil):
    """Launches of more than pool.BAKE_MIN_TAPS taps, which build the window into the kernel
    (on CPUs: rows computed 8 outputs at a time from vector loads, pool.cl VECTOR_ROWS), with
    rows of 61 (a scalar remainder), ties, one NaN, and an input view that starts unaligned."""
    from cltensor.ops import pool
    for dtype in fp_dtypes:
        full = np.round(random_array(rng, (2, 16, 48, 62), dtype) * 4) / 4  # many ties
        full[1, 2, 20, 31] = np.nan
        a = full[..., 1:]
        x = T(full, device)[..., 1:]
        y, idx = F.max_pool2d(x, k, s, p, ceil_mode=ceil, return_indices=True)
        assert y.numel() * k * k >= pool.BAKE_MIN_TAPS
        y_ref, idx_ref = ref_max_pool(np.nan_to_num(a, nan=-np.inf), (k, k), (s, s), (p, p),
                                      (1, 1), ceil)
        has_nan = ref_max_pool(np.isnan(a).astype(np.float64), (k, k), (s, s), (p, p), (1, 1),
                               ceil)[0] > 0
        got, got_idx = y.numpy(), idx.numpy()
        assert (np.isnan(got) == has_nan).all() and has_nan.any()
        assert (got_idx[has_nan] == 20 * 61 + 30).all()
        assert_close(got[~has_nan], y_ref[~has_nan])
        assert (got_idx[~has_nan] == idx_ref[~has_nan]).all(), dtype


@pytest.mark.parametrize("k,s,p,d,ceil", [c for c in POOLS if c[3] == (1, 1)])
@pytest.mark.parametrize("include_pad", [True, False])
def test_avg_pool2d_forward(device, rng, k, s, p, d, ceil, include_pad):
    a = random_array(rng, (2, 3, 9, 11))
    expected = ref_avg_pool(a, k, s, p, ceil, include_pad)
    for layout, x in strided_views(a, device):
        y = F.avg_pool2d(x, k, s, p, ceil_mode=ceil, count_include_pad=include_pad)
        assert_close(y, expected, **F32), layout
    y = F.avg_pool2d(T(a, device), k, s, p, ceil, include_pad, divisor_override=5)
    assert_close(y, ref_avg_pool(a, k, s, p, ceil, include_pad, divisor=5), **F32)


@pytest.mark.parametrize("out", [(1, 1), (3, 5), (4, 4), (9, 11), (13, 2)])
def test_adaptive_avg_pool2d_forward(device, rng, out):
    a = random_array(rng, (2, 3, 9, 11))
    for layout, x in strided_views(a, device):
        assert_close(F.adaptive_avg_pool2d(x, out), ref_adaptive_avg_pool(a, out), **F32), layout
    y = F.adaptive_avg_pool2d(T(a[0], device), (out[0], None))
    assert_close(y, ref_adaptive_avg_pool(a, (out[0], 11))[0], **F32)


@pytest.mark.parametrize("k,s,p,d,ceil", POOLS[1:3] + POOLS[5:])
def test_pool_gradients(device, rng, k, s, p, d, ceil):
    x = T(rng.standard_normal((1, 2, 5, 6)), device, True)
    assert gradcheck(lambda t: F.max_pool2d(t, k, s, p, d, ceil), [x])
    assert gradcheck(lambda t: F.avg_pool2d(t, k, s, p, ceil, count_include_pad=False), [x])
    assert gradcheck(lambda t: F.avg_pool2d(t, k, s, p, ceil, divisor_override=3), [x])


def test_adaptive_avg_pool2d_gradient(device, rng):
    x = T(rng.standard_normal((1, 2, 5, 7)), device, True)
    for out in ((2, 3), (5, 7), (3, 4)):
        assert gradcheck(lambda t, out=out: F.adaptive_avg_pool2d(t, out), [x])


def test_pool_backward_layouts(device, rng):
    """Gradients of channels_last, 3-d and sliced inputs against the contiguous result; the
    output gradient of a sum is broadcast (stride 0)."""
    a = random_array(rng, (2, 3, 8, 7))
    g = random_array(rng, (2, 3, 4, 4))
    fns = [lambda t: F.max_pool2d(t, 3, 2, 1), lambda t: F.avg_pool2d(t, 3, 2, 1),
           lambda t: F.adaptive_avg_pool2d(t, (4, 4))]
    for fn in fns:
        ref = grad_of(fn, T(a, device, True), T(g, device))
        for layout, x in strided_views(a, device):
            leaf = x.detach().requires_grad_()
            assert_close(grad_of(fn, leaf, T(g, device)), ref, **F32), layout
        x3 = T(a[1], device, True)
        assert_close(grad_of(fn, x3, T(g[1], device)), ref[1], **F32)
    _, idx = ref_max_pool(a, (2, 2), (2, 2), (0, 0), (1, 1), False)
    expected = np.zeros(a.shape).reshape(2, 3, -1)
    np.put_along_axis(expected, idx.reshape(2, 3, -1), 1.0, axis=2)
    x = T(a, device, True)
    F.max_pool2d(x, 2).sum().backward()
    assert_close(x.grad, expected.reshape(a.shape))


def test_pool_offset_types(device, rng, monkeypatch):
    """pool.cl computes offsets in 32-bit ints when the buffers are small: the 64-bit build
    (forced) gives the same results, small and large (window baked) launches, every layout;
    and a size-1 dim's stride that no int holds is harmless."""
    pools = [lambda t: F.max_pool2d(t, 3, 2, 1), lambda t: F.avg_pool2d(t, 3, 1, 1),
             lambda t: F.adaptive_avg_pool2d(t, (4, 5))]
    cases = []
    for shape in ((2, 3, 9, 11), (2, 16, 48, 61), (2, 3, 9, 1)):  # W = 1: a size-1 dim
        a = random_array(rng, shape)
        for fn in pools:
            g = T(random_array(rng, fn(T(a, device)).shape), device)
            cases.append((a, fn, g, fn(T(a, device)).numpy(), grad_of(fn, T(a, device, True), g)))
    assert pool_ops._offset_type(T(cases[0][0], device)) == "int"
    monkeypatch.setattr(pool_ops, "INT_OFFSETS_BELOW", 0)
    assert pool_ops._offset_type(T(cases[0][0], device)) == "long"
    for a, fn, g, y, gx in cases:
        for layout, x in strided_views(a, device):
            leaf = x.detach().requires_grad_()
            assert np.array_equal(fn(leaf).numpy(), y), layout
            assert np.array_equal(grad_of(fn, leaf, g), gx), layout
    monkeypatch.undo()
    a, fn, _, y, _ = cases[0]
    x = T(a[:1], device)
    huge = cltensor.ClTensor(x.storage, x.shape, (2**40,) + x.strides[1:], 0, x.dtype)
    assert pool_ops._offset_type(huge) == "int"
    assert np.array_equal(fn(huge).numpy(), y[:1])


def test_max_pool2d_nan(device, rng):
    """NaN wins its windows (with the last NaN's position, as torch) and gets their gradient."""
    a = random_array(rng, (1, 1, 5, 5)).astype(np.float64)
    a[0, 0, 1, 1] = a[0, 0, 2, 2] = np.nan
    x = T(a, device, True)
    y, idx = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    y_ref, idx_ref = ref_max_pool(np.nan_to_num(a, nan=-np.inf), (3, 3), (2, 2), (1, 1), (1, 1),
                                  False)
    y_ref[0, 0, :2, :2] = np.nan
    idx_ref[0, 0, :2, :2] = [[6, 6], [6, 12]]
    assert_close(y, y_ref)
    assert_close(idx, idx_ref)
    y.backward(cltensor.ones_like(y))
    assert x.grad.numpy()[0, 0, 1, 1] == 3 and x.grad.numpy()[0, 0, 2, 2] == 1


def test_pool_awkward_sizes(device, rng):
    for shape, k in (((1, 1, 1, 1), 1), ((3, 1, 7, 1), (3, 1)), ((1, 37, 3, 13), (1, 3)),
                     ((0, 2, 5, 5), 2)):
        a = random_array(rng, shape)
        kk = k if isinstance(k, tuple) else (k, k)
        y = F.max_pool2d(T(a, device), k, 1, ceil_mode=True)
        assert y.shape[:2] == shape[:2]
        if a.size:
            assert_close(y, ref_max_pool(a, kk, (1, 1), (0, 0), (1, 1), True)[0])
        z = F.avg_pool2d(T(a, device), k, 2, ceil_mode=True, count_include_pad=False)
        assert z.shape == shape[:2] + tuple(ref_pool_size(n, k_, 2, 0, 1, True)
                                            for n, k_ in zip(shape[2:], kk))
        if a.size:
            assert_close(z, ref_avg_pool(a, kk, (2, 2), (0, 0), True, False), **F32)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_pool_property(device, data):
    k = (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4)))
    s = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    p = (data.draw(st.integers(0, k[0] // 2)), data.draw(st.integers(0, k[1] // 2)))
    ceil = data.draw(st.booleans())
    hw = (data.draw(st.integers(k[0], 12)), data.draw(st.integers(k[1], 12)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    a = random_array(rng, (2, 3) + hw)
    x = T(a, device) if data.draw(st.booleans()) else \
        T(a, device).contiguous(cltensor.channels_last)
    assert_close(F.max_pool2d(x, k, s, p, 1, ceil), ref_max_pool(a, k, s, p, (1, 1), ceil)[0])
    assert_close(F.avg_pool2d(x, k, s, p, ceil), ref_avg_pool(a, k, s, p, ceil, True), **F32)


def test_pool_bad_input(device, rng):
    x = T(random_array(rng, (1, 2, 6, 6)), device)
    with pytest.raises(ValueError, match="3-d .* or 4-d"):
        F.max_pool2d(T(random_array(rng, (6, 6)), device), 2)
    with pytest.raises(ValueError, match="pad should be at most half"):
        F.max_pool2d(x, 3, padding=2)
    with pytest.raises(ValueError, match="pad should be at most half"):
        F.avg_pool2d(x, 2, padding=(0, 2))
    with pytest.raises(ValueError, match="stride must be greater than zero"):
        F.max_pool2d(x, 3, stride=0)
    with pytest.raises(ValueError, match="kernel_size must be greater than zero"):
        F.avg_pool2d(x, 0)
    with pytest.raises(ValueError, match="dilation must be greater than zero"):
        F.max_pool2d(x, 2, dilation=0)
    with pytest.raises(ValueError, match="too small"):
        F.max_pool2d(x, 7)
    with pytest.raises(ValueError, match="divisor_override"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(TypeError, match="floating point"):
        F.max_pool2d(cltensor.zeros(1, 1, 4, 4, dtype=cltensor.int32, device=device), 2)
    with pytest.raises(TypeError, match="pair of ints"):
        F.max_pool2d(x, (2, 2, 2))
    with pytest.raises(ValueError, match="output_size"):
        F.adaptive_avg_pool2d(x, 0)


# The kernel forms (pool.cl: rows/planes on CPUs, items on GPUs), each with its window geometry
# baked into the build and read at run time: (kernel, stride, padding, dilation, ceil_mode).
FORM_POOLS = [((3, 3), (2, 2), (0, 0), (1, 1), True),    # GoogLeNet's (AlexNet's: floor)
              ((3, 3), (2, 2), (1, 1), (1, 1), True),    # ceil_mode with padding
              ((3, 3), (1, 1), (1, 1), (1, 1), False),   # GoogLeNet's stride 1
              ((2, 3), (3, 4), (1, 1), (3, 2), True)]    # stride > kernel, dilation


@pytest.fixture(params=["rows", "items"])
def pool_form(request, device, monkeypatch):
    """Every kernel form on every device."""
    monkeypatch.setitem(pool_ops.FORM, "cpu" if device.is_cpu else "gpu", request.param)
    return request.param


def _poison_pool(device, *nbytes):
    """Leave NaN-filled blocks of these sizes in the memory pool, so that an output element a
    kernel forgets to write reads NaN (or a huge integer)."""
    held = [cltensor.full((max(n // 4, 1),), float("nan"), device=device) for n in nbytes]
    del held


def ref_max_pool_grad(x, g, k, s, p, d, ceil):
    """Max pooling in float64 with torch's rules (the first largest, or the last NaN; -inf where
    the window holds no input), its argmax (-1 there) and dL/dx for the output gradient g."""
    N, C, H, W = x.shape
    OH, OW = (ref_pool_size(n, k[i], s[i], p[i], d[i], ceil) for i, n in enumerate((H, W)))
    y, idx = np.full((N, C, OH, OW), -np.inf), np.full((N, C, OH, OW), -1)
    gx = np.zeros((N, C, H * W))
    for n, c, oh, ow in np.ndindex(N, C, OH, OW):
        pos = [(h, w) for h in range(oh * s[0] - p[0], oh * s[0] - p[0] + k[0] * d[0], d[0])
               for w in range(ow * s[1] - p[1], ow * s[1] - p[1] + k[1] * d[1], d[1])
               if 0 <= h < H and 0 <= w < W]
        if not pos:
            continue
        vals = np.array([x[n, c, h, w] for h, w in pos], np.float64)
        nan = np.flatnonzero(np.isnan(vals))
        best = nan[-1] if nan.size else int(np.argmax(vals))
        y[n, c, oh, ow], idx[n, c, oh, ow] = vals[best], pos[best][0] * W + pos[best][1]
        gx[n, c, idx[n, c, oh, ow]] += g[n, c, oh, ow]
    return y, idx, gx.reshape(x.shape)


def ref_avg_pool_grad(g, x_shape, k, s, p, ceil, include_pad, divisor):
    """dL/dx of ref_avg_pool in float64 for the output gradient g."""
    H, W = x_shape[2:]
    gx = np.zeros(x_shape)
    for oh, ow in np.ndindex(*g.shape[2:]):
        h0, w0 = oh * s[0] - p[0], ow * s[1] - p[1]
        h1, w1 = min(h0 + k[0], H + p[0]), min(w0 + k[1], W + p[1])
        padded = (h1 - h0) * (w1 - w0)
        h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, H), min(w1, W)
        div = divisor or (padded if include_pad else (h1 - h0) * (w1 - w0))
        gx[:, :, h0:h1, w0:w1] += g[:, :, oh:oh + 1, ow:ow + 1] / div
    return gx


def _check_max_pool_kernels(device, x, a, g, gn, k, s, p, d, ceil):
    y_ref, idx_ref, gx_ref = ref_max_pool_grad(a, gn, k, s, p, d, ceil)
    fields, out_hw = pool_ops.window("max_pool2d", x, k, s, p, d, ceil)
    _poison_pool(device, 4 * y_ref.size, 4 * y_ref.size)
    y, taps = pool_ops.max_pool2d(x, fields, out_hw, True)
    np.testing.assert_array_equal(y.numpy(), y_ref.astype(np.float32))
    assert taps.dtype == cltensor.uint8  # windows of up to 255 taps
    _poison_pool(device, 8 * y_ref.size)
    idx = pool_ops.max_pool2d_indices(taps, x.shape, fields)
    inside = idx_ref >= 0  # a window wholly in the padding has no argmax in torch's sense
    np.testing.assert_array_equal(idx.numpy()[inside], idx_ref[inside])
    _poison_pool(device, 4 * a.size)
    gx = pool_ops.max_pool2d_backward(g, taps, x.shape, pool_ops.layout_of(x), fields)
    assert gx.is_contiguous(pool_ops.layout_of(x))
    assert_close(gx, gx_ref, **F32)
    # torch's indices back to taps (max_pool2d_with_indices_backward): the same gradient
    back = pool_ops.max_pool2d_taps(idx, x.shape, fields)
    assert_close(pool_ops.max_pool2d_backward(g, back, x.shape, pool_ops.layout_of(x), fields),
                 gx_ref, **F32)


def _check_avg_pool_kernels(device, x, a, g, gn, k, s, p, ceil):
    fields, out_hw = pool_ops.window("avg_pool2d", x, k, s, p, 1, ceil)
    for include_pad, divisor in ((True, 0), (False, 0), (True, 5)):
        _poison_pool(device, 4 * gn.size)
        y = pool_ops.avg_pool2d(x, fields, out_hw, divisor, include_pad)
        assert_close(y, ref_avg_pool(a, k, s, p, ceil, include_pad, divisor), **F32)
        _poison_pool(device, 4 * a.size)
        gx = pool_ops.avg_pool2d_backward(g, x.shape, pool_ops.layout_of(x), fields, divisor,
                                          include_pad)
        assert_close(gx, ref_avg_pool_grad(gn, a.shape, k, s, p, ceil, include_pad, divisor),
                     **F32)


@pytest.mark.parametrize("baked", [True, False], ids=["baked", "generic"])
@pytest.mark.parametrize("k,s,p,d,ceil", FORM_POOLS)
def test_pool2d_kernel_forms(device, rng, pool_form, monkeypatch, baked, k, s, p, d, ceil):
    """Each form of the max and avg kernels, forward and backward, with the window geometry
    built in and read at run time, in every layout (a gradient of the input's layout kind),
    NaN included, on outputs poisoned first; avg pooling takes the geometry without dilation.
    The small inputs leave no output a window inside the input's columns (the rows form's inner
    span is empty: ceil_mode's last window overhangs a 2x2 input), and with dilation 1x1 and
    4x1 inputs leave max windows wholly in the padding (the 4x1 input's argmax there is torch's,
    h * W + w with w = W: an input of the next row, which must get no gradient)."""
    monkeypatch.setattr(pool_ops, "BAKE_MIN_TAPS", 0 if baked else 2**62)
    for shape in ((2, 3, 9, 11), (1, 2, 1, 1), (1, 2, 2, 2), (1, 2, 4, 1)):
        if min(ref_pool_size(n, k[i], s[i], p[i], d[i], ceil)
               for i, n in enumerate(shape[2:])) < 1:
            continue
        a = random_array(rng, shape)
        if a.size > 41:
            a.flat[[5, 40, 41]] = np.nan  # 40 and 41 share windows: the last NaN wins
        for dilation in dict.fromkeys((d, (1, 1))):  # max's geometry, then avg's
            out = tuple(ref_pool_size(n, k[i], s[i], p[i], dilation[i], ceil)
                        for i, n in enumerate(shape[2:]))
            gn = random_array(rng, shape[:2] + out)
            for (_, x), (_, g) in zip(strided_views(a, device), strided_views(gn, device)):
                if dilation == d:
                    _check_max_pool_kernels(device, x, a, g, gn, k, s, p, d, ceil)
                if dilation == (1, 1):
                    _check_avg_pool_kernels(device, x, a, g, gn, k, s, p, ceil)


def test_large_pooling_windows_stay_accurate(device, rng):
    """Average pooling over a whole 512 x 512 plane (adaptive, to 1 x 1) and with a 64 x 64
    window, in float32: within 2e-6 of float64 (windows are summed by rows; one float32 sum of
    262144 elements was 6e-6 off)."""
    a = rng.uniform(0, 1, (1, 2, 512, 512)).astype(np.float32)
    want = a.astype(np.float64).mean((2, 3), keepdims=True)
    assert_close(F.adaptive_avg_pool2d(T(a, device), 1), want, rtol=2e-6, atol=0)
    want = a.astype(np.float64).reshape(1, 2, 8, 64, 8, 64).mean((3, 5))
    assert_close(F.avg_pool2d(T(a, device), 64), want, rtol=2e-6, atol=0)


def _adaptive_max_reference(a, oh, ow):
    n, c, h, w = a.shape
    y = np.empty((n, c, oh, ow))
    idx = np.empty((n, c, oh, ow), np.int64)
    for i in range(oh):
        h0, h1 = i * h // oh, -(-(i + 1) * h // oh)
        for j in range(ow):
            w0, w1 = j * w // ow, -(-(j + 1) * w // ow)
            win = a[:, :, h0:h1, w0:w1].reshape(n, c, -1)
            k = win.argmax(-1)
            y[:, :, i, j] = np.take_along_axis(win, k[..., None], -1)[..., 0]
            idx[:, :, i, j] = (h0 + k // (w1 - w0)) * w + w0 + k % (w1 - w0)
    return y, idx


def test_adaptive_max_pool2d(device, rng):
    """Values and argmax against a numpy reference on strided and channels_last inputs, down-
    and upsampling windows; the gradient by finite differences; NaN wins, as max_pool2d."""
    a = random_array(rng, (2, 3, 7, 9))
    for out in [(3, 4), (1, 1), (7, 9), (10, 12), (None, 2)]:
        oh, ow = (7 if out[0] is None else out[0]), out[1]
        want, want_idx = _adaptive_max_reference(a.astype(np.float64), oh, ow)
        for layout, x in strided_views(a, device):
            y, idx = F.adaptive_max_pool2d(x, out, return_indices=True)
            assert_close(y, want, rtol=0, atol=0), (out, layout)
            np.testing.assert_array_equal(idx.numpy(), want_idx)
    if device.has_fp64:
        x64 = T(rng.standard_normal((1, 2, 5, 6)), device, True)
        assert gradcheck(lambda t: F.adaptive_max_pool2d(t, (2, 4)), [x64])
    b = a.copy()
    b[0, 0, 1, 1] = np.nan
    y = F.adaptive_max_pool2d(T(b, device), 1).numpy()
    assert np.isnan(y[0, 0, 0, 0]) and not np.isnan(y[0, 1:]).any()
    assert F.adaptive_max_pool2d(T(a[0], device), 2).shape == (3, 2, 2)
    with pytest.raises(ValueError, match="output_size must hold positive ints"):
        F.adaptive_max_pool2d(T(a, device), (0, 2))
