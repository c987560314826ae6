"""Random numbers: the Philox4x32-10 stream bit for bit, determinism, statistics and errors."""
import math

import numpy as np
import pytest
from conftest import DEVICES
from hypothesis import given, settings
from hypothesis import strategies as st

import cltensor
from cltensor import random as crandom
from cltensor.testing import assert_close

# ---- a pure-numpy Philox4x32-10 (Salmon et al. 2011) -----------------------------------------

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = 0x9E3779B9, 0xBB67AE85
LOW32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(ctr, key):
    """ctr: (n, 4) counters, key: (k0, k1) -> (n, 4) uint32 outputs."""
    c = [np.asarray(ctr, dtype=np.uint64)[:, i] for i in range(4)]
    k0, k1 = key
    for _ in range(10):
        p0, p1 = M0 * c[0], M1 * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & LOW32,
             (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & LOW32]
        k0, k1 = (k0 + W0) % 2**32, (k1 + W1) % 2**32
    return np.stack(c, axis=1).astype(np.uint32)


def stream_words(seed, counter, count):
    """The words cltensor's stream gives: block b is counter (lo, hi of counter + b, 0, 0)."""
    blocks = -(-count // 4)
    c = (np.arange(blocks, dtype=np.uint64) + np.uint64(counter))
    ctr = np.stack([c & LOW32, c >> np.uint64(32), 0 * c, 0 * c], axis=1)
    return philox4x32_10(ctr, (seed % 2**32, seed // 2**32)).ravel()[:count]


def uniform_ref(seed, counter, count, dtype):
    """[0, 1) uniforms: 24 bits per word (float32) or 53 bits of each word pair (float64)."""
    if dtype == np.float32:
        return ((stream_words(seed, counter, count) >> 8) * 2.0**-24).astype(np.float32)
    w = stream_words(seed, counter, 2 * count).astype(np.uint64)
    x = w[0::2] | (w[1::2] << np.uint64(32))
    return (x >> np.uint64(11)) * 2.0**-53


def normal_ref(u):
    """Box-Muller on consecutive pairs, both outputs used, in float64."""
    u = np.append(u.astype(np.float64), 0.0)[:len(u) + len(u) % 2]
    r = np.sqrt(-2 * np.log(1 - u[0::2]))
    z = np.stack([r * np.cos(2 * np.pi * u[1::2]), r * np.sin(2 * np.pi * u[1::2])], axis=1)
    return z.ravel()


# Random123's tests/kat_vectors, the three philox4x32 10 lines: counter, key, expected output.
KAT = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
       ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
       ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
        (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]


def test_reference_philox_known_answers():
    for ctr, key, expected in KAT:
        np.testing.assert_array_equal(philox4x32_10([ctr], key)[0], np.array(expected, np.uint32))


@pytest.mark.parametrize("seed, counter", [(0, 0), (2**64 - 1, 5), (0x299f31d0a4093822, 2**32 - 3),
                                           (12345, 2**64 - 2)])
def test_device_stream_matches_reference(device, seed, counter):
    words = crandom.philox_words(31, seed=seed, counter=counter, device=device).numpy()
    np.testing.assert_array_equal(words, stream_words(seed, counter, 31).astype(np.int64))


def test_device_known_answer(device):
    words = crandom.philox_words(4, seed=0, counter=0, device=device).numpy()
    np.testing.assert_array_equal(words, np.array(KAT[0][2], np.int64))


# ---- the generators follow the stream ----------------------------------------------------------

def test_rand_is_the_stream_and_calls_advance(device):
    cltensor.manual_seed(77)
    a = cltensor.rand(10, device=device).numpy()
    b = cltensor.rand(3, 3, device=device).numpy()
    np.testing.assert_array_equal(a, uniform_ref(77, 0, 10, np.float32))
    np.testing.assert_array_equal(b.ravel(), uniform_ref(77, 3, 9, np.float32))  # 10 used 3 blocks
    assert cltensor.get_rng_state().tolist() == [77, 6]


def test_rand_float64_is_the_stream(device):
    if not device.has_fp64:
        pytest.skip("no fp64 on this device")
    cltensor.manual_seed(5)
    a = cltensor.rand(7, dtype=cltensor.float64, device=device).numpy()
    np.testing.assert_array_equal(a, uniform_ref(5, 0, 7, np.float64))


def test_randn_is_box_muller_of_the_stream(device, fp_dtypes):
    for dtype in fp_dtypes:
        cltensor.manual_seed(11)
        z = cltensor.randn(1001, dtype=dtype, device=device).numpy()
        expected = normal_ref(uniform_ref(11, 0, 1002, dtype))[:1001]
        tol = 2e-5 if dtype == cltensor.float32 else 1e-12
        assert_close(z, expected, rtol=tol, atol=tol)


def test_randint_and_bernoulli_are_the_stream(device):
    cltensor.manual_seed(3)
    x = cltensor.randint(-7, 1000, (9,), device=device).numpy()
    w = stream_words(3, 0, 18).astype(np.uint64)
    x64 = w[0::2] | (w[1::2] << np.uint64(32))
    np.testing.assert_array_equal(x, -7 + (x64 % 1007).astype(np.int64))
    cltensor.manual_seed(3)
    b = cltensor.bernoulli(cltensor.full((9,), 0.3, device=device)).numpy()
    u = uniform_ref(3, 0, 9, np.float32)
    np.testing.assert_array_equal(b, (u < np.float32(0.3)).astype(np.float32))


def test_work_group_size_does_not_change_numbers(device, monkeypatch):
    results = []
    for local in (None, 1, 3, 64):
        monkeypatch.setattr(crandom, "LOCAL_SIZE", local)
        cltensor.manual_seed(21)
        results.append((cltensor.rand(1001, device=device).numpy(),
                        cltensor.randint(0, 50, (333,), device=device).numpy(),
                        cltensor.randperm(777, device=device).numpy()))
    for r in results[1:]:
        for got, want in zip(r, results[0]):
            np.testing.assert_array_equal(got, want)


def test_same_seed_same_numbers_on_every_device():
    """Uniforms and integers are bit-identical across devices; normals go through each device's
    log/cos, so they agree to rounding."""
    outs = []
    for dev in DEVICES:
        cltensor.manual_seed(1234)
        outs.append((cltensor.rand(513, device=dev).numpy(),
                     cltensor.randint(2**40, (100,), device=dev).numpy(),
                     cltensor.randn(257, device=dev).numpy()))
    for u, i, z in outs[1:]:
        np.testing.assert_array_equal(u, outs[0][0])
        np.testing.assert_array_equal(i, outs[0][1])
        assert_close(z, outs[0][2], rtol=1e-5, atol=1e-5)
    cltensor.manual_seed(1234)
    np.testing.assert_array_equal(cltensor.rand(513, device=DEVICES[0]).numpy(), outs[0][0])


def test_seeds_and_consecutive_calls_differ(device):
    cltensor.manual_seed(0)
    a, b = cltensor.rand(64, device=device).numpy(), cltensor.rand(64, device=device).numpy()
    cltensor.manual_seed(1)
    c = cltensor.rand(64, device=device).numpy()
    assert not np.array_equal(a, b) and not np.array_equal(a, c)
    assert len(np.intersect1d(a, b)) < 4 and len(np.intersect1d(a, c)) < 4


def test_state_functions():
    cltensor.manual_seed(-1)
    assert cltensor.initial_seed() == 2**64 - 1
    cltensor.manual_seed(99)
    cltensor.rand(5)
    state = cltensor.get_rng_state()
    a = cltensor.rand(6).numpy()
    cltensor.set_rng_state(state)
    np.testing.assert_array_equal(cltensor.rand(6).numpy(), a)
    g = cltensor.Generator().manual_seed(99)
    cltensor.manual_seed(99)
    np.testing.assert_array_equal(cltensor.rand(9, generator=g).numpy(), cltensor.rand(9).numpy())
    s = cltensor.seed()
    assert cltensor.initial_seed() == s and cltensor.get_rng_state().tolist() == [s, 0]


# ---- statistics (fixed seeds: deterministic, bounds several sigma wide) -------------------------

def _max_cdf_gap(sample, edges, cdf):
    """max over edges of |empirical CDF - cdf| (a KS statistic read at the edges)."""
    emp = np.searchsorted(np.sort(sample), edges, side="right") / len(sample)
    return np.max(np.abs(emp - np.array([cdf(e) for e in edges])))


def _phi(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def test_uniform_statistics(device, fp_dtypes):
    for dtype in fp_dtypes:
        cltensor.manual_seed(2024)
        u = cltensor.rand(1 << 20, dtype=dtype, device=device).numpy().astype(np.float64)
        assert u.min() >= 0 and u.max() < 1
        assert abs(u.mean() - 0.5) < 2e-3 and abs(u.var() - 1 / 12) < 1e-3
        assert _max_cdf_gap(u, np.linspace(0, 1, 101), lambda e: e) < 4e-3
        assert len(np.unique(u[:4096])) > 4090  # 24 or 53 random bits, not fewer


def test_normal_statistics(device, fp_dtypes):
    for dtype in fp_dtypes:
        cltensor.manual_seed(7)
        z = cltensor.randn(1 << 20, dtype=dtype, device=device).numpy().astype(np.float64)
        assert np.isfinite(z).all()
        assert abs(z.mean()) < 6e-3 and abs(z.var() - 1) < 1e-2
        assert _max_cdf_gap(z, np.linspace(-4, 4, 81), _phi) < 4e-3
        m = cltensor.normal(3.0, 0.5, (200000,), dtype=dtype, device=device).numpy()
        assert abs(m.mean() - 3) < 1e-2 and abs(m.std() - 0.5) < 1e-2


def test_normal_with_tensor_mean_and_std(device, rng):
    mean = cltensor.from_numpy(rng.uniform(-5, 5, (4, 1)).astype(np.float32), device=device)
    std = cltensor.from_numpy(np.array([0.5, 1, 2], np.float32), device=device)
    both = cltensor.normal(mean, cltensor.full((4, 30000), 0.5, device=device))
    assert both.shape == (4, 30000) and both.dtype == cltensor.float32
    assert_close(both.numpy().mean(axis=1), mean.numpy()[:, 0], atol=0.02, rtol=0)
    assert_close(both.numpy().std(axis=1), np.full(4, 0.5), rtol=0.03, atol=0)
    x = cltensor.normal(mean.expand(4, 30000), 2.0).numpy()
    assert_close(x.mean(axis=1), mean.numpy()[:, 0], atol=0.06, rtol=0)
    y = cltensor.normal(1.0, std.expand(30000, 3)).numpy()
    assert_close(y.std(axis=0), std.numpy(), rtol=0.03, atol=0)
    assert_close(y.mean(axis=0), np.ones(3), atol=0.06, rtol=0)


def test_exponential_and_uniform_range(device, fp_dtypes):
    for dtype in fp_dtypes:
        e = cltensor.empty(200000, dtype=dtype, device=device).exponential_(4.0).numpy()
        assert e.min() >= 0 and abs(e.mean() - 0.25) < 5e-3
        u = cltensor.empty(200000, dtype=dtype, device=device).uniform_(-3, 5).numpy()
        assert u.min() >= -3 and u.max() < 5 and abs(u.mean() - 1) < 0.03


def test_randint_range_dtype_and_forms(device):
    cltensor.manual_seed(8)
    for dtype in (cltensor.int64, cltensor.int32, cltensor.float32):
        x = cltensor.randint(-3, 4, (70000,), dtype=dtype, device=device)
        assert x.dtype == dtype
        counts = np.bincount(x.numpy().astype(np.int64) + 3, minlength=7)
        assert len(counts) == 7 and np.all(np.abs(counts / 70000 - 1 / 7) < 0.01)
    assert cltensor.randint(5, (3, 2), device=device).shape == (3, 2)
    assert cltensor.randint(5, size=(4,), device=device).numpy().max() < 5
    assert cltensor.randint(low=2, high=4, size=(50,), device=device).numpy().min() >= 2
    for high in (2**63 - 1, 2**63):  # 2^64 - 1 values, and all 2^64
        big = cltensor.randint(-2**63, high, (1000,), device=device).numpy()
        assert big.min() < -2**61 and big.max() > 2**61
    full = cltensor.zeros(1000, dtype=cltensor.int64, device=device).random_(-2**63, None).numpy()
    assert full.min() < -2**61 and full.max() > 2**61
    like = cltensor.randint_like(cltensor.zeros(2, 5, dtype=cltensor.int32, device=device), 3, 9)
    assert like.dtype == cltensor.int32 and like.shape == (2, 5)
    assert set(like.numpy().ravel()) <= set(range(3, 9))
    r = cltensor.zeros(5000, dtype=cltensor.bool, device=device).random_().numpy()
    assert 2000 < r.sum() < 3000


def test_bernoulli_rates(device, rng):
    p = cltensor.tensor([[0.0], [0.1], [0.5], [0.9], [1.0]], device=device)
    draws = cltensor.bernoulli(p.expand(5, 40000).contiguous()).numpy()
    assert draws.dtype == np.float32 and set(np.unique(draws)) <= {0.0, 1.0}
    assert_close(draws.mean(axis=1), [0, 0.1, 0.5, 0.9, 1], atol=0.01, rtol=0)
    x = cltensor.zeros(5, 40000, dtype=cltensor.bool, device=device).bernoulli_(p)
    assert x.dtype == cltensor.bool
    assert_close(x.numpy().mean(axis=1), [0, 0.1, 0.5, 0.9, 1], atol=0.01, rtol=0)
    y = cltensor.ones(30000, dtype=cltensor.int64, device=device).bernoulli(0.25).numpy()
    assert y.dtype == np.int64 and abs(y.mean() - 0.25) < 0.01
    z = cltensor.zeros(30000, device=device).t().bernoulli_(0.75).numpy()
    assert abs(z.mean() - 0.75) < 0.01


def test_float64_bernoulli_and_like(device):
    if not device.has_fp64:
        pytest.skip("no fp64 on this device")
    p = cltensor.full((50000,), 0.2, dtype=cltensor.float64, device=device)
    b = cltensor.bernoulli(p)
    assert b.dtype == cltensor.float64 and abs(b.numpy().mean() - 0.2) < 0.01
    r = cltensor.rand_like(p)
    assert r.dtype == cltensor.float64 and r.shape == p.shape
    z = cltensor.randn_like(p, dtype=cltensor.float32)
    assert z.dtype == cltensor.float32 and abs(z.numpy().std() - 1) < 0.02


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 64, 65, 1000, 4096, 4097, 100003])
def test_randperm_is_a_permutation(device, n):
    p = cltensor.randperm(n, device=device)
    assert p.dtype == cltensor.int64 and p.shape == (n,)
    np.testing.assert_array_equal(np.sort(p.numpy()), np.arange(n))


def test_randperm_looks_random(device):
    cltensor.manual_seed(4)
    p = cltensor.randperm(100000, dtype=cltensor.int32, device=device).numpy()
    assert p.dtype == np.int32
    assert abs(np.corrcoef(np.arange(100000), p)[0, 1]) < 0.02
    assert np.sum(p == np.arange(100000)) < 12  # fixed points are about Poisson(1)
    q = cltensor.randperm(100000, dtype=cltensor.int32, device=device).numpy()
    assert np.sum(p == q) < 12
    counts = {}
    for _ in range(600):
        key = tuple(cltensor.randperm(3, device=device).numpy())
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 6 and min(counts.values()) > 60 and max(counts.values()) < 140


# ---- in-place fills of views --------------------------------------------------------------------

VIEWS = {
    "transposed": lambda base: base.T,
    "step_sliced": lambda base: base[::2, 1::3],
    "offset": lambda base: base[1:, 2:],
}


@pytest.mark.parametrize("kind", sorted(VIEWS))
@pytest.mark.parametrize("method, args", [("uniform_", (-2.0, 3.0)), ("normal_", (1.0, 2.0)),
                                          ("bernoulli_", (0.4,)), ("random_", (5, 60)),
                                          ("exponential_", (2.0,))])
def test_inplace_fill_of_views(device, kind, method, args):
    base = cltensor.full((9, 11), float("nan"), device=device)
    view = VIEWS[kind](base)
    mask = np.zeros((9, 11), bool)
    VIEWS[kind](mask)[...] = True
    cltensor.manual_seed(31)
    getattr(view, method)(*args)
    cltensor.manual_seed(31)
    expected = getattr(cltensor.empty(view.shape, device=device), method)(*args).numpy()
    got = base.numpy()
    np.testing.assert_array_equal(VIEWS[kind](got), expected)
    assert np.isnan(got[~mask]).all()


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(0, 6), min_size=1, max_size=4), seed=st.integers(0, 2**64 - 1),
       perm_seed=st.integers(0, 1000))
