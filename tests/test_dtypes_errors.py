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


def test_values_that_fit_are_kept(device):
    # today's conversions: uint64 -> int64, int16 -> int32, bool and floats as they are
    big = np.array([0, 2**63 - 1], np.uint64)
    got = ct.from_numpy(big, device=device)
    assert got.dtype == ct.int64
    np.testing.assert_array_equal(got.numpy(), big.astype(np.int64))
    small = ct.from_numpy(np.array([-3, 7], np.int16), device=device)
    assert small.dtype == ct.int32
    np.testing.assert_array_equal(small.numpy(), [-3, 7])


@pytest.mark.parametrize("code", [">i4", ">i8", ">f4", ">f8", ">u2"])
@pytest.mark.parametrize("creator", list(CREATORS))
def test_big_endian_converted_to_native(device, code, creator):
    array = np.array([1, 2, 300], dtype=code)
    got = CREATORS[creator](array, device=device).numpy()
    assert got.dtype.isnative
    np.testing.assert_array_equal(got, array.astype(np.float64))

