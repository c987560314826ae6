"""cat, stack, split, chunk, pad, flip, repeat and roll against numpy."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cltensor as ct
from cltensor.device import Device
from cltensor.ops import shape as shape_ops
from cltensor.testing import assert_close, gradcheck, random_array


def layouts(a, device):
    """a as a contiguous tensor, a transposed view and a step-sliced view with an offset."""
    yield ct.from_numpy(a, device=device)
    if a.ndim >= 2:
        swapped = np.ascontiguousarray(np.swapaxes(a, 0, -1))
        yield ct.from_numpy(swapped, device=device).transpose(0, -1)
    flat = np.zeros(2 * a.size + 3, dtype=a.dtype)
    flat[3::2] = a.ravel()
    yield ct.from_numpy(flat, device=device)[3::2].view(a.shape)


# ---- cat and stack -------------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_cat(device, rng, dim):
    sizes = [3, 1, 7]
    parts = []
    for n in sizes:
        shape = [4, 5, 2]
        shape[dim] = n
        parts.append(random_array(rng, shape, np.float32))
    ref = np.concatenate(parts, axis=dim)
    for views in zip(*(layouts(p, device) for p in parts)):
        assert_close(ct.cat(list(views), dim), ref)
    # an expanded (stride 0) input
    row = ct.from_numpy(parts[0][:1], device=device).expand(5, 5, 2) if dim == 0 else None
    if row is not None:
        assert_close(ct.cat([row, ct.from_numpy(parts[1], device=device)]),
                     np.concatenate([np.broadcast_to(parts[0][:1], (5, 5, 2)), parts[1]]))


@pytest.mark.parametrize("form", ["cat_rows", "cat_contig"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int8, np.bool_])
def test_cat_of_contiguous_inputs_in_one_launch(device, rng, dtype, form, monkeypatch):
    """Two to eight contiguous inputs of one dtype (some at an offset in their buffer) take one
    launch along every dim, in either kernel form; nine, or a strided input, the copy per
    input; all as numpy's."""
    monkeypatch.setitem(shape_ops.CAT_FORM, "cpu" if device.is_cpu else "gpu", form)
    monkeypatch.setattr(shape_ops, "CAT_ROW_CHUNK", 7)  # rows of several chunks
    monkeypatch.setattr(shape_ops, "CAT_GROUP", 4)  # and of several cat_contig items
    for dim in (0, 1, 3):
        for count in (2, 5, 8, 9):
            arrays, views = [], []
            for i in range(count):
                shape = [2, 3, 4, 5]
                shape[dim] = 1 + (i * 3) % 4
                a = random_array(rng, [1 + i % 2] + shape, dtype)
                arrays.append(a[-1])
                views.append(ct.from_numpy(a, device=device)[-1])  # offset when 1 + i % 2 == 2
            ref = np.concatenate(arrays, axis=dim)
            with ct.profile() as prof:
                out = ct.cat(views, dim)
            assert_close(out, ref)
            assert len(prof.events) == (1 if count <= 8 else count), (dim, count)
            strided = list(layouts(arrays[0], device))[2]
            with ct.profile() as prof:
                out = ct.cat([strided] + views[1:], dim)
            assert_close(out, ref)
            assert len(prof.events) == count, (dim, count)


def test_cat_promotes_dtypes(device, rng):
    a, b = random_array(rng, (2, 3), np.int32), random_array(rng, (1, 3), np.float32)
    c = rng.random((2, 3)) < 0.5
    out = ct.cat([ct.from_numpy(a, device=device), ct.from_numpy(b, device=device)])
    assert_close(out, np.concatenate([a, b]).astype(np.float32), dtype=np.float32)
    out = ct.cat((ct.from_numpy(c, device=device), ct.from_numpy(a, device=device)), dim=1)
    assert_close(out, np.concatenate([c.astype(np.int32), a], 1), dtype=np.int32)
    out = ct.cat([ct.from_numpy(c, device=device)] * 2)
    assert_close(out, np.concatenate([c, c]), dtype=np.bool_)


def test_cat_empty_parts(device, rng):
    a = random_array(rng, (3, 4), np.float32)
    x = ct.from_numpy(a, device=device)
    assert_close(ct.cat([x, ct.zeros(0, 4, device=device), x], 0), np.concatenate([a, a]))
    # torch's legacy rule: 1-d empty tensors are skipped whatever the other shapes
    assert_close(ct.cat([ct.zeros(0, device=device), x], 1), a)
    assert ct.cat([ct.zeros(0, device=device)] * 3).shape == (0,)