def test_views_get_the_contiguous_numbers(shape, seed, perm_seed):
    """Any permuted, step-sliced view is filled with the numbers of a contiguous tensor."""
    order = np.random.default_rng(perm_seed).permutation(len(shape)).tolist()
    for device in DEVICES:
        base = cltensor.full(tuple(2 * n for n in shape), -1.0, device=device)
        view = base[tuple(slice(None, None, 2) for _ in shape)].permute(*order)
        cltensor.manual_seed(seed)
        view.uniform_()
        cltensor.manual_seed(seed)
        expected = cltensor.rand(view.shape, device=device).numpy()
        np.testing.assert_array_equal(view.numpy(), expected)
        got = base.numpy()
        assert (got[tuple(slice(1, None, 2) for _ in shape)] == -1).all()


# ---- errors -------------------------------------------------------------------------------------

def test_bad_sizes_and_dtypes(device):
    with pytest.raises(ValueError, match="negative dimension"):
        cltensor.rand(2, -1, device=device)
    with pytest.raises(ValueError, match="negative dimension"):
        cltensor.randint(3, (-2,), device=device)
    with pytest.raises(TypeError, match="floating point dtype"):
        cltensor.rand(3, dtype=cltensor.int64, device=device)
    with pytest.raises(TypeError, match="floating point tensor"):
        cltensor.zeros(3, dtype=cltensor.int32, device=device).uniform_()
    with pytest.raises(TypeError, match="floating point tensor"):
        cltensor.bernoulli(cltensor.zeros(3, dtype=cltensor.int64, device=device))
    with pytest.raises(ValueError, match="n must be non-negative"):
        cltensor.randperm(-1, device=device)
    with pytest.raises(ValueError, match="too large"):
        cltensor.randperm(2**24 + 2, dtype=cltensor.float32, device=device)
    with pytest.raises(TypeError, match="size must be a tuple"):
        cltensor.randint(0, 10, 5, device=device)
    with pytest.raises(TypeError, match="missing the size"):
        cltensor.randint(device=device, high=3)


