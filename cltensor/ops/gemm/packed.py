"""The packed family of CPUs: gemm_cpu.cl:gemm_packed over panels that gemm_pack.cl packs,
each operand read in place where its layout allows."""
import math

import numpy as np

from ... import dtypes as dt
from ...program import launch, round_up
from ...tensor import ClTensor
from .. import elementwise as ew
from . import kit
from .kit import get_kernel, launch_tiles, pack_defines, scratch, storage_defines


# pack_panels' work-group along K, unless the entry's PACK_LX says otherwise. NOTE: Intel's
# runtime packs faster in groups of 8 (it vectorizes across the group's work-items: 256 x
# 6272 x 1152's slabs of B 15 ms in groups of 16-128, 4.8 in 8); PoCL slower below 16
PACK_LOCAL = 16
# pack_panels' row-copying form on CPUs: panel rows contiguous in the source move ROWS_VW at a
# time, one work-item per step of K into every panel. PoCL, B of 256 x 1352 x 3456 packed:
# 3.2 -> 1.5 ms (Intel's runtime 2.8 -> 1.25; a contiguous copy of it 0.98)
ROWS_VW = 16
# packs of at least this many bytes stream their panels past the caches (NT_STORE), unless the
# entry's NT_PACK_MIN_BYTES says otherwise: faster from 12.5 MB on both CPU runtimes, slower
# on PoCL at 2.7 and 7.2 MB, which its caches hold (docs/performance.md)
NT_PACK_MIN_BYTES = 8 << 20


def _nt_min(params):
    """The least bytes of a pack or an output that streaming stores write (the entry's
    NT_PACK_MIN_BYTES, else NT_PACK_MIN_BYTES)."""
    return params.get("NT_PACK_MIN_BYTES", NT_PACK_MIN_BYTES)


def panel_dtype(p, op):
    """The dtype of op's packed panels: a 16-bit operand's own (its panels hold its bits, and
    gemm_cpu.cl converts them as it loads them: half the bytes of float panels), else p's."""
    return op.t.dtype if op.t.dtype in dt.HALF_TYPES and p.dtype == dt.float32 else p.dtype


