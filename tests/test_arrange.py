"""The arranging ops (cltensor/composed/arrange.py): meshgrid, broadcast_tensors, the stacks,
tensor_split, tile, repeat_interleave, rot90, flips, diagonal (a view), trace, diag_embed, diff,
cartesian_prod, block_diag and the view functions, against float64 numpy references on
contiguous and strided inputs, against torch forward and backward, gradients by finite
differences, edge sizes and bad input."""
import itertools

import numpy as np
import pytest

import cltensor
from cltensor.testing import assert_close, gradcheck, random_array
from test_composed import F64, T, _fp

EXACT = {"rtol": 0, "atol": 0}


def _data(rng, shape, device):
    return random_array(rng, shape, np.float64).astype(_fp(device))


def _layouts(a, device):
    """a as a contiguous tensor, as a strided view (every other element of a bigger tensor) and,
    from 2-d on, as a view with its dims reversed in memory."""
    out = [T(a, device), T(np.stack([a, a + 1], -1), device)[..., 0]]
    if a.ndim >= 2:
        out.append(T(np.ascontiguousarray(a.T), device).permute(*reversed(range(a.ndim))))
    return out


def _tuple(r):
    return tuple(r) if isinstance(r, (tuple, list)) else (r,)


def _assert_all(got, want):
    got, want = _tuple(got), _tuple(want)
    assert len(got) == len(want), f"{len(got)} results, expected {len(want)}"
    for g, w in zip(got, want):
        assert_close(g, w, **EXACT)


# ---- diagonals --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, dims", [((3, 4), (0, 1)), ((4, 3), (1, 0)), ((2, 3, 4), (2, 0)),
                                         ((2, 3, 4), (-1, -2)), ((1, 5), (0, -1)),
                                         ((0, 3), (0, 1)), ((3, 0, 2), (1, 2))])
def test_diagonal_and_trace(device, rng, shape, dims):
    a = _data(rng, shape, device)
    for x in _layouts(a, device):
        for offset in range(-5, 6):  # offsets beyond the size give empty diagonals
            d = cltensor.diagonal(x, offset, *dims)
            assert d.storage is x.storage
            assert_close(d, np.diagonal(a, offset, *dims), **EXACT)
            assert_close(x.diagonal(offset=offset, dim1=dims[0], dim2=dims[1]),
                         np.diagonal(a, offset, *dims), **EXACT)
        if x.ndim == 2:
            tol = F64 if a.dtype == np.float64 else {"rtol": 1e-5, "atol": 1e-6}
            assert_close(x.trace(), np.trace(a), **tol)
    ints = T(np.arange(1, 10, dtype=np.int32).reshape(3, 3), device)
    assert cltensor.trace(ints).item() == 15 and cltensor.trace(ints).dtype == cltensor.int64


def test_diagonal_is_a_view(device, rng):
    a = _data(rng, (3, 4), device)
    for x in _layouts(a, device):
        want = a.copy()
        x.diagonal(1).fill_(7.0)
        want[[0, 1, 2], [1, 2, 3]] = 7.0
        x.diagonal(-1)[1] = -3.0  # element (2, 1)
        want[2, 1] = -3.0
        x.diagonal(0, 1, 0).copy_(T(np.array([5.0, 6.0, 8.0], a.dtype), device))
        want[[0, 1, 2], [0, 1, 2]] = [5.0, 6.0, 8.0]
        assert_close(x, want, **EXACT)
    b = _data(rng, (2, 3, 3), device)
    y = T(b, device)
    y.diagonal(0, -2, -1).mul_(2)  # a batch of diagonals, written in place
    b[:, [0, 1, 2], [0, 1, 2]] *= 2
    assert_close(y, b, **EXACT)


def test_diag_embed(device, rng):
    a = _data(rng, (2, 3), device)
    for x in _layouts(a, device):
        for offset, d1, d2 in ((0, -2, -1), (1, 0, 2), (-2, 2, 0), (4, 1, -1), (-1, -1, 1)):
            got = cltensor.diag_embed(x, offset, d1, d2)
            m = 3 + abs(offset)
            square = np.zeros((2, m, m), a.dtype)
            rows = np.arange(3) + max(0, -offset)
            square[:, rows, rows + offset] = a
            want = np.moveaxis(square, (1, 2), (d1 % 3, d2 % 3))
            assert_close(got, want, **EXACT)
            # the diagonal of diag_embed gives the input back
            assert_close(got.diagonal(offset, d1, d2), a, **EXACT)
    flags = cltensor.diag_embed(T(np.array([True, False, True]), device))
    assert flags.dtype == cltensor.bool
    np.testing.assert_array_equal(flags.numpy(), np.diag([True, False, True]))
    inf = cltensor.diag_embed(T(np.array([np.inf, -1.0]), device))  # no inf * 0 = NaN
    np.testing.assert_array_equal(inf.numpy(), np.diag([np.inf, -1.0]))
    assert cltensor.diag_embed(cltensor.zeros(2, 0, device=device), 2).shape == (2, 2, 2)


