"""How the GEMM engine's fast families read their operands and store their results: xgemm
reading aligned operands in place (a padded copy only where it must), its plans and runs
remembered per layout, GROUP_M tile bands, vector stores and their per-element fallback,
every xgemm set the database ships; gemm_packed's two walks, a shared operand packed once,
operands read in place, the transposed product when it packs less, sums over a batch dim, the
rule for reading B in place; gemm_direct's rows per work-item. Launches are counted and
results held to the classical bound of test_gemm.py on NaN-poisoned outputs."""
import itertools
import json

import numpy as np
import pytest

import cltensor
from cltensor.ops import gemm as gm
from cltensor.testing import random_array
from test_gemm import (SHIPPED_DB, _kernel_counts, check_bound, epilogue_outputs, exact,
                       poisoned, put, run_check, stored)


# ---- how the fast families read their operands ------------------------------------------------

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
    k = gm.packed.TALL_PACK_MIN_K
    n = 16 * 97  # rows on cache lines, 97 lines apart: no aliasing
    y = cltensor.zeros((k, n), device=device)
    tall = lambda m, k, least: gm.packed_reads_b_in_place(  # noqa: E731
        gm.Problem(device, np.dtype(np.float32), m, n, k, (), None,
                   gm.Operand(y[:k], [], n, 1), None, None),
        dict(params, B_IN_PLACE_MAX_M=192, NT_PACK_MIN_BYTES=least))
    assert tall(192, k, 0) and not tall(193, k, 0)  # taller products pack a deep B,
    assert tall(193, k - 1, 0)  # not a shallower one,
    assert tall(193, k, k * n * 4 + 1) and not tall(193, k, k * n * 4)  # nor a smaller one
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