def _pack_panels(p, op, rows, rs, ks, width, kc=0, lx=PACK_LOCAL, computed=False,
                 nt_min=NT_PACK_MIN_BYTES):
    """op as panels of `width` rows (gemm_pack.cl), in slabs of kc steps of K when kc is set
    (gemm_slabs), one copy when every batch shares it, in work-groups of lx along K; returns
    (scratch tensor, its batch stride). 16-bit operands keep their dtype (panel_dtype) unless
    `computed` asks for p's. Row-copying packs of at least nt_min bytes use streaming stores."""
    shared = not any(op.bstrides)
    nb = 1 if shared else p.nbatch
    size = -(-rows // width) * p.k * width
    dtype = p.dtype if computed else panel_dtype(p, op)
    # NOTE: 16-bit panels are packed as their bits (ushort), which copies them exactly
    defines = pack_defines(p, op) if dtype == p.dtype else {"T": "ushort"}
    dst = ClTensor.empty_on((nb * size,), dtype, p.device)
    defines = dict(defines, PR=width, **({"KC": kc} if kc else {}))
    panels = -(-rows // width)
    if rs == 1 and "TA" not in defines and width % ROWS_VW == 0 and p.device.is_cpu:
        defines, panels = dict(defines, ROWS_VW=ROWS_VW), 1  # a row of K a work-item
        if dst.nbytes >= nt_min:
            defines["NT_STORE"] = 1
    kernel = get_kernel(p.device, "gemm_pack.cl", "pack_panels", defines)
    lx = min(lx, p.device.max_work_group)
    if kc:
        lx = math.gcd(lx, kc)  # a work-group within one slab (gemm_pack.cl)
    bshape = () if shared else p.bshape
    for b0 in range(0, nb, kit.MAX_GROUPS):
        gsize = (round_up(p.k, lx), panels, min(kit.MAX_GROUPS, nb - b0))
        launch(p.device, kernel, gsize, (lx, 1, 1), np.int32(rows), np.int32(p.k),
               np.int64(b0), np.int32(len(bshape)), ew.shape_arg(bshape), op.t.storage.buf,
               ew.view_arg(op.t.offset, op.bstrides), np.int64(rs), np.int64(ks),
               dst.storage.buf, np.int64(0 if shared else size))
    return dst, 0 if shared else size


def packed_walks_n(p, params):
    """Whether gemm_packed's consecutive work-items walk along N (ORDER 1: they share A's panel
    and write C's rows in order) rather than down M (ORDER 0: they share B's panel, each
    streaming its own A panel of MR x K). Products with K of at least WALK_M_FROM_K walk down
    M whatever ORDER says (gemm.json: the PoCL measurements)."""
    return params.get("ORDER", 0) == 1 and p.k < params.get("WALK_M_FROM_K", 2**62)


# B read in place streams panels of NR columns down rows row_bytes apart; their cache lines fall
# in L2_SPAN / gcd(row_bytes, L2_SPAN) of the L2's sets (at most L2_SETS), which hold L2_WAYS
# rows each, and a panel deeper than that evicts itself. The model is a 1 MiB 16-way L2 (x86
# cores since Skylake-SP and Zen 2). PoCL, 2 AVX-512 cores, in place against packed: rows 4 KiB
# apart (16 sets, 256 rows) 2048^3 107 vs 91 ms, CPU ms 1024^3 16.7 vs 10.7, K = 512 level
# (hence gemm_packed's floor ALIASED_MIN_K); 256 x 3200 x 2400 (rows 12800 bytes apart: 128
# sets, 2048 rows) 0.87-0.96x on both runtimes, 256 x 6272 x 1152 (2048 rows) 1.06-1.20x
L2_SETS, L2_WAYS, L2_SPAN = 1024, 16, 65536
ALIASED_MIN_K = 1024


def _aliased(p, depth):
    """Whether B's in-place panels, `depth` rows deep, outgrow the L2 sets their rows map to."""
    row_bytes = p.b.rs * p.b.t.dtype.itemsize
    sets = min(L2_SETS, L2_SPAN // math.gcd(row_bytes, L2_SPAN))
    return depth > sets * L2_WAYS


# A panel of B read in place touches a page per row once rows lie a page or more apart, and
# past the data TLB's reach (with A's and C's pages) every row is a page walk. PoCL, 2 Zen 4
# cores (4 KiB pages, 3072-entry L2 TLB), 256 x N x K, GFLOP/s, B in place against packed B
# or slabs: N 1352 K 2048 171 vs 173, 2304 161 vs 165, 2560 146 vs 171, 3456 116 vs 164
# (Intel's runtime 91 vs 176); N 1568 K 2304 192 vs 177; N 3200 K 2560 164 vs 193 (slabs)
PAGE_BYTES, B_IN_PLACE_MAX_PAGES = 4096, 2304


def _deep(p):
    """Whether B's in-place panels, K rows deep, span more pages than B_IN_PLACE_MAX_PAGES."""
    row_bytes = p.b.rs * p.b.t.dtype.itemsize
    return p.b.cs == 1 and -(-p.k * min(row_bytes, PAGE_BYTES) // PAGE_BYTES) > B_IN_PLACE_MAX_PAGES


# B's rows off cache lines (row bytes not a multiple of LINE_BYTES) put a panel's NR columns
# across one more line every other row; from M = MISALIGNED_PACK_MIN_M on the pack is
# cheaper. PoCL, GFLOP/s, in place vs packed B: 256 x N x 1728 at N 1344 (aligned) 189 vs
# 179, 1352 188 vs 201, 1360 (aligned) 200 vs 197; 384 x 1352 x 1728 168 vs 189, 192 x 5832 x
# 1600 166 vs 177, 256 x 1352 x 3456 165 (slabs) vs 196; but 128 x 24200 x 363 149 vs 100.
# Intel's runtime: 192 x 5832 x 1600 124 vs 171, 256 x 1352 x 2304 101 vs 188
LINE_BYTES, MISALIGNED_PACK_MIN_M = 64, 192


def _misaligned(p):
    """Whether B's rows are off cache lines and M is large enough to pack B instead."""
    return p.b.rs * p.b.t.dtype.itemsize % LINE_BYTES != 0 and p.m >= MISALIGNED_PACK_MIN_M


def packed_slab(p, params, summed=False):
    """gemm_slabs' KC for a product, or 0 where gemm_packed runs it: with KC set, K of at least
    SLAB_MIN_K (default 2 * KC) and M of at least SLAB_MIN_M, or any K where the slabs read B
    in place and gemm_packed's B, its rows on cache lines, would be _deep; M and N of at least
    SLAB_MIN_MN (default 256: narrower, one operand's panels are few and gemm_packed reads
    the other once), N of at least SLAB_MIN_N (gemm.json: on both CPU runtimes gemm_packed ran
    deep products of up to about 1024 columns faster) and C not summed over batches. KC is
    rounded up to a multiple of KB, so that the blocked sums stay gemm_packed's (gemm_cpu.cl).
    NOTE: deep B on PoCL, GFLOP/s, slabs vs gemm_packed on packed B (the pack copying rows):
    256 x 3200 x 2400 200 vs 193, 256 x 6272 x 2560 198 vs 192. SLAB_MIN_M: with B packed,
    whole-K panels beat the slabs except on the largest products (docs/tuning.md)"""
    kc, kb = params.get("KC", 0), params.get("KB", 0)
    deep = (_deep(p) and not _misaligned(p) and _slabs_may_read_b_in_place(p, params))
    shallow = p.k < params.get("SLAB_MIN_K", 2 * kc) or p.m < params.get("SLAB_MIN_M", 0)
    if (not kc or summed or (shallow and not deep) or
            min(p.m, p.n) < params.get("SLAB_MIN_MN", 256) or
            p.n < params.get("SLAB_MIN_N", 0)):
        return 0
    return -(-kc // kb) * kb if kb else kc


def _slabs_may_read_b_in_place(p, params):
    """SLAB_B_IN_PLACE set, B's dtype the computed one (16-bit B is packed into float slabs)
    and M at most SLAB_B_IN_PLACE_MAX_M. NOTE: reading B in place costs every tile a little
    (its slab's rows far apart) where the pack costs B's size once, so from a few hundred rows
    on the pack is cheaper (docs/tuning.md)."""
    return (bool(params.get("SLAB_B_IN_PLACE")) and p.b.t.dtype == p.dtype and
            p.m <= params.get("SLAB_B_IN_PLACE_MAX_M", 2**62))


def slabs_read_b_in_place(p, params):
    """Whether gemm_slabs reads B where it is instead of packing it (_slabs_may_read_b_in_place):
    rows contiguous along N, at least NR columns and a slab of rows that does not alias
    (_aliased, KC rows deep). NOTE: the pack is a read and a write of all of B; on the
    convolutions' wide products (N in the thousands, M a few hundred) it took a fifth to a
    third of the product's time (docs/performance.md)."""
    return (_slabs_may_read_b_in_place(p, params) and p.b.cs == 1 and p.n >= params["NR"] and
            not _aliased(p, packed_slab(p, params)))


def packed_reads_b_in_place(p, params, summed=False):
    """Whether gemm_packed reads B where it is (rows contiguous along N) instead of from packed
    panels: from N = B_IN_PLACE_MIN_N columns on (gemm.json: on PoCL the pack, a full memory
    pass, cost as much as the product on the convolutions' shallow batched products; narrower
    B spends too much of its panels in the partial last one) and below K = B_IN_PLACE_MAX_K,
    unless from K = ALIASED_MIN_K on its rows alias (_aliased) or its panels are _deep, or its
    rows are off cache lines (_misaligned), or it is _tall. A 16-bit B read in place is
    converted as it is loaded (B_CONVERTS)."""
    unfit = p.k >= ALIASED_MIN_K and (_aliased(p, p.k) or _deep(p))
    return (p.b.cs == 1 and p.n >= params.get("B_IN_PLACE_MIN_N", 2**62) and not unfit and
            not _misaligned(p) and not _tall(p, params) and
            p.k < params.get("B_IN_PLACE_MAX_K", 2**62) and not packed_slab(p, params, summed))


def _tall(p, params):
    """Whether a product has more than B_IN_PLACE_MAX_M rows, K of at least TALL_PACK_MIN_K
    and a B whose pack would stream (NT_PACK_MIN_BYTES): reading B in place costs each tile a
    little, more the deeper its panel, where the pack costs B's size once. A B the caches hold
    costs the tiles nothing, and its pack an extra launch (docs/tuning.md)."""
    nbytes = p.k * p.n * p.dtype.itemsize * (p.nbatch if any(p.b.bstrides) else 1)
    return (p.m > params.get("B_IN_PLACE_MAX_M", 2**62) and p.k >= TALL_PACK_MIN_K and
            nbytes >= _nt_min(params))


# _tall's least K: PoCL, kernel ms with packs, B in place / packed, 512x1568x2304 18.00 /
# 17.25; level at K = 1152 (256x3136x1152 9.26 / 9.21, 256x6272x1152 18.02 / 18.10)
TALL_PACK_MIN_K = 2048


# float16 A is read in place from this K on, else packed into 16-bit panels. NOTE: in place,
# gemm_cpu.cl converts 16 columns of its MR rows at a time (and the last K % 16 one by one);
# PoCL, ms, interleaved medians of 15, in place vs panels: 288x8192x64 0.86 vs 1.42,
# 1152x3136x128 4.35 vs 6.69, 864x784x208 1.64 vs 2.05, 256^3 0.20 vs 0.24, 64x64 @
# 16x64x256 0.31 vs 0.34, 333x77x300 0.20 vs 0.21; but 32x27 @ 8x27x4096 1.04 vs 0.84
FLOAT16_A_IN_PLACE_MIN_K = 64


def packed_reads_a_in_place(p, params, summed=False):
    """Whether gemm_packed reads A where it is (rows contiguous along K, A_IN_PLACE set; never
    in slabs, which read packed operands); float16 A from K = FLOAT16_A_IN_PLACE_MIN_K on.
    NOTE: float16's conversion of MR scalars per step of K doubled the kernel's time (PoCL,
    2 AVX-512 cores, 512^3 in ms, medians of 7 interleaved: float32 1.1, bfloat16 in place
    1.6, float16 in place 5.2, packed as float 2.6), so gemm_cpu.cl converts 16 steps at once;
    bfloat16's is a shift. Packed float16 panels stay 16-bit (panel_dtype) and convert a
    panel's MR values as one vector."""
    return (bool(params.get("A_IN_PLACE")) and (p.a.cs == 1 or p.k == 1) and
            (p.a.t.dtype != dt.float16 or p.k >= FLOAT16_A_IN_PLACE_MIN_K) and
            not packed_slab(p, params, summed))


def _packed_operand(p, op, in_place, ld, rows, rs, ks, width, params, kc=0, computed=False):
    """[buffer, batch stride, View, leading dim] of an operand as gemm_packed and gemm_slabs
    read it: where it is (its View and leading dim), or packed into panels of `width` rows
    (in slabs of kc, as _pack_panels)."""
    if in_place:
        return [op.t.storage.buf, np.int64(0), ew.view_arg(op.t.offset, op.bstrides),
                np.int64(ld)]
    t, bs = _pack_panels(p, op, rows, rs, ks, width, kc, params.get("PACK_LX", PACK_LOCAL),
                         computed, _nt_min(params))
    return [t.storage.buf, np.int64(bs), ew.view_arg(0, [0] * len(p.bshape)), np.int64(0)]


def moves(p, params, summed=False):
    """Elements gemm_packed moves one at a time for a problem: those it packs into panels (what
    it cannot read in place) and those it stores per element (C not row-contiguous).
    NOTE: gemm_into runs the transposed problem when that moves fewer: with both operands
    K-contiguous (1x1 weight gradients, x @ W^T) the smaller one is packed. PoCL, 2 AVX-512
    cores, kernel ms with packs, interleaved medians: 64x512x1568 (GoogLeNet 4b/pool's weight
    gradient) 1.58 -> 1.10, 32x256x6272 2.15 -> 1.08, x @ W^T at batch 64 (64x4096x9216)
    84.9 -> 31.9; counting packs alone, 1x1 input gradients (832x49x48 x8, A shared) were
    transposed for a column-strided C and lost (0.31 -> 0.44 ms)."""
    count = 0 if p.co.cs == 1 else p.m * p.n * p.nbatch
    b_in_place = (slabs_read_b_in_place(p, params) if packed_slab(p, params, summed) else
                  packed_reads_b_in_place(p, params, summed))
    for op, rows, in_place in ((p.a, p.m, packed_reads_a_in_place(p, params, summed)),
                               (p.b, p.n, b_in_place)):
        if not in_place:
            count += rows * p.k * (p.nbatch if any(op.bstrides) else 1)
    return count


def packed_nr(p, params):
    """gemm_packed's NR for a problem: the entry's, or half of it when N fits in half (and VW
    divides it). NOTE: a narrow product fills half the lanes of a full-width tile. PoCL, 2
    AVX-512 cores, 2026-12-01, ms with packs, medians of 7 interleaved rounds, NR 32 vs 16:
    GoogLeNet's 1x1 weight gradients with 16 outputs (run transposed) 192x16x6272 0.61 vs 0.39
    (numpy 0.56 on the same operands) and 480x16x1568 0.41 vs 0.28, 1000x8x512 0.31 vs 0.24,
    192x16x256 level; at N = 24 (two panels) 16 lost (0.73 vs 0.93)."""
    nr = params["NR"]
    if p.n <= nr // 2 and (nr // 2) % params["VW"] == 0:
        return nr // 2
    return nr


def packed_tile(p, params):
    """gemm_packed's (MR, NR) for a problem: packed_nr's, or the tile of the same area at half
    MR and twice NR for products of at most WIDE_MAX_M rows and at least WIDE_MIN_N columns.
    NOTE: few rows with B read in place: a wider tile reads more of each row of B per visit.
    GFLOP/s, 8x32 vs 4x64, PoCL / Intel's runtime, medians of 5: 64x24200x363 126 vs 152 /
    122 vs 135, 128x25088x576 141 vs 186 / 173 vs 171, 64x100352x147 135 vs 138 / 127 vs 131,
    96x6272x192 207 vs 211 / 200 vs 195; narrower, the wide tile lost (48x392x832 203 vs 191 /
    197 vs 180)."""
    mr, vw = params["MR"], params["VW"]
    if (p.m <= params.get("WIDE_MAX_M", 0) and p.n >= params.get("WIDE_MIN_N", 2**62) and
            mr % 2 == 0 and (2 * params["NR"]) % vw == 0):
        return mr // 2, 2 * params["NR"]
    return mr, packed_nr(p, params)


# Work-items per compute unit that tiles_per_item leaves at least (when the grid has them)
MIN_ITEMS_PER_UNIT = 8


def tiles_per_item(p, params, mr, nr, walk_n, summed=False):
    """gemm_packed's TPI: how many consecutive tiles along the walk (dim 0) one work-item
    computes, the entry's TPI (default 1) halved until the grid keeps MIN_ITEMS_PER_UNIT
    work-items per compute unit. NOTE: fewer, longer work-items cost the runtimes' schedulers
    less and keep the walk's shared panel in one core's cache; PoCL and Intel's runtime, 2 Zen 4
    cores, TPI 8 against 1, GFLOP per CPU second 0 to 11% more on every shape tried, wall time
    of 1024^3 on PoCL 124 -> 179 GFLOP/s (docs/performance.md)."""
    tpi = params.get("TPI", 1)
    along = -(-p.n // nr) if walk_n else -(-p.m // mr)
    batches = p.nbatch // p.bshape[0] if summed else p.nbatch
    across = (-(-p.m // mr) if walk_n else -(-p.n // nr)) * batches
    floor = MIN_ITEMS_PER_UNIT * p.device.compute_units
    while tpi > 1 and (tpi >= 2 * along or -(-along // tpi) * across < floor):
        tpi //= 2
    return tpi


def run_packed(p, entry, epi, summed=False):
    """gemm_packed on p; summed: C is the sum over the first batch dim (gemm_sum_into)."""
    params = entry["packed"]
    mr, nr = packed_tile(p, params)
    a_in_place = packed_reads_a_in_place(p, params, summed)
    b_in_place = packed_reads_b_in_place(p, params, summed)
    kc = packed_slab(p, params, summed)
    tile = {"MR": mr, "NR": nr, "VW": params["VW"],
            **(storage_defines(p) if kc else
               storage_defines(p, p.a.t.dtype if a_in_place else panel_dtype(p, p.a),
                               p.b.t.dtype if b_in_place else panel_dtype(p, p.b)))}
    for op in "AB":  # a 16-bit operand (in place or in panels), converted as loaded
        if "T" + op in tile:
            tile[op + "_CONVERTS"] = 1
    if "KB" in params:  # else gemm_cpu.cl's default block of K
        tile["KB"] = params["KB"]
    if kc:
        return _run_slabs(p, params, epi, dict(tile, KC=kc), kc)
    # NOTE: B read in place walks down M, so that its panel (K rows far apart) is read from
    # memory once for all of M; walking N streamed all of B once per panel of A (PoCL, gemm.json)
    walk_n = packed_walks_n(p, params) and not b_in_place
    tpi = tiles_per_item(p, params, mr, nr, walk_n, summed)
    tile.update(A_INPLACE=int(a_in_place), B_INPLACE=int(b_in_place), TPI=tpi)
    if summed:
        tile["SUM_BATCHES"] = 1
    if streams_c(p, params):
        tile["C_NT"] = 1
    kernel = get_kernel(p.device, "gemm_cpu.cl", "gemm_packed", tile)
    a_args = _packed_operand(p, p.a, a_in_place, p.a.rs, p.m, p.a.rs, p.a.cs, mr, params)
    b_args = _packed_operand(p, p.b, b_in_place, p.b.rs, p.n, p.b.cs, p.b.rs, nr, params)
    tail = a_args + b_args + [np.int32(walk_n)] + epi
    launch_tiles(p, kernel, mr, -(-p.n // nr), (1, 1, 1), p.k, tail, rows_in_dim0=not walk_n,
                  summed=summed, per_item=tpi)


def streams_c(p, params):
    """Whether gemm_packed stores C's whole tiles with streaming stores (C_NT): on a CPU, a C
    of at least NT_PACK_MIN_BYTES stored in the compute type, its offset, row stride and batch
    strides multiples of the vector width and its buffer aligned to the vector (the device's
    base address alignment). PoCL and Intel's runtime, 2 Zen 4 cores: 64 x 100352 x 147 (C 26
    MB) 13-16% faster, 128 x 25088 x 576 (13 MB) 4-8% (docs/performance.md)."""
    co, vw, size = p.co, params["VW"], p.dtype.itemsize
    return (p.device.is_cpu and co.cs == 1 and co.t.dtype == p.dtype and
            not any(v % vw for v in (co.t.offset, co.rs, *co.bstrides)) and
            p.device.cl_device.mem_base_addr_align >= 8 * vw * size and
            p.m * p.n * p.nbatch * size >= _nt_min(params))


def _run_slabs(p, params, epi, tile, kc):
    """gemm_slabs on p: both operands packed in slabs of kc, each work-item a block of BM x BN
    tiles, A's panels prefetched PF elements ahead; the tiles' sums between slabs in a scratch
    of C's padded size per batch."""
    mr, nr = tile["MR"], tile["NR"]
    bm, bn = params.get("BM", 16), params.get("BN", 8)
    # NOTE: prefetching is a CPU instruction; NVIDIA's compiler refuses __builtin_prefetch of
    # a __global pointer, so other devices build gemm_slabs without it
    tile.update(BM=bm, BN=bn, PF=params.get("PF", 0) if p.device.is_cpu else 0)
    lx = params.get("PACK_LX", PACK_LOCAL)
    part_size = -(-p.m // mr) * mr * -(-p.n // nr) * nr
    part = scratch(p, p.nbatch * part_size)
    walk_n = params.get("SLAB_WALK_N", 0)
    # NOTE: 16-bit operands are packed into float panels at most half their slabs at a time
    # (no more bytes than whole 16-bit panels), each run of slabs a launch, where gemm_slabs
    # reading 16-bit panels ran 6 to 13% slower (PoCL, 1024^3 and 2048x1024x1024, float16
    # and bfloat16; one launch per slab cost 512x2048x512 8%)
    b_in_place = slabs_read_b_in_place(p, params)
    tile["B_INPLACE"] = int(b_in_place)
    kernel = get_kernel(p.device, "gemm_cpu.cl", "gemm_slabs", tile)
    half = any(panel_dtype(p, op) != p.dtype for op in (p.a, p.b))
    step = kc * max(1, -(-p.k // kc) // 2) if half else p.k
    for k0 in range(0, p.k, step):
        ps = _k_range(p, k0, min(step, p.k - k0)) if half else p
        a, a_bs = _pack_panels(ps, ps.a, p.m, p.a.rs, p.a.cs, mr, kc, lx, True,
                               _nt_min(params))
        b_args = _packed_operand(ps, ps.b, b_in_place, ps.b.rs, p.n, p.b.cs, p.b.rs, nr, params,
                                 kc, computed=True)
        tail = [a.storage.buf, np.int64(a_bs), *b_args, part.storage.buf,
                np.int64(part_size // tile["VW"]), np.int32(walk_n), np.int32(k0 > 0),
                np.int32(k0 + ps.k == p.k)] + epi
        launch_tiles(ps, kernel, mr * bm, -(-p.n // (nr * bn)), (1, 1, 1), ps.k, tail,
                     rows_in_dim0=not walk_n)
        del a, b_args, tail  # the packs go back to the pool before the next slab's are made


def _k_range(p, k0, kk):
    """p over steps k0 .. k0 + kk of K (its operands' views moved along K)."""
    def moved(op, step):
        t = op.t
        return op._replace(t=ClTensor(t.storage, t.shape, t.strides, t.offset + k0 * step,
                                      t.dtype))
    return p._replace(k=kk, a=moved(p.a, p.a.cs), b=moved(p.b, p.b.rs))
