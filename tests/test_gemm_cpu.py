"""The CPU GEMM's K slabs (gemm_cpu.cl's gemm_slabs over pack_panels' slab layout): odd shapes
against float64 with NaN-poisoned outputs and every epilogue, the same sums as gemm_packed to
the bit, long sums, the rules that choose it, and its tunables in the database and the tuner."""
import itertools
import json
import types

import numpy as np
import pytest

import cltensor
from cltensor import tune
from cltensor.defaults import cpu_gemm
from cltensor.ops import gemm as gm
from cltensor.ops.gemm import packed
from cltensor.testing import random_array
from test_gemm import _kernel_counts, epilogue_outputs, poisoned, put, run_check
from test_gemm_accuracy import LONG_K, check_long, uniform


def slab_entry(device, dtype, **over):
    """The device's packed entry with slabs from any size on (KC two blocks of KB, blocks of
    2 x 2 tiles), the thresholds off; `over` replaces fields."""
    base = gm.entry_for(device, np.dtype(dtype))
    params = dict(base["packed"], KB=base["packed"].get("KB", 64))
    params.update(KC=2 * params["KB"], BM=2, BN=2, SLAB_MIN_K=0, SLAB_MIN_M=0, SLAB_MIN_MN=0,
                  SLAB_MIN_N=0)
    params.update(over)
    return dict(base, packed=params, min_work=0, min_dim=0, min_m=0)