# ---- differences ------------------------------------------------------------------------------

def test_diff(device, rng):
    a = _data(rng, (3, 5), device)
    pre, app = _data(rng, (3, 2), device), _data(rng, (1, 5), device)
    for x in _layouts(a, device):
        for n, dim in itertools.product((0, 1, 2, 4, 6), (0, 1, -1)):
            assert_close(cltensor.diff(x, n, dim), np.diff(a, n, dim), rtol=1e-12, atol=1e-12)
        assert_close(x.diff(2, 1, prepend=T(pre, device)), np.diff(a, 2, 1, prepend=pre),
                     rtol=1e-12, atol=1e-12)
        assert_close(x.diff(dim=0, append=T(app, device), prepend=T(app, device)),
                     np.diff(a, 1, 0, prepend=app, append=app), rtol=1e-12, atol=1e-12)
    flags = np.array([True, False, False, True, True])
    np.testing.assert_array_equal(T(flags, device).diff(2).numpy(), np.diff(flags, 2))
    ints = np.array([1, 4, 9, 16], np.int32)
    np.testing.assert_array_equal(T(ints, device).diff().numpy(), np.diff(ints))
    assert cltensor.diff(cltensor.zeros(2, 0, device=device), 3).shape == (2, 0)
    x = T(a, device)
    same = x.diff(0, prepend=T(pre, device))  # n = 0: a copy of input alone, as torch
    assert same.storage is not x.storage and same.shape == (3, 5)


# ---- turning ----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, dims", [((2, 3), (0, 1)), ((2, 3), (1, 0)), ((2, 3, 4), (0, 2)),
                                         ((2, 3, 4), (-1, 1)), ((0, 3), (0, 1))])
def test_rot90(device, rng, shape, dims):
    a = _data(rng, shape, device)
    for x in _layouts(a, device):
        for k in range(-5, 6):  # negative k, k = 4 (a copy), beyond a full turn
            got = cltensor.rot90(x, k, dims)
            assert_close(got, np.rot90(a, k, dims), **EXACT)
            assert got.storage is not x.storage
        assert_close(x.rot90(), np.rot90(a, 1, (0, 1)), **EXACT)
        assert_close(cltensor.fliplr(x), np.fliplr(a), **EXACT)
        assert_close(x.flipud(), np.flipud(a), **EXACT)
    v = _data(rng, (4,), device)
    assert_close(T(v, device).flipud(), v[::-1], **EXACT)


# ---- grids ------------------------------------------------------------------------------------

def test_meshgrid_broadcast_and_cartesian_prod(device, rng):
    parts = [_data(rng, (n,), device) for n in (2, 3, 4)]
    xs = [T(p, device) for p in parts]
    for indexing in ("ij", "xy"):
        for k in (1, 2, 3):
            grids = cltensor.meshgrid(*xs[:k], indexing=indexing)
            _assert_all(grids, np.meshgrid(*parts[:k], indexing=indexing))
            assert all(g.storage is x.storage for g, x in zip(grids, xs))  # views
        _assert_all(cltensor.meshgrid(xs[:2], indexing=indexing),
                    np.meshgrid(*parts[:2], indexing=indexing))
    with pytest.warns(UserWarning, match="meshgrid: pass indexing"):
        grids = cltensor.meshgrid(xs[0], xs[1])
    _assert_all(grids, np.meshgrid(parts[0], parts[1], indexing="ij"))
    scalar = T(np.array(2.5), device)  # 0-d counts as one element
    _assert_all(cltensor.meshgrid(scalar, xs[1], indexing="xy"),
                np.meshgrid([2.5], parts[1], indexing="xy"))
    none = cltensor.zeros(0, dtype=xs[0].dtype, device=device)
    assert [g.shape for g in cltensor.meshgrid(xs[0], none, indexing="ij")] == [(2, 0), (2, 0)]

    shapes = [(3, 1), (4,), (1, 1), ()]
    arrays = [_data(rng, s, device) for s in shapes]
    for layout in range(2):
        tensors = [_layouts(b, device)[layout] for b in arrays]
        _assert_all(cltensor.broadcast_tensors(*tensors), np.broadcast_arrays(*arrays))
    assert cltensor.broadcast_tensors() == ()

    want = np.array(list(itertools.product(*parts)))
    assert_close(cltensor.cartesian_prod(*xs), want, **EXACT)
    assert_close(cltensor.cartesian_prod(xs[2], xs[0]), np.array(list(
        itertools.product(parts[2], parts[0]))), **EXACT)
    assert cltensor.cartesian_prod(xs[1]) is xs[1]
    assert cltensor.cartesian_prod(xs[0], none).shape == (0, 2)


