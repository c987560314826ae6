/*
 * gemm_rowdot.cl: GEMM for a few rows (a linear layer's x @ W^T at a small batch, on CPUs),
 * where A and B are both K-contiguous. Prepended with gemm_common.cl.
 *
 *   Co[b] = act(alpha * A[b] @ B[b] + beta * Ci[b] + biases)     (epilogue: gemm_common.cl)
 *
 * A[b] is M x K with A[m][k] at A[oa + m*lda + k]; B[b] is K x N with B[k][n] at
 * B[ob + n*ldb + k] (the weight W, N x K, row-major). Such products stream B once and are
 * bound by memory bandwidth; the packed and direct families read B across its rows (direct) or
 * copy it (packed), both several times slower here. Each work-item takes NB columns n (rows
 * of W) and all M rows, runs over K in vectors of VW (M * NB vector accumulators), and adds
 * up the lanes at the end; the last K % VW elements one by one. Global size at least
 * (ceil(N/NB), 1, batches), any local size; row0 must be 0.
 *
 * gemm_rowdot_wg (GPUs): the same product with each work-group of LX work-items on NB
 * columns: work-item t reads vectors t, t + LX, ... of each row (neighbours read neighbouring
 * vectors, so loads coalesce), and the work-group adds its LX partial sums in local memory.
 * One work-item per column would leave a GPU nearly idle at N in the thousands and walk each
 * row of W alone. Global size at least (ceil(N/NB) * LX, 1, batches), local (LX, 1, 1).
 *
 * gemm_rowaxpy (CPUs) and gemm_rowaxpy_wg (GPUs), below: a few rows times a B whose columns are
 * contiguous (a linear layer's input gradient g @ W).
 *
 * Build options: T, TA, TB (gemm_common.cl); MR (= M, the rows, baked so the register tile
 * unrolls); ALIGNED (lda,
 * ldb and every offset are multiples of VW: direct vector loads, faster than vloadN on PoCL).
 * Tunables: NB (columns per work-item or work-group), VW (vector width), LX (gemm_rowdot_wg's
 * work-group size, a power of two).
 */
#ifndef MR
#define MR 1
#endif
#ifndef NB
#define NB 4
#endif
#ifndef VW
#define VW 16
#endif
#ifndef LX
#define LX 128
#endif
#define VT CAT(T, VW)
#ifdef ALIGNED
#define LOADV(X, p) VLDA(X, VW, p)
#else
#define LOADV(X, p) VLD(X, VW, p)
#endif
typedef union { VT v; T s[VW]; } LanesV;

/* acc[i][j] += the products of row i of A and row j of pb over the vectors at k = from,
 * from + step, ... below to (both kernels' main loop: one work-item's share of K). */
__attribute__((always_inline)) inline void rowdot_vectors(
    VT acc[MR][NB], __global const TA* pa, const long lda, __global const TB* const pb[NB],
    const int from, const int to, const int step) {
  for (int k = from; k < to; k += step) {
    VT bv[NB];
#pragma unroll
    for (int j = 0; j < NB; ++j) bv[j] = LOADV(TB, pb[j] + k);
#pragma unroll
    for (int i = 0; i < MR; ++i) {
      const VT av = LOADV(TA, pa + (long)i * lda + k);
#pragma unroll
      for (int j = 0; j < NB; ++j) acc[i][j] += av * bv[j];
    }
  }
}

__kernel void gemm_rowdot(const int M, const int N, const int K, const int row0, BATCH_ARGS,
                          __global const TA* A, const View va, const long lda, const long a_cs,
                          __global const TB* B, const View vb, const long b_rs,
                          const long ldb, EPI_ARGS) {
  const int n0 = get_global_id(0) * NB;
  if (n0 >= N) return;
  const long b = batch0 + get_global_id(2);
  __global const TA* pa = A + batch_offset(b, nbd, batch, va);
  __global const TB* pb[NB];
  const long ob = batch_offset(b, nbd, batch, vb);
#pragma unroll
  for (int j = 0; j < NB; ++j) pb[j] = B + ob + (long)min(n0 + j, N - 1) * ldb;
  VT acc[MR][NB];
  T tail[MR][NB];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      acc[i][j] = (VT)0;
      tail[i][j] = (T)0;
    }
  const int kv = K / VW * VW;
  rowdot_vectors(acc, pa, lda, pb, 0, kv, VW);
  for (int k = kv; k < K; ++k)
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int j = 0; j < NB; ++j) tail[i][j] += LD(TA, pa, (long)i * lda + k) * LD(TB, pb[j], k);

  const long oci = batch_offset(b, nbd, batch, vci);
  const long oco = batch_offset(b, nbd, batch, vco);
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      LanesV u;
      u.v = acc[i][j];
      T s = tail[i][j];