@pytest.fixture
def use_entry(monkeypatch):
    """Force the packed family and make `entry` the database's answer."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "packed")
    return lambda entry: monkeypatch.setattr(gm, "entry_for", lambda *args: entry)


def test_pack_panels_slab_layout(device, rng, fp_dtypes):
    """pack_panels with KC (0: one slab): slab s holds every panel for its kc steps of K,
    panel p at s*KC*pad + p*kc*PR, rows past `rows` zero; a last slab shorter than KC; KC a
    multiple of the work-group along K and not (the host then narrows the group); sources
    contiguous along K and along the rows (B's layout: CPUs copy rows as vectors, with plain
    or streaming stores)."""
    for dtype, kc, form in itertools.product(fp_dtypes, (32, 20, 0), ("k", "rows", "streamed")):
        rows_contiguous = form != "k"
        rows, k = (53, 75) if rows_contiguous else (21, 75)
        width = 2 * packed.ROWS_VW if rows_contiguous else 8
        x = random_array(rng, (rows, k), dtype)
        p = gm.Problem(device, np.dtype(dtype), rows, 1, k, (), None, None, None, None)
        if rows_contiguous:
            op = gm.Operand(put(device, np.ascontiguousarray(x.T)), [], 1, rows)
            t, _ = packed._pack_panels(p, op, rows, 1, rows, width, kc,
                                       nt_min=0 if form == "streamed" else 2 ** 62)
        else:
            op = gm.Operand(put(device, x), [], k, 1)
            t, _ = packed._pack_panels(p, op, rows, k, 1, width, kc)
        kc = kc or k
        pad = -(-rows // width) * width
        padded = np.zeros((pad, k), dtype)
        padded[:rows] = x
        want = np.concatenate([padded[:, k0:k0 + kc].reshape(pad // width, width, -1)
                               .transpose(0, 2, 1).ravel() for k0 in range(0, k, kc)])
        np.testing.assert_array_equal(t.numpy(), want)


@pytest.mark.parametrize("b_in_place", [0, 1])
def test_slabs_match_float64_on_odd_shapes(device, rng, use_entry, fp_dtypes, b_in_place):
    """M, N not multiples of the tile nor of the block, K not a multiple of the slab (nor of
    KB); batched operands and a B shared by the batches; alpha, beta with C read, biases and
    ReLU; contiguous, offset and column-strided outputs poisoned with NaN. One pack of A, one
    of B unless the slabs read it in place (SLAB_B_IN_PLACE: the last, partial panel of N then
    ends at column N), and one gemm_slabs launch; the sums equal gemm_packed's bit for bit on
    CPUs (GPU compilers may contract a different multiply-add into an fma: within 2 ulp)."""
    for dtype in fp_dtypes:
        entry = slab_entry(device, dtype, SLAB_B_IN_PLACE=b_in_place)
        params = entry["packed"]
        mr, nr, kc = params["MR"], params["NR"], params["KC"]
        m, n, k = 2 * 2 * mr + mr + 3, 2 * 2 * nr + 5, 2 * kc + 37
        for batched_b in (True, False):
            use_entry(entry)
            a = random_array(rng, (2, m, k), dtype)
            b = random_array(rng, (2, k, n) if batched_b else (k, n), dtype)
            bb = np.broadcast_to(b, (2, k, n))
            A, B = put(device, a), put(device, b).expand(2, k, n)
            epi, dev_epi, outs = epilogue_outputs(device, rng, dtype, (2,), m, n)
            for name, out in outs.items():
                counts = _kernel_counts(lambda: cltensor.gemm(A, B, out=out, **dev_epi))
                assert counts == {"pack_panels": 2 - b_in_place, "gemm_slabs": 1}, (name, counts)
                try:
                    run_check(out, a, bb, dtype, **epi)
                except AssertionError as e:
                    raise AssertionError(f"{dtype} B batched {batched_b} {name}: {e}") from None
            got = outs["contiguous"].numpy()
            use_entry(dict(entry, packed=dict(params, KC=0, B_IN_PLACE_MIN_N=2**40)))
            again = poisoned(device, (2, m, n), dtype)
            assert _kernel_counts(lambda: cltensor.gemm(A, B, out=again, **dev_epi)).get(
                "gemm_packed") == 1
            if device.is_cpu:
                np.testing.assert_array_equal(got, again.numpy())
            else:
                np.testing.assert_array_max_ulp(got, again.numpy(), maxulp=2)
            use_entry(entry)
            c = random_array(rng, (2, m, n), dtype)
            out = put(device, c)
            cltensor.gemm(A, B, out=out, c=out, beta=0.5, **dev_epi)
            run_check(out, a, bb, dtype, beta=0.5, c=c, **epi)


def test_streamed_packs_match_float64(device, rng, use_entry, fp_dtypes):
    """B packed with streaming stores (NT_PACK_MIN_BYTES 0) for gemm_packed and gemm_slabs:
    batched and shared B, N past a whole panel, outputs poisoned, against float64; the same
    values as plain stores give, bit for bit."""
    for dtype, slabs in itertools.product(fp_dtypes, (False, True)):
        entry = slab_entry(device, dtype, SLAB_B_IN_PLACE=0, B_IN_PLACE_MIN_N=2 ** 40,
                           A_IN_PLACE=0)
        if not slabs:
            entry["packed"]["KC"] = 0
        params = entry["packed"]
        m, n, k = 3 * params["MR"] + 1, 2 * params["NR"] + 5, 2 * params["KB"] + 37
        kernel = "gemm_slabs" if slabs else "gemm_packed"
        for batched_b in (True, False):
            a = random_array(rng, (2, m, k), dtype)
            b = random_array(rng, (2, k, n) if batched_b else (k, n), dtype)
            A, B = put(device, a), put(device, b).expand(2, k, n)
            got = {}
            for nt_min in (0, 2 ** 62):
                use_entry(dict(entry, packed=dict(params, NT_PACK_MIN_BYTES=nt_min)))
                out = poisoned(device, (2, m, n), dtype)
                counts = _kernel_counts(lambda: cltensor.gemm(A, B, out=out))
                assert counts == {"pack_panels": 2, kernel: 1}, counts
                run_check(out, a, np.broadcast_to(b, (2, k, n)), dtype)
                got[nt_min] = out.numpy()
            np.testing.assert_array_equal(got[0], got[2 ** 62])


def test_streamed_c_matches_float64(device, rng, use_entry, fp_dtypes):
    """gemm_packed storing C's whole tiles with streaming stores (NT_PACK_MIN_BYTES 0):
    batched, with biases and ReLU, N past the last whole panel, C dense and offset by a vector
    (both streamed on CPUs) or by one element (not); poisoned, against float64 and bit for bit
    the plain stores' values. streams_c's conditions."""
    for dtype in fp_dtypes:
        entry = slab_entry(device, dtype, KC=0)
        params = entry["packed"]
        mr, nr, vw = params["MR"], params["NR"], params["VW"]
        m, n, k = 3 * mr + 1, 3 * nr + vw, 37
        a, b = random_array(rng, (2, m, k), dtype), random_array(rng, (2, k, n), dtype)
        A, B = put(device, a), put(device, b)
        epi, dev_epi, _ = epilogue_outputs(device, rng, dtype, (2,), m, n)
        for shift in (0, vw, 1):
            got = {}
            for nt_min in (0, 2 ** 62):
                use_entry(dict(entry, packed=dict(params, NT_PACK_MIN_BYTES=nt_min)))
                out = poisoned(device, (2, m, n + shift), dtype)[..., shift:]
                assert _kernel_counts(lambda: cltensor.gemm(A, B, out=out, **dev_epi)).get(
                    "gemm_packed") == 1
                run_check(out, a, b, dtype, **epi)
                got[nt_min] = out.numpy()
            np.testing.assert_array_equal(got[0], got[2 ** 62])
    stream = dict(params, NT_PACK_MIN_BYTES=0)
    c = cltensor.zeros((2, m, n + vw), device=device)

    def streams(view, **over):
        co = gm.Operand(view, list(view.strides[:1]), view.strides[1], view.strides[2])
        p = gm.Problem(device, np.dtype(np.float32), m, n, k, (2,), None, None, None, co)
        return packed.streams_c(p, dict(stream, **over))
    assert streams(c[..., :n]) == streams(c[..., vw:]) == device.is_cpu
    odd_rows = cltensor.zeros((2, m, n + 1), device=device)[..., :n]
    assert not streams(c[..., 1:n + 1]) and not streams(odd_rows)  # vectors off alignment
    assert not streams(c[..., :n], NT_PACK_MIN_BYTES=2 * m * n * 4 + 1)


@pytest.mark.parametrize("kb", [0, 48])
def test_slabs_with_other_blocks(device, rng, use_entry, kb):
    """KB 0 (the slabs are the blocks) and KC 100 rounded up to KB's multiple 144; blocks of
    one tile and of more tiles than the product has; A prefetched or not."""
    for bm, bn, pf in ((1, 1, 0), (64, 64, 256)):
        entry = slab_entry(device, np.float32, KB=kb, KC=100, BM=bm, BN=bn, PF=pf,
                           SLAB_B_IN_PLACE=0)
        use_entry(entry)
        m, n, k = 37, 70, 333
        a, b = random_array(rng, (m, k)), random_array(rng, (k, n))
        out = poisoned(device, (m, n), np.float32)
        counts = _kernel_counts(lambda: cltensor.gemm(put(device, a), put(device, b), out))
        assert counts == {"pack_panels": 2, "gemm_slabs": 1}, counts
        run_check(out, a, b, np.float32)


def test_slabs_read_b_in_place_through_views(device, rng, use_entry):
    """SLAB_B_IN_PLACE on B seen through views: an offset, rows strided past N (a column
    slice), batches strided apart and N = NR exactly read in place (one pack, of A); B with
    columns strided, narrower than NR or stored as 16 bits packed as before (two packs).
    Outputs poisoned, against float64."""
    entry = slab_entry(device, np.float32, SLAB_B_IN_PLACE=1, BM=2, BN=3)
    use_entry(entry)
    nr = entry["packed"]["NR"]
    m, k = 29, 2 * entry["packed"]["KC"] + 9
    wide = random_array(rng, (3, k + 2, 3 * nr + 11))
    cases = {"offset and sliced rows": (wide[1, 2:, 5:5 + 2 * nr + 3], 1),
             "batches strided apart": (wide[:, 1:, 3:3 + nr + 7], 1),
             "N = NR": (wide[0, :k, :nr], 1),
             "columns strided": (wide[0, :k, ::2][:, :nr + 4], 2),
             "N < NR": (wide[0, :k, :nr - 3], 2)}
    dev_wide = put(device, wide)
    for name, (b, packs) in cases.items():
        B = _view_like(dev_wide, wide, b)
        a = random_array(rng, b.shape[:-2] + (m, b.shape[-2]))
        out = poisoned(device, b.shape[:-2] + (m, b.shape[-1]), np.float32)
        counts = _kernel_counts(lambda: cltensor.gemm(put(device, a), B, out))
        assert counts == {"pack_panels": packs, "gemm_slabs": 1}, (name, counts)
        run_check(out, a, b, np.float32)


def _view_like(dev, host, view):
    """The device tensor's view with the host view's shape, strides and offset (in elements)."""
    item = host.itemsize
    offset = (view.__array_interface__["data"][0] - host.__array_interface__["data"][0]) // item
    return dev.as_strided(view.shape, [s // item for s in view.strides], offset)


def test_slabs_keep_long_sums_blocked(device, rng, use_entry):
    """K = 16384 + 37 in slabs: the error of blocked sums, not of one running sum."""
    use_entry(slab_entry(device, np.float32, KC=512))
    a, b = uniform(rng, (3, LONG_K + 37)), uniform(rng, (LONG_K + 37, 40))
    out = poisoned(device, (3, 40), np.float32)
    counts = _kernel_counts(lambda: cltensor.gemm(put(device, a), put(device, b), out))
    assert counts.get("gemm_slabs") == 1, counts
    check_long(out, a, b)


def test_wide_tile_for_few_rows(device, rng, use_entry):
    """WIDE_MAX_M / WIDE_MIN_N: products of at most WIDE_MAX_M rows and at least WIDE_MIN_N
    columns run half MR and twice NR (same area); others, and entries without the fields,
    keep the entry's; the wide tile's result is right (poisoned output, float64 reference)."""
    base = gm.entry_for(device, np.dtype(np.float32))
    params = dict(base["packed"], MR=8, NR=32, VW=16, WIDE_MAX_M=64, WIDE_MIN_N=200)
    t = cltensor.empty(1, device=device)
    opa, opb = gm.Operand(t, [], 40, 1), gm.Operand(t, [], 4096, 1)

    def prob(m, n):
        return gm.Problem(device, np.dtype(np.float32), m, n, 40, (), opa, opb, None, None)
    assert packed.packed_tile(prob(64, 200), params) == (4, 64)
    assert packed.packed_tile(prob(65, 200), params) == (8, 32)
    assert packed.packed_tile(prob(64, 199), params) == (8, 32)
    assert packed.packed_tile(prob(64, 200), base["packed"] | {"WIDE_MAX_M": 0}) != (4, 64)
    use_entry(dict(base, packed=params, min_work=0, min_dim=0))
    a, b = random_array(rng, (37, 40)), random_array(rng, (40, 203))
    out = poisoned(device, (37, 203), np.float32)
    cltensor.gemm(put(device, a), put(device, b), out)
    run_check(out, a, b, np.float32)


def test_slab_rules(device):
    """Slabs for K from SLAB_MIN_K (default 2 KC) and M from SLAB_MIN_M, M, N from SLAB_MIN_MN
    (default 256) and N from SLAB_MIN_N, never for summed batches or without KC; KC rounded up
    to a multiple of KB; neither operand read in place then, but B by slabs of at most
    SLAB_B_IN_PLACE_MAX_M rows."""
    params = {"MR": 8, "NR": 32, "VW": 16, "KB": 64, "KC": 200, "A_IN_PLACE": 1,
              "B_IN_PLACE_MIN_N": 1}
    t = cltensor.empty(1, device=device)  # stands for the operands: their dtype is read
    op = gm.Operand(t, [], 1, 1)
    opb = gm.Operand(t, [], 4096, 1)

    def prob(m, n, k):
        return gm.Problem(device, np.dtype(np.float32), m, n, k, (), op._replace(rs=k), opb,
                          None, None)
    assert packed.packed_slab(prob(256, 256, 400), params) == 256
    assert packed.packed_slab(prob(256, 256, 399), params) == 0
    assert packed.packed_slab(prob(255, 4096, 4096), params) == 0
    assert packed.packed_slab(prob(256, 256, 400), params, summed=True) == 0
    assert packed.packed_slab(prob(4096, 4096, 4096), dict(params, KC=0)) == 0
    assert packed.packed_slab(prob(64, 64, 100), dict(params, SLAB_MIN_K=100,
                                                      SLAB_MIN_MN=64, KB=0)) == 200
    narrow = dict(params, SLAB_MIN_N=1024)  # deep products of fewer columns stay gemm_packed's
    assert packed.packed_slab(prob(4096, 1023, 4096), narrow) == 0
    assert packed.packed_slab(prob(256, 1024, 4096), narrow) == 256
    tall = dict(params, SLAB_MIN_M=4096)  # deep products of fewer rows stay gemm_packed's
    assert packed.packed_slab(prob(4095, 4096, 4096), tall) == 0
    assert packed.packed_slab(prob(4096, 256, 4096), tall) == 256
    deep, shallow = prob(512, 512, 512), prob(512, 512, 300)
    for reads in (packed.packed_reads_a_in_place, packed.packed_reads_b_in_place):
        assert not reads(deep, params) and reads(shallow, params)
        assert reads(deep, params, summed=True)
    # SLAB_B_IN_PLACE: B's slab (KC rows) read where it is unless those rows alias in the L2
    # (16384 bytes apart: 4 sets of 16 ways, 64 rows; 4000 apart: all sets)
    on = dict(params, SLAB_B_IN_PLACE=1)
    assert not packed.slabs_read_b_in_place(deep, params)
    assert not packed.slabs_read_b_in_place(deep, on)
    apart = deep._replace(b=opb._replace(rs=1000))
    assert packed.slabs_read_b_in_place(apart, on)
    assert not packed.slabs_read_b_in_place(apart._replace(b=apart.b._replace(cs=2)), on)
    assert not packed.slabs_read_b_in_place(apart._replace(n=16), on)
    # SLAB_B_IN_PLACE_MAX_M: taller products pack B (its pack costs less than reading it far)
    assert packed.slabs_read_b_in_place(apart, dict(on, SLAB_B_IN_PLACE_MAX_M=apart.m))
    assert not packed.slabs_read_b_in_place(apart, dict(on, SLAB_B_IN_PLACE_MAX_M=apart.m - 1))
    # B's in-place panels spanning more than B_IN_PLACE_MAX_PAGES pages (a page per row from
    # 4 KiB apart, fewer pages for closer rows): packed B, or slabs where slabs read B in place
    pages = packed.B_IN_PLACE_MAX_PAGES
    wide = dict(params, SLAB_MIN_K=2 ** 20, B_IN_PLACE_MAX_K=2 ** 20)
    for rs, deepest in ((1104, pages), (1504, pages), (560, pages * 4096 // 2240)):
        for k, deep in ((deepest, False), (deepest + 2, True)):
            q = prob(256, 1024, k)._replace(b=opb._replace(rs=rs))
            assert packed.packed_reads_b_in_place(q, wide) != deep, (rs, k)
            assert packed.packed_slab(q, wide) == 0
            assert packed.packed_slab(q, dict(wide, SLAB_B_IN_PLACE=1)) == (256 if deep else 0)
            # the deep ones' slabs whatever SLAB_MIN_M says, unless they would pack B too
            assert packed.packed_slab(q, dict(wide, SLAB_B_IN_PLACE=1, SLAB_MIN_M=2 ** 20)) == \
                (256 if deep else 0)
            assert packed.packed_slab(q, dict(wide, SLAB_B_IN_PLACE=1,
                                              SLAB_B_IN_PLACE_MAX_M=255)) == 0
            assert not packed.packed_reads_b_in_place(q, dict(wide, SLAB_B_IN_PLACE=1)) or not deep
    # rows off 64-byte lines: B packed from M = MISALIGNED_PACK_MIN_M on, never slabs for depth
    q = prob(packed.MISALIGNED_PACK_MIN_M, 1024, 3000)._replace(b=opb._replace(rs=1100))
    assert not packed.packed_reads_b_in_place(q, wide)
    assert packed.packed_slab(q, dict(wide, SLAB_B_IN_PLACE=1)) == 0
    assert not packed.packed_reads_b_in_place(q._replace(k=300), wide)
    assert packed.packed_reads_b_in_place(q._replace(m=q.m - 1, k=300), wide)


def test_slab_fields_in_database_defaults_and_tuner():
    """The slab fields pass the schema (bad values named), the shipped entries and the derived
    CPU default set KC a multiple of KB, and the tuner's slab candidates are valid and include
    slabs off."""
    tile = {"MR": 8, "NR": 32, "VW": 16}
    desc = type("Desc", (), {"is_cpu": True, "vector_width": 16})()
    for itemsize in (4, 8):
        p = cpu_gemm(desc, itemsize)["packed"]
        tune.check_value({"packed": p}, tune.GEMM_ENTRY, "entry")
        assert p["KC"] % p["KB"] == 0
    cands = tune.slab_candidates(dict(tile, KB=64))
    assert {"KC": 0} in cands and len(cands) > 2
    for c in cands:
        tune.check_value({"packed": dict(tile, **c)}, tune.GEMM_ENTRY, "entry")
        assert c["KC"] % 64 == 0
    for field, bad in (("KC", -1), ("BM", 0), ("SLAB_WALK_N", 2), ("SLAB_MIN_MN", 1.5),
                       ("PF", -1), ("SLAB_MIN_M", -1), ("SLAB_B_IN_PLACE_MAX_M", "256"),
                       ("NT_PACK_MIN_BYTES", -1)):
        with pytest.raises(ValueError, match=f"entry.packed.{field}"):
            tune.check_value({"packed": dict(tile, **{field: bad})}, tune.GEMM_ENTRY, "entry")
    data = json.loads((tune.DB_DIR / "gemm.json").read_text())
    for vendor in data["gemm_float32"]["vendors"].values():
        for entry in vendor["devices"].values():
            p = entry.get("packed", {})
            assert p.get("KC", 0) % p.get("KB", 64) == 0


def test_tuner_picks_slabs_then_pack_groups(device, monkeypatch):
    """tune_slabs times the slab candidates on a cube twice the tuning size, keeps the tile's
    fields, then times pack_panels' work-groups (PACK_LX) with the winner."""
    def measure(self, entry, shape, label="", layout="KN"):
        p = entry["packed"]
        assert shape == (64, 64, 64) and (p["MR"], p["NR"], p["KB"]) == (8, 32, 64)
        return 1.0 + (p.get("KC") == 512 and p.get("BM") == 16) + (p.get("PACK_LX") == 8)
    monkeypatch.setattr(tune.GemmTuner, "measure", measure)
    tuner = tune.GemmTuner(device, np.float32, 32, 1, log=lambda *a: None)
    got = tuner.tune_slabs({"MR": 8, "NR": 32, "VW": 16, "KB": 64, "KC": 256, "PF": 0})
    assert (got["KC"], got["BM"], got["PACK_LX"]) == (512, 16, 8), got
    tune.check_value({"packed": got}, tune.GEMM_ENTRY, "entry")


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_slabs_on_16_bit_operands(device, use_entry, name):
    """Slabs pack 16-bit operands into float panels, at most half the slabs at a time (here
    3 slabs of K, one launch each), and store C rounded once, as torch does from float32
    sums (within an ulp of the output's scale)."""
    torch = pytest.importorskip("torch")
    use_entry(slab_entry(device, np.float32))
    rng = np.random.default_rng(7)
    ta, tb = (torch.from_numpy(rng.standard_normal(s)).to(getattr(torch, name))
              for s in ((37, 300), (300, 45)))
    a, b = (cltensor.from_numpy(x.float().numpy(), device=device).to(getattr(cltensor, name))
            for x in (ta, tb))
    out = cltensor.full((37, 45), float("nan"), dtype=getattr(cltensor, name), device=device)
    counts = _kernel_counts(lambda: cltensor.matmul(a, b, out=out))
    assert counts == {"pack_panels": 6, "gemm_slabs": 3}, counts
    want = (ta.float() @ tb.float()).to(getattr(torch, name)).float().numpy()
    ulp = 2.0 ** -10 if name == "float16" else 2.0 ** -7
    np.testing.assert_allclose(out.float().numpy(), want, rtol=0, atol=ulp * np.abs(want).max())


