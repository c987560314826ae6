/*
 * gemm_cpu.cl: GEMM for CPU devices (family 2), over operands packed by gemm_pack.cl's
 * pack_panels. Prepended with gemm_common.cl.
 *
 *   Co[b] = act(alpha * A[b] @ B[b] + beta * Ci[b] + biases)     (epilogue: gemm_common.cl)
 *
 * Layout: Ap holds panels of MR rows of A, Ap[b][p][k][i] = A[b][p*MR + i][k]; Bp panels of NR
 * columns of B, Bp[b][q][k][j] = B[b][k][q*NR + j]; both zero past M and N, batch strides
 * ap_bs and bp_bs (0: shared by every batch). Ci and Co are strided views as in gemm_direct.cl.
 *
 * One work-item computes one MR x NR tile of C in registers (MR * NR / VW vectors of T: 28
 * AVX-512 registers for 14 x 32 floats) over the whole of K: per k one row of B's panel as
 * NR / VW vector loads, MR scalars of A's panel, MR * NR / VW vector multiply-adds. No local
 * memory and no barriers; local size (1, 1, 1) (PoCL then runs one work-item per work-group
 * with no work-item loop). Plain `s += a * b` on vectors and direct vector loads: PoCL 3.0
 * compiles fma() and vloadN to out-of-line calls. Rows start at row0 (a multiple of MR).
 * Global size (ceil(M/MR), ceil(N/NR), batches), or dims 0 and 1 swapped when walk_n is 1:
 * consecutive work-items then walk along N (sharing A's panel), else down M (sharing B's).
 *
 * Tunables (the parameter database, cltensor/tuning/gemm.json, sets them):
 *   MR, NR   the register tile; VW, the vector width, divides NR
 */
#ifndef MR
#define MR 14
#endif
#ifndef NR
#define NR 32
#endif
#ifndef VW
#define VW 16
#endif
#define NV (NR / VW)
#define VT CAT(T, VW)

typedef union { VT v; T s[VW]; } Lanes;

__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void gemm_packed(const int M, const int N, const int K, const int row0, BATCH_ARGS,
                 __global const T* Ap, const long ap_bs, __global const T* Bp, const long bp_bs,
                 const int walk_n, EPI_ARGS) {
  const int g0 = get_global_id(0), g1 = get_global_id(1);
  const int pm = row0 / MR + (walk_n ? g1 : g0), pn = walk_n ? g0 : g1;
  const long b = batch0 + get_global_id(2);
  __global const T* a = Ap + b * ap_bs + (long)pm * K * MR;
  __global const VT* bp = (__global const VT*)(Bp + b * bp_bs + (long)pn * K * NR);

  VT acc[MR][NV];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NV; ++j) acc[i][j] = (VT)0;
  for (int k = 0; k < K; ++k) {
    VT bv[NV];
#pragma unroll
    for (int j = 0; j < NV; ++j) bv[j] = bp[j];
#pragma unroll
    for (int i = 0; i < MR; ++i) {
      const T av = a[i];
#pragma unroll
      for (int j = 0; j < NV; ++j) acc[i][j] += av * bv[j];
    }
    a += MR;
    bp += NV;
  }

  const long oci = batch_offset(b, nbd, batch, vci);
  const long oco = batch_offset(b, nbd, batch, vco);
  const int m0 = pm * MR, n0 = pn * NR;
  const int rows = min(MR, M - m0), cols = min(NR, N - n0);
  /* NOTE: acc is copied out with constant indices first; indexing it with the run-time bounds
   * below would make the compiler keep the whole register tile in memory. */
  Lanes out[MR][NV];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NV; ++j) out[i][j].v = acc[i][j];
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) EPILOGUE(m0 + i, n0 + j, out[i][j / VW].s[j % VW])
}
