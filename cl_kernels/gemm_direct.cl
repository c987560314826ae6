/*
 * gemm_direct.cl: bounds-checked GEMM straight from strided operands (family 3: small and odd
 * sizes, integer dtypes, any layout; no packing or padding copies).
 *
 *   Co[b] = act(alpha * A[b] @ B[b] + beta * Ci[b] + biases)     (epilogue: gemm_common.cl)
 *
 * A[b] is M x K, B[b] is K x N, Ci[b] and Co[b] are M x N. Element (b, r, c) of operand X lives
 * at X[batch_offset(b, vx) + r * x_rs + c * x_cs], so transposed, step-sliced, offset and
 * expanded views need no copy. Rows start at row0 (the host splits launches whose work-group
 * counts a device would refuse). K == 0 gives Co = act(beta * Ci + biases). Accumulation is in T;
 * A and B are read as TA and TB (gemm_common.cl).
 * Prepended with gemm_common.cl.
 *
 * Kernels (same arguments; gemm_tiled adds two load-order flags):
 *   gemm_direct  no local memory, no barriers (for CPUs). Each work-item computes a TM x TN
 *                block of C in a register tile (vectors of VW along N when B's rows are
 *                contiguous); a block cut by the edge of C runs a plain loop over what is left.
 *                Global size at least (ceil(N/TN), ceil(M/TM), batches), any local size.
 *   gemm_tiled   for GPUs. A work-group of exactly (TSN/WPTN, TSM/WPTM) work-items computes a
 *                TSM x TSN block of C, staging TSK-deep slices of A and B in local memory
 *                (TSK*(TSM+TSN+2) elements); each work-item keeps a WPTM x WPTN register tile,
 *                its rows and columns strided by the work-group's extent. Global size
 *                (ceil(N/TSN)*TSN/WPTN, ceil(M/TSM)*TSM/WPTM, batches).
 *
 * Build options:
 *   B_UNIT_N     B's column stride is 1 (gemm_direct then loads B as vectors)
 *   B_ALIGNED    with B_UNIT_N: B's offsets and row strides are multiples of VW, so vector loads
 *                are aligned (direct vector access, faster than vloadN on PoCL)
 * Tunables (defaults below; the parameter database, cltensor/tuning/gemm.json, sets them):
 *   TM, TN, VW                  gemm_direct's block per work-item and vector width (VW divides TN)
 *   TSM, TSN, TSK, WPTM, WPTN   gemm_tiled's tile of C, K-slice depth and register tile
 */
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 32
#endif
#ifndef VW
#define VW 16
#endif
#ifndef TSM
#define TSM 64
#endif
#ifndef TSN
#define TSN 64
#endif
#ifndef TSK
#define TSK 16
#endif
#ifndef WPTM
#define WPTM 4
#endif
#ifndef WPTN
#define WPTN 4
#endif
#define RTSM (TSM / WPTM) /* work-group extent along rows (dim 1) */
#define RTSN (TSN / WPTN) /* work-group extent along columns (dim 0) */

#ifdef B_UNIT_N
#define B_CS 1
#else
#define B_CS b_cs
#endif

#define DIRECT_ARGS                                                           \
  const int M, const int N, const int K, const int row0, BATCH_ARGS,          \
      __global const TA* A, const View va, const long a_rs, const long a_cs,  \
      __global const TB* B, const View vb, const long b_rs, const long b_cs, EPI_ARGS

#define OFFSETS(b)                                       \
  const long oa = batch_offset(b, nbd, batch, va);     \
  const long ob = batch_offset(b, nbd, batch, vb);     \
  const long oci = batch_offset(b, nbd, batch, vci);   \
  const long oco = batch_offset(b, nbd, batch, vco);

#if defined(B_UNIT_N) && VW > 1
#define VT CAT(T, VW)
#define VSTORE CAT(vstore, VW)
#ifdef B_ALIGNED
#define LOAD_B(bk, j) VLDA(TB, VW, (bk) + (j) * VW)
#else
#define LOAD_B(bk, j) VLD(TB, VW, (bk) + (j) * VW)
#endif
/* A full block when B's rows are contiguous: TN / VW vectors per row of the block. */
inline void block_full(__global const TA* pa, const long a_rs, const long a_cs,
                       __global const TB* pb, const long b_rs, const long b_cs, const int K,
                       T acc[TM][TN]) {
  VT v[TM][TN / VW];
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN / VW; ++j) v[i][j] = (VT)0;
  for (int k = 0; k < K; ++k) {
    VT bv[TN / VW];
    __global const TB* bk = pb + (long)k * b_rs;
    for (int j = 0; j < TN / VW; ++j) bv[j] = LOAD_B(bk, j);
    __global const TA* ak = pa + (long)k * a_cs;
    for (int i = 0; i < TM; ++i) {
      const T a = LD(TA, ak, i * a_rs);
      for (int j = 0; j < TN / VW; ++j) v[i][j] += a * bv[j];
    }
  }
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN / VW; ++j) VSTORE(v[i][j], j, acc[i]);
}
#else
/* A full block through any strides: scalar loads, a TM x TN register tile. */
inline void block_full(__global const TA* pa, const long a_rs, const long a_cs,
                       __global const TB* pb, const long b_rs, const long b_cs, const int K,
                       T acc[TM][TN]) {
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) acc[i][j] = 0;
  for (int k = 0; k < K; ++k) {
    T av[TM], bv[TN];
    __global const TA* ak = pa + (long)k * a_cs;
    __global const TB* bk = pb + (long)k * b_rs;
    for (int i = 0; i < TM; ++i) av[i] = LD(TA, ak, i * a_rs);
    for (int j = 0; j < TN; ++j) bv[j] = LD(TB, bk, j * B_CS);
    for (int i = 0; i < TM; ++i)
      for (int j = 0; j < TN; ++j) acc[i][j] += av[i] * bv[j];
  }
}
#endif

