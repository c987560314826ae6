"""The GEMM engine (cltensor/ops/gemm/): every kernel family against float64 numpy with every
transposition, batches, the fused epilogue, awkward sizes and poisoned outputs; forced device
limits; the parameter database and the tuner.

Error bounds, per dtype (u = 2**-24 for float32, 2**-53 for float64). Every element of
C = act(alpha * A @ B + beta * Ci + row_bias + col_bias) satisfies

    |C - C_exact| <= (K + 5) * u * (|alpha| |A| @ |B| + |beta Ci| + |row_bias| + |col_bias|)

the classical bound for a length-K dot product in any summation order, with or without fused
multiply-adds, plus the epilogue's roundings (ReLU is 1-Lipschitz and adds none). Exact values
come from numpy in long double. On random data the norm-relative error is far smaller; tested
here at most 1e-5 for float32 and 1e-13 for float64 with K up to 2053.
"""
import itertools
import json
import re
import subprocess
import sys
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cltensor
from cltensor import tune, tunedb
from cltensor.device import Device
from cltensor.ops import gemm as gm
from cltensor.testing import random_array, rel_error
from conftest import subprocess_env

UNIT_ROUNDOFF = {np.dtype(np.float32): 2.0**-24, np.dtype(np.float64): 2.0**-53}
NORM_TOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-13}
SIZES = [(1, 1, 1), (1, 17, 5), (13, 1, 29), (67, 45, 37), (130, 66, 17), (64, 64, 64),
         (5, 131, 2), (29, 31, 1)]
SHIPPED_DB = tune.DB_DIR / "gemm.json"