#pragma unroll
      for (int e = 0; e < VW; ++e) s += u.s[e];
      if (n0 + j < N) EPILOGUE(i, n0 + j, s)
    }
}

__kernel __attribute__((reqd_work_group_size(LX, 1, 1)))
void gemm_rowdot_wg(const int M, const int N, const int K, const int row0, BATCH_ARGS,
                    __global const TA* A, const View va, const long lda, const long a_cs,
                    __global const TB* B, const View vb, const long b_rs, const long ldb,
                    EPI_ARGS) {
  __local T part[MR * NB][LX];
  const int t = get_local_id(0);
  const int n0 = (int)(get_global_id(0) / LX) * NB;  /* global ids include launch offsets */
  const long b = batch0 + get_global_id(2);
  __global const TA* pa = A + batch_offset(b, nbd, batch, va);
  const long ob = batch_offset(b, nbd, batch, vb);
  __global const TB* pb[NB];
#pragma unroll
  for (int j = 0; j < NB; ++j) pb[j] = B + ob + (long)min(n0 + j, N - 1) * ldb;
  VT acc[MR][NB];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NB; ++j) acc[i][j] = (VT)0;
  const int kv = K / VW * VW;
  rowdot_vectors(acc, pa, lda, pb, t * VW, kv, LX * VW);
  const int kt = kv + t;  /* the last K % VW (< LX) elements, one per work-item */
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      LanesV u;
      u.v = acc[i][j];
      T s = kt < K ? LD(TA, pa, (long)i * lda + kt) * LD(TB, pb[j], kt) : (T)0;
#pragma unroll
      for (int e = 0; e < VW; ++e) s += u.s[e];
      part[i * NB + j][t] = s;
    }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int width = LX / 2; width > 0; width >>= 1) {
    if (t < width)
      for (int q = 0; q < MR * NB; ++q) part[q][t] += part[q][t + width];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const long oci = batch_offset(b, nbd, batch, vci);
  const long oco = batch_offset(b, nbd, batch, vco);
  for (int q = t; q < MR * NB; q += LX) {
    const int i = q / NB, j = q % NB;
    if (n0 + j < N) EPILOGUE(i, n0 + j, part[q][0])
  }
}

/* gemm_rowaxpy (CPUs): a few rows times a B whose columns are contiguous (a linear layer's
 * input gradient g @ W at a small batch, W N x K row-major read as K x N): B[k][n] at
 * B[ob + k*ldb + n]. Each work-item takes NV vectors of VW consecutive columns and all M rows
 * and walks down K, adding A[m][k] * B[k][n..] into M * NV vector accumulators: B is streamed
 * once, row strip by row strip. Sums run in blocks of KB over K added into second sums (as
 * gemm_packed's), so long K keeps a blocked sum's error. The last work-item's columns past N
 * are loaded from clamped addresses and not stored. Global size at least
 * (ceil(N / (NV * VW)), 1, batches), any local size; row0 must be 0.
 *
 * Build options: T, TA, TB; MR (= M); ALIGNED (ldb, B's offsets and N multiples of VW).
 * Tunables: NV (vectors per work-item), VW (vector width), KB (block of the sums over K).
 */
#ifndef NV
#define NV 2
#endif
#ifndef KB
#define KB 64
#endif

__kernel void gemm_rowaxpy(const int M, const int N, const int K, const int row0, BATCH_ARGS,
                           __global const TA* A, const View va, const long lda, const long a_cs,
                           __global const TB* B, const View vb, const long ldb,
                           const long b_cs, EPI_ARGS) {
  const int n0 = get_global_id(0) * NV * VW;
  if (n0 >= N) return;
  const long b = batch0 + get_global_id(2);
  __global const TA* pa = A + batch_offset(b, nbd, batch, va);
  __global const TB* pb = B + batch_offset(b, nbd, batch, vb);
  int col[NV];
#pragma unroll
  for (int j = 0; j < NV; ++j) col[j] = min(n0 + j * VW, N - VW);  /* N >= VW: see the runner */
  VT acc[MR][NV], part[MR][NV];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NV; ++j) acc[i][j] = (VT)0;
  for (int k0 = 0; k0 < K; k0 += KB) {
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int j = 0; j < NV; ++j) part[i][j] = (VT)0;
    const int k1 = min(k0 + KB, K);
    for (int k = k0; k < k1; ++k) {
      __global const TB* row = pb + (long)k * ldb;
      VT bv[NV];
#pragma unroll
      for (int j = 0; j < NV; ++j) bv[j] = LOADV(TB, row + col[j]);
#pragma unroll
      for (int i = 0; i < MR; ++i) {
        const T a = LD(TA, pa, (long)i * lda + (long)k * a_cs);
#pragma unroll
        for (int j = 0; j < NV; ++j) part[i][j] += a * bv[j];
      }
    }
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int j = 0; j < NV; ++j) acc[i][j] += part[i][j];
  }
  const long oci = batch_offset(b, nbd, batch, vci);
  const long oco = batch_offset(b, nbd, batch, vco);
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NV; ++j) {
      LanesV u;
      u.v = acc[i][j];
      /* a clamped vector's lanes below n0 + j * VW belong to another vector: skipped */
      const int skip = n0 + j * VW - col[j];
#pragma unroll
      for (int e = 0; e < VW; ++e)
        if (e >= skip && col[j] + e < N) EPILOGUE(i, col[j] + e, u.s[e])
    }
}