def test_bad_ranges(device):
    x = cltensor.zeros(4, device=device)
    with pytest.raises(ValueError, match="less than 'to'"):
        cltensor.randint(5, 5, (3,), device=device)
    with pytest.raises(ValueError, match="less than 'to'"):
        cltensor.randint(0, (3,), device=device)
    with pytest.raises(ValueError, match="does not fit dtype int32"):
        cltensor.randint(0, 2**40, (3,), dtype=cltensor.int32, device=device)
    with pytest.raises(ValueError, match=r"\[from, to\) range"):
        x.uniform_(1, 0)
    with pytest.raises(ValueError, match="std >= 0"):
        x.normal_(0, -1)
    with pytest.raises(ValueError, match="std >= 0"):
        cltensor.normal(0.0, -0.5, (3,), device=device)
    with pytest.raises(ValueError, match="lambda > 0"):
        x.exponential_(0)
    with pytest.raises(TypeError, match="give a size"):
        cltensor.normal(0.0, 1.0)
    with pytest.raises(TypeError, match="size is only allowed"):
        cltensor.normal(x, 1.0, (4,))
    np.testing.assert_array_equal(x.numpy(), 0)


def test_bad_probabilities_leave_data_untouched(device):
    x = cltensor.full((2, 3), 7.0, device=device)
    for p in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"p_in >= 0 && p_in <= 1"):
            x.bernoulli_(p)
        with pytest.raises(ValueError, match=r"p_in >= 0 && p_in <= 1"):
            x.bernoulli_(cltensor.tensor([0.5, p, 0.5], device=device))
        with pytest.raises(ValueError, match=r"p_in >= 0 && p_in <= 1"):
            cltensor.bernoulli(cltensor.tensor([[0.1], [p]], device=device))
    with pytest.raises(ValueError, match="does not broadcast"):
        x.bernoulli_(cltensor.rand(3, 2, device=device))
    np.testing.assert_array_equal(x.numpy(), 7.0)