def test_cat_errors(device):
    x = ct.zeros(2, 3, device=device)
    with pytest.raises(ValueError, match="must match except in dimension 0; expected size 3 but "
                                         "got size 4 for tensor 1 in dimension 1"):
        ct.cat([x, ct.zeros(2, 4, device=device)])
    with pytest.raises(ValueError, match="same number of dims"):
        ct.cat([x, ct.zeros(2, 3, 1, device=device)], 1)
    with pytest.raises(ValueError, match="zero-dimensional"):
        ct.cat([ct.tensor(1.0, device=device)])
    with pytest.raises(ValueError, match="non-empty"):
        ct.cat([])
    with pytest.raises(TypeError, match="list or tuple of tensors"):
        ct.cat(x)
    with pytest.raises(TypeError, match="got ndarray at position 1"):
        ct.cat([x, np.zeros((2, 3))])
    with pytest.raises(IndexError, match="dimension out of range"):
        ct.cat([x, x], 2)
    other = Device(device.index + "-other", device.cl_device)
    with pytest.raises(RuntimeError, match="same device"):
        ct.cat([x, ct.zeros(2, 3, device=other)])


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_stack(device, rng, dim):
    parts = [random_array(rng, (3, 5), np.int64) for _ in range(4)]
    ref = np.stack(parts, axis=dim)
    for views in zip(*(layouts(p, device) for p in parts)):
        assert_close(ct.stack(views, dim), ref)


def test_stack_errors(device):
    with pytest.raises(ValueError, match=r"but got \(2,\) at entry 0 and \(3,\) at entry 1"):
        ct.stack([ct.zeros(2, device=device), ct.zeros(3, device=device)])
    with pytest.raises(IndexError, match="dimension out of range"):
        ct.stack([ct.zeros(2, device=device)], 2)
    assert ct.stack([ct.tensor(1.0, device=device)] * 3).shape == (3,)


# ---- split and chunk -----------------------------------------------------------------------------

def test_split_gives_views(device, rng):
    a = random_array(rng, (5, 11), np.float32)
    x = ct.from_numpy(a, device=device)
    parts = ct.split(x, 4, dim=1)
    assert [p.shape for p in parts] == [(5, 4), (5, 4), (5, 3)]
    for p, r in zip(parts, np.split(a, [4, 8], axis=1)):
        assert_close(p, r)
    parts = x.split([2, 0, 3], 0)
    assert [p.shape for p in parts] == [(2, 11), (0, 11), (3, 11)]
    parts[2].fill_(7.0)  # a view: writes reach x
    a[2:] = 7.0
    assert_close(x, a)
    assert [p.shape for p in ct.zeros(0, 3, device=device).split(2)] == [(0, 3)]


def test_split_errors(device):
    x = ct.zeros(5, 3, device=device)
    with pytest.raises(ValueError, match=r"split sizes \(2, 2\) must be non-negative and add up "
                                         r"to the size 5 of dimension 0"):
        x.split([2, 2])
    with pytest.raises(ValueError, match="must be non-negative"):
        x.split([6, -1])
    with pytest.raises(ValueError, match="split_size must be positive"):
        x.split(0)
    with pytest.raises(TypeError, match="must be an int"):
        x.split(1.5)


@pytest.mark.parametrize("n, chunks, sizes", [
    (5, 3, [2, 2, 1]), (6, 4, [2, 2, 2]), (7, 7, [1] * 7), (2, 5, [1, 1]), (0, 3, [0, 0, 0]),
    (13, 2, [7, 6])])
def test_chunk_sizes_match_torch(device, n, chunks, sizes):
    a = np.arange(n * 2, dtype=np.float32).reshape(2, n)
    parts = ct.from_numpy(a, device=device).chunk(chunks, -1)
    assert [p.shape[1] for p in parts] == sizes
    if n:
        assert_close(ct.cat(list(parts), 1), a)
    with pytest.raises(ValueError, match="chunks must be positive"):
        ct.chunk(ct.zeros(3, device=device), 0)


# ---- pad -----------------------------------------------------------------------------------------

def _pad_ref(a, pad, mode="constant", value=0):
    """numpy's pad for the positive amounts and crops for the negative ones: in circular mode
    crops first (the wrap-around reads the cropped dim, as torch), otherwise pads first."""
    widths = [(0, 0)] * a.ndim
    crops = [slice(None)] * a.ndim
    for i in range(len(pad) // 2):
        d, left, right = a.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        widths[d] = (max(left, 0), max(right, 0))
        n = a.shape[d] if mode == "circular" else a.shape[d] + max(left, 0) + max(right, 0)
        crops[d] = slice(max(-left, 0), n - max(-right, 0))
    np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
               "circular": "wrap"}[mode]
    kwargs = {"constant_values": value} if mode == "constant" else {}
    if mode == "circular":
        return np.pad(a[tuple(crops)], widths, mode=np_mode)
    return np.pad(a, widths, mode=np_mode, **kwargs)[tuple(crops)]