# ---- stacking ---------------------------------------------------------------------------------

def test_stacks_and_atleast(device, rng):
    refs = {"h": (cltensor.hstack, np.hstack), "v": (cltensor.vstack, np.vstack),
            "r": (cltensor.row_stack, np.vstack), "d": (cltensor.dstack, np.dstack),
            "c": (cltensor.column_stack, np.column_stack)}
    groups = [([(), (3,), ()], "h"), ([(2,), (2,)], "hvrdc"), ([(2, 3), (2, 1)], "hc"),
              ([(2, 3), (4, 3)], "vr"), ([(2, 3), (2, 3, 2)], "d"), ([(2, 3, 2), (2, 1, 2)], "h"),
              ([(4,)], "hvdc"), ([(), ()], "hvdc"), ([(3,), (3, 2), (3,)], "c")]
    for shapes, ops in groups:
        arrays = [_data(rng, s, device) for s in shapes]
        for layout in range(2):
            xs = [_layouts(b, device)[layout] for b in arrays]
            for op in ops:
                fn, ref = refs[op]
                assert_close(fn(xs), ref(arrays), **EXACT)
                assert_close(fn(tuple(xs)), ref(arrays), **EXACT)
    for shape in ((), (3,), (2, 3), (2, 3, 2), (0,)):
        a = _data(rng, shape, device)
        x = T(a, device)
        for fn, ref in ((cltensor.atleast_1d, np.atleast_1d), (cltensor.atleast_2d, np.atleast_2d),
                        (cltensor.atleast_3d, np.atleast_3d)):
            one = fn(x)
            assert one.storage is x.storage
            assert_close(one, ref(a), **EXACT)
            _assert_all(fn(x, x), ref(a, a))
            _assert_all(fn([x]), (ref(a),))
    assert cltensor.atleast_2d() == ()