def test_tiles_per_item_rule(device):
    """TPI: the entry's tiles per work-item (1 without it), halved until the grid keeps
    MIN_ITEMS_PER_UNIT work-items per compute unit, and to the least power of two covering
    the walk when the walk is shorter."""
    t = cltensor.empty(1, device=device)
    op = gm.Operand(t, [], 1, 1)
    two_units = types.SimpleNamespace(compute_units=2)  # the floor: 2 * MIN_ITEMS_PER_UNIT
    floor = 2 * packed.MIN_ITEMS_PER_UNIT

    def tpi(m, n, walk_n, nbatch=1, **params):
        p = gm.Problem(two_units, np.dtype(np.float32), m, n, 64, (nbatch,) * (nbatch > 1),
                       op, op, None, None)
        return packed.tiles_per_item(p, dict(MR=8, NR=32, VW=16, **params), 8, 32, walk_n)
    assert tpi(8 * 64, 32 * floor, False) == 1
    assert tpi(8 * 64, 32 * floor, False, TPI=8) == 8
    assert tpi(8 * floor, 32 * 64, True, TPI=8) == 8  # walking N: 64 panels, floor rows
    assert tpi(8 * 3, 32 * floor, False, TPI=8) == 4  # a walk of 3 tiles
    assert tpi(8 * 4 * floor, 32, False, TPI=8) == 4  # one column: 4 tiles an item keep the floor
    assert tpi(8 * 4 * floor, 32, False, nbatch=2, TPI=8) == 8  # two batches, twice the items
    assert tpi(8, 32, False, TPI=8) == 1