def test_bad_std_tensor_and_seed(device):
    std = cltensor.tensor([1.0, -1.0], device=device)
    with pytest.raises(ValueError, match="all elements of std >= 0"):
        cltensor.normal(cltensor.zeros(2, device=device), std)
    with pytest.raises(ValueError, match="all elements of std >= 0"):
        cltensor.normal(0.0, cltensor.tensor([float("nan")], device=device))
    with pytest.raises(TypeError, match="floating point tensor"):
        cltensor.normal(cltensor.zeros(2, dtype=cltensor.int64, device=device), 1.0)
    with pytest.raises(ValueError, match="outside"):
        cltensor.manual_seed(2**64)
    with pytest.raises(TypeError, match="must be an int"):
        cltensor.manual_seed(1.5)
    with pytest.raises(ValueError, match="uint64 array"):
        cltensor.set_rng_state(np.zeros(3, np.uint64))


def test_expanded_output_is_refused(device):
    x = cltensor.zeros(1, 3, device=device).expand(4, 3)
    with pytest.raises(RuntimeError, match="expanded view"):
        x.uniform_()
    with pytest.raises(RuntimeError, match="expanded view"):
        x.bernoulli_(cltensor.rand(4, 3, device=device))


# ---- poisson -----------------------------------------------------------------------------------