@pytest.mark.parametrize("pad", [(1, 2), (0, 0, 3, 1), (2, -1, -1, 2), (-2, -1), (1, 1, 1, 1, 1, 1),
                                 (-3, 4)])
def test_pad_constant(device, rng, pad):
    a = random_array(rng, (3, 4, 5), np.float32)
    ref = _pad_ref(a, pad, value=-1.5)
    for x in layouts(a, device):
        assert_close(ct.pad(x, pad, value=-1.5), ref)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_, np.float64])
def test_pad_constant_dtypes(device, rng, dtype):
    if dtype == np.float64 and not device.has_fp64:
        pytest.skip("no fp64")
    a = random_array(rng, (2, 3), dtype)
    out = ct.pad(ct.from_numpy(a, device=device), (1, 0, 0, 2), value=1)
    assert_close(out, _pad_ref(a, (1, 0, 0, 2), value=1), dtype=dtype)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", [(2, 1), (1, 3, 2, 0), (0, 2, -1, 1)])
def test_pad_modes(device, rng, mode, pad):
    a = random_array(rng, (2, 4, 5), np.float32)
    ref = _pad_ref(a, pad, mode)
    for x in layouts(a, device):
        assert_close(ct.pad(x, pad, mode=mode), ref)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_mode_gradients(device, rng, mode):
    """The input gradient of reflect, replicate and circular padding (entries read several
    times add up), one and two dims, crops among the amounts, and a padded Conv2d's training
    step: against finite differences in float64, and as the adjoint of the padding itself."""
    if not device.has_fp64:
        pytest.skip("the device has no float64")
    for shape, pad in (((2, 4, 5), (3, 1)), ((2, 4, 5), (1, 2, 3, 0)), ((3, 6), (2, -1, -1, 2)),
                       ((1, 2, 4, 4), (1, 1, 1, 1))):
        x = ct.from_numpy(random_array(rng, shape, np.float64), device=device)
        gradcheck(lambda t: ct.pad(t, pad, mode=mode), [x.requires_grad_()])
        g = random_array(rng, ct.pad(x.detach(), pad, mode=mode).shape, np.float64)
        (gx,) = ct.autograd.grad(ct.pad(x, pad, mode=mode), [x], ct.from_numpy(g, device=device))
        # <pad(e_i), g> for every basis vector e_i: the adjoint, element by element
        basis = np.eye(int(np.prod(shape))).reshape((-1,) + shape)
        want = np.array([(_pad_ref(e, pad, mode) * g).sum() for e in basis]).reshape(shape)
        assert_close(gx, want, rtol=1e-12, atol=1e-12)
    conv = ct.nn.Conv2d(2, 3, 3, padding=1, padding_mode=mode, device=device)
    conv(ct.randn(2, 2, 5, 5, device=device)).sum().backward()
    assert conv.weight.grad is not None and conv.weight.grad.shape == (3, 2, 3, 3)


def test_pad_errors(device):
    x = ct.zeros(2, 3, device=device)
    with pytest.raises(ValueError, match="padding length 6 is too large for a 2-d input"):
        ct.pad(x, (1, 1, 1, 1, 1, 1))
    with pytest.raises(ValueError, match="even number"):
        ct.pad(x, (1, 1, 1))
    with pytest.raises(ValueError, match="gives a negative size"):
        ct.pad(x, (-2, -2))
    with pytest.raises(ValueError, match="must be smaller than the size 3"):
        ct.pad(x, (3, 0), mode="reflect")
    with pytest.raises(ValueError, match="at most the size 3"):
        ct.pad(x, (0, 4), mode="circular")
    with pytest.raises(ValueError, match=r"at most the size 1 of dimension 1 \(after cropping\)"):
        ct.pad(x, (2, -2), mode="circular")
    with pytest.raises(ValueError, match="mode must be one of"):
        ct.pad(x, (1, 1), mode="mirror")
    with pytest.raises(ValueError, match="takes no fill value"):
        ct.pad(x, (1, 1), mode="replicate", value=2)
    with pytest.raises(TypeError, match="must be an int"):
        ct.pad(x, (1.0, 1))