def test_block_diag(device, rng):
    shapes = [(2, 3), (), (4,), (1, 2), (0, 2), (3, 0), (0,)]
    arrays = [_data(rng, s, device) for s in shapes]
    blocks = [b.reshape(1, -1) if b.ndim < 2 else b for b in arrays]
    want = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)))
    r = c = 0
    for b in blocks:
        want[r:r + b.shape[0], c:c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    for layout in range(2):
        xs = [_layouts(b, device)[layout] for b in arrays]
        assert_close(cltensor.block_diag(*xs), want, **EXACT)
    mixed = cltensor.block_diag(T(np.array([[1, 2]], np.int32), device),
                                cltensor.tensor(1.5, device=device))
    assert mixed.dtype == cltensor.float32
    np.testing.assert_array_equal(mixed.numpy(), [[1, 2, 0], [0, 0, 1.5]])
    assert cltensor.block_diag().shape == (1, 0)


# ---- splitting and repeating ------------------------------------------------------------------

def test_tensor_split(device, rng):
    a = _data(rng, (7, 4), device)
    specs = [1, 3, 7, 9, [2, 5], [-2, 1, 9], [], (0, 0, 7), [5, 2]]
    for x in _layouts(a, device):
        for spec, dim in itertools.product(specs, (0, -2)):
            pieces = cltensor.tensor_split(x, spec, dim)
            assert all(p.storage is x.storage for p in pieces)
            _assert_all(pieces, np.array_split(a, spec, dim))
        _assert_all(x.tensor_split(3, 1), np.array_split(a, 3, 1))
        _assert_all(x.tensor_split(T(np.array(3), device)), np.array_split(a, 3))
        _assert_all(x.tensor_split(T(np.array([1, 6]), device), dim=1),
                    np.array_split(a, [1, 6], 1))
    empty = cltensor.tensor_split(cltensor.zeros(0, 2, device=device), 3)
    assert [p.shape for p in empty] == [(0, 2)] * 3


def test_tile_and_repeat_interleave(device, rng):
    a = _data(rng, (2, 3), device)
    for x in _layouts(a, device):
        for reps in ((2,), (1, 3), (2, 1, 2), (), (0, 2)):
            assert_close(cltensor.tile(x, reps), np.tile(a, reps), **EXACT)
        assert_close(x.tile(2, 2), np.tile(a, (2, 2)), **EXACT)
        for r, dim in itertools.product((0, 1, 3), (None, 0, 1, -1)):
            assert_close(cltensor.repeat_interleave(x, r, dim), np.repeat(a, r, dim), **EXACT)
        counts = np.array([2, 0, 3])
        assert_close(x.repeat_interleave(T(counts, device), 1), np.repeat(a, counts, 1), **EXACT)
        assert_close(x.repeat_interleave(T(np.array([3, 1], np.int32), device), dim=0,
                                         output_size=4), np.repeat(a, [3, 1], 0), **EXACT)
        assert_close(x.repeat_interleave(T(np.array([2]), device), 0), np.repeat(a, 2, 0),
                     **EXACT)
        flat_counts = np.arange(6) % 3
        assert_close(x.repeat_interleave(T(flat_counts, device)), np.repeat(a, flat_counts),
                     **EXACT)
    s = T(np.array(1.5), device)
    assert_close(cltensor.tile(s, (2,)), [1.5, 1.5], **EXACT)
    assert_close(s.repeat_interleave(3), [1.5] * 3, **EXACT)
    counts = cltensor.repeat_interleave(T(np.array([1, 0, 3]), device))
    assert counts.dtype == cltensor.int64
    np.testing.assert_array_equal(counts.numpy(), [0, 2, 2, 2])
    assert cltensor.repeat_interleave(T(np.zeros(0, np.int64), device)).shape == (0,)


# ---- the view functions -----------------------------------------------------------------------

def test_view_functions(device, rng):
    a = _data(rng, (2, 1, 3), device)
    x = T(a, device)
    cases = [
        (cltensor.narrow(x, -1, 1, 2), a[:, :, 1:3]),
        (cltensor.select(x, 2, -1), a[:, :, -1]),
        (cltensor.squeeze(x), a.squeeze()),
        (cltensor.squeeze(x, 1), a.squeeze(1)),
        (cltensor.unsqueeze(x, -1), a[..., None]),
        (cltensor.flatten(x), a.ravel()),
        (cltensor.flatten(x, 1), a.reshape(2, 3)),
        (cltensor.unflatten(x, 2, (3, 1)), a.reshape(2, 1, 3, 1)),
        (cltensor.broadcast_to(x, (4, 2, 2, 3)), np.broadcast_to(a, (4, 2, 2, 3))),
        (cltensor.permute(x, (2, 0, 1)), a.transpose(2, 0, 1)),
        (cltensor.reshape(x, (3, -1)), a.reshape(3, -1)),
        (cltensor.transpose(x, 0, 2), a.swapaxes(0, 2)),
        (cltensor.t(x[:, 0]), a[:, 0].T),
    ]
    for got, want in cases:
        assert got.storage is x.storage
        assert_close(got, want, **EXACT)


# ---- against torch, forward and backward ------------------------------------------------------

CASES = [  # name, fn(module, a) with the same call in cltensor and torch, input shape
    ("diagonal", lambda m, a: m.diagonal(a, 1, 0, 2), (3, 2, 4)),
    ("diagonal strided", lambda m, a: a.mT.diagonal(-1) * 2, (3, 4)),
    ("diagonal below", lambda m, a: m.diagonal(a, -2, -1, 0), (2, 4, 3)),
    ("trace", lambda m, a: m.trace(a.mT), (3, 4)),
    ("diag_embed", lambda m, a: m.diag_embed(a, -1, 0, 2), (2, 3)),
    ("diag_embed strided", lambda m, a: a.mT.diag_embed(2), (2, 3)),
    ("diff", lambda m, a: m.diff(a, 2, 0, prepend=a[:1] * 3, append=a.flip(0)), (3, 4)),
    ("diff bigger n", lambda m, a: a.diff(n=5), (2, 4)),
    ("rot90", lambda m, a: m.rot90(a, 1, (0, 2)), (2, 3, 2)),
    ("rot90 -1", lambda m, a: a.mT.rot90(-1), (2, 3)),
    ("rot90 2", lambda m, a: m.rot90(a, 2, (1, 0)), (2, 3)),
    ("fliplr flipud", lambda m, a: m.fliplr(a) * m.flipud(a), (2, 2)),
    ("tile", lambda m, a: m.tile(a, (2, 1, 3)), (2, 3)),
    ("repeat_interleave", lambda m, a: m.repeat_interleave(a.mT, 2, 0), (2, 3)),
    ("repeat_interleave counts", lambda m, a: a.repeat_interleave(m.tensor([2, 0, 3]), dim=1),
     (2, 3)),
    ("tensor_split", lambda m, a: m.tensor_split(a, [1, 3], 1), (2, 4)),
    ("hstack vstack", lambda m, a: m.hstack([a, a[:, :1]])[:, 1:] * m.vstack([a, a * 2])[2:],
     (2, 3)),
    ("dstack column_stack", lambda m, a: m.dstack([a, a.mT.mT])[..., 1] + m.column_stack(
        [a[0], a[1]]).mT, (2, 3)),
    ("atleast_3d", lambda m, a: m.atleast_3d(a) * 2, (3,)),
    ("block_diag", lambda m, a: m.block_diag(a, a[0], a[1, 1]), (2, 3)),
    ("cartesian_prod", lambda m, a: m.cartesian_prod(a[0], a[1], a[0]), (2, 2)),
    ("meshgrid", lambda m, a: m.meshgrid(a[0], a[1], indexing="xy"), (2, 3)),
    ("broadcast_tensors", lambda m, a: m.broadcast_tensors(a, a[:1], a[0, 0]), (2, 3)),
    ("view functions", lambda m, a: m.narrow(m.unflatten(m.flatten(a), 0, (3, 2)), 0, 1, 2)
     + m.select(m.unsqueeze(a, 0), 2, 0).mT, (2, 3)),
]


@pytest.mark.parametrize("name, fn, shape", CASES, ids=[c[0] for c in CASES])
def test_against_torch(device, rng, name, fn, shape):
    torch = pytest.importorskip("torch")
    dtype = _fp(device)
    tol = F64 if dtype == np.float64 else {"rtol": 1e-5, "atol": 1e-6}
    a = _data(rng, shape, device)
    x, t = T(a, device, True), torch.tensor(a, requires_grad=True)
    ys, tys = _tuple(fn(cltensor, x)), _tuple(fn(torch, t))
    assert len(ys) == len(tys)
    ct_loss = torch_loss = 0
    for y, ty in zip(ys, tys):
        assert_close(y, ty.detach().numpy(), **tol)
        g = rng.standard_normal(ty.shape).astype(dtype)
        ct_loss = ct_loss + (y * T(g, device)).sum()
        torch_loss = torch_loss + (ty * torch.tensor(g)).sum()
    ct_loss.backward()
    torch_loss.backward()
    assert_close(x.grad, t.grad.numpy(), **tol)


def test_gradcheck(device, rng):
    if not device.has_fp64:
        pytest.skip(f"{device} has no float64")
    x = T(rng.standard_normal((3, 4)), device, True)
    v = T(rng.standard_normal(3), device, True)
    assert gradcheck(lambda a: a.mT.diagonal(1), [x])
    assert gradcheck(lambda a: a.trace() * a, [x])
    assert gradcheck(lambda a: cltensor.diag_embed(a, -1), [v])
    assert gradcheck(lambda a, b: a.diff(2, 1, prepend=b.unsqueeze(1)), [x, v])
    assert gradcheck(lambda a: a.rot90(3), [x])
    assert gradcheck(lambda a: a.repeat_interleave(T(np.array([1, 0, 2]), device), 0), [x])
    assert gradcheck(lambda a, b: cltensor.block_diag(a[:2], b), [x, v])
    assert gradcheck(lambda a, b: cltensor.cartesian_prod(b, a[0]), [x, v])


# ---- bad input --------------------------------------------------------------------------------

def test_bad_input(device):
    x = cltensor.ones(2, 3, device=device)
    v = cltensor.ones(3, device=device)
    s = cltensor.tensor(1.0, device=device)
    bad = [
        (RuntimeError, "diagonal dimensions cannot be identical 1, -1",
         lambda: x.diagonal(0, 1, -1)),
        (IndexError, r"diagonal: dimension out of range .*got 1\)", lambda: v.diagonal()),
        (TypeError, "diagonal: offset must be an int", lambda: x.diagonal(1.0)),
        (RuntimeError, "trace: expected a matrix, but got tensor with dim 1", lambda: v.trace()),
        (RuntimeError, "diag_embed: diagonal dimensions cannot be identical",
         lambda: cltensor.diag_embed(x, 0, 0, -3)),
        (IndexError, r"diag_embed: dimension out of range .*got -2\)",
         lambda: cltensor.diag_embed(s)),
        (RuntimeError, "rot90: expected total rotation dims == 2, but got dims = 3",
         lambda: x.rot90(1, (0, 1, 0))),
        (RuntimeError, "rot90: expected total dims >= 2, but got total dims = 1",
         lambda: v.rot90()),
        (RuntimeError, "rot90: expected rotation dims to be different, but got dim0 = 0 and "
                       "dim1 = -2", lambda: x.rot90(1, (0, -2))),
        (IndexError, "rot90: dimension out of range", lambda: x.rot90(1, (0, 2))),
        (TypeError, "rot90: k must be an int", lambda: x.rot90(1.0)),
        (RuntimeError, "fliplr: input must be >= 2-d, got 1-d", lambda: v.fliplr()),
        (RuntimeError, "flipud: input must be >= 1-d", lambda: s.flipud()),
        (RuntimeError, "diff expects input to be at least one-dimensional", lambda: s.diff()),
        (RuntimeError, "diff: order must be non-negative but got -1", lambda: x.diff(-1)),
        (RuntimeError, "diff expects prepend or append to be the same dimension as input",
         lambda: x.diff(prepend=v)),
        (RuntimeError, r"diff expects the shape of append \(3, 1\) to match .* along dim 1",
         lambda: x.diff(append=cltensor.ones(3, 1, device=device))),
        (TypeError, "diff: prepend must be a tensor, got float", lambda: v.diff(prepend=1.0)),
        (RuntimeError, "tensor_split expected at least a 1-dimensional tensor",
         lambda: s.tensor_split(2)),
        (RuntimeError, "tensor_split: number of sections must be larger than 0, got 0",
         lambda: x.tensor_split(0)),
        (RuntimeError, "tensor_split expected tensor_indices_or_sections to have dtype of long",
         lambda: x.tensor_split(cltensor.tensor([1.0], device=device))),
        (RuntimeError, "zero-dimensional or one-dimensional tensor, but got a tensor with 2 dims",
         lambda: x.tensor_split(cltensor.tensor([[1]], device=device))),
        (TypeError, "tensor_split: sections must be an int", lambda: x.tensor_split(2.0)),
        (TypeError, "tensor_split: indices must be an int", lambda: x.tensor_split([1, 1.5])),
        (RuntimeError, r"tile: trying to create a tensor with a negative dimension",
         lambda: x.tile(2, -3)),
        (TypeError, "tile: dims must be an int", lambda: cltensor.tile(x, (1.5,))),
        (RuntimeError, "repeat_interleave: repeats must be non-negative, got -1",
         lambda: x.repeat_interleave(-1)),
        (RuntimeError, "repeat_interleave: repeats can not be negative",
         lambda: x.repeat_interleave(cltensor.tensor([1, -1], device=device), 0)),
        (RuntimeError, r"repeats must have the same size as input along dim, but got "
                       r"repeats.size\(0\) = 3 and input.size\(dim\) = 2",
         lambda: x.repeat_interleave(cltensor.tensor([1, 2, 3], device=device), 0)),
        (RuntimeError, "repeat_interleave: repeats must be 0-dim or 1-dim tensor",
         lambda: x.repeat_interleave(cltensor.tensor([[1, 2]], device=device), 0)),
        (TypeError, "repeat_interleave: repeats must be an integer tensor, got float32",
         lambda: x.repeat_interleave(cltensor.tensor([1.0, 2.0], device=device), 0)),
        (RuntimeError, "repeat_interleave: output_size 4 does not match the required size 3",
         lambda: x.repeat_interleave(cltensor.tensor([1, 2], device=device), 0, output_size=4)),
        (RuntimeError, "repeat_interleave: only accepts a 1-d tensor of repeats",
         lambda: cltensor.repeat_interleave(cltensor.tensor([[1]], device=device))),
        (IndexError, "repeat_interleave: a 0-d input has no dim 0",
         lambda: s.repeat_interleave(2, 0)),
        (RuntimeError, 'meshgrid: indexing must be one of "xy" or "ij", but received: xx',
         lambda: cltensor.meshgrid(v, indexing="xx")),
        (RuntimeError, r"meshgrid: expected 0-d or 1-d tensors, got shape \(2, 3\) at position 1",
         lambda: cltensor.meshgrid(v, x, indexing="ij")),
        (RuntimeError, "meshgrid expects all tensors to have the same dtype",
         lambda: cltensor.meshgrid(v, cltensor.tensor([1], device=device), indexing="ij")),
        (RuntimeError, "meshgrid expects a non-empty TensorList",
         lambda: cltensor.meshgrid(indexing="ij")),
        (TypeError, "meshgrid: expected a tensor as element 1, got list",
         lambda: cltensor.meshgrid(v, [1.0], indexing="ij")),
        (ValueError, r"shapes \(2, 3\) and \(2,\) cannot be broadcast",
         lambda: cltensor.broadcast_tensors(x, cltensor.ones(2, device=device))),
        (RuntimeError, r"cartesian_prod: expect a 1D vector, but got shape \(2, 3\)",
         lambda: cltensor.cartesian_prod(x)),
        (RuntimeError, "meshgrid expects a non-empty TensorList",
         lambda: cltensor.cartesian_prod()),
        (RuntimeError, "block_diag: input tensors must have 2 or fewer dimensions. Input 1 has 3",
         lambda: cltensor.block_diag(x, cltensor.ones(1, 1, 1, device=device))),
        (TypeError, "block_diag: expected a tensor as element 1, got int",
         lambda: cltensor.block_diag(x, 1)),
        (RuntimeError, "hstack expects a non-empty TensorList", lambda: cltensor.hstack([])),
        (TypeError, "vstack: expected a list or tuple of tensors, got ClTensor",
         lambda: cltensor.vstack(x)),
        (TypeError, "dstack: expected tensors, got int at position 1",
         lambda: cltensor.dstack([x, 3])),
        (ValueError, "cat: sizes of tensors must match except in dimension 0",
         lambda: cltensor.vstack([v, cltensor.ones(2, device=device)])),
        (TypeError, "atleast_1d: expected a tensor as element 0, got list",
         lambda: cltensor.atleast_1d([[1.0]])),
        (TypeError, "narrow: input must be a tensor, got list",
         lambda: cltensor.narrow([1, 2], 0, 0, 1)),
    ]
    for exc, message, fn in bad:
        with pytest.raises(exc, match=message):
            fn()


def test_torch_raises_the_same_types(device):
    """The bad calls above that torch also has: the same exception type (cltensor's own
    broadcast and cat checks raise ValueError where torch raises RuntimeError). Not rot90 with
    a dim out of range: its type changed between torch versions (2.11 RuntimeError, 2.13
    IndexError, ours)."""
    torch = pytest.importorskip("torch")
    calls = [
        lambda m, x, v, s: x.diagonal(0, 1, -1), lambda m, x, v, s: v.diagonal(),
        lambda m, x, v, s: v.trace(), lambda m, x, v, s: x.rot90(1, (0, -2)),
        lambda m, x, v, s: v.rot90(),
        lambda m, x, v, s: v.fliplr(), lambda m, x, v, s: s.diff(),
        lambda m, x, v, s: x.diff(prepend=v), lambda m, x, v, s: x.tensor_split(0),
        lambda m, x, v, s: s.tensor_split(2), lambda m, x, v, s: m.diag_embed(s),
        lambda m, x, v, s: x.repeat_interleave(m.tensor([1, 2, 3]), 0),
        lambda m, x, v, s: m.meshgrid(v, x, indexing="ij"),
        lambda m, x, v, s: m.block_diag(m.ones(1, 1, 1)),
        lambda m, x, v, s: m.cartesian_prod(x), lambda m, x, v, s: m.hstack([]),
    ]
    ours = (cltensor.ones(2, 3, device=device), cltensor.ones(3, device=device),
            cltensor.tensor(1.0, device=device))
    theirs = (torch.ones(2, 3), torch.ones(3), torch.tensor(1.0))
    for call in calls:
        with pytest.raises(Exception) as want:
            call(torch, *theirs)
        with pytest.raises(want.type):
            call(cltensor, *ours)