POISSON_RATES = [0.0, 0.3, 2.5, 9.9, 10.0, 40.0, 1e3, 3e6]


def _poisson_cdf(rate, k):
    """P(X <= k) for X ~ Poisson(rate), k a numpy array of counts, in float64."""
    top = int(k.max()) + 1
    ks = np.arange(top)
    logpmf = ks * math.log(rate) - rate - np.array([math.lgamma(j + 1) for j in ks])
    return np.cumsum(np.exp(logpmf))[k.astype(np.int64)]


@pytest.mark.parametrize("dtype, fp64", [("float32", True), ("float64", True),
                                         ("float32", False), ("bfloat16", True)])
def test_poisson_distribution(device, dtype, fp64, monkeypatch):
    """20000 draws per rate: integers, mean within 5 standard errors, variance within 10%, and
    (rates up to 40) the sample CDF within 0.02 of the exact one; as on a device without
    float64 too (fp64 False)."""
    if fp64 and not device.has_fp64:
        pytest.skip("no fp64 on this device")
    monkeypatch.setattr(device, "has_fp64", fp64)
    ct_dtype, count = getattr(cltensor, dtype), 20000
    cltensor.manual_seed(3)
    rates = cltensor.tensor(POISSON_RATES, device=device).repeat(count, 1)
    draws = cltensor.poisson(rates.to(ct_dtype))
    assert draws.dtype == ct_dtype and draws.shape == (count, len(POISSON_RATES))
    d = draws.float().numpy().astype(np.float64)
    assert (d >= 0).all() and np.array_equal(d, np.round(d))
    for rate, column in zip(POISSON_RATES, d.T):
        if rate == 0:
            assert (column == 0).all()
            continue
        if ct_dtype == cltensor.bfloat16 and rate > 100:
            continue  # counts round to bfloat16's 8 bits
        assert abs(column.mean() - rate) < 5 * math.sqrt(rate / count), rate
        assert abs(column.var() / rate - 1) < 0.1, rate
        if rate <= 40:
            k = np.arange(int(column.max()) + 1)
            sample = np.searchsorted(np.sort(column), k, side="right") / count
            assert np.abs(sample - _poisson_cdf(rate, k)).max() < 0.02, rate