@pytest.fixture(params=gm.FAMILIES)
def family(request, monkeypatch):
    """Force one GEMM family for every product the test makes."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", request.param)
    return request.param


def put(device, array):
    return cltensor.from_numpy(np.ascontiguousarray(array), device=device)


def stored(device, x, transposed):
    """x as a tensor, kept in memory transposed (a .mT view of the transpose) if asked."""
    if not transposed:
        return put(device, x)
    return put(device, np.swapaxes(x, -1, -2)).mT


def poisoned(device, shape, dtype):
    return cltensor.full(shape, float("nan"), dtype=dtype, device=device)


def exact(a, b, alpha=1, beta=0, c=None, row_bias=None, col_bias=None, relu=False):
    """(value, magnitude) of the GEMM in long double: the exact result for the bound, and the
    sum of absolute values that rounding errors scale with."""
    ld = np.longdouble
    a, b = a.astype(ld), b.astype(ld)
    value, mag = ld(alpha) * np.matmul(a, b), abs(ld(alpha)) * np.matmul(abs(a), abs(b))
    terms = [] if c is None else [ld(beta) * c.astype(ld)]
    terms += [] if row_bias is None else [row_bias.astype(ld)[:, None]]
    terms += [] if col_bias is None else [col_bias.astype(ld)]
    for t in terms:
        value, mag = value + t, mag + abs(t)
    return (np.maximum(value, 0) if relu else value), mag


def check_bound(out, expected, dtype, k):
    """The elementwise bound of the module docstring for a length-k product; every element
    written (no NaN of the poison left)."""
    value, mag = expected
    got = out.numpy().astype(np.longdouble)
    assert got.shape == value.shape, f"shape {got.shape} != {value.shape}"
    assert out.dtype == np.dtype(dtype)
    assert not np.isnan(got).any(), "unwritten (NaN-poisoned) elements left"
    bound = (k + 5) * UNIT_ROUNDOFF[np.dtype(dtype)] * mag
    excess = abs(got - value) - bound
    if excess.size and excess.max() > 0:
        worst = np.unravel_index(np.argmax(excess), excess.shape)
        raise AssertionError(f"error {float(abs(got - value)[worst]):.3g} over the bound "
                             f"{float(bound[worst]):.3g} at {worst}")


def run_check(out, a, b, dtype, **epilogue):
    check_bound(out, exact(a, b, **epilogue), dtype, a.shape[-1])


# ---- families, transpositions, sizes ----------------------------------------------------------

def test_every_family_transposition_and_size(device, rng, family, fp_dtypes):
    for dtype, (m, n, k) in itertools.product(fp_dtypes, SIZES):
        a, b = random_array(rng, (m, k), dtype), random_array(rng, (k, n), dtype)
        for ta, tb in itertools.product((False, True), repeat=2):
            out = poisoned(device, (m, n), dtype)
            cltensor.gemm(stored(device, a, ta), stored(device, b, tb), out)
            run_check(out, a, b, dtype)


def test_large_k_accuracy(device, rng, family, fp_dtypes):
    for dtype in fp_dtypes:
        a, b = random_array(rng, (9, 2053), dtype), random_array(rng, (2053, 35), dtype)
        out = cltensor.gemm(put(device, a), put(device, b))
        run_check(out, a, b, dtype)
        assert rel_error(out, a.astype(np.float64) @ b) <= NORM_TOL[np.dtype(dtype)]


def test_integer_dtypes_are_exact(device, rng, family):
    for dtype in (np.int32, np.int64):
        a, b = random_array(rng, (5, 19, 9), dtype), random_array(rng, (9, 33), dtype)
        c = random_array(rng, (33,), dtype)
        out = cltensor.gemm(put(device, a), put(device, b), col_bias=put(device, c), relu=True)
        np.testing.assert_array_equal(out.numpy(), np.maximum(a @ b + c, 0))


def test_k_zero(device, rng, family):
    c = random_array(rng, (4, 5))
    bias = random_array(rng, (4,))
    out = poisoned(device, (4, 5), np.float32)
    cltensor.gemm(put(device, np.zeros((4, 0), np.float32)), put(device, np.zeros((0, 5), np.float32)),
                  out, c=put(device, c), beta=0.5, row_bias=put(device, bias))
    np.testing.assert_allclose(out.numpy(), 0.5 * c + bias[:, None], rtol=1e-6)


# ---- the fused epilogue -----------------------------------------------------------------------

EPILOGUES = [
    {"alpha": 1.5},
    {"alpha": -0.5, "beta": 2.0, "c": "full"},
    {"beta": -1.0, "c": "row"},
    {"row_bias": True},
    {"col_bias": True, "relu": True},
    {"alpha": 0.75, "beta": 0.5, "c": "full", "row_bias": True, "col_bias": True, "relu": True},
    {"relu": True},
]


def _epilogue_case(device, rng, spec, m, n, dtype):
    """(tensor kwargs, numpy kwargs) of one epilogue spec, with strided biases."""
    kw, ref = {}, {}
    for name in ("alpha", "beta", "relu"):
        if name in spec:
            kw[name] = ref[name] = spec[name]
    if "c" in spec:
        ref["c"] = random_array(rng, (m, n) if spec["c"] == "full" else (n,), dtype)
        kw["c"] = put(device, ref["c"])
    for name, size in (("row_bias", m), ("col_bias", n)):
        if spec.get(name):
            base = random_array(rng, (2 * size + 1,), dtype)
            ref[name], kw[name] = base[1::2], put(device, base)[1::2]
    if "c" in ref:
        ref["beta"] = spec.get("beta", 1)
    return kw, ref


def test_fused_epilogue(device, rng, family, fp_dtypes):
    for dtype, spec in itertools.product(fp_dtypes, EPILOGUES):
        for m, n, k in ((67, 45, 37), (64, 64, 32)):
            a, b = random_array(rng, (m, k), dtype), random_array(rng, (k, n), dtype)
            kw, ref = _epilogue_case(device, rng, spec, m, n, dtype)
            big = poisoned(device, (m + 2, 2 * n), dtype)
            out = big[1:m + 1, ::2]  # a strided, offset output view
            assert cltensor.gemm(put(device, a), stored(device, b, True), out, **kw) is out
            run_check(out, a, b, dtype, **ref)
            host = big.numpy()
            assert np.isnan(host[0]).all() and np.isnan(host[:, 1::2]).all(), "wrote outside out"


def test_relu_keeps_nan_and_beta_zero_ignores_c(device, rng, family):
    a, b = random_array(rng, (20, 7)), random_array(rng, (7, 18))
    c = random_array(rng, (20, 18))
    c[3, 4] = np.nan
    A, B, C = put(device, a), put(device, b), put(device, c)
    out = cltensor.gemm(A, B, c=C, relu=True).numpy()
    assert np.isnan(out[3, 4]) and np.isnan(out).sum() == 1
    out = cltensor.gemm(A, B, c=C, beta=0, relu=True)
    run_check(out, a, b, np.float32, relu=True)


def test_out_is_c_in_place_and_aliasing(device, rng, family):
    a, b, c = random_array(rng, (9, 9)), random_array(rng, (9, 9)), random_array(rng, (9, 9))
    C = put(device, c)
    assert cltensor.gemm(put(device, a), put(device, b), C, c=C, beta=0.5, alpha=2) is C
    run_check(C, a, b, np.float32, alpha=2, beta=0.5, c=c)
    A = put(device, a)  # out is also an operand and its bias: computed through a temporary
    cltensor.gemm(A, A.mT, A, row_bias=A[0])
    run_check(A, a, a.T, np.float32, row_bias=a[0])


# ---- batches ----------------------------------------------------------------------------------

def test_batched_strided_and_broadcast(device, rng, family, fp_dtypes):
    for dtype in fp_dtypes:
        x = random_array(rng, (3, 4, 13, 9), dtype)
        w = random_array(rng, (4, 9, 11), dtype)
        bias = random_array(rng, (13,), dtype)
        X = put(device, x.transpose(1, 0, 2, 3)).permute(1, 0, 2, 3)  # batch dims that cannot merge
        out = poisoned(device, (3, 4, 13, 11), dtype)
        cltensor.gemm(X, put(device, w), out, row_bias=put(device, bias), relu=True)
        run_check(out, x, w, dtype, row_bias=bias, relu=True)
        shared = random_array(rng, (9, 11), dtype)  # one matrix for every batch (folded rows)
        out = cltensor.gemm(put(device, x), put(device, shared).expand(3, 4, 9, 11),
                            col_bias=put(device, bias[:11]))
        run_check(out, x, shared, dtype, col_bias=bias[:11])
        lhs = random_array(rng, (13, 9), dtype)  # A shared, B batched (stride-0 batch of A)
        out = cltensor.gemm(put(device, lhs), put(device, w))
        run_check(out, np.broadcast_to(lhs, (4, 13, 9)), w, dtype)


def test_batch_of_transposed_slices(device, rng, family):
    base = random_array(rng, (6, 40, 30))
    a = base[::2, 3:20, ::2]  # (3, 17, 15): step-sliced batch, offset rows, strided columns
    A = put(device, base)[::2, 3:20, ::2]
    b = random_array(rng, (3, 12, 15))
    out = cltensor.gemm(A, put(device, b).mT, c=put(device, np.ones((12,), np.float32)), beta=3)
    run_check(out, a, b.transpose(0, 2, 1), np.float32, beta=3, c=np.ones(12, np.float32))


# ---- how the fast families read their operands ------------------------------------------------

def _kernel_counts(fn):
    with cltensor.profile() as prof:
        fn()
    counts = {}
    for r in prof.records():
        counts[r["name"]] = counts.get(r["name"], 0) + 1
    return counts


def test_xgemm_reads_aligned_operands_in_place(device, rng, monkeypatch):
    monkeypatch.setattr(gm, "FORCE_FAMILY", "xgemm")
    entry = dict(gm.entry_for(device, np.dtype(np.float32)), xgemm=[gm.XGEMM_FALLBACKS[1]],
                 strict=True)
    monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
    for ta, tb in itertools.product((False, True), repeat=2):
        a, b = random_array(rng, (64, 32)), random_array(rng, (32, 96))
        A, B = stored(device, a, ta), stored(device, b, tb)
        counts = _kernel_counts(lambda: run_check(cltensor.gemm(A, B), a, b, np.float32))
        assert counts == {"xgemm": 1}, counts
    a, b = random_array(rng, (65, 33)), random_array(rng, (33, 95))
    counts = _kernel_counts(lambda: run_check(cltensor.gemm(put(device, a), put(device, b)),
                                              a, b, np.float32))
    assert counts == {"pad_copy": 2, "xgemm": 1}, counts
    # M and N no multiple of the tiles: read in place, rows past the last read as zeros
    a, b = random_array(rng, (2, 76, 40)), random_array(rng, (2, 40, 68))
    for ta, tb in itertools.product((False, True), repeat=2):
        A, B = stored(device, a, ta), stored(device, b, tb)
        counts = _kernel_counts(lambda: run_check(cltensor.matmul(A, B), a, b, np.float32))
        assert counts == {"xgemm": 1}, (ta, tb, counts)
    # K no multiple of KWG: an operand with vectors along its rows is read in place (rows
    # from K on as zeros), a K-contiguous one is padded
    for k in (1, 3, 33):
        a, b = random_array(rng, (32, k)), random_array(rng, (k, 96))
        for ta, tb in itertools.product((False, True), repeat=2):
            A, B = stored(device, a, ta), stored(device, b, tb)
            counts = _kernel_counts(lambda: run_check(cltensor.gemm(A, B), a, b, np.float32))
            copies = (k > 1 and not ta) + (k > 1 and tb)
            assert counts == dict({"xgemm": 1}, **({"pad_copy": copies} if copies else {})), \
                (k, ta, tb, counts)


def test_xgemm_plans_are_reused_for_the_same_layout_only(device, rng, monkeypatch):
    """A product's decided plan is remembered per layout: new tensors of the same layout reuse
    it (and it reads the new tensors); a view whose offset breaks the vector alignment gets its
    own plan, with a padded copy."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "xgemm")
    entry = dict(gm.entry_for(device, np.dtype(np.float32)), xgemm=[gm.XGEMM_FALLBACKS[1]],
                 strict=True)
    monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
    gm.clear_cache()
    a, b = random_array(rng, (64, 32)), random_array(rng, (32, 96))
    B = put(device, b)
    counts = _kernel_counts(lambda: run_check(cltensor.gemm(put(device, a), B), a, b,
                                              np.float32))
    assert counts == {"xgemm": 1} and len(gm.xgemm._prepared) == 1, counts
    shifted = put(device, np.concatenate([[0.5], a.ravel()]).astype(np.float32))[1:]
    A = shifted.view(64, 32)  # offset 1: no 16-byte loads
    assert A.offset == 1
    counts = _kernel_counts(lambda: run_check(cltensor.gemm(A, B), a, b, np.float32))
    assert counts == {"pad_copy": 1, "xgemm": 1}, counts
    a, b = random_array(rng, (64, 32)), random_array(rng, (32, 96))
    counts = _kernel_counts(lambda: run_check(cltensor.gemm(put(device, a), put(device, b)),
                                              a, b, np.float32))
    assert counts == {"xgemm": 1} and len(gm.xgemm._prepared) == 1, counts


