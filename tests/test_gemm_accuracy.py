"""Long float32 sums in the CPU GEMM (gemm_cpu.cl's gemm_packed, blocked by KB): products with
K in the thousands keep an error near PyTorch CPU's, where one running sum over K grows like
sqrt(K) (docs/conv_precision.md).

Data are uniform in [0, 1): every partial sum grows and each rounding scales with it, the case
where one running sum is worst. With u the unit roundoff, one running sum over K = 16384 leaves
a norm-relative error near 28 u on such data (PoCL, float32 and float64 alike); sums in blocks
of KB (64 to 256) added into second sums leave about 3 u. LONG_SUM_TOL, 8 u, sits between.
Every element must also meet the classical bound of tests/test_gemm.py.
"""
import json

import numpy as np
import pytest

import cltensor
from cltensor import tune
from cltensor.ops import gemm as gm
from test_gemm import check_bound, exact, poisoned, put, stored

U32 = 2.0**-24
LONG_SUM_TOL = 8 * U32
LONG_K = 16384


@pytest.fixture
def packed(device, monkeypatch):
    """The packed family forced for every product, its entry with A and B read in place or
    packed as asked; returns set_layout(a_in_place, b_in_place)."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "packed")
    entries = {}

    def set_layout(a_in_place, b_in_place):
        def entry_for(dev, dtype):
            key = (np.dtype(dtype), a_in_place, b_in_place)
            if key not in entries:
                base = ORIGINAL_ENTRY_FOR(dev, dtype)
                params = dict(base["packed"], A_IN_PLACE=int(a_in_place),
                              B_IN_PLACE_MIN_N=0 if b_in_place else 2**62)
                entries[key] = dict(base, packed=params)
            return entries[key]
        monkeypatch.setattr(gm, "entry_for", entry_for)
    return set_layout


ORIGINAL_ENTRY_FOR = gm.entry_for


def uniform(rng, shape, dtype=np.float32):
    return rng.random(shape).astype(dtype)


def norm_error(out, value):
    got = out.numpy().astype(np.float64)
    value = value.astype(np.float64)
    return float(np.linalg.norm(got - value) / np.linalg.norm(value))


def check_long(out, a, b, dtype=np.float32, tol=LONG_SUM_TOL, **epilogue):
    """Every element within the classical bound, and the norm-relative error within tol."""
    want = exact(a, b, **epilogue)
    check_bound(out, want, dtype, a.shape[-1])
    err = norm_error(out, want[0])
    assert err <= tol, f"norm-relative error {err:.3g} over {tol:.3g}"
    return err


@pytest.mark.parametrize("a_in_place,b_in_place", [(True, True), (False, False)])
def test_long_sums_stay_near_one_block(device, rng, packed, a_in_place, b_in_place):
    """K = 16384 and K = 16384 + 37 (a partial last block), with A and B read in place or
    packed; N = 40 (a last panel past N) and N = 5 (fewer columns than a vector)."""
    packed(a_in_place, b_in_place)
    for k, n in ((LONG_K, 40), (LONG_K + 37, 5)):
        a, b = uniform(rng, (3, k)), uniform(rng, (k, n))
        out = poisoned(device, (3, n), np.float32)
        cltensor.gemm(stored(device, a, not a_in_place), stored(device, b, False), out)
        check_long(out, a, b)


def test_short_k_and_epilogues(device, rng, packed):
    """K below one block, K of one block plus one, and a long K through every epilogue: alpha,
    beta * C, row and column biases, ReLU (into a strided, NaN-poisoned view)."""
    packed(True, True)
    for k in (1, 7, 129, 257):
        a, b = uniform(rng, (5, k)) - 0.5, uniform(rng, (k, 33)) - 0.5
        out = poisoned(device, (5, 33), np.float32)
        cltensor.gemm(put(device, a), put(device, b), out)
        check_bound(out, exact(a, b), np.float32, k)
    a, b = uniform(rng, (4, LONG_K)), uniform(rng, (LONG_K, 36))
    c, rb, cb = (uniform(rng, s) * 1000 for s in ((4, 36), (4,), (36,)))
    host = poisoned(device, (4, 2 * 36), np.float32)
    out = host[:, ::2]
    cltensor.gemm(put(device, a), put(device, b), out, c=put(device, c), alpha=-1.5, beta=0.5,
                  row_bias=put(device, rb), col_bias=put(device, cb), relu=True)
    epilogue = dict(alpha=-1.5, beta=0.5, c=c, row_bias=rb, col_bias=cb, relu=True)
    check_bound(out, exact(a, b, **epilogue), np.float32, LONG_K)
    assert np.isnan(host.numpy()[:, 1::2]).all(), "wrote outside out"
    out = poisoned(device, (4, 36), np.float32)
    cltensor.gemm(put(device, a), put(device, b), out, c=put(device, c), alpha=2.0, beta=1.0,
                  row_bias=put(device, rb))
    check_long(out, a, b, alpha=2.0, beta=1.0, c=c, row_bias=rb)


def test_batched_strided_operands(device, rng, packed):
    """A batch of long products from offset, strided views, A packed and B read in place."""
    packed(False, True)
    k = LONG_K + 3
    a_full, b = uniform(rng, (2, 3, k + 2)), uniform(rng, (2, k, 34))
    a = a_full[..., 1:k + 1]
    out = poisoned(device, (2, 3, 34), np.float32)
    cltensor.gemm(put(device, a_full)[..., 1:k + 1], put(device, b), out)
    check_long(out, a, b)


def test_summed_batches(device, rng, packed):
    """gemm_sum_into (a 1x1 convolution's weight gradient): the sum over 4 batches of K = 4096
    is one sum of 16384 terms, blocked too."""
    packed(True, True)
    a, b = uniform(rng, (4, 3, LONG_K // 4)), uniform(rng, (4, LONG_K // 4, 40))
    out = poisoned(device, (3, 40), np.float32)
    gm.gemm_sum_into(put(device, a), put(device, b), out)
    value, mag = exact(a, b)
    check_bound(out, (value.sum(axis=0), mag.sum(axis=0)), np.float32, LONG_K)
    err = norm_error(out, value.sum(axis=0))
    assert err <= LONG_SUM_TOL, f"norm-relative error {err:.3g} over {LONG_SUM_TOL:.3g}"


def test_float64_long_sums(device, rng, packed, fp_dtypes):
    if cltensor.float64 not in fp_dtypes:
        pytest.skip("no float64 on this device")
    packed(True, False)
    a, b = uniform(rng, (3, LONG_K + 5), np.float64), uniform(rng, (LONG_K + 5, 20), np.float64)
    out = poisoned(device, (3, 20), np.float64)
    cltensor.gemm(put(device, a), put(device, b), out)
    check_long(out, a, b, np.float64, tol=8 * 2.0**-53)


def test_kb_in_the_database_schema():
    """The packed entry's KB is an integer from 0 (one running sum) to 65536; the shipped
    database sets it for PoCL."""
    spec = tune.GEMM_ENTRY
    packed = {"MR": 8, "NR": 32, "VW": 16}
    for kb in (0, 64, 65536):
        tune.check_value({"packed": dict(packed, KB=kb)}, spec, "entry")
    for kb in (-1, 65537, 1.5, "64"):
        with pytest.raises(ValueError, match="entry.packed.KB"):
            tune.check_value({"packed": dict(packed, KB=kb)}, spec, "entry")
    data = json.loads((tune.DB_DIR / "gemm.json").read_text())
    assert data["gemm_float32"]["vendors"]["pocl"]["default"]["packed"]["KB"] == 64