def test_poisson_reads_views_and_repeats_under_the_seed(device):
    rates = cltensor.tensor([[1.5], [25.0]], device=device).expand(2, 30000)
    cltensor.manual_seed(9)
    first = cltensor.poisson(rates.t())  # a transposed, expanded view: each column one rate
    cltensor.manual_seed(9)
    again = cltensor.poisson(rates.t().contiguous()).numpy()
    assert np.array_equal(first.numpy(), again)
    assert_close(again.mean(axis=0), [1.5, 25.0], rtol=0.03, atol=0)
    assert not np.array_equal(cltensor.poisson(rates.t()).numpy(), again)  # the stream moved on
    assert cltensor.poisson(cltensor.zeros(0, 3, device=device)).shape == (0, 3)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_poisson_refuses_bad_rates(device, bad):
    with pytest.raises(RuntimeError, match="invalid Poisson rate"):
        cltensor.poisson(cltensor.tensor([1.0, bad, 3.0], device=device))
    with pytest.raises(TypeError, match="floating"):
        cltensor.poisson(cltensor.tensor([1, 2], device=device))


def _ks(sample, cdf):
    """Kolmogorov's distance between a continuous sample's CDF and cdf (a function of a numpy
    array), at and just below every value the sample takes."""
    x = np.sort(sample)
    at = np.arange(1, len(x) + 1) / len(x)
    return max(np.abs(at - cdf(x)).max(), np.abs(at - 1 / len(x) - cdf(x)).max())