# ---- flip, repeat, roll --------------------------------------------------------------------------

@pytest.mark.parametrize("dims", [(0,), (1,), (-1,), (0, 2), (2, 0, 1), ()])
def test_flip(device, rng, dims):
    a = random_array(rng, (3, 4, 5), np.int32)
    for x in layouts(a, device):
        out = ct.flip(x, dims)
        assert out.is_contiguous()
        assert_close(out, np.flip(a, dims))
        assert_close(x.flip(*dims), np.flip(a, dims))
    assert ct.flip(ct.zeros(0, 3, device=device), (0, 1)).shape == (0, 3)
    with pytest.raises(ValueError, match="more than once"):
        ct.flip(ct.zeros(2, 3, device=device), (1, -1))


@pytest.mark.parametrize("sizes", [(2, 3), (1, 1), (3, 1, 2), (0, 2), (2, 2, 1, 1)])
def test_repeat(device, rng, sizes):
    a = random_array(rng, (3, 4) if len(sizes) != 3 else (4, 2), np.float32)
    if len(sizes) == 4:
        a = a[:, :, None]
    for x in layouts(a, device):
        assert_close(x.repeat(*sizes), np.tile(a, sizes))
        assert_close(ct.repeat(x, sizes), np.tile(a, sizes))
    with pytest.raises(ValueError, match="at least one per dim"):
        ct.zeros(2, 3, device=device).repeat(2)
    with pytest.raises(ValueError, match="non-negative"):
        ct.zeros(2, device=device).repeat(-1)


@pytest.mark.parametrize("shifts, dims", [(1, 0), (-2, 1), ((1, 7), (0, 1)), (13, None),
                                          (0, 1), ((2, -1), (-1, -2))])
def test_roll(device, rng, shifts, dims):
    a = random_array(rng, (4, 5), np.float32)
    for x in layouts(a, device):
        out = ct.roll(x, shifts, dims)
        assert_close(out, np.roll(a, shifts, dims))
    x = ct.from_numpy(a, device=device)
    assert x.roll(0, 0).storage is not x.storage  # always a copy
    with pytest.raises(ValueError, match="2 shifts for 1 dims"):
        x.roll((1, 2), 0)


# ---- property tests ------------------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=4), data=st.data())
def test_cat_split_round_trip_property(device, shape, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    lengths = data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    parts = []
    for n in lengths:
        s = list(shape)
        s[dim] = n
        parts.append(rng.uniform(-2, 2, size=s).astype(np.float32))
    ref = np.concatenate(parts, axis=dim)
    tensors = [ct.from_numpy(p, device=device) for p in parts]
    if data.draw(st.booleans()):
        tensors = [t.transpose(0, -1).contiguous().transpose(0, -1) for t in tensors]
    out = ct.cat(tensors, dim)
    assert_close(out, ref)
    for piece, p in zip(out.split(lengths, dim), parts):
        assert_close(piece, p)


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data())
def test_pad_property(device, shape, data):
    n_pairs = data.draw(st.integers(1, len(shape)))
    mode = data.draw(st.sampled_from(["constant", "replicate", "circular", "reflect"]))
    pad = []
    for i in range(n_pairs):
        size = shape[len(shape) - 1 - i]
        most = {"circular": size, "reflect": size - 1}.get(mode, 3)  # torch's limits
        left = min(data.draw(st.integers(-size, 3)), most)
        lowest = -size + max(-left, 0) if mode == "circular" else -size - left  # crop <= size
        right = min(data.draw(st.integers(lowest, 3)), most)
        if mode == "circular":  # wrap at most once around the cropped dim
            kept = size - max(-left, 0) - max(-right, 0)
            left, right = min(left, kept), min(right, kept)
        pad += [left, right]
    a = np.random.default_rng(len(pad)).uniform(-2, 2, size=shape).astype(np.float32)
    ref = _pad_ref(a, tuple(pad), mode)
    assert_close(ct.pad(ct.from_numpy(a, device=device), tuple(pad), mode=mode), ref)


def test_zero_dim_inputs(device):
    x = ct.tensor(2.5, device=device)
    for out in (x.flip(0), x.roll(1, 0), x.roll(3), x.repeat(), ct.pad(x, ())):
        assert out.shape == () and out.item() == 2.5 and out.storage is not x.storage
    assert_close(x.repeat(3, 2), np.full((3, 2), 2.5))
    with pytest.raises(ValueError, match="at least one dim"):
        x.split(1)
    with pytest.raises(ValueError, match="at least one dim"):
        x.chunk(2)