/* gemm_rowaxpy_wg (GPUs): gemm_rowaxpy's product by work-groups of LX x KS work-items, each
 * group on LX * VW consecutive columns: work-item (t, s) takes the VW columns at t * VW
 * (neighbours read neighbouring vectors of a row: loads coalesce) in the rows k = s, s + KS, ...
 * (KS rows of B in flight per column strip), with blocked sums as gemm_rowaxpy's (blocks of KB
 * of its rows), and the KS sums of each column are added in local memory in the order of s.
 * One work-item per strip down the whole of K, as on CPUs, left a GPU's memory system nearly
 * idle. Global size (ceil(N / (LX * VW)) * LX, KS, batches), local (LX, KS, 1); N >= VW;
 * local memory KS * MR * LX vectors. Built when KS is given (the host sizes KS so that the
 * sums fit: a build for the other kernels must not hold them). Tunables: LX, KS (power of two
 * or not), VW, KB.
 */
#ifdef KS
#define ROWAXPY_UNROLL 4 /* rows loaded before their multiply-adds: loads in flight */

__kernel __attribute__((reqd_work_group_size(LX, KS, 1)))
void gemm_rowaxpy_wg(const int M, const int N, const int K, const int row0, BATCH_ARGS,
                     __global const TA* A, const View va, const long lda, const long a_cs,
                     __global const TB* B, const View vb, const long ldb, const long b_cs,
                     EPI_ARGS) {
  __local VT sums[KS][MR][LX];
  const int t = get_local_id(0), s = get_local_id(1);
  const int n0 = (int)(get_global_id(0) / LX) * (LX * VW) + t * VW;
  const long b = batch0 + get_global_id(2);
  __global const TA* pa = A + batch_offset(b, nbd, batch, va);
  const int col = min(n0, N - VW); /* past N: the last whole vector, computed and not stored */
  __global const TB* pb = B + batch_offset(b, nbd, batch, vb) + col;
  VT acc[MR], part[MR];
#pragma unroll
  for (int i = 0; i < MR; ++i) acc[i] = (VT)0;
  for (int k0 = 0; k0 < K; k0 += KB * KS) {
#pragma unroll
    for (int i = 0; i < MR; ++i) part[i] = (VT)0;
    const int k1 = min(k0 + KB * KS, K);
    int k = k0 + s;
    for (; k + (ROWAXPY_UNROLL - 1) * KS < k1; k += ROWAXPY_UNROLL * KS) {
      VT bv[ROWAXPY_UNROLL];
#pragma unroll
      for (int u = 0; u < ROWAXPY_UNROLL; ++u) bv[u] = LOADV(TB, pb + (long)(k + u * KS) * ldb);
#pragma unroll
      for (int u = 0; u < ROWAXPY_UNROLL; ++u)
#pragma unroll
        for (int i = 0; i < MR; ++i)
          part[i] += LD(TA, pa, (long)i * lda + (long)(k + u * KS) * a_cs) * bv[u];
    }
    for (; k < k1; k += KS) {
      const VT bv = LOADV(TB, pb + (long)k * ldb);
#pragma unroll
      for (int i = 0; i < MR; ++i) part[i] += LD(TA, pa, (long)i * lda + (long)k * a_cs) * bv;
    }
#pragma unroll
    for (int i = 0; i < MR; ++i) acc[i] += part[i];
  }
#pragma unroll
  for (int i = 0; i < MR; ++i) sums[s][i][t] = acc[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (s != 0 || n0 >= N) return;
  const long oci = batch_offset(b, nbd, batch, vci);
  const long oco = batch_offset(b, nbd, batch, vco);
  const int skip = n0 - col; /* a clamped vector's lanes below n0 belong to another work-item */
#pragma unroll
  for (int i = 0; i < MR; ++i) {
    LanesV u;
    u.v = sums[0][i][t];
    for (int r = 1; r < KS; ++r) u.v += sums[r][i][t];
#pragma unroll
    for (int e = 0; e < VW; ++e)
      if (e >= skip && col + e < N) EPILOGUE(i, col + e, u.s[e])
  }
}
#endif