def test_xgemm_runs_are_replayed_for_the_same_layout_and_entry(device, rng, monkeypatch):
    """gemm_into replays a product's in-place xgemm run for the same layout and database entry
    without choosing the family again: the new call's tensors, addend, biases and ReLU are the
    ones used. Another entry, another forced family, another alignment or benchmark mode
    choose afresh; clear_cache forgets the runs."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "xgemm")
    entry = dict(gm.entry_for(device, np.dtype(np.float32)), xgemm=[gm.XGEMM_FALLBACKS[1]],
                 strict=True)
    monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
    gm.clear_cache()
    chosen = []
    family = gm.engine._family
    monkeypatch.setattr(gm.engine, "_family", lambda p, e: chosen.append(p.m) or family(p, e))

    def product(m=64, **epilogue):
        a, b = random_array(rng, (m, 40)), random_array(rng, (40, 96))
        c, rb, cb = (random_array(rng, shape) for shape in ((m, 96), (m,), (96,)))
        out = poisoned(device, (m, 96), np.float32)
        kw = {"c": put(device, c), "beta": 0.5} if epilogue.get("c") else {"beta": 0}
        kw.update(row_bias=put(device, rb) if epilogue.get("row_bias") else None,
                  col_bias=put(device, cb) if epilogue.get("col_bias") else None,
                  relu=epilogue.get("relu", False))
        cltensor.gemm(put(device, a), put(device, b), out, **kw)
        ref = dict(beta=kw["beta"], c=c if "c" in kw else None, relu=kw["relu"],
                   row_bias=rb if kw["row_bias"] is not None else None,
                   col_bias=cb if kw["col_bias"] is not None else None)
        run_check(out, a, b, np.float32, **ref)

    product()
    assert chosen == [64] and len(gm.engine._recipes) == 1
    product(c=True, relu=True)
    product(row_bias=True, col_bias=True)
    assert chosen == [64], "the same layout chose again"
    product(m=72)
    assert chosen == [64, 72] and len(gm.engine._recipes) == 2
    other = dict(entry)
    monkeypatch.setattr(gm, "entry_for", lambda *args: other)
    product(c=True)
    assert len(chosen) == 3, "a new entry was not asked"
    monkeypatch.setattr(gm, "FORCE_FAMILY", "tiled")
    product()
    assert len(chosen) == 4, "a new forced family was not asked"
    monkeypatch.setattr(gm, "FORCE_FAMILY", "xgemm")
    product()
    assert len(chosen) == 4, "the run of the new entry was not replayed"
    flat, b = random_array(rng, (64 * 40 + 1,)), random_array(rng, (40, 96))
    A = put(device, flat)[1:].reshape(64, 40)  # the same strides, its offset off the vectors
    run_check(cltensor.gemm(A, put(device, b)), flat[1:].reshape(64, 40), b, np.float32)
    assert len(chosen) == 5, "an unaligned operand replayed an aligned run"
    monkeypatch.setattr(cltensor.backends, "benchmark", True)
    product()
    assert len(chosen) == 6, "benchmark mode replayed"
    gm.clear_cache()
    assert not gm.engine._recipes

def test_xgemm_tile_bands(device, rng, monkeypatch):
    """GROUP_M bands (gemm_common.cl's tile_of) cover every tile once, also when the tile rows
    are no multiple of the band (5 rows in bands of 2, 2, 1) and in a batch."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "xgemm")
    for group_m in (2, 3, 8):
        entry = dict(gm.entry_for(device, np.dtype(np.float32)), strict=True,
                     xgemm=[dict(gm.XGEMM_FALLBACKS[1], GROUP_M=group_m)])
        monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
        a, b = random_array(rng, (2, 150, 40)), random_array(rng, (2, 40, 90))
        out = cltensor.matmul(put(device, a), put(device, b))
        run_check(out, a, b, np.float32)


def test_xgemm_vector_stores_and_their_fallback(device, rng, monkeypatch, fp_dtypes):
    """Row-contiguous, aligned outputs are stored as vectors with the epilogue (alpha, both
    biases, ReLU), in edge tiles the vectors inside the product (and a vector that N cuts lane
    by lane); an output view whose offset or row stride is no multiple of the vector, a
    column-strided one and beta != 0 take the per-element stores. 64 x 64 tiles of 4-wide
    vectors on a 136 x 132 product: 4 whole tiles, 5 edge ones; then 131 columns in rows of
    132 and 136 rows of 140: nothing outside the output view is written."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "xgemm")
    for dtype in fp_dtypes:
        entry = dict(gm.entry_for(device, np.dtype(dtype)), strict=True,
                     xgemm=[dict(gm.XGEMM_FALLBACKS[0], STRN=0)])
        monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
        a, b = random_array(rng, (136, 37), dtype), random_array(rng, (37, 132), dtype)
        rb, cb = random_array(rng, (136,), dtype), random_array(rng, (132,), dtype)
        A, B, RB, CB = (put(device, x) for x in (a, b, rb, cb))
        epi = dict(alpha=-0.75, row_bias=rb, col_bias=cb, relu=True)
        dev_epi = dict(epi, row_bias=RB, col_bias=CB)
        outs = {"contiguous": poisoned(device, (136, 132), dtype),
                "offset 4": poisoned(device, (136, 136), dtype)[:, 4:],
                "offset 1": poisoned(device, (136, 133), dtype)[:, 1:],
                "row stride 134": poisoned(device, (136, 134), dtype)[:, 2:],
                "column-strided": poisoned(device, (132, 136), dtype).mT}
        for name, out in outs.items():
            cltensor.gemm(A, B, out=out, **dev_epi)
            try:
                run_check(out, a, b, dtype, **epi)
            except AssertionError as e:
                raise AssertionError(f"{dtype} output {name}: {e}") from None
        c = random_array(rng, (136, 132), dtype)
        out = put(device, c)
        cltensor.gemm(A, B, out=out, c=out, beta=0.5, **dev_epi)
        run_check(out, a, b, dtype, beta=0.5, c=c, **epi)
        whole = poisoned(device, (140, 132), dtype)
        cut = dict(epi, col_bias=cb[:131])
        cltensor.gemm(A, B[:, :131], out=whole[:136, :131], **dict(dev_epi, col_bias=CB[:131]))
        run_check(whole[:136, :131], a, b[:, :131], dtype, **cut)
        rest = whole.numpy()
        assert np.isnan(rest[136:]).all() and np.isnan(rest[:, 131]).all(), \
            f"{dtype}: the product wrote outside its output view"


def _shipped_xgemm_sets():
    db = json.loads(SHIPPED_DB.read_text())
    return [(kernel, q) for kernel in ("gemm_float32", "gemm_float64")
            for vendor in db[kernel].get("vendors", {}).values()
            for entry in vendor.get("devices", {}).values() for q in entry.get("xgemm", [])]


@pytest.mark.parametrize("kernel, params", _shipped_xgemm_sets())
def test_shipped_xgemm_sets(device, rng, monkeypatch, kernel, params):
    """Every xgemm set the database ships, on every device: tails in M, N and K read in
    place, a batch, the fused epilogue."""
    dtype = np.float32 if kernel == "gemm_float32" else np.float64
    if dtype == np.float64 and not device.has_fp64:
        pytest.skip(f"{device} has no float64")
    monkeypatch.setattr(gm, "FORCE_FAMILY", "xgemm")
    entry = dict(gm.entry_for(device, np.dtype(dtype)), strict=True, xgemm=[params])
    monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
    a, b = random_array(rng, (2, 136, 37), dtype), random_array(rng, (2, 37, 132), dtype)
    bias = random_array(rng, (136,), dtype)
    out = cltensor.gemm(put(device, a), put(device, b), row_bias=put(device, bias), relu=True)
    run_check(out, a, b, dtype, row_bias=bias, relu=True)


def epilogue_outputs(device, rng, dtype, batch, m, n):
    """(epilogue for run_check, the same on the device, {name: output}): alpha, row and column
    biases and ReLU; contiguous, offset and column-strided (*batch, m, n) outputs poisoned."""
    rb, cb = random_array(rng, (m,), dtype), random_array(rng, (n,), dtype)
    epi = dict(alpha=-0.75, row_bias=rb, col_bias=cb, relu=True)
    dev_epi = dict(epi, row_bias=put(device, rb), col_bias=put(device, cb))
    outs = {"contiguous": poisoned(device, (*batch, m, n), dtype),
            "offset 1": poisoned(device, (*batch, m, n + 1), dtype)[..., 1:],
            "column-strided": poisoned(device, (*batch, n, m), dtype).mT}
    return epi, dev_epi, outs


def test_packed_walks_both_ways(device, rng, monkeypatch):
    """gemm_packed's work-items walk along N (ORDER 1) or down M (ORDER 0, and every product
    with K of at least WALK_M_FROM_K): each way covers every tile once, with tails in M and N
    and a batch."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "packed")
    base = gm.entry_for(device, np.dtype(np.float32))
    for order, k in ((0, 37), (1, 37), (1, 45)):
        params = dict(base["packed"], ORDER=order, WALK_M_FROM_K=40)
        entry = dict(base, packed=params, min_work=0, min_dim=0)
        monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
        p = gm.Problem(device, np.dtype(np.float32), 29, 53, k, (2,), *[None] * 4)
        assert gm.packed_walks_n(p, params) == (order == 1 and k < 40)
        a, b = random_array(rng, (2, 29, k)), random_array(rng, (2, k, 53))
        out = poisoned(device, (2, 29, 53), np.float32)
        cltensor.gemm(put(device, a), put(device, b), out=out)
        run_check(out, a, b, np.float32)


