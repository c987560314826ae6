/*
 * gemm_pack.cl: copies of GEMM operands into the layouts the fast kernels read, zero-padded so
 * that those kernels need no bounds checks. Prepended with gemm_common.cl.
 *
 * An operand is seen as `rows` x K (rows = M for A, N for B) with element (b, r, k) at
 * src[batch_offset(b) + r * s_r + k * s_k]; any strides, 0 included.
 *
 *   pack_panels  (gemm_cpu.cl's layout) panels of PR rows: dst[b][p][k][i] = X(b, p*PR + i, k),
 *                zero past `rows`. One work-item per (k, panel) writes PR contiguous elements.
 *                Global size (at least K, ceil(rows/PR), batches); dst batch stride d_bs (0: one copy
 *                for a launch of one batch). With KC (gemm_cpu.cl's gemm_slabs) K is cut into
 *                slabs of KC, each holding its panels in turn: element (p, k, i) at
 *                dst[b][s*KC*pad + (p*kc + k - s*KC)*PR + i], s = k / KC, kc = min(KC, K - s*KC),
 *                pad = ceil(rows/PR)*PR (without KC: one slab of K); work-groups along K
 *                must then divide KC.
 *                Built with ROWS_VW (CPUs), for a source of type T whose panel rows are
 *                contiguous (s_r 1: B's rows along N): one work-item per k copies its row into
 *                every panel, in vectors of ROWS_VW (a divisor of PR); global size (at least
 *                K, 1, batches).
 *   pad_copy     (gemm_xgemm.cl's layouts) a 2-d copy into a dense ni_p x nj_p matrix per batch:
 *                dst[b][i][j] = src[batch_offset(b) + i*s_i + j*s_j] for i < ni, j < nj, else 0.
 *                One work-item per element of dst, consecutive work-items along j (coalesced
 *                writes). Global size (round_up(ni_p * nj_p, local), batches).
 *
 *   pack_tf32_slices  (nvidia_wgmma.cl's layout; float only, built when SLICE_K is given) the
 *                operand rounded to TF32 in slices of `width` rows by SLICE_K (8, 16 or 32) of K,
 *                slice t of row block p at dst[b][p][t], each laid out as the wgmma's swizzled
 *                K-major tiles: rows of SLICE_K floats, 16-byte chunk c of row r at chunk
 *                c ^ ((r * SLICE_K / 32) % (SLICE_K / 4)) of the row; zero past `rows` and K.
 *                Rounding: to nearest, ties away from zero (cvt.rna.tf32's), Inf and NaN kept.
 *                One work-item per 16-byte chunk of dst (idle past the last), read as one
 *                16-byte load where the source is K-contiguous and aligned. Global size (at
 *                least the chunks of a batch, 1, batches); dst batch stride d_bs.
 *   pack_half_slices  the same slices of 16-bit operands (nvidia_wgmma.cl with HALF): pairs of
 *                K-consecutive float16 or bfloat16 values per 32-bit word, copied bit for bit.
 *
 * Build options: PR and KC (pack_panels' panel width and slab), ROWS_VW (pack_panels'
 * row-copying form) and NT_STORE (its streaming stores), SLICE_K (pack_tf32_slices');
 * TA, the source's storage type (default T): pack_panels and pad_copy read it through LD and
 * write T, so a 16-bit operand is converted as it is packed.
 */
#ifndef PR
#define PR 16
#endif
#ifndef KC
#define KC 0
#endif

#ifdef ROWS_VW
#define RV_LOAD CL_CAT(vload, ROWS_VW)
#define RV_STORE CL_CAT(vstore, ROWS_VW)
#ifndef NT_STORE
#define NT_STORE 0
#endif
/* NT_STORE 1: the panels' vectors go out as streaming stores (gemm_common.cl's HAS_NT_STORE),
 * and the pack does not evict the caches (the host asks for it on packs too large to stay
 * there). The panels are vector-aligned (PR a multiple of ROWS_VW, buffers aligned to the
 * device's base address alignment). */
#if NT_STORE && HAS_NT_STORE
#define RV_PUT(v, j, d) __builtin_nontemporal_store((v), (__global CL_CAT(T, ROWS_VW)*)(d) + (j))
#else
#define RV_PUT(v, j, d) RV_STORE((v), (j), (d))
#endif
__kernel void pack_panels(const int rows, const int K, BATCH_ARGS, __global const T* src,
                          const View vs, const long s_r, const long s_k, __global T* dst,
                          const long d_bs) {  /* s_r: 1 */
  const int k = get_global_id(0);
  if (k >= K) return;
  const long b = batch0 + get_global_id(2);
  const int s0 = KC ? k / KC * KC : 0;
  const int kc = KC ? min(KC, K - s0) : K;
  const long pad = (long)(rows + PR - 1) / PR * PR;
  __global T* d = dst + b * d_bs + s0 * pad + (long)(k - s0) * PR;
  __global const T* row = src + batch_offset(b, nbd, batch, vs) + (long)k * s_k;
  const int whole = rows / PR;
  for (int p = 0; p < whole; ++p, d += (long)kc * PR, row += PR)
    for (int j = 0; j < PR / ROWS_VW; ++j) RV_PUT(RV_LOAD(j, row), j, d);
  if (whole * PR < rows)
    for (int i = 0; i < PR; ++i) d[i] = whole * PR + i < rows ? row[i] : (T)0;
#if NT_STORE
  NT_FENCE();
#endif
}
#else
__kernel void pack_panels(const int rows, const int K, BATCH_ARGS, __global const TA* src,
                          const View vs, const long s_r, const long s_k, __global T* dst,
                          const long d_bs) {
  const int k = get_global_id(0), p = get_global_id(1);
  if (k >= K) return;
  const long b = batch0 + get_global_id(2);
  const long o = batch_offset(b, nbd, batch, vs) + (long)k * s_k;
  /* NOTE: the slab of the work-group's first k (the host keeps a group within one slab): the
   * same for the whole group, so d stays linear in k and the group's stores vectorize */
  const int s0 = KC ? (int)(get_group_id(0) * get_local_size(0)) / KC * KC : 0;
  const int kc = KC ? min(KC, K - s0) : K;
  const long pad = (long)(rows + PR - 1) / PR * PR;
  __global T* d = dst + b * d_bs + s0 * pad + ((long)p * kc + k - s0) * PR;
  const int r0 = p * PR;
  if (r0 + PR <= rows) {
    for (int i = 0; i < PR; ++i) d[i] = LD(TA, src, o + (long)(r0 + i) * s_r);
  } else {
    for (int i = 0; i < PR; ++i)
      d[i] = r0 + i < rows ? LD(TA, src, o + (long)(r0 + i) * s_r) : (T)0;
  }
}
#endif

