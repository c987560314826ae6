"""ClTensor: creation, host transfer, dtypes, views and their sharing of storage."""
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cltensor as ct
from cltensor.testing import assert_close, random_array


def test_tensor_from_python_data_infers_torch_dtypes(device):
    assert ct.tensor([1.0, 2.0], device=device).dtype == ct.float32
    assert ct.tensor([1, 2], device=device).dtype == ct.int64
    assert ct.tensor([True, False], device=device).dtype == ct.bool
    assert ct.tensor(3.5, device=device).shape == ()
    assert ct.tensor([[1, 2], [3, 4]], dtype=ct.float32, device=device).dtype == ct.float32
    assert ct.tensor(np.zeros(2, np.int32), device=device).dtype == ct.int32
    assert ct.tensor([], device=device).shape == (0,)
    if device.has_fp64:
        assert ct.tensor(np.ones(3), device=device).dtype == ct.float64


def test_host_roundtrip_every_dtype(device, rng):
    for dtype in (np.float32, np.float64, np.int32, np.int64, np.bool_):
        if dtype == np.float64 and not device.has_fp64:
            continue
        a = random_array(rng, (3, 5, 2), dtype)
        t = ct.from_numpy(a, device=device)
        assert t.dtype == np.dtype(dtype) and t.shape == a.shape
        np.testing.assert_array_equal(t.numpy(), a)
        assert t.tolist() == a.tolist()
    assert ct.tensor([[2.5]], device=device).item() == 2.5
    with pytest.raises(ValueError, match="2 elements"):
        ct.tensor([1, 2], device=device).item()


def test_host_read_into_prefaulted_pages(device, rng, monkeypatch):
    """numpy() faults large host arrays' pages in before the copy (tensor.PREFAULT_MIN_BYTES):
    the copy must still land whole, for views and sizes that are not whole pages."""
    monkeypatch.setattr(sys.modules["cltensor.tensor"], "PREFAULT_MIN_BYTES", 1)
    a = random_array(rng, (3, 1500, 7), np.float32)
    t = ct.from_numpy(a, device=device)
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal(t[1:, ::3].numpy(), a[1:, ::3])
    np.testing.assert_array_equal(t[2, 5].numpy(), a[2, 5])


# (shape, strides) of views whose *_like tensors torch lays out by preserve_format: dense ones
# in any order of dims, a channels_last slice, an expanded view, size-1 dims
LIKE_VIEWS = [((2, 3, 4, 5), (60, 1, 15, 3)), ((4, 6), (1, 4)), ((4, 3), (6, 2)),
              ((2, 4, 4, 4), (128, 2, 32, 8)), ((4, 3), (1, 0)), ((1, 3, 1, 1), (3, 1, 1, 1)),
              ((2, 1, 3, 3), (9, 1, 3, 1)), ((3, 1, 1, 1), (1, 1, 1, 1)), ((2, 3, 4), (1, 8, 2))]


def test_like_functions_preserve_the_layout_as_torch(device):
    """empty/zeros/ones/full/rand/randn/randint_like and .to(dtype) lay out their result as
    torch does (preserve_format: a dense view's strides, else channels_last or contiguous as
    the strides suggest), with the right values; contiguous_format and channels_last asked
    for; a bad memory_format or channels_last of a 3-d tensor refused."""
    torch = pytest.importorskip("torch")
    for shape, strides in LIKE_VIEWS:
        want = torch.empty_like(torch.empty_strided(shape, strides)).stride()
        span = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
        base = ct.arange(span, dtype=ct.float32, device=device)
        x = base.as_strided(shape, strides)
        for made in (ct.empty_like(x), ct.zeros_like(x), ct.ones_like(x), ct.full_like(x, 2.5),
                     ct.rand_like(x), ct.randn_like(x), x.to(ct.float16), x.double()
                     if device.has_fp64 else x.to(ct.bfloat16),
                     ct.randint_like(x.to(ct.int64), 3, 9)):
            assert made.strides == want, (shape, strides, made.strides, want)
        np.testing.assert_array_equal(ct.full_like(x, 2.5).numpy(), np.full(shape, 2.5))
        np.testing.assert_array_equal(ct.zeros_like(x).numpy(), np.zeros(shape))
        np.testing.assert_array_equal(x.to(ct.int64).numpy(), x.numpy().astype(np.int64))
        ints = ct.randint_like(x.to(ct.int64), 3, 9).numpy()
        assert ((ints >= 3) & (ints < 9)).all()
        rand = ct.rand_like(x).numpy()
        assert ((rand >= 0) & (rand < 1)).all() and len(np.unique(rand)) == rand.size
    x = ct.randn(2, 3, 4, 5, device=device)
    assert ct.empty_like(x, memory_format=ct.channels_last).is_contiguous(ct.channels_last)
    y = x.contiguous(memory_format=ct.channels_last)
    assert ct.zeros_like(y, memory_format=ct.contiguous_format).is_contiguous()
    with pytest.raises(ValueError, match="memory_format must be"):
        ct.empty_like(x, memory_format="strided")
    with pytest.raises(ValueError, match="channels_last needs a 4-d tensor"):
        ct.ones_like(x[0], memory_format=ct.channels_last)