def test_packed_packs_a_shared_operand_once(device, rng, monkeypatch):
    monkeypatch.setattr(gm, "FORCE_FAMILY", "packed")
    base = gm.entry_for(device, np.dtype(np.float32))
    entry = dict(base, packed=dict(base["packed"], A_IN_PLACE=0, B_IN_PLACE_MIN_N=2**62))
    monkeypatch.setattr(gm, "entry_for", lambda *args: entry)  # both operands packed
    x, w = random_array(rng, (5, 7, 9)), random_array(rng, (9, 11))
    bias = random_array(rng, (7,))
    fn = lambda: run_check(cltensor.gemm(put(device, x), put(device, w),
                                         row_bias=put(device, bias)), x, w, np.float32,
                           row_bias=bias)
    assert _kernel_counts(fn) == {"pack_panels": 2, "gemm_packed": 1}


def test_packed_reads_operands_in_place_and_stores_vectors(device, rng, monkeypatch,
                                                           fp_dtypes):
    """gemm_packed reading B where it is (batched, misaligned offset, padded rows): whole
    panels, a partial last panel (the panel ending at column N, or with N < NR whole vectors,
    lanes, zeros); A packed, or read where it is
    (batched, padded rows, a partial last panel); then the epilogue stored as vectors for whole
    tiles of row-contiguous outputs (misaligned ones too) and per element for edge tiles, a
    column-strided output and beta != 0."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "packed")
    monkeypatch.setattr(gm.packed, "moves", lambda p, params: 0)  # the problems as given, untransposed
    for dtype, a_in_place in itertools.product(fp_dtypes, (0, 1)):
        base = gm.entry_for(device, np.dtype(dtype))
        params = dict(base["packed"], B_IN_PLACE_MIN_N=1, A_IN_PLACE=a_in_place)
        entry = dict(base, packed=params, min_work=0, min_dim=0)
        monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
        mr, nr, vw = params["MR"], params["NR"], params["VW"]
        m, k = 2 * mr + 5, 19
        for n in (3 * nr, 2 * nr + vw + 3, nr + 3, vw + 3, 3):
            a_full = random_array(rng, (2, 3, m, k + 2), dtype)
            a, A = a_full[..., 1:k + 1], put(device, a_full)[..., 1:k + 1]
            full = random_array(rng, (2, 3, k, n + 6), dtype)
            b, B = full[..., 1:n + 1], put(device, full)[..., 1:n + 1]
            p = gm.Problem(device, np.dtype(dtype), m, n, k, (2, 3),
                           gm.Operand(A, list(A.strides[:2]), A.strides[2], A.strides[3]),
                           gm.Operand(B, list(B.strides[:2]), B.strides[2], B.strides[3]),
                           None, None)
            assert gm.packed_reads_b_in_place(p, params)
            assert gm.packed_reads_a_in_place(p, params) == bool(a_in_place)
            epi, dev_epi, outs = epilogue_outputs(device, rng, dtype, (2, 3), m, n)
            for name, out in outs.items():
                counts = _kernel_counts(lambda: cltensor.gemm(A, B, out=out, **dev_epi))
                packs = {} if a_in_place else {"pack_panels": 1}
                assert counts == dict(packs, gemm_packed=1), counts
                try:
                    run_check(out, a, b, dtype, **epi)
                except AssertionError as e:
                    raise AssertionError(f"{dtype} A in place {a_in_place} n={n} output "
                                         f"{name}: {e}") from None
            c = random_array(rng, (2, 3, m, n), dtype)
            out = put(device, c)
            cltensor.gemm(A, B, out=out, c=out, beta=0.5, **dev_epi)
            run_check(out, a, b, dtype, beta=0.5, c=c, **epi)


def test_packed_runs_the_transposed_product_when_it_packs_less(device, rng, monkeypatch,
                                                               fp_dtypes):
    """Both operands K-contiguous (a weight gradient's gout @ x^T): gemm_packed can read only
    A in place, so gemm_into runs C^T = B^T @ A^T when A^T, the operand then packed, is much
    the smaller (ops/gemm/packed.py moves); biases, Ci and Co follow the transposition
    (row-contiguous, column-strided and offset outputs; batched and shared operands)."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "packed")
    packed_rows = []
    real_pack = gm.packed._pack_panels
    def pack(p, op, rows, *args):
        packed_rows.append(rows)
        return real_pack(p, op, rows, *args)
    monkeypatch.setattr(gm.packed, "_pack_panels", pack)
    for dtype in fp_dtypes:
        base = gm.entry_for(device, np.dtype(dtype))
        params = dict(base["packed"], B_IN_PLACE_MIN_N=1, A_IN_PLACE=1)
        entry = dict(base, packed=params, min_work=0, min_dim=0, min_m=0)
        monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
        k = 23
        for m, n, shared_b in ((11, 2 * params["NR"] + 5, False), (5, 90, True),
                               (3 * params["MR"] + 2, 9, False)):
            a = random_array(rng, (2, m, k), dtype)
            bt = random_array(rng, (n, k) if shared_b else (2, n, k), dtype)
            b = np.swapaxes(bt, -1, -2)
            A, B = put(device, a), put(device, bt).mT
            epi, dev_epi, outs = epilogue_outputs(device, rng, dtype, (2,), m, n)
            for name, out in outs.items():
                packed_rows.clear()
                cltensor.gemm(A, B.expand(2, k, n), out=out, **dev_epi)
                assert packed_rows == [min(m, n)], (m, n, packed_rows)
                try:
                    run_check(out, a, np.broadcast_to(b, (2, k, n)), dtype, **epi)
                except AssertionError as e:
                    raise AssertionError(f"{dtype} {m}x{n} output {name}: {e}") from None
            c = random_array(rng, (2, m, n), dtype)
            out = put(device, c)
            cltensor.gemm(A, B.expand(2, k, n), out=out, c=out, beta=0.5, **dev_epi)
            run_check(out, a, np.broadcast_to(b, (2, k, n)), dtype, beta=0.5, c=c, **epi)


def test_packed_sums_over_a_batch_dim(device, rng, monkeypatch, fp_dtypes):
    """gemm_sum_into: C (*batch, M, N) = the sum over the first batch dim of A @ B, one
    gemm_packed launch (SUM_BATCHES), the other batch dims launched; with A and B read in place
    or packed, tails in M and N, strided and offset views, the product run transposed when
    that packs less, into NaN-poisoned contiguous and column-strided outputs; one summed batch
    is a plain product. Only the packed family sums in one kernel (sums_batches)."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "xgemm")
    assert not gm.sums_batches(device, np.float32)
    monkeypatch.setattr(gm, "FORCE_FAMILY", "packed")
    # NOTE: three builds of the kernel, not every combination (each costs seconds on PoCL)
    combos = [(cltensor.float32, 0, 2**62), (cltensor.float32, 1, 1), (cltensor.float64, 1, 2**62)]
    for dtype, a_in_place, min_n in [c for c in combos if c[0] in fp_dtypes]:
        base = gm.entry_for(device, np.dtype(dtype))
        params = dict(base["packed"], B_IN_PLACE_MIN_N=min_n, A_IN_PLACE=a_in_place)
        entry = dict(base, packed=params, min_work=0, min_dim=0, min_m=0)
        monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
        assert gm.sums_batches(device, dtype)
        m, n, k = params["MR"] + 3, params["NR"] + 5, 13
        for batch, b_kc in (((3, 2), False), ((4,), True), ((1, 2), False)):
            a_full = random_array(rng, batch + (m, k + 2), dtype)
            a, A = a_full[..., 1:k + 1], put(device, a_full)[..., 1:k + 1]
            b = random_array(rng, batch + (k, n), dtype)
            B = stored(device, b, transposed=b_kc)
            value, mag = exact(a, b)
            want = (value.sum(axis=0), mag.sum(axis=0))
            outs = {"contiguous": poisoned(device, batch[1:] + (m, n), dtype),
                    "column-strided": poisoned(device, batch[1:] + (n, m), dtype).mT}
            for name, out in outs.items():
                counts = _kernel_counts(lambda: gm.gemm_sum_into(A, B, out))
                assert counts.get("gemm_packed") == 1 and set(counts) <= {
                    "gemm_packed", "pack_panels"}, counts
                try:
                    check_bound(out, want, dtype, batch[0] * k)
                except AssertionError as e:
                    raise AssertionError(f"{dtype} A in place {a_in_place} B_IN_PLACE_MIN_N "
                                         f"{min_n} batch {batch} output {name}: {e}") from None
    for s, m, k in ((0, 3, 4), (2, 3, 0), (2, 0, 4)):  # no products, K = 0, an empty result
        out = poisoned(device, (m, 5), np.float32)
        gm.gemm_sum_into(cltensor.ones(s, m, k, device=device),
                         cltensor.ones(s, k, 5, device=device), out)
        assert (out.numpy() == 0).all(), (s, m, k)


def test_packed_b_in_place_rule(device):
    params = {"MR": 6, "NR": 16, "VW": 8, "B_IN_PLACE_MIN_N": 128}
    x = cltensor.zeros((3, 4, 200), device=device)
    rule = lambda t, n: gm.packed_reads_b_in_place(  # noqa: E731
        gm.Problem(device, np.dtype(np.float32), 8, n, 4, (), None,
                   gm.Operand(t, [], t.strides[-2], t.strides[-1]), None, None), params)
    assert rule(x[0], 200) and rule(x[0, :, 1:129], 128)   # N-contiguous, wide enough
    assert not rule(x[0, :, :127], 127)                     # too narrow: packed
    assert not rule(x[0, :, ::2], 100) and not rule(x[0].mT, 4)  # not N-contiguous
    deep = lambda k, ld: gm.packed_reads_b_in_place(  # noqa: E731
        gm.Problem(device, np.dtype(np.float32), 8, 2048, k, (), None,
                   gm.Operand(x, [], ld, 1), None, None), params)
    assert not deep(2048, 2048) and not deep(1024, 2048) and not deep(1024, 1024)  # aliasing
    assert deep(512, 1024) and deep(2048, 2050) and deep(1024, 1000)  # shallow or not aliasing
    assert not gm.packed_reads_b_in_place(
        gm.Problem(device, np.dtype(np.float32), 8, 200, 4, (), None,
                   gm.Operand(x[0], [], 200, 1), None, None), {"MR": 6})  # off by default


def test_direct_rows_divide_m(device, rng, monkeypatch):
    """gemm_direct takes as many rows per work-item as divide M (no block cut by the edge)."""
    assert [gm.direct_rows(m, 8) for m in (1, 2, 3, 4, 6, 8, 12, 16, 24, 130)] == \
        [1, 2, 1, 4, 2, 8, 4, 8, 8, 2]
    monkeypatch.setattr(gm, "FORCE_FAMILY", "direct")
    for m in (2, 4, 6, 12):
        a, b = random_array(rng, (m, 53)), random_array(rng, (53, 70))
        out = poisoned(device, (m, 70), np.float32)
        cltensor.gemm(put(device, a), put(device, b), out=out)
        run_check(out, a, b, np.float32)


# ---- device limits ----------------------------------------------------------------------------

TOO_BIG = [  # 512 work-items; then 48 KiB of local memory; then a fitting one
    {"MWG": 128, "NWG": 128, "KWG": 16, "MDIMC": 16, "NDIMC": 32, "VWM": 4, "VWN": 4,
     "STRM": 1, "STRN": 1, "PADA": 0, "PADB": 0, "NBUF": 2},
    {"MWG": 128, "NWG": 64, "KWG": 32, "MDIMC": 16, "NDIMC": 16, "VWM": 4, "VWN": 4,
     "STRM": 1, "STRN": 1, "PADA": 4, "PADB": 4, "NBUF": 2},
    {"MWG": 64, "NWG": 32, "KWG": 16, "MDIMC": 16, "NDIMC": 8, "VWM": 2, "VWN": 4,
     "STRM": 0, "STRN": 1, "PADA": 2, "PADB": 4, "NBUF": 2},
]


def test_forced_small_device_limits(device, rng, monkeypatch):
    """256 work-items and 32 KiB of local memory, as on many AMD and Intel GPUs: every choice
    fits, and the results stay right (also when the device's own limits chose first: the
    fitting sets are memoized)."""
    entry = dict(gm.entry_for(device, np.dtype(np.float32)), xgemm=TOO_BIG,
                 tiled={"TSM": 128, "TSN": 128, "TSK": 32, "WPTM": 4, "WPTN": 4})
    gm.xgemm_candidates(device, entry, 4)
    monkeypatch.setattr(device, "max_work_group", 256)
    monkeypatch.setattr(device, "local_mem", 32 * 1024)
    monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
    own, extra = gm.xgemm_candidates(device, entry, 4)
    assert own == TOO_BIG[2:]
    assert all(gm.xgemm_local_bytes(q, 4) <= 32 * 1024 and q["MDIMC"] * q["NDIMC"] <= 256
               for q in own + extra)
    assert all(q["TSM"] <= 64 for q in gm.tiled_candidates(device, entry, 4))
    for fam in ("xgemm", "tiled"):
        monkeypatch.setattr(gm, "FORCE_FAMILY", fam)
        a, b = random_array(rng, (70, 50)), random_array(rng, (50, 40))
        with cltensor.profile() as prof:
            out = cltensor.gemm(put(device, a), put(device, b), col_bias=put(device, b[0]))
        run_check(out, a, b, np.float32, col_bias=b[0])
        locals_ = [r["local"] for r in prof.records() if r["name"] in ("xgemm", "gemm_tiled")]
        assert locals_ and all(np.prod(lc) <= 256 for lc in locals_)


def test_plan_weighs_padding_occupancy_and_split_k(device):
    big = dict(TOO_BIG[0], rate=40.0)
    narrow = dict(TOO_BIG[2], rate=30.0)  # 64 x 32 tiles
    entry = {"xgemm": [big, narrow], "compute_units": 8, "threads_per_cu": 256,
             "split_cost_us": 0, "bandwidth_gbs": 1e9}
    p = lambda m, n, k: gm.Problem(device, np.dtype(np.float32), m, n, k, (), *[None] * 4)
    best = lambda prob: min(entry["xgemm"], key=lambda q: gm.xgemm_plan(prob, entry, q)[0])
    assert best(p(1024, 1024, 64)) is big          # 64 tiles, no padding: the faster rate wins
    assert best(p(64, 4096, 64)) is narrow         # half of each 128-row tile would be padding
    cost, splits = gm.xgemm_plan(p(128, 256, 4096), entry, big)
    assert splits == 4                             # 2 tiles on 8 units: 4 shares fill a wave
    # 3 tiles: 8 shares make 3 full waves; 3 shares would leave the second wave 1/8 busy
    assert gm.xgemm_plan(p(384, 128, 4096), entry, big)[1] == 8
    assert gm.groups_per_cu(entry, narrow) == 2 and gm.groups_per_cu(entry, big) == 1
    assert gm.xgemm_plan(p(128, 256, 64), entry, big)[1] == 1       # too few K slices to split
    assert gm.xgemm_plan(p(128, 256, 4096), dict(entry, split_k=False), big)[1] == 1
    slow_reduce = dict(entry, split_cost_us=1e6)      # a second per extra pass: never split
    assert gm.xgemm_plan(p(128, 256, 4096), slow_reduce, big)[1] == 1
    # split counts are powers of two (24 tiles on 132 units: the estimate's best count is 11)
    many_units = dict(entry, compute_units=132)
    assert [gm.xgemm_plan(p(128, n, 36864), many_units, big)[1] for n in (2048, 3072, 4096)] \
        == [8, 16, 4]


def test_plan_prices_each_layout_at_its_own_rate(device):
    """A set's layout_factors scale its rate to the way A and B are stored (gemm.layout_of):
    a set twice as slow with both operands K-contiguous loses a product it wins row-major."""
    big = dict(TOO_BIG[0], rate=40.0, layout_factors={"KK": 0.5, "MN": 1.0, "MK": 1.0})
    narrow = dict(TOO_BIG[2], rate=30.0)
    entry = {"xgemm": [big, narrow], "compute_units": 8, "threads_per_cu": 256}
    m, n, k = 1024, 1024, 64

    def problem(a_kc, b_kc):
        a = gm.Operand(None, [], k, 1) if a_kc else gm.Operand(None, [], 1, m)
        b = gm.Operand(None, [], 1, k) if b_kc else gm.Operand(None, [], n, 1)
        return gm.Problem(device, np.dtype(np.float32), m, n, k, (), a, b, None, None)
    layouts = {lay: problem(lay[0] == "K", lay[1] == "K") for lay in gm.LAYOUTS}
    assert {lay: gm.layout_of(q) for lay, q in layouts.items()} == {l: l for l in gm.LAYOUTS}
    best = lambda prob: min(entry["xgemm"], key=lambda q: gm.xgemm_plan(prob, entry, q)[0])
    assert [best(layouts[lay]) is big for lay in gm.LAYOUTS] == [True, True, False, True]
    kk, kn = (gm.xgemm_plan(layouts[lay], entry, big)[0] for lay in ("KK", "KN"))
    assert kk == pytest.approx(2 * kn)


def test_split_k_sums_the_shares(device, rng, monkeypatch, fp_dtypes):
    monkeypatch.setattr(gm, "FORCE_FAMILY", "xgemm")
    entry = dict(gm.entry_for(device, np.dtype(np.float32)), xgemm=[gm.XGEMM_FALLBACKS[1]],
                 strict=True, compute_units=64)
    monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
    for dtype in fp_dtypes:
        a, b = random_array(rng, (2, 40, 301), dtype), random_array(rng, (2, 301, 50), dtype)
        c, bias = random_array(rng, (40, 50), dtype), random_array(rng, (40,), dtype)
        with cltensor.profile() as prof:
            out = cltensor.gemm(put(device, a), stored(device, b, True), c=put(device, c),
                                beta=-1, row_bias=put(device, bias), relu=True)
        run_check(out, a, b, dtype, beta=-1, c=c, row_bias=bias, relu=True)
        names = [r["name"] for r in prof.records()]
        assert names.count("xgemm_reduce") == 1, names
        (xgemm_launch,) = [r for r in prof.records() if r["name"] == "xgemm"]
        assert xgemm_launch["global"][2] > 2, "K was not split"


def test_benchmark_mode_times_sets_and_splits(device, rng, monkeypatch):
    """cltensor.backends.benchmark: xgemm times the near-best (set, split count) pairs once
    per shape into a scratch output (an in-place c = a @ b + c stays right), runs the fastest
    and remembers it."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "xgemm")
    monkeypatch.setattr(gm.bench, "BENCH_MIN_SECONDS", 0.0)
    monkeypatch.setattr(gm.bench, "BENCH_SLACK", 1e9)  # every candidate
    monkeypatch.setattr(cltensor.backends, "benchmark", True)
    sets = [gm.XGEMM_FALLBACKS[1], dict(gm.XGEMM_FALLBACKS[1], MWG=64, MDIMC=16)]
    entry = dict(gm.entry_for(device, np.dtype(np.float32)), xgemm=sets, strict=True,
                 compute_units=64)
    monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
    gm.clear_cache()
    a, b, c = (random_array(rng, s, np.float32) for s in ((40, 301), (301, 50), (40, 50)))
    tc = put(device, c)
    cltensor.gemm(put(device, a), stored(device, b, True), out=tc, c=tc, beta=1)
    run_check(tc, a, b, np.float32, beta=1, c=c)
    (params, splits, times), = gm.benchmark_times(device).values()
    assert len(times) == 2 * 301 // (8 * gm.SPLIT_MIN_SLICES)  # both sets, splits 1..9
    assert times[(sets.index(params), splits)] == min(times.values())
    monkeypatch.setattr(gm.bench, "_time_plan", lambda *args: pytest.fail("timed twice"))
    out = poisoned(device, (40, 50), np.float32)
    cltensor.gemm(put(device, a), stored(device, b, True), out)
    run_check(out, a, b, np.float32)
    gm.clear_cache()
    assert gm.benchmark_times(device) == {}


def test_invalid_parameter_sets_are_skipped():
    assert gm.xgemm_valid(gm.XGEMM_FALLBACKS[0])
    assert not gm.xgemm_valid(dict(gm.XGEMM_FALLBACKS[0], VWM=3))
    assert not gm.xgemm_valid(dict(gm.XGEMM_FALLBACKS[0], MWG=48))  # MWG % (MDIMC*VWM) != 0
    assert not gm.xgemm_valid({"MWG": 64})


# ---- the parameter database -------------------------------------------------------------------

@pytest.fixture
def tmp_tuning(tmp_path, monkeypatch):
    """A private database folder and user cache for one test."""
    db = tmp_path / "db"
    db.mkdir()
    monkeypatch.setattr(tunedb, "DB_DIR", db)
    monkeypatch.setenv("CLTENSOR_CACHE_DIR", str(tmp_path / "cache"))
    tune.clear()
    yield db
    tune.clear()


def test_lookup_falls_back_device_vendor_global(device, tmp_tuning):
    vendor = tune.vendor_of(device)
    name = device.name
    # levels: 1 global ... 4 long; keys that the device's derived defaults leave to the database
    a, b, c, d = "threads_per_cu", "compute_units", "min_m", "rowdot_max_m"
    table = {"gemm_float32": {
        "default": {a: 1, b: 1, c: 1, d: 1},
        "vendors": {vendor: {"default": {b: 2, c: 2, d: 2},
                             "devices": {name[:3]: {c: 3, d: 3},
                                         name[:5]: {d: 4}, "no such device": {a: 9}}},
                    "other vendor": {"default": {a: 9}}}}}
    (tmp_tuning / "gemm.json").write_text(json.dumps(table))
    got = tune.lookup("gemm", "gemm_float32", device)  # the longest device key wins, alone
    derived = tune.derived_defaults("gemm_float32", device.description())
    assert got == dict(derived, **{a: 1, b: 2, c: 2, d: 4})
    assert tune.lookup("gemm", "gemm_float64", device) == tune.derived_defaults(
        "gemm_float64", device.description())


def test_user_cache_overrides_and_is_keyed_by_device_and_driver(device, tmp_tuning, tmp_path):
    vendor = {tune.vendor_of(device): {"default": {"family": "direct", "min_work": 5}}}
    (tmp_tuning / "gemm.json").write_text(json.dumps({"gemm_float32": {"vendors": vendor}}))
    assert gm.entry_for(device, np.dtype(np.float32))["min_work"] == 5
    path = tune.store("gemm_float32", device, {"min_work": 7})
    assert path == tune.user_cache_path(device)
    assert str(path).startswith(str(tmp_path / "cache" / "tuning"))
    assert re.sub(r"[^A-Za-z0-9_.-]+", "_", device.cl_device.driver_version) in path.name
    got = tune.lookup("gemm", "gemm_float32", device)
    assert (got["family"], got["min_work"]) == ("direct", 7)
    assert gm.entry_for(device, np.dtype(np.float32))["min_work"] == 7  # store() forgets


def test_shipped_database_has_measured_entries():
    db = json.loads((tune.DB_DIR / "gemm.json").read_text())
    for kernel in ("gemm_float32", "gemm_float64"):
        vendors = db[kernel]["vendors"]
        assert any("pthread" in key for key in vendors["pocl"]["devices"]), kernel
        assert any("H200" in key for key in vendors["nvidia"]["devices"]), kernel
        for entry in [db[kernel]["default"], *(v["default"] for v in vendors.values()),
                      *(e for v in vendors.values() for e in v["devices"].values())]:
            assert all(gm.xgemm_valid(q) for q in entry.get("xgemm", [])), entry


# ---- the tuner --------------------------------------------------------------------------------

def test_tuner_stores_a_winner_the_next_process_uses(device, tmp_tuning, tmp_path, monkeypatch):
    (tmp_tuning / "gemm.json").write_text(SHIPPED_DB.read_text())
    monkeypatch.setattr(tune, "_packed_candidates", lambda dtype: [
        {"MR": 4, "NR": 16, "VW": 16, "ORDER": 0}, {"MR": 6, "NR": 16, "VW": 16, "ORDER": 1}])
    monkeypatch.setattr(tune, "_xgemm_structures", lambda dtype: [gm.XGEMM_FALLBACKS[1]])
    monkeypatch.setattr(tune, "_xgemm_variations", lambda p: [dict(p, STRM=0)])
    monkeypatch.setattr(tune.GemmTuner, "tune_threshold", lambda self, e: {"min_work": 1234})
    report = tmp_path / "report.json"
    assert tune.main(["gemm", "--device", device.index, "--size", "64", "--reps", "1",
                      "--json", str(report)]) == 0
    winner = json.loads(report.read_text())["winners"]["gemm_float32"]
    assert winner["min_work"] == 1234
    if device.is_cpu:
        assert winner["family"] == "packed" and winner["packed"]["MR"] in (4, 6)
    cached = json.loads(tune.user_cache_path(device).read_text())["gemm_float32"]
    assert cached == winner
    code = ("import cltensor, numpy as np; from cltensor.ops import gemm; "
            f"d = cltensor.get_device({device.index!r}); "
            "print(gemm.entry_for(d, np.dtype(np.float32))['min_work'])")
    out = subprocess.run([sys.executable, "-c", code], env=subprocess_env(), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "1234"


def test_tuner_rejects_wrong_or_unfit_candidates(device, rng, monkeypatch):
    tuner = tune.GemmTuner(device, np.float32, 32, 1, log=lambda *a: None)
    base = gm.entry_for(device, np.dtype(np.float32))
    unfit = dict(base, family="xgemm", xgemm=[dict(gm.XGEMM_FALLBACKS[1], KWG=8192)],
                 strict=True, min_work=0, min_dim=0)  # 2 MiB of local memory
    assert tuner.measure(unfit, (32, 32, 32)) is None
    ok = dict(base, family="xgemm", xgemm=[gm.XGEMM_FALLBACKS[1]], strict=True, min_work=0,
              min_dim=0)
    assert tuner.measure(ok, (32, 32, 32)) > 0
    monkeypatch.setattr(tuner, "_correct", lambda entry: False)
    assert tuner.measure(ok, (32, 32, 32)) is None


def test_tuner_never_times_a_fallback_for_an_unfit_set(device, monkeypatch):
    """A set that does not fit the device gets no rate (the engine would run a fallback set
    in its place, and the fallback's rate would be shipped under the unfit set's name)."""
    unfit = dict(gm.XGEMM_FALLBACKS[0], KWG=8192)  # 4 MiB of local memory
    fit = dict(gm.XGEMM_FALLBACKS[1], GROUP_M=8)
    monkeypatch.setattr(tune, "_xgemm_structures", lambda dtype: [unfit, fit])
    monkeypatch.setattr(tune, "_xgemm_variations", lambda p: [])
    logs = []
    tuner = tune.GemmTuner(device, np.float32, 32, 1, log=lambda *a: logs.append(a))
    winner = tuner.tune_xgemm()
    assert [{k: v for k, v in q.items() if k not in ("rate", "layout_factors")}
            for q in winner["xgemm"]] == [fit]
    assert {r["entry"]["xgemm"][0]["KWG"] for r in tuner.results} == {fit["KWG"]}
    # the winner's speed in the other layouts, timed with A and B stored that way
    assert "layout_factors" in winner["xgemm"][0], (tuner.results[-6:], logs[-6:])
    factors = winner["xgemm"][0]["layout_factors"]
    assert set(factors) == {"MN", "KK", "MK"} and all(f > 0 for f in factors.values())
    assert {r["label"] for r in tuner.results} >= {f"layout {lay}" for lay in gm.LAYOUTS}
    for lay in gm.LAYOUTS:
        a, b, A, B, _ = tuner._tensors(32, 32, 32, lay)
        assert (A.strides[1] == 1, B.strides[0] == 1) == (lay[0] == "K", lay[1] == "K"), lay
        np.testing.assert_array_equal(A.numpy(), a)
        np.testing.assert_array_equal(B.numpy(), b)


# ---- bad input --------------------------------------------------------------------------------

def test_gemm_errors_leave_data_untouched(device, rng):
    a, c = random_array(rng, (3, 4)), random_array(rng, (3, 5))
    A, C = put(device, a), put(device, c)
    B = put(device, random_array(rng, (4, 5)))
    with pytest.raises(ValueError, match=r"gemm: shapes \(3, 4\) and \(3, 4\) cannot be multiplied"):
        cltensor.gemm(A, A, C)
    with pytest.raises(ValueError, match="gemm: expected a and b to be at least 2-d, got 1-d"):
        cltensor.gemm(A[0], B)
    with pytest.raises(ValueError, match=r"row_bias must have shape \(3,\), got \(5,\)"):
        cltensor.gemm(A, B, C, row_bias=C[0])
    with pytest.raises(ValueError, match=r"col_bias must have shape \(5,\), got \(3, 5\)"):
        cltensor.gemm(A, B, C, col_bias=C)
    with pytest.raises(ValueError, match=r"input of shape \(4,\) cannot be broadcast"):
        cltensor.gemm(A, B, C, c=A[0])
    with pytest.raises(ValueError, match=r"result's shape \(3, 5\) does not match out's shape"):
        cltensor.gemm(A, B, A)
    with pytest.raises(RuntimeError, match="expanded view"):
        cltensor.gemm(A, B, C[:1].expand(3, 5))
    with pytest.raises(TypeError, match="gemm: expected all operands to have the same dtype"):
        cltensor.gemm(A, B, C, col_bias=cltensor.ones(5, dtype=cltensor.int32, device=device))
    with pytest.raises(TypeError, match="gemm: alpha must be a real number"):
        cltensor.gemm(A, B, C, alpha="2")
    with pytest.raises(TypeError, match="gemm: expected tensors, got ndarray"):
        cltensor.gemm(A, b=np.ones((4, 5)))
    with pytest.raises(ValueError, match=r"batch dims of shapes \(2, 3, 4\) and \(3, 4, 5\)"):
        cltensor.gemm(put(device, np.ones((2, 3, 4), np.float32)),
                      put(device, np.ones((3, 4, 5), np.float32)))
    other = Device(device.index + "-other-context", device.cl_device)
    with pytest.raises(RuntimeError, match="gemm: expected all tensors on the same device"):
        cltensor.gemm(A, B, C, row_bias=cltensor.from_numpy(c[:, 0].copy(), device=other))
    np.testing.assert_array_equal(C.numpy(), c)
    np.testing.assert_array_equal(A.numpy(), a)


# ---- property test ----------------------------------------------------------------------------

@st.composite
def gemm_case(draw):
    """Shapes, batch broadcasting, layouts, an epilogue and the family to run."""
    m, n, k = (draw(st.integers(1, 70)) for _ in range(3))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    a_batch = tuple(draw(st.sampled_from([1, d])) for d in batch)
    b_batch = tuple(draw(st.sampled_from([1, d])) for d in batch)
    return {"m": m, "n": n, "k": k, "a_batch": a_batch, "b_batch": b_batch,
            "ta": draw(st.booleans()), "tb": draw(st.booleans()),
            "row_bias": draw(st.booleans()), "col_bias": draw(st.booleans()),
            "relu": draw(st.booleans()), "beta": draw(st.sampled_from([0.0, 1.0, -0.5])),
            "family": draw(st.sampled_from(gm.FAMILIES))}


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=gemm_case())
def test_gemm_property(device, case):
    rng = np.random.default_rng(zlib.crc32(repr(sorted(case.items())).encode()))
    m, n, k = case["m"], case["n"], case["k"]
    a = random_array(rng, case["a_batch"] + (m, k))
    b = random_array(rng, case["b_batch"] + (k, n))
    shape = np.broadcast_shapes(case["a_batch"], case["b_batch"]) + (m, n)
    c = random_array(rng, shape)
    kw = {"beta": case["beta"], "relu": case["relu"], "c": put(device, c)}
    ref = {"beta": case["beta"], "relu": case["relu"], "c": c}
    for name, size in (("row_bias", m), ("col_bias", n)):
        if case[name]:
            ref[name] = random_array(rng, (size,))
            kw[name] = put(device, ref[name])
    old, gm.FORCE_FAMILY = gm.FORCE_FAMILY, case["family"]
    try:
        out = cltensor.gemm(stored(device, a, case["ta"]), stored(device, b, case["tb"]), **kw)
    finally:
        gm.FORCE_FAMILY = old
    run_check(out, np.broadcast_to(a, shape[:-2] + (m, k)),
              np.broadcast_to(b, shape[:-2] + (k, n)), np.float32, **ref)


def test_small_problem_thresholds(device):
    """Below min_work (M*N*K*batches), min_dim (min(M, N)) or min_m (M) the entry's small
    family runs; integer products always take it."""
    entry = {"family": "packed", "small": "direct", "min_work": 1000, "min_dim": 4, "min_m": 24}

    def fam(shape, nbatch=1, dtype=np.float32):
        return gm.family_of(device, dtype, entry, shape, nbatch)

    assert fam((64, 64, 64)) == "packed"
    assert fam((8, 8, 8)) == "direct"            # min_work
    assert fam((4, 8, 8), nbatch=64) == "direct"  # min_m (the work is enough)
    assert fam((512, 3, 512)) == "direct"        # min_dim
    assert fam((16, 4096, 4096)) == "direct"     # min_m
    assert fam((24, 4096, 4096)) == "packed"
    assert fam((4096, 8, 4096)) == "packed"      # few columns, many rows: packed
    assert fam((64, 64, 64), dtype=np.int32) == "direct"


@pytest.mark.parametrize("m", [1, 3, 8])
@pytest.mark.parametrize("kernel", ["gemm_rowdot", "gemm_rowdot_wg"])
def test_rowdot_linear_layers(device, rng, fp_dtypes, m, kernel):
    """gemm_rowdot and gemm_rowdot_wg (x @ W^T with few rows, both K-contiguous) on every
    device: K with and without a vector tail, N prime, offset (unaligned) views, batches, the
    whole epilogue; poisoned outputs."""
    for dtype in fp_dtypes:
        _check_rowdot(device, rng, dtype, m, kernel)


def epilogue_args(device, rng, dtype, m, n, epi):
    """gemm_into's keyword arguments for the epilogue named by epi (alpha, beta, relu,
    row_bias, col_bias) on an (m, n) result, random where data is needed, and exact()'s."""
    kw, ref_kw = {}, {}
    if "beta" in epi:
        c = random_array(rng, (m, n), dtype)
        kw.update(c_in=put(device, c), beta=epi["beta"])
        ref_kw.update(c=c, beta=epi["beta"])
    for side, size in (("row_bias", m), ("col_bias", n)):
        if epi.get(side):
            bias = random_array(rng, (size,), dtype)
            kw[side], ref_kw[side] = put(device, bias), bias
    for flag in ("alpha", "relu"):
        if flag in epi:
            kw[flag] = ref_kw[flag] = epi[flag]
    return kw, ref_kw


def _check_rowdot(device, rng, dtype, m, kernel):
    entry = dict(gm.entry_for(device, dtype), rowdot_max_m=8,
                 rowdot_wg=int(kernel == "gemm_rowdot_wg"))
    cases = [(37, 64, {}), (131, 53, {"alpha": -0.5, "relu": True}),
             (16, 1000, {"beta": 2.0}), (29, 7, {"row_bias": True, "col_bias": True})]
    for n, k, epi in cases:
        x, w = random_array(rng, (m, k + 1), dtype), random_array(rng, (n, k + 1), dtype)
        a, b = put(device, x)[:, 1:], put(device, w)[:, 1:].mT  # offset views: unaligned
        kw, ref_kw = epilogue_args(device, rng, dtype, m, n, epi)
        out = poisoned(device, (m, n), dtype)
        with cltensor.profile() as prof:
            gm.gemm_into(a, b, out, entry=entry, **kw)
        assert {r["name"] for r in prof.records()} == {kernel}
        run_check(out, x[:, 1:], w[:, 1:].T, dtype, **ref_kw)
    # aligned and batched: a (3, m, 64) batch against one shared weight
    x, w = random_array(rng, (3, m, 64), dtype), random_array(rng, (40, 64), dtype)
    out = poisoned(device, (3, m, 40), dtype)
    gm.gemm_into(put(device, x), put(device, w).mT.expand(3, 64, 40), out, entry=entry)
    run_check(out, x, np.broadcast_to(w.T, (3, 64, 40)), dtype)
