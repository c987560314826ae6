"""numpy dtypes cltensor cannot hold are refused by name, values are never wrapped on the way
in, and bad arguments get an error that names the problem."""
import numpy as np
import pytest

import cltensor as ct

UNSUPPORTED = {
    "complex64": np.ones(2, np.complex64),
    "complex128": np.ones(2, np.complex128),
    "datetime64": np.array(["2020-01-01"], "datetime64[D]"),
    "timedelta64": np.array([3], "timedelta64[s]"),
    "object": np.array([1, None], object),
    "str": np.array(["ab"]),
    "bytes": np.array([b"ab"]),
    "void": np.zeros(2, "V4"),
}
CREATORS = {"from_numpy": ct.from_numpy, "tensor": ct.tensor, "as_tensor": ct.as_tensor}


@pytest.mark.parametrize("creator", list(CREATORS))
@pytest.mark.parametrize("kind", list(UNSUPPORTED))
def test_unsupported_numpy_dtype_refused(device, creator, kind):
    array = UNSUPPORTED[kind]
    with pytest.raises(TypeError, match=str(array.dtype).replace("[", r"\[").replace("]", r"\]")):
        CREATORS[creator](array, device=device)


def test_unsupported_numpy_dtype_refused_in_setitem(device):
    x = ct.zeros(2, device=device)
    with pytest.raises(TypeError, match="complex64"):
        x[0:2] = np.ones(2, np.complex64)


@pytest.mark.parametrize("creator", list(CREATORS))
def test_uint64_beyond_int64_refused(device, creator):
    with pytest.raises(OverflowError, match="9223372036854775813 does not fit in int64"):
        CREATORS[creator](np.array([1, 2**63 + 5], np.uint64), device=device)


def test_python_int_beyond_int64_refused(device):
    with pytest.raises(OverflowError, match="does not fit in int64"):
        ct.tensor([2**63], device=device)


def test_value_beyond_chosen_dtype_refused(device):
    with pytest.raises(OverflowError, match="-2147483649 does not fit in int32"):
        ct.tensor(np.array([-2**31 - 1, 0]), dtype=ct.int32, device=device)


def test_float_beyond_integer_dtype_refused(device):
    with pytest.raises(OverflowError, match="does not fit in int32"):
        ct.tensor([1.0, 3e9], dtype=ct.int32, device=device)
    with pytest.raises(ValueError, match="NaN or infinity cannot be converted to int64"):
        ct.from_numpy(np.array([1.0, np.nan]), dtype=ct.int64, device=device)
    got = ct.tensor([-2.7, 2.7, 2.0**31 - 1], dtype=ct.int32, device=device)
    np.testing.assert_array_equal(got.numpy(), [-2, 2, 2**31 - 1])  # truncated, as torch


def test_load_state_dict_refuses_wrapping(device):
    bn = ct.nn.BatchNorm1d(2, device=device)
    with pytest.raises(OverflowError, match="does not fit in int64"):
        bn.load_state_dict({"num_batches_tracked": np.array(2**63 + 5, np.uint64)}, strict=False)
    assert bn.num_batches_tracked.item() == 0


def test_uint64_index_beyond_int64_refused(device):
    x = ct.arange(3, device=device)
    with pytest.raises(OverflowError, match="9223372036854775809 does not fit in int64"):
        x[np.array([2**63 + 1], np.uint64)]
    np.testing.assert_array_equal(x[np.array([2, 0], np.uint64)].numpy(), [2, 0])


def test_values_that_fit_are_kept(device):
    # uint64 -> int64; int16 (and the other dtypes cltensor has) as they are
    big = np.array([0, 2**63 - 1], np.uint64)
    got = ct.from_numpy(big, device=device)
    assert got.dtype == ct.int64
    np.testing.assert_array_equal(got.numpy(), big.astype(np.int64))
    small = ct.from_numpy(np.array([-3, 7], np.int16), device=device)
    assert small.dtype == ct.int16
    np.testing.assert_array_equal(small.numpy(), [-3, 7])


@pytest.mark.parametrize("code", [">i4", ">i8", ">f4", ">f8", ">u2"])
@pytest.mark.parametrize("creator", list(CREATORS))
def test_big_endian_converted_to_native(device, code, creator):
    array = np.array([1, 2, 300], dtype=code)
    got = CREATORS[creator](array, device=device).numpy()
    assert got.dtype.isnative
    np.testing.assert_array_equal(got, array.astype(np.float64))