__kernel void gemm_direct(DIRECT_ARGS) {
  const int n0 = get_global_id(0) * TN;
  const int m0 = row0 + get_global_id(1) * TM;
  if (n0 >= N || m0 >= M) return;
  OFFSETS(batch0 + get_global_id(2))
  __global const TA* pa = A + oa + (long)m0 * a_rs;
  __global const TB* pb = B + ob + (long)n0 * B_CS;

  if (m0 + TM <= M && n0 + TN <= N) {
    T acc[TM][TN];
    block_full(pa, a_rs, a_cs, pb, b_rs, b_cs, K, acc);
    for (int i = 0; i < TM; ++i)
      for (int j = 0; j < TN; ++j) EPILOGUE(m0 + i, n0 + j, acc[i][j])
    return;
  }
  /* An edge block (all blocks of a thin product, such as mv): one row at a time, loops
   * bounded by what is left, so no work is spent on columns or rows past the edge. */
  const int rows = min(TM, M - m0), cols = min(TN, N - n0);
  for (int i = 0; i < rows; ++i) {
    T s[TN];
    for (int j = 0; j < TN; ++j) s[j] = 0;
    __global const TA* ai = pa + (long)i * a_rs;
    for (int k = 0; k < K; ++k) {
      const T a = LD(TA, ai, (long)k * a_cs);
      __global const TB* bk = pb + (long)k * b_rs;
      for (int j = 0; j < cols; ++j) s[j] += a * LD(TB, bk, j * B_CS);
    }
    for (int j = 0; j < cols; ++j) EPILOGUE(m0 + i, n0 + j, s[j])
  }
}

__kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1)))
void gemm_tiled(DIRECT_ARGS, const int a_k_fast, const int b_n_fast) {
  /* +1 column of padding: loads that walk down a column of a tile hit distinct banks */
  __local T As[TSK][TSM + 1];
  __local T Bs[TSK][TSN + 1];
  const int tx = get_local_id(0), ty = get_local_id(1);
  const int tid = ty * RTSN + tx;
  const int mt = row0 + get_group_id(1) * TSM;
  const int nt = get_group_id(0) * TSN;
  OFFSETS(batch0 + get_global_id(2))

  T acc[WPTM][WPTN];
  for (int i = 0; i < WPTM; ++i)
    for (int j = 0; j < WPTN; ++j) acc[i][j] = 0;

  for (int k0 = 0; k0 < K; k0 += TSK) {
    /* Consecutive work-items load consecutive addresses when the flag says which index of
     * the operand has the smaller stride; out-of-range elements load as 0. */
    for (int l = tid; l < TSK * TSM; l += RTSM * RTSN) {
      const int kk = a_k_fast ? l % TSK : l / TSM;
      const int mm = a_k_fast ? l / TSK : l % TSM;
      const int m = mt + mm, k = k0 + kk;
      As[kk][mm] = (m < M && k < K) ? LD(TA, A, oa + (long)m * a_rs + (long)k * a_cs) : (T)0;
    }
    for (int l = tid; l < TSK * TSN; l += RTSM * RTSN) {
      const int kk = b_n_fast ? l / TSN : l % TSK;
      const int nn = b_n_fast ? l % TSN : l / TSK;
      const int n = nt + nn, k = k0 + kk;
      Bs[kk][nn] = (n < N && k < K) ? LD(TB, B, ob + (long)k * b_rs + (long)n * b_cs) : (T)0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < TSK; ++kk) {
      T bv[WPTN];
      for (int j = 0; j < WPTN; ++j) bv[j] = Bs[kk][tx + j * RTSN];
      for (int i = 0; i < WPTM; ++i) {
        const T a = As[kk][ty + i * RTSM];
        for (int j = 0; j < WPTN; ++j) acc[i][j] += a * bv[j];
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  for (int i = 0; i < WPTM; ++i) {
    const int m = mt + ty + i * RTSM;
    for (int j = 0; j < WPTN; ++j) {
      const int n = nt + tx + j * RTSN;
      if (m < M && n < N) EPILOGUE(m, n, acc[i][j])
    }
  }
}