ERF = np.vectorize(math.erf)
GAMMA_CDFS = {0.5: lambda x: ERF(np.sqrt(x)), 1.0: lambda x: 1 - np.exp(-x),
              2.0: lambda x: 1 - np.exp(-x) * (1 + x)}


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_standard_gamma_distribution(device, dtype):
    """20000 draws per shape: the exact CDF within 0.02 (shapes 0.5, 1, 2: erf, exponential,
    Erlang), mean within 5 standard errors, variance within 15%, every draw at least the
    dtype's smallest normal number (shape 0.05 draws many below it)."""
    if dtype == "float64" and not device.has_fp64:
        pytest.skip("no fp64 on this device")
    shapes, count = [0.05, 0.5, 1.0, 2.0, 30.0], 20000
    cltensor.manual_seed(4)
    alpha = cltensor.tensor(shapes, device=device).to(getattr(cltensor, dtype))
    draws = cltensor._standard_gamma(alpha.expand(count, len(shapes)))
    assert draws.dtype == alpha.dtype
    d = (draws.float() if dtype == "bfloat16" else draws).numpy().astype(np.float64)
    assert (d >= cltensor.finfo(alpha.dtype).tiny).all()
    for a, column in zip(shapes, d.T):
        assert abs(column.mean() - a) < 5 * math.sqrt(a / count), a
        if a >= 0.5:
            assert abs(column.var() / a - 1) < 0.15, a
        if a in GAMMA_CDFS and dtype != "bfloat16":
            assert _ks(column, GAMMA_CDFS[a]) < 0.02, a