def test_creation_functions(device):
    assert_close(ct.zeros(2, 3, device=device), np.zeros((2, 3)), dtype=np.float32)
    assert_close(ct.ones((2, 3), dtype=ct.int32, device=device), np.ones((2, 3)), dtype=np.int32)
    assert_close(ct.full((2,), 7, device=device), [7, 7], dtype=np.int64)
    assert_close(ct.full((2,), 1.5, device=device), [1.5, 1.5], dtype=np.float32)
    x = ct.ones(4, 2, dtype=ct.int32, device=device)
    assert ct.zeros_like(x).dtype == ct.int32 and ct.zeros_like(x).shape == (4, 2)
    assert_close(ct.full_like(x, 3), np.full((4, 2), 3))
    assert_close(ct.ones_like(x, dtype=ct.float32), np.ones((4, 2)), dtype=np.float32)
    assert ct.empty(0, 3, device=device).numel() == 0
    assert ct.empty_like(x).shape == (4, 2)
    assert ct.zeros(0, device=device).numpy().shape == (0,)


def test_bad_creation_inputs(device):
    with pytest.raises(ValueError, match="ragged"):
        ct.tensor([[1, 2], [3]], device=device)
    with pytest.raises(TypeError, match="cannot make a tensor"):
        ct.tensor(["a", "b"], device=device)
    with pytest.raises(ValueError, match="negative dimension"):
        ct.zeros(2, -1, device=device)
    with pytest.raises(TypeError, match="unsupported dtype"):
        ct.zeros(2, dtype=np.uint32, device=device)
    # numpy's wider unsigned arrays become int64 where every value fits, else OverflowError
    t = ct.from_numpy(np.array([1, 2**32 - 1], np.uint32), device=device)
    assert t.dtype is ct.int64 and t.tolist() == [1, 2**32 - 1]
    with pytest.raises(OverflowError, match="does not fit in int64"):
        ct.from_numpy(np.array([2**63 + 5], np.uint64), device=device)
    with pytest.raises(ct.OutOfMemoryError, match="largest allocation"):
        ct.empty(device.max_alloc // 4 + 1, device=device)


def test_creation_functions_take_requires_grad(device):
    """torch's requires_grad=True on every creation function: a leaf whose gradient backward
    fills; integer results refuse it, naming the dtype."""
    x = ct.ones(2, 3, device=device)
    made = {
        "tensor": ct.tensor([1.0, 2.0], device=device, requires_grad=True),
        "empty": ct.empty(2, device=device, requires_grad=True),
        "zeros": ct.zeros(2, 3, device=device, requires_grad=True),
        "ones": ct.ones(2, device=device, requires_grad=True),
        "full": ct.full((2,), 1.5, device=device, requires_grad=True),
        "zeros_like": ct.zeros_like(x, requires_grad=True),
        "ones_like": ct.ones_like(x, requires_grad=True),
        "full_like": ct.full_like(x, 2.0, requires_grad=True),
        "empty_like": ct.empty_like(x, requires_grad=True),
        "rand": ct.rand(3, device=device, requires_grad=True),
        "randn": ct.randn(3, device=device, requires_grad=True),
        "rand_like": ct.rand_like(x, requires_grad=True),
        "randn_like": ct.randn_like(x, requires_grad=True),
        "normal": ct.normal(0.0, 1.0, (3,), device=device, requires_grad=True),
        "arange": ct.arange(0.0, 3.0, device=device, requires_grad=True),
        "linspace": ct.linspace(0, 1, 4, device=device, requires_grad=True),
        "logspace": ct.logspace(0, 1, 4, device=device, requires_grad=True),
        "eye": ct.eye(2, device=device, requires_grad=True),
    }
    for name, t in made.items():
        assert t.requires_grad and t.is_leaf and t.grad_fn is None, name
    assert not ct.zeros(2, device=device).requires_grad and not ct.randn(2, device=device).requires_grad
    w = made["linspace"]
    (w * w).sum().backward()
    assert_close(w.grad, 2 * w.numpy().astype(np.float64))
    for make in (lambda: ct.zeros(2, dtype=ct.int64, device=device, requires_grad=True),
                 lambda: ct.tensor([1, 2], device=device, requires_grad=True),
                 lambda: ct.randint(5, (3,), device=device, requires_grad=True),
                 lambda: ct.randperm(4, device=device, requires_grad=True),
                 lambda: ct.arange(3, device=device, requires_grad=True)):
        with pytest.raises(TypeError, match="floating point dtype.*int64"):
            make()


def test_fp64_rejected_without_extension(device):
    fake = ct.Device(device.index + "-nofp64", device.cl_device)
    fake.has_fp64 = False
    with pytest.raises(TypeError, match="cl_khr_fp64"):
        ct.zeros(2, dtype=ct.float64, device=fake)


def test_to_dtype_and_device(device, rng):
    a = random_array(rng, (3, 4), np.float32) * 10
    t = ct.from_numpy(a, device=device)
    assert_close(t.to(ct.int32), a.astype(np.int32), dtype=np.int32)
    assert_close(t.int(), a.astype(np.int32))
    assert_close(t.long(), a.astype(np.int64), dtype=np.int64)
    assert_close(t.bool(), a != 0, dtype=np.bool_)
    assert_close(ct.tensor([0.25, 0.0, -0.5], device=device).bool(), [True, False, True])
    assert_close(ct.full((2,), 0.5, dtype=ct.bool, device=device), [True, True])
    assert_close(t.T.to(ct.int64), a.T.astype(np.int64))
    if device.has_fp64:
        assert_close(t.double(), a.astype(np.float64), dtype=np.float64)
    assert t.to(ct.float32) is t
    assert t.to(ct.float32, copy=True) is not t
    twin = ct.Device(device.index + "-twin", device.cl_device)
    moved = t.T.to(twin)
    assert moved.device is twin
    assert_close(moved, a.T)
    assert_close(t.to(t), a)


def test_views_share_storage(device, rng):
    a = random_array(rng, (4, 6), np.float32)
    t = ct.from_numpy(a, device=device)
    views = [t.view(2, 12), t.reshape(24), t.T, t.permute(1, 0), t[1:, ::2], t.unsqueeze(0),
             t.flatten(), t.transpose(0, 1), t[None, :, None], t[..., 2], t.narrow(1, 2, 3),
             t.select(0, 1), t.unsqueeze(-1).squeeze(-1)]
    for v in views:
        assert v.storage is t.storage
    t.T[0, 1] = 100.0  # writes through a view land in the base
    assert t[1, 0].item() == 100.0


def test_view_semantics_match_numpy(device, rng):
    a = random_array(rng, (2, 3, 4), np.float32)
    t = ct.from_numpy(a, device=device)
    assert_close(t.view(6, 4), a.reshape(6, 4))
    assert_close(t.view(-1), a.reshape(-1))
    assert_close(t.reshape(4, -1), a.reshape(4, -1))
    assert_close(t.permute(2, 0, 1).reshape(4, 6), a.transpose(2, 0, 1).reshape(4, 6))
    assert_close(t.T, a.T)
    assert_close(t.mT, a.transpose(0, 2, 1))
    assert_close(t[0].t(), a[0].T)
    assert_close(t.flatten(1), a.reshape(2, 12))
    assert_close(t.flatten(0, 1), a.reshape(6, 4))
    assert_close(t[:, :1].expand(2, 5, 4)[:, 4], a[:, 0])
    assert_close(t[:, None].expand(-1, 3, -1, -1), np.broadcast_to(a[:, None], (2, 3, 3, 4)))
    assert_close(t.unsqueeze(1).squeeze(), a)
    assert_close(t[:1].squeeze(0), a[0])
    assert_close(t[1, ::2, -1], a[1, ::2, -1])
    assert_close(t[..., 1:3], a[..., 1:3])
    assert_close(t[-1, -2:], a[-1, -2:])
    assert_close(t.unfold(2, 2, 1), np.lib.stride_tricks.sliding_window_view(a, 2, axis=2))
    # a view of a non-contiguous tensor, when the strides allow it
    v = t.permute(1, 0, 2)[:, :, 1:3]
    assert_close(v.reshape(6, 2), a.transpose(1, 0, 2)[:, :, 1:3].reshape(6, 2))
    assert t.permute(2, 1, 0).contiguous().view(-1).shape == (24,)


def test_view_errors(device):
    t = ct.ones(2, 3, device=device)
    with pytest.raises(RuntimeError, match="use .reshape"):
        t.T.view(6)
    with pytest.raises(ValueError, match="invalid for input of size 6"):
        t.view(4, 2)
    with pytest.raises(ValueError, match="only one dimension"):
        t.view(-1, -1)
    with pytest.raises(IndexError, match="out of range"):
        t.permute(0, 2)
    with pytest.raises(ValueError, match="repeated"):
        t.permute(1, 1)
    with pytest.raises(IndexError, match="out of bounds"):
        t[2]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(ValueError, match="step must be positive"):
        t[::-1]
    with pytest.raises(ValueError, match="cannot expand"):
        t.expand(4, 3)
    with pytest.raises(IndexError, match="out of range"):
        t.unsqueeze(3)


def test_contiguity_and_channels_last(device, rng):
    a = random_array(rng, (2, 3, 4, 5), np.float32)
    t = ct.from_numpy(a, device=device)
    assert t.is_contiguous() and not t.is_contiguous(ct.channels_last)
    cl_t = t.contiguous(memory_format=ct.channels_last)
    assert cl_t.is_contiguous(ct.channels_last) and not cl_t.is_contiguous()
    assert cl_t.strides == (60, 1, 15, 3)
    assert_close(cl_t, a)  # same logical values
    # the NHWC storage order really holds the data channel-last
    nhwc = cl_t.permute(0, 2, 3, 1)
    assert nhwc.is_contiguous()
    assert_close(nhwc, a.transpose(0, 2, 3, 1))
    assert_close(ct.exp(cl_t), np.exp(a.astype(np.float64)), rtol=2e-6)
    assert cl_t.clone().is_contiguous(ct.channels_last)
    assert t.T.contiguous().is_contiguous()
    with pytest.raises(ValueError, match="4-d"):
        ct.ones(2, 3, device=device).contiguous(memory_format=ct.channels_last)


def test_basic_setitem_and_fill(device, rng):
    a = random_array(rng, (4, 5), np.float32)
    t = ct.from_numpy(a, device=device)
    t[1] = 3.0
    t[:, 0] = ct.tensor([9.0, 8.0, 7.0, 6.0], device=device)
    t[2:, 2:4] = ct.tensor([[1.0, 2.0]], device=device)
    t[3, 4] = [42.0] if False else 42.0
    a[1] = 3.0
    a[:, 0] = [9, 8, 7, 6]
    a[2:, 2:4] = [[1, 2]]
    a[3, 4] = 42
    assert_close(t, a)
    t.zero_()
    assert_close(t, np.zeros((4, 5)))
    t[0] = [1, 2, 3, 4, 5]
    assert_close(t[0], [1, 2, 3, 4, 5])


def test_repr_and_conversions(device):
    t = ct.tensor([[1.0, 2.0]], device=device)
    r = repr(t)
    assert r.startswith("tensor([[1., 2.]]") and "cl:" in r
    assert "dtype=cltensor.int32" in repr(ct.tensor([1], dtype=ct.int32, device=device))
    assert float(ct.tensor(2.5, device=device)) == 2.5
    assert int(ct.tensor([3], device=device)) == 3
    assert bool(ct.tensor([True], device=device))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(ct.tensor([1, 2], device=device))
    assert len(t) == 1 and [x.shape for x in t] == [(2,)]
    assert np.asarray(t).shape == (1, 2)


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data())
def test_property_reshape_of_permuted_views(device, shape, data):
    rng = np.random.default_rng(0)
    a = random_array(rng, shape, np.float32)
    perm = data.draw(st.permutations(range(len(shape))))
    t = ct.from_numpy(a, device=device).permute(*perm)
    ap = a.transpose(perm)
    n = ap.size
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    d = data.draw(st.sampled_from(divisors))
    assert_close(t.reshape(d, -1), ap.reshape(d, -1))
    assert_close(t.reshape(-1, d).T, ap.reshape(-1, d).T)