@pytest.mark.parametrize("tpi", [3, 8])
def test_tiles_per_item_match_float64(device, rng, use_entry, monkeypatch, tpi):
    """Work-items of TPI tiles along either walk, the last one cut by M or N: odd shapes with
    A and B read in place or packed, batched, every epilogue and output layout poisoned with
    NaN, against the float64 bound; the sums equal those of one tile a work-item to the bit
    on CPUs."""
    monkeypatch.setattr(packed, "MIN_ITEMS_PER_UNIT", 0)
    built, get_kernel = [], packed.get_kernel

    def spy(dev, file, name, defines):
        if name == "gemm_packed":
            built.append(defines["TPI"])
        return get_kernel(dev, file, name, defines)
    monkeypatch.setattr(packed, "get_kernel", spy)
    base = gm.entry_for(device, np.dtype(np.float32))
    one = dict(base["packed"], MR=4, NR=16, VW=8, KC=0, TPI=1, A_IN_PLACE=1,
               B_IN_PLACE_MIN_N=16, ORDER=1, WALK_M_FROM_K=2**20)
    m, n = 4 * 7 + 3, 16 * 5 + 9
    for k, walk in ((37, "N"), (70, "M")):
        params = dict(one, WALK_M_FROM_K=2**20 if walk == "N" else 0)
        for b_in_place in (True, False):
            # B packed: walks along N (ORDER 1 below WALK_M_FROM_K); in place: down M
            params = dict(params, B_IN_PLACE_MIN_N=16 if b_in_place else 2**40)
            a, b = random_array(rng, (2, m, k)), random_array(rng, (2, k, n))
            A, B = put(device, a), put(device, b)
            epi, dev_epi, outs = epilogue_outputs(device, rng, np.float32, (2,), m, n)
            use_entry(dict(base, packed=params, min_work=0, min_dim=0, min_m=0))
            ref = poisoned(device, (2, m, n), np.float32)
            cltensor.gemm(A, B, out=ref, **dev_epi)
            use_entry(dict(base, packed=dict(params, TPI=tpi), min_work=0, min_dim=0, min_m=0))
            for name, out in outs.items():
                counts = _kernel_counts(lambda: cltensor.gemm(A, B, out=out, **dev_epi))
                assert counts.get("gemm_packed") == 1, counts
                try:
                    run_check(out, a, b, np.float32, **epi)
                except AssertionError as e:
                    raise AssertionError(f"TPI {tpi} k {k} B in place {b_in_place} {name}: "
                                         f"{e}") from None
            if device.is_cpu:
                np.testing.assert_array_equal(outs["contiguous"].numpy(), ref.numpy())
    assert tpi in built and max(built) == tpi, built  # fewer on a transposed, shorter walk