def _binomial_cdf(n, p):
    k = np.arange(int(n) + 1)
    with np.errstate(divide="ignore"):
        logpmf = (math.lgamma(n + 1) - np.array([math.lgamma(j + 1) + math.lgamma(n - j + 1)
                                                  for j in k]) + k * np.log(p) +
                  (n - k) * np.log1p(-p))
    cdf = np.cumsum(np.exp(logpmf))
    return lambda x: cdf[np.clip(x.astype(np.int64), 0, int(n))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binomial_distribution(device, dtype):
    """(count, prob) through both inversion and BTRS, p above 1/2, a fractional count
    (floored, as torch): the exact CDF within 0.02, means within 5 standard errors; counts 0 and
    probabilities 0 and 1 draw exactly."""
    if dtype == "float64" and not device.has_fp64:
        pytest.skip("no fp64 on this device")
    cases = [(5, 0.5), (20, 0.05), (100, 0.3), (1000, 0.9), (12.7, 0.4), (7, 1.0), (0, 0.3),
             (9, 0.0)]
    count = 20000
    cltensor.manual_seed(8)
    to = getattr(cltensor, dtype)
    n = cltensor.tensor([c[0] for c in cases], device=device).to(to)
    p = cltensor.tensor([c[1] for c in cases], device=device).to(to)
    draws = cltensor.binomial(n.expand(count, len(cases)), p)
    assert draws.dtype == to and draws.shape == (count, len(cases))
    d = draws.numpy().astype(np.float64)
    for (cnt, prob), column in zip(cases, d.T):
        trials = math.floor(cnt)
        if prob in (0.0, 1.0) or trials == 0:
            assert (column == trials * prob).all()
            continue
        assert abs(column.mean() - trials * prob) < 5 * math.sqrt(trials * prob * (1 - prob) /
                                                                 count)
        k = np.arange(trials + 1)
        sample = np.searchsorted(np.sort(column), k, side="right") / count
        assert np.abs(sample - _binomial_cdf(trials, prob)(k)).max() < 0.02, (cnt, prob)


def test_binomial_broadcasts_and_dirichlet_sums_to_one(device):
    cltensor.manual_seed(2)
    counts = cltensor.tensor([[10.0], [40.0]], device=device)
    draws = cltensor.binomial(counts, cltensor.tensor([0.1, 0.5, 0.9], device=device)).numpy()
    assert draws.shape == (2, 3) and (draws >= 0).all() and (draws <= [[10], [40]]).all()
    alpha = cltensor.tensor([0.5, 1.0, 3.0, 0.01], device=device)
    rows = cltensor._sample_dirichlet(alpha.expand(20000, 4)).numpy().astype(np.float64)
    assert np.allclose(rows.sum(-1), 1, atol=1e-5) and (rows > 0).all()
    assert_close(rows.mean(0), alpha.numpy() / alpha.numpy().sum(), atol=0.01, rtol=0)
    cltensor.manual_seed(2)
    again = cltensor.binomial(counts, cltensor.tensor([0.1, 0.5, 0.9], device=device)).numpy()
    assert np.array_equal(draws, again)


def test_gamma_binomial_dirichlet_refuse_bad_parameters(device):
    t = lambda *v: cltensor.tensor(v, device=device)  # noqa: E731
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(RuntimeError, match="positive"):
            cltensor._standard_gamma(t(1.0, bad))
        with pytest.raises(RuntimeError, match="positive"):
            cltensor._sample_dirichlet(t(1.0, bad))
    assert np.isinf(cltensor._standard_gamma(t(float("inf"))).numpy()).all()
    for n, p, why in [(-1.0, 0.5, "non-negative"), (float("nan"), 0.5, "non-negative"),
                      (float("inf"), 0.5, "finite"), (3.0, 1.5, r"\[0, 1\]"),
                      (3.0, float("nan"), r"\[0, 1\]")]:
        with pytest.raises(RuntimeError, match=why):
            cltensor.binomial(t(2.0, n), t(0.5, p))
    with pytest.raises(TypeError, match="floating"):
        cltensor.binomial(cltensor.tensor([3], device=device), t(0.5))
    with pytest.raises(ValueError, match="broadcast|shape"):
        cltensor.binomial(t(1.0, 2.0), t(0.5, 0.5, 0.5))
