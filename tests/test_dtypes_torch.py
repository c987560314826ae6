"""dtypes as torch's: dtype objects and their numpy interplay, Size, the default dtype, thread
settings, the legacy tensor types (FloatTensor, ...), and uint8/int8/int16 tensors through the
integer kernel families, each against torch on the CPU."""
import copy
import pickle

import numpy as np
import pytest
import torch

import cltensor as ct

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64"]
SMALL = ["uint8", "int8", "int16"]


def _pair(name):
    return getattr(ct, name), getattr(torch, name)


def _name(d):
    return str(d).split(".")[-1]


# ---- dtype objects ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_dtype_attributes_match_torch(name):
    d, t = _pair(name)
    assert isinstance(d, ct.dtype)
    assert (d.is_floating_point, d.is_complex, d.is_signed, d.itemsize) == \
        (t.is_floating_point, t.is_complex, t.is_signed, t.itemsize)
    assert repr(d) == str(d) == str(t).replace("torch.", "cltensor.")
    assert d.to_real() is d


def test_dtype_aliases_are_the_same_objects():
    assert ct.float is ct.float32 and ct.double is ct.float64 and ct.long is ct.int64
    assert ct.int is ct.int32 and ct.short is ct.int16 and ct.bool is ct.bool_
    assert len({id(getattr(ct, n)) for n in NAMES}) == len(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_dtype_is_numpy_compatible(name):
    d = getattr(ct, name)
    n = np.dtype(name if name != "bool" else np.bool_)
    assert d == n and n == d and d == n.type and not d != n
    assert hash(d) == hash(n) and {n: 1}[d] == 1 and {d: 1}[n] == 1
    assert np.dtype(d) == n and np.zeros(2, d).dtype == n and np.asarray([1], dtype=d).dtype == n
    others = [getattr(ct, m) for m in NAMES if m != name]
    assert all(d != o for o in others)
    assert d != None and d != "nonsense" and d != 4  # noqa: E711 (numpy takes None as float64)
    assert pickle.loads(pickle.dumps(d)) is d and copy.deepcopy(d) is d


def test_promote_types_match_torch():
    for a in NAMES:
        for b in NAMES:
            got = ct.promote_types(getattr(ct, a), getattr(ct, b))
            assert _name(got) == _name(torch.promote_types(getattr(torch, a), getattr(torch, b))), (a, b)


def test_finfo_iinfo_match_torch():
    for name in ("float32", "float64"):
        d, t = _pair(name)
        f, g = ct.finfo(d), torch.finfo(t)
        assert (f.bits, f.eps, f.max, f.min, f.tiny, f.smallest_normal, f.resolution, f.dtype) == \
            (g.bits, g.eps, g.max, g.min, g.tiny, g.smallest_normal, g.resolution, g.dtype)
    assert ct.finfo().eps == torch.finfo().eps
    for name in SMALL + ["int32", "int64"]:
        i, j = ct.iinfo(getattr(ct, name)), torch.iinfo(getattr(torch, name))
        assert (i.bits, i.min, i.max, i.dtype) == (j.bits, j.min, j.max, j.dtype)
    with pytest.raises(TypeError, match="not an integer dtype"):
        ct.iinfo(ct.float32)
    with pytest.raises(TypeError, match="not a floating-point dtype"):
        ct.finfo(ct.int16)


# ---- Size -------------------------------------------------------------------------------------

def test_shape_is_a_size(device):
    x = ct.zeros(2, 3, device=device)
    for s in (x.shape, x.size(), x[:].shape, ct.Size([2, 3])):
        assert isinstance(s, tuple) and s == (2, 3)
    assert type(x.shape) is ct.Size and type(x.size()) is ct.Size and type(x.t().shape) is ct.Size
    assert repr(x.shape) == str(x.shape) == "cltensor.Size([2, 3])"
    assert repr(ct.zeros((), device=device).shape) == "cltensor.Size([])"
    assert x.shape.numel() == 6 and ct.Size([]).numel() == 1 and ct.Size([4, 0]).numel() == 0
    assert x.size(1) == 3 and type(x.size(-1)) is int
    assert f"{x.shape}" == "(2, 3)"  # the error messages' form
    s = pickle.loads(pickle.dumps(x.shape))
    assert type(s) is ct.Size and s == (2, 3)
    assert ct.zeros(x.shape, device=device).shape == (2, 3)


def test_size_round_trips_through_checkpoints(device, tmp_path):
    path = tmp_path / "sizes.pt"
    ct.save({"s": ct.zeros(2, 3, device=device).shape, "e": ct.Size([]), "t": (1, 2)}, path)
    got, theirs = ct.load(path, map_location=device), torch.load(path)
    assert type(got["s"]) is ct.Size and got["s"] == (2, 3) and type(got["e"]) is ct.Size
    assert type(got["t"]) is tuple
    assert theirs == {"s": torch.Size([2, 3]), "e": torch.Size([]), "t": (1, 2)}
    assert type(theirs["s"]) is torch.Size
    torch.save({"s": torch.Size([4, 5])}, path)
    assert type(ct.load(path, map_location=device)["s"]) is ct.Size


# ---- default dtype, threads, legacy tensor types ----------------------------------------------

def test_default_dtype_drives_float_creation(device):
    if not device.has_fp64:
        pytest.skip("the device lacks cl_khr_fp64")
    assert ct.get_default_dtype() is ct.float32
    ct.set_default_dtype(ct.float64)
    try:
        assert ct.get_default_dtype() is ct.float64
        made = [ct.tensor([1.5], device=device), ct.zeros(2, device=device),
                ct.ones(2, device=device), ct.empty(2, device=device),
                ct.full((2,), 0.5, device=device), ct.arange(0.0, 1.0, 0.5, device=device),
                ct.linspace(0, 1, 3, device=device), ct.rand(2, device=device),
                ct.tensor([1, 2], device=device) + 0.5, ct.tensor([4], device=device).sqrt()]
        assert [x.dtype for x in made] == [ct.float64] * len(made)
        assert ct.tensor([1], device=device).dtype is ct.int64
        assert ct.tensor([1.0], dtype=ct.float32, device=device).dtype is ct.float32
        assert "dtype" not in repr(made[0]) and "dtype=cltensor.float32" in \
            repr(made[0].float())
        assert ct.finfo().eps == torch.finfo(torch.float64).eps
        with pytest.raises(TypeError, match="only floating-point types"):
            ct.set_default_dtype(ct.int64)
    finally:
        ct.set_default_dtype(ct.float32)
    assert ct.tensor([1.5], device=device).dtype is ct.float32


def test_num_threads_are_accepted():
    before = ct.get_num_threads()
    try:
        ct.set_num_threads(3)
        ct.set_num_interop_threads(2)
        assert ct.get_num_threads() == 3 and ct.get_num_interop_threads() == 2
        for bad in (0, -1, 1.5, "4"):
            with pytest.raises(ValueError, match="positive int"):
                ct.set_num_threads(bad)
    finally:
        ct.set_num_threads(before)


TYPES = {"FloatTensor": "float32", "DoubleTensor": "float64", "LongTensor": "int64",
         "IntTensor": "int32", "ShortTensor": "int16", "CharTensor": "int8",
         "ByteTensor": "uint8", "BoolTensor": "bool"}


@pytest.mark.parametrize("kind", list(TYPES))
def test_legacy_tensor_types(device, kind):
    if kind == "DoubleTensor" and not device.has_fp64:
        pytest.skip("the device lacks cl_khr_fp64")
    cls, tcls = getattr(ct, kind), getattr(torch, kind)
    x, t = cls([1, 0, 1], device=device), tcls([1, 0, 1])
    assert _name(x.dtype) == _name(t.dtype) == TYPES[kind]
    np.testing.assert_array_equal(x.numpy(), t.numpy())
    assert cls(2, 3, device=device).shape == (2, 3) and cls(device=device).shape == (0,)
    assert cls(ct.Size([4]), device=device).shape == (4,)
    assert isinstance(x, cls) and isinstance(x, ct.Tensor)
    assert not isinstance(x.to(ct.float32 if kind != "FloatTensor" else ct.int64), cls)
    assert x.type() == t.type().replace("torch.", "cltensor.")
    y = ct.zeros(2, device=device).type(cls)
    assert y.dtype == x.dtype and ct.zeros(2, device=device).type(f"torch.{kind}").dtype == x.dtype
    with pytest.raises(TypeError, match="expected sizes"):
        cls([1], 2, device=device)


# ---- uint8, int8, int16 -----------------------------------------------------------------------

def _data(rng, name, shape):
    """Random values over the dtype's whole range (floats in [-64, 64), bools half True)."""
    if name == "bool":
        return rng.random(shape) < 0.5
    if name.startswith("float"):
        return (rng.random(shape) * 128 - 64).astype(name)
    info = np.iinfo(name)
    return rng.integers(info.min, info.max + 1, size=shape).astype(name)


def _both(a, device):
    """a on the device and in torch; the device copy keeps a's dtype (no widening)."""
    x = ct.from_numpy(a, device=device)
    assert _name(x.dtype) == str(a.dtype), (x.dtype, a.dtype)
    return x, torch.from_numpy(a.copy())


def _nonzero(m, b):
    return m.where(b == 0, m.ones_like(b), b)


# ops on (module, a, b): a and b are 3x4 tensors of one small dtype, as cltensor or torch
OPS = {
    "add": lambda m, a, b: a + b, "sub": lambda m, a, b: a - b, "mul": lambda m, a, b: a * b,
    "add_wraps_scalar": lambda m, a, b: a + 300, "mul_negative": lambda m, a, b: a * -3,
    "rsub": lambda m, a, b: 7 - a, "abs": lambda m, a, b: m.abs(a), "sign": lambda m, a, b: m.sign(a),
    "square": lambda m, a, b: a ** 2, "floor_divide": lambda m, a, b: m.floor_divide(a, _nonzero(m, b)),
    "remainder": lambda m, a, b: m.remainder(a, _nonzero(m, b)), "true_divide": lambda m, a, b: a / 7,
    "and": lambda m, a, b: a & b, "or": lambda m, a, b: a | b, "xor": lambda m, a, b: a ^ b,
    "not": lambda m, a, b: ~a, "shift_left": lambda m, a, b: a << 2, "shift_right": lambda m, a, b: a >> 1,
    "eq": lambda m, a, b: a == b, "lt": lambda m, a, b: a < b, "ge_scalar": lambda m, a, b: a >= 5,
    "maximum": lambda m, a, b: m.maximum(a, b), "minimum": lambda m, a, b: m.minimum(a, b),
    "clamp": lambda m, a, b: m.clamp(a, 2, 100), "where": lambda m, a, b: m.where(a > b, a, b),
    "where_scalar": lambda m, a, b: m.where(a > b, a, 3), "bool_plus": lambda m, a, b: (a > 0) + a,
    "sqrt_of_float": lambda m, a, b: m.sqrt(m.abs(a.float())),
    "sum": lambda m, a, b: a.sum(), "sum_dim": lambda m, a, b: a.sum(1), "prod": lambda m, a, b: a.prod(1),
    "max": lambda m, a, b: a.max(), "min_dim": lambda m, a, b: a.min(1)[0],
    "argmax": lambda m, a, b: a.argmax(1), "amax": lambda m, a, b: a.amax(0),
    "cumsum": lambda m, a, b: a.cumsum(1), "any": lambda m, a, b: a.any(1), "all": lambda m, a, b: a.all(),
    "count_nonzero": lambda m, a, b: m.count_nonzero(a),
    "to_float": lambda m, a, b: a.to(m.float32), "to_long": lambda m, a, b: a.long(),
    "from_float": lambda m, a, b: (a.float() * 0.5).to(a.dtype), "to_bool": lambda m, a, b: a.bool(),
    "sort": lambda m, a, b: m.sort(a, 1)[0], "sort_descending": lambda m, a, b: m.sort(a, 1, True)[0],
    "argsort_stable": lambda m, a, b: m.sort(a, dim=1, stable=True)[1],
    "topk": lambda m, a, b: m.topk(a, 3, 1)[0], "kthvalue": lambda m, a, b: a.kthvalue(2, 1)[0],
    "unique": lambda m, a, b: m.unique(a),
    "gather": lambda m, a, b: m.gather(a, 1, m.tensor([[0, 2], [1, 1], [3, 0]])),
    "index_select": lambda m, a, b: m.index_select(a, 1, m.tensor([3, 0])),
    "mask_select": lambda m, a, b: a[a > b], "index": lambda m, a, b: a[m.tensor([2, 0])],
    "masked_fill": lambda m, a, b: a.masked_fill(a > b, 7),
    "scatter": lambda m, a, b: a.scatter(1, m.tensor([[0], [2], [1]]), b[:, :1]),
    "scatter_add": lambda m, a, b: a.scatter_add(1, m.tensor([[0, 0], [2, 2], [1, 3]]), b[:, :2]),
    "index_put": lambda m, a, b: a.index_put((m.tensor([0, 2]),), b[:2]),
    "nonzero": lambda m, a, b: m.nonzero(a),
    "cat": lambda m, a, b: m.cat([a, b], 0), "stack": lambda m, a, b: m.stack([a, b]),
    "transpose_copy": lambda m, a, b: a.t().contiguous(), "flip": lambda m, a, b: m.flip(a, [1]),
    "roll": lambda m, a, b: m.roll(a, 1, 1), "tril": lambda m, a, b: m.tril(a),
    "repeat": lambda m, a, b: a.repeat(2, 1),
    "zeros": lambda m, a, b: m.zeros(3, dtype=a.dtype), "ones": lambda m, a, b: m.ones(2, 2, dtype=a.dtype),
    "full": lambda m, a, b: m.full((2,), 5, dtype=a.dtype),
    "arange": lambda m, a, b: m.arange(10, dtype=a.dtype),
    "fill_wraps_negative": lambda m, a, b: a.clone().fill_(-3 if a.dtype == m.uint8 else 3),
}


@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("op", list(OPS))
def test_small_int_ops_match_torch(device, rng, op, name):
    (ca, ta), (cb, tb) = _both(_data(rng, name, (3, 4)), device), _both(_data(rng, name, (3, 4)), device)
    want, got = OPS[op](torch, ta, tb), OPS[op](ct, ca, cb)
    assert _name(got.dtype) == _name(want.dtype) and got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


MIXED = [("uint8", "int8"), ("uint8", "int16"), ("int8", "int16"), ("uint8", "int32"),
         ("bool", "uint8"), ("int8", "int64"), ("uint8", "float32")]


@pytest.mark.parametrize("names", MIXED, ids="-".join)
def test_small_int_promotion_matches_torch(device, rng, names):
    (ca, ta), (cb, tb) = (_both(_data(rng, n, (5,)), device) for n in names)
    for op in ("add", "mul", "lt", "maximum", "where"):
        want, got = OPS[op](torch, ta, tb), OPS[op](ct, ca, cb)
        assert _name(got.dtype) == _name(want.dtype), (op, got.dtype, want.dtype)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, err_msg=op)
    if ca.dtype.category == 1:  # a 0-d int64 tensor does not widen a dimensioned integer one
        assert (ca + ct.tensor(1000, device=device)).dtype == ca.dtype


@pytest.mark.parametrize("name", SMALL)
def test_small_int_creation_and_conversion(device, name):
    d = getattr(ct, name)
    host = np.array([0, 1, np.iinfo(name).max], name)
    for x in (ct.from_numpy(host, device=device), ct.tensor(host, device=device),
              ct.tensor(host.tolist(), dtype=d, device=device), ct.as_tensor(host, device=device)):
        assert x.dtype is d and x.numpy().dtype == host.dtype
        np.testing.assert_array_equal(x.numpy(), host)
    x = ct.tensor([-2, 3, 130], device=device)
    t = torch.tensor([-2, 3, 130])
    for method in ("byte", "char", "short"):
        got, want = getattr(x, method)(), getattr(t, method)()
        assert _name(got.dtype) == _name(want.dtype)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert x.to(d).dtype is d and x.to(name).dtype is d and x.to(np.dtype(name)).dtype is d
    with pytest.raises(OverflowError, match=f"does not fit in {name}"):
        ct.tensor([np.iinfo(name).max + 1], dtype=d, device=device)
    with pytest.raises(OverflowError, match=f"cannot be converted to {name}"):
        ct.zeros(2, dtype=d, device=device).fill_(70000)