# ---- errors and edge cases that used to fail obscurely ----------------------------------------

@pytest.mark.parametrize("eq, shapes", [
    ("ij,jk->ik", [(2, 0), (0, 3)]),  # a summed dim of size 0: zeros
    ("ij,jk->ik", [(2, 3), (3, 0)]),
    ("ij->", [(0, 3)]),
    ("ii->i", [(0, 0)]),
    ("bij,bjk->bik", [(0, 2, 3), (1, 3, 4)]),  # size 1 broadcast against 0
    ("i,i->", [(0,), (0,)]),
])
def test_einsum_over_zero_size_dims(device, rng, eq, shapes):
    torch = pytest.importorskip("torch")
    arrays = [rng.standard_normal(s) for s in shapes]
    got = ct.einsum(eq, *[ct.from_numpy(a, dtype=ct.float32, device=device) for a in arrays])
    want = torch.einsum(eq, *[torch.from_numpy(a) for a in arrays]).numpy()
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_rnn_with_batch_zero_matches_torch(device, mode, batch_first):
    torch = pytest.importorskip("torch")
    shape = (0, 5, 3) if batch_first else (5, 0, 3)
    kw = dict(num_layers=2, bidirectional=True, batch_first=batch_first)
    out, state = getattr(ct.nn, mode)(3, 4, device=device, **kw)(ct.zeros(shape, device=device))
    t_out, t_state = getattr(torch.nn, mode)(3, 4, **kw)(torch.zeros(shape))
    assert out.shape == tuple(t_out.shape)
    states, t_states = (state, t_state) if mode == "LSTM" else ((state,), (t_state,))
    assert [s.shape for s in states] == [tuple(s.shape) for s in t_states]


def test_torch_tensor_operand_refused(device):
    torch = pytest.importorskip("torch")
    x = ct.ones(2, device=device)
    for op in (lambda: torch.ones(2) + x, lambda: x * torch.ones(2), lambda: x == torch.ones(2)):
        with pytest.raises(TypeError, match=r"torch.Tensor .*convert it explicitly"):
            op()
    for op in (lambda: torch.ones(2) @ x, lambda: ct.cat([x, torch.ones(2)]),
               lambda: ct.outer(x, torch.ones(2))):
        with pytest.raises(TypeError, match=r"got Tensor.*convert it explicitly"):
            op()


def test_numpy_array_operand_refused(device):
    x = ct.ones(2, device=device)
    with pytest.raises(TypeError, match=r"numpy.ndarray .*cltensor.from_numpy"):
        x + np.ones(2)


@pytest.mark.parametrize("dtype, name", [(np.uint16, "uint16"), (np.uint32, "uint32"),
                                         (np.complex64, "complex64")])
def test_to_unsupported_dtype_names_it(device, dtype, name):
    x = ct.ones(2, device=device)
    with pytest.raises(TypeError, match=f"unsupported dtype {name}"):
        x.to(dtype)
    with pytest.raises(TypeError, match=f"unsupported dtype {name}"):
        x.to(device, dtype)


def test_to_torch_dtype_says_use_cltensors(device):
    torch = pytest.importorskip("torch")
    x = ct.ones(2, device=device)
    with pytest.raises(TypeError, match="torch.float32: a torch dtype; use cltensor's own"):
        x.to(torch.float32)


def test_to_supported_numpy_types(device):
    x = ct.ones(2, device=device)
    assert x.to(np.int32).dtype == ct.int32
    assert x.to("int64").dtype == ct.int64


@pytest.mark.parametrize("kwargs, name", [(dict(stride=2**40), "stride"),
                                          (dict(stride=(1, 2**31)), "stride"),
                                          (dict(divisor_override=2**40), "divisor_override")])
def test_avg_pool_huge_arguments(device, kwargs, name):
    x = ct.ones(1, 1, 4, 4, device=device)
    with pytest.raises(ValueError, match=f"{name} .* too large"):
        ct.nn.functional.avg_pool2d(x, 2, **kwargs)


def test_avg_pool_largest_stride_works(device):
    x = ct.ones(1, 1, 4, 4, device=device)
    got = ct.nn.functional.avg_pool2d(x, 2, stride=2**31 - 1)
    np.testing.assert_array_equal(got.numpy(), np.ones((1, 1, 1, 1)))