__kernel void pad_copy(const int ni, const int nj, const int ni_p, const int nj_p, BATCH_ARGS,
                       __global const TA* src, const View vs, const long s_i, const long s_j,
                       __global T* dst) {
  const long e = get_global_id(0);
  if (e >= (long)ni_p * nj_p) return;
  const long b = batch0 + get_global_id(1);
  const int i = e / nj_p, j = e % nj_p;
  T v = (T)0;
  if (i < ni && j < nj) v = LD(TA, src, batch_offset(b, nbd, batch, vs) + i * s_i + j * s_j);
  dst[b * ni_p * nj_p + e] = v;
}

#ifdef SLICE_K
/* Whether pointer p is 16-byte aligned: a K-contiguous source's chunk is then one 16-byte load
 * (the wgmma's operands, row-major, K a multiple of 8) instead of 4 or 8 scalar ones. */
#define ALIGNED16(p) (((size_t)(p) & 15) == 0)

/* The 16-byte chunk of dst that work-item q of pack_*_slices writes (`per` values of K per
 * chunk, SLICE_K / 4 chunks per row of a slice): its row, and its first k in *k; -1 past the
 * last chunk. */
inline long slice_chunk(const int rows, const int K, const int width, const int per, int* k) {
  const int per_row = SLICE_K / 4, kw = per_row * per, slices = (K + kw - 1) / kw;
  const long q = get_global_id(0), per_slice = width * per_row;
  if (q >= (rows + width - 1) / width * slices * per_slice) return -1;
  const long blk = q / per_slice; /* p * slices + t */
  const int at = q % per_slice, r = at / per_row;
  const int c = at % per_row ^ (r * SLICE_K / 32) % per_row; /* the chunk stored at `at` */
  *k = (int)(blk % slices) * kw + per * c;
  return blk / slices * width + r;
}

__kernel void pack_tf32_slices(const int rows, const int K, const int width, BATCH_ARGS,
                               __global const float* src, const View vs, const long s_r,
                               const long s_k, __global float4* dst, const long d_bs) {
  int k;
  const long row = slice_chunk(rows, K, width, 4, &k);
  if (row < 0) return;
  const long q = get_global_id(0), b = batch0 + get_global_id(2);
  __global const float* x = src + batch_offset(b, nbd, batch, vs) + row * s_r + k * s_k;
  uint4 v = (uint4)(0);
  if (row < rows && s_k == 1 && k + 4 <= K && ALIGNED16(x)) {
    v = as_uint4(*(__global const float4*)x);
  } else if (row < rows) {
    if (k < K) v.s0 = as_uint(x[0]);
    if (k + 1 < K) v.s1 = as_uint(x[s_k]);
    if (k + 2 < K) v.s2 = as_uint(x[2 * s_k]);
    if (k + 3 < K) v.s3 = as_uint(x[3 * s_k]);
  }
  const int4 finite = (v & 0x7f800000u) != 0x7f800000u;
  dst[b * d_bs / 4 + q] = as_float4(select(v, (v + 0x1000u) & 0xffffe000u, finite));
}

/* The 16-bit operands' form of pack_tf32_slices (nvidia_wgmma.cl with HALF): the same slices of
 * SLICE_K 32-bit words per row, each word two K-consecutive values (the lower k in the low half),
 * copied bit for bit from a float16 or bfloat16 source; zero past `rows` and K (K counts 16-bit
 * values). One work-item per 16-byte chunk (8 values) of dst. */
__kernel void pack_half_slices(const int rows, const int K, const int width, BATCH_ARGS,
                               __global const ushort* src, const View vs, const long s_r,
                               const long s_k, __global uint4* dst, const long d_bs) {
  int k;
  const long row = slice_chunk(rows, K, width, 8, &k);
  if (row < 0) return;
  const long q = get_global_id(0), b = batch0 + get_global_id(2);
  __global const ushort* x = src + batch_offset(b, nbd, batch, vs) + row * s_r + k * s_k;
  __global uint4* d = dst + b * d_bs / 4 + q;
#ifdef __ENDIAN_LITTLE__ /* the lower k of each word is then its low half already */
  if (row < rows && s_k == 1 && k + 8 <= K && ALIGNED16(x)) {
    *d = *(__global const uint4*)x;
    return;
  }
#endif
  uint h[8];
  for (int i = 0; i < 8; ++i) h[i] = row < rows && k + i < K ? x[i * s_k] : 0;
  *d = (uint4)(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}
#endif
