/*
 * gemm_xgemm.cl: GEMM for GPUs (family 1), in the manner of CLBlast's xgemm. Prepended with
 * gemm_common.cl.
 *
 *   Co[b] = act(alpha * A[b] @ B[b] + beta * Ci[b] + biases)     (epilogue: gemm_common.cl)
 *
 * A work-group of NDIMC x MDIMC work-items computes an MWG x NWG tile of C. Per KWG-deep slice
 * of K it copies the slice of A (KWG x MWG) and of B (KWG x NWG) into local memory, with vector
 * loads of VWA / VWB elements along each operand's contiguous dim, and each work-item multiplies
 * its MWI x NWI register tile (MWI = MWG/MDIMC, NWI = NWG/NDIMC) from vectors of VWM / VWN
 * elements read out of local memory. With NBUF 2 the next slice is loaded into registers while
 * the current one is multiplied, and stored into the other of two local buffers (one barrier
 * per slice); with NBUF 1 one buffer and two barriers per slice.
 *
 * Layout (the host packs operands that do not fit into zero-padded copies, gemm_pack.cl):
 *   A: element (m, k) at A[oa + k*lda + m] (A_KC 0: M contiguous) or A[oa + m*lda + k] (A_KC 1)
 *   B: element (k, n) at B[ob + k*ldb + n] (B_KC 0: N contiguous) or B[ob + n*ldb + k] (B_KC 1)
 *   with oa, ob the batch offsets of the Views; lda, ldb and every offset multiples of VWA / VWB;
 *   A readable for round_up(M, MWG) rows and B for round_up(N, NWG) columns, unless ATAIL /
 *   BTAIL (then M and N multiples of VWA / VWB where the vectors run along them). K need not be a
 *   multiple of KWG (KTAIL 1): an operand whose vectors run along M or N (A_KC / B_KC 0) then
 *   reads its rows from K on as zeros, and a K-contiguous one must be readable (zero) up to
 *   round_up(K, KWG). C is stored through its strides with bounds checks, rows from row0;
 *   whole tiles of row-contiguous C aligned to VWN elements with vector stores (without Ci).
 *   Global size (ceil(N/NWG)*NDIMC, ceil(M/MWG)*MDIMC, batches*splits), local size
 *   (NDIMC, MDIMC, 1). Local memory: NBUF * KWG * (MWG + PADA + NWG + PADB) elements of T.
 *
 * Split K (for products with too few tiles to fill the device): with splits > 1, work-group z
 * of dim 2 multiplies batch z / splits over its share z % splits of the K slices and stores
 * the raw sums, part[z][m][n] (dense M x N); xgemm_reduce then adds the splits' sums and
 * applies the epilogue. Global size of xgemm_reduce (round_up(M*N, local), batches).
 *
 * Tunables (the parameter database, cltensor/tuning/gemm.json, and the tuner set them):
 *   MWG, NWG, KWG    work-group tile; MDIMC, NDIMC: work-group shape (MDIMC*NDIMC work-items)
 *   VWM, VWN         vector widths of the local-memory reads (divide MWI and NWI)
 *   STRM, STRN       1: a work-item's vectors are strided by the work-group's extent
 *                    (neighbours read neighbouring vectors); 0: they are contiguous
 *   PADA, PADB       local-memory padding per row (multiples of VWM and VWN)
 *   NBUF             1 or 2 local buffers
 *   GROUP_M          tiles run in bands of GROUP_M tile rows (gemm_common.cl's tile_of)
 *   VWA, VWB         vector widths of the global loads (KWG*MWG/VWA and KWG*NWG/VWB are
 *                    multiples of MDIMC*NDIMC); set by the host from the operands' alignment
 *   A_KC, B_KC       the operands' layouts, above (set by the host)
 *   KTAIL            1 when K is no multiple of KWG (set by the host)
 *   ATAIL, BTAIL     1 when A / B is read in place and M / N is no multiple of MWG / NWG
 *                    (set by the host): rows past M / N read as zeros
 *   XGEMM_MMA        1: the multiply of xgemm_mma.cl (tensor cores; conv kernels only)
 *   MMA_HALF         with XGEMM_MMA: 0 TF32 products, 1 float16, 2 bfloat16 (xgemm_mma.cl)
 *   TA, TB           the operands' storage types (gemm_common.cl): 16-bit ones are converted
 *                    to T as a slice is stored into local memory, so the local slices hold T
 */
#ifndef MWG
#define MWG 64
#endif
#ifndef NWG
#define NWG 64
#endif
#ifndef KWG
#define KWG 16
#endif
#ifndef MDIMC
#define MDIMC 16
#endif
#ifndef NDIMC
#define NDIMC 16
#endif
#ifndef VWM
#define VWM 4
#endif
#ifndef VWN
#define VWN 4
#endif
#ifndef STRM
#define STRM 1
#endif
#ifndef STRN
#define STRN 1
#endif
#ifndef PADA
#define PADA 0
#endif
#ifndef PADB
#define PADB 0
#endif
#ifndef NBUF
#define NBUF 2
#endif
#ifndef GROUP_M
#define GROUP_M 1
#endif
#ifndef VWA
#define VWA 4
#endif
#ifndef VWB
#define VWB 4
#endif
#ifndef KTAIL
#define KTAIL 0
#endif
#ifndef XGEMM_MMA
#define XGEMM_MMA 0
#endif
#ifndef MMA_HALF
#define MMA_HALF 0
#endif
#ifndef ATAIL
#define ATAIL 0
#endif
#ifndef BTAIL
#define BTAIL 0
#endif
#ifndef A_KC
#define A_KC 1
#endif
#ifndef B_KC
#define B_KC 0
#endif

#define MWI (MWG / MDIMC)
#define NWI (NWG / NDIMC)
#define WGS (MDIMC * NDIMC)
#define LDA (MWG + PADA) /* row length of A's slice in local memory */
#define LDB (NWG + PADB)
#define NLA (KWG * MWG / VWA / WGS) /* global vector loads per work-item and slice */
#define NLB (KWG * NWG / VWB / WGS)

#define VEC(w) VEC_I(w) /* not CAT: VEC_4 itself expands through CAT */
#define VEC_I(w) VEC_##w
#define VEC_1 T
#define VEC_2 CAT(T, 2)
#define VEC_4 CAT(T, 4)
#define VEC_8 CAT(T, 8)
#define VEC_16 CAT(T, 16)
#define VTM VEC(VWM)
#define VTN VEC(VWN)
#define VTA VEC(VWA)
#define VTB VEC(VWB)
typedef union { VTM v; T s[VWM]; } LanesM;
typedef union { VTN v; T s[VWN]; } LanesN;
typedef union { VTA v; T s[VWA]; } LanesA;
typedef union { VTB v; T s[VWB]; } LanesB;
/* A slice's values wait in registers between its global loads and its local stores as the
 * operands' storage bits (RTA, RTB: ushort lanes for 16-bit types), converted to T as they are
 * stored: a conversion right after a load would hold a GPU's warp there until the value came,
 * before its next load issued (NVIDIA: bfloat16 cx_wgrad took 1.7-2.5x float32's time).
 * A_VALUE(l) / B_VALUE(l): register vector l's values (a kernel may redefine them, to mask). */
#define RTA VTYPE(BITS_OF(TA), VWA)
#define RTB VTYPE(BITS_OF(TB), VWB)
#define LDR(X, W, p) (*(__global const VTYPE(BITS_OF(X), W)*)(p)) /* aligned to W elements */
#define A_VALUE(l) CAT(CVT_, TA)(VWA, ra[l])
#define B_VALUE(l) CAT(CVT_, TB)(VWB, rb[l])

/* The first element (in local memory) of a work-item's i-th vector of rows / j-th of columns */
#if STRM
#define ROW(i) (((i) * MDIMC + tm) * VWM)
#else
#define ROW(i) ((tm * (MWI / VWM) + (i)) * VWM)
#endif
#if STRN
#define COL(j) (((j) * NDIMC + tn) * VWN)
#else
#define COL(j) ((tn * (NWI / VWN) + (j)) * VWN)
#endif

/* Vector v of a slice: its row (from the tile's origin) and K index (from k0), and where it
 * is in global memory (pa, pb: the tile's origin in A and B). */
#define A_ROW(v) (A_KC ? (v) / (KWG / VWA) : ((v) % (MWG / VWA)) * VWA)
#define A_K(v) (A_KC ? ((v) % (KWG / VWA)) * VWA : (v) / (MWG / VWA))
#define B_ROW(v) (B_KC ? (v) / (KWG / VWB) : ((v) % (NWG / VWB)) * VWB)
#define B_K(v) (B_KC ? ((v) % (KWG / VWB)) * VWB : (v) / (NWG / VWB))
#define A_AT(v) (pa + (A_KC ? (long)A_ROW(v) * lda + k0 + A_K(v)                            \
                            : (long)(k0 + A_K(v)) * lda + A_ROW(v)))
#define B_AT(v) (pb + (B_KC ? (long)B_ROW(v) * ldb + k0 + B_K(v)                            \
                            : (long)(k0 + B_K(v)) * ldb + B_ROW(v)))
/* Whether vector v is read (else zeros): with KTAIL, rows k0 + K index from k_end on of an
 * operand with vectors along M / N are not; with ATAIL / BTAIL, rows from m_left / n_left
 * (M and N counted from the tile's origin) are not. */
#define A_OK(v) ((!ATAIL || A_ROW(v) < m_left) && (!KTAIL || A_KC || k0 + A_K(v) < k_end))
#define B_OK(v) ((!BTAIL || B_ROW(v) < n_left) && (!KTAIL || B_KC || k0 + B_K(v) < k_end))
/* Global -> registers: slice k0 of A and of B, as storage bits. */
inline void load_slice(__global const TA* pa, const long lda, __global const TB* pb,
                       const long ldb, const int k0, const int k_end, const int m_left,
                       const int n_left, const int tid, RTA* ra, RTB* rb) {
#pragma unroll
  for (int l = 0; l < NLA; ++l) {
    const int v = l * WGS + tid;
    ra[l] = A_OK(v) ? LDR(TA, VWA, A_AT(v)) : (RTA)0;
  }
#pragma unroll
  for (int l = 0; l < NLB; ++l) {
    const int v = l * WGS + tid;
    rb[l] = B_OK(v) ? LDR(TB, VWB, B_AT(v)) : (RTB)0;
  }
}

/* How a value is stored into local memory: as it is, or with XGEMM_MMA's TF32 products
 * (xgemm_mma.cl, the tensor-core multiply) rounded to TF32 (half a TF32 unit added; the
 * tensor cores drop the low 13 bits). 16-bit products (MMA_HALF) take the exact values. */
#if XGEMM_MMA && !MMA_HALF
#define TO_LOCAL(x) as_float(as_uint(x) + 0x1000u)
#else
#define TO_LOCAL(x) (x)
#endif

/* Registers (ra, rb of the work-item tid) -> local memory as T, transposing K-contiguous
 * operands into K-major rows. */
#if A_KC
#define A_LANE_AT(mm, kk, e) (((kk) + (e)) * LDA + (mm))
#else
#define A_LANE_AT(mm, kk, e) ((kk) * LDA + (mm) + (e))
#endif
#if B_KC
#define B_LANE_AT(nn, kk, e) (((kk) + (e)) * LDB + (nn))
#else
#define B_LANE_AT(nn, kk, e) ((kk) * LDB + (nn) + (e))
#endif
#define STORE_A(as)                                                                        \
  _Pragma("unroll") for (int l = 0; l < NLA; ++l) {                                        \
    const int v = l * WGS + tid;                                                           \
    LanesA u;                                                                              \
    u.v = A_VALUE(l);                                                                      \
    _Pragma("unroll") for (int e = 0; e < VWA; ++e)                                        \
        (as)[A_LANE_AT(A_ROW(v), A_K(v), e)] = TO_LOCAL(u.s[e]);                          \
  }
#define STORE_B(bs)                                                                        \
  _Pragma("unroll") for (int l = 0; l < NLB; ++l) {                                        \
    const int v = l * WGS + tid;                                                           \
    LanesB u;                                                                              \
    u.v = B_VALUE(l);                                                                      \
    _Pragma("unroll") for (int e = 0; e < VWB; ++e)                                        \
        (bs)[B_LANE_AT(B_ROW(v), B_K(v), e)] = TO_LOCAL(u.s[e]);                          \
  }

/* acc += the slice in local memory (as, bs), for work-item (tn, tm). */
inline void multiply_slice(__local const T* as, __local const T* bs, const int tm, const int tn,
                           VTN acc[MWI][NWI / VWN]) {
#pragma unroll
  for (int kk = 0; kk < KWG; ++kk) {
    VTN bv[NWI / VWN];
#pragma unroll
    for (int j = 0; j < NWI / VWN; ++j) bv[j] = *(__local const VTN*)(bs + kk * LDB + COL(j));
#pragma unroll
    for (int i = 0; i < MWI / VWM; ++i) {
      LanesM a;
      a.v = *(__local const VTM*)(as + kk * LDA + ROW(i));
#pragma unroll
      for (int e = 0; e < VWM; ++e)
#pragma unroll
        for (int j = 0; j < NWI / VWN; ++j) acc[i * VWM + e][j] += a.s[e] * bv[j];
    }
  }
}

/* Split s of `splits` (split K): its share of nslices slices, [*t0, *t0 + the count returned). */
inline int split_share(const int nslices, const int splits, const int s, int* t0) {
  const int share = (nslices + splits - 1) / splits;
  *t0 = s * share;
  return max(0, min(nslices, *t0 + share) - *t0);
}

/* The K loop over `slices` slices, shared with conv_xgemm.cl: LOAD(t) fills the registers
 * ra, rb with slice t (global -> registers); the slices go through local memory (a_slices,
 * b_slices) into the accumulators acc of work-item (tm, tn), by XGEMM_MULTIPLY (xgemm_mma.cl
 * replaces it). */
#define XGEMM_MULTIPLY(as, bs) multiply_slice(as, bs, tm, tn, acc)
#if NBUF == 2
#define XGEMM_K_LOOP(slices, LOAD)                                                         \
  if ((slices) > 0) LOAD(0);                                                               \
  STORE_A((__local T*)a_slices[0]);                                                        \
  STORE_B((__local T*)b_slices[0]);                                                        \
  barrier(CLK_LOCAL_MEM_FENCE);                                                            \
  for (int t = 0; t < (slices); ++t) {                                                     \
    const int cur = t & 1;                                                                 \
    if (t + 1 < (slices)) LOAD(t + 1);                                                     \
    XGEMM_MULTIPLY((__local T*)a_slices[cur], (__local T*)b_slices[cur]);                 \
    if (t + 1 < (slices)) {                                                                \
      STORE_A((__local T*)a_slices[cur ^ 1]);                                              \
      STORE_B((__local T*)b_slices[cur ^ 1]);                                              \
    }                                                                                      \
    barrier(CLK_LOCAL_MEM_FENCE);                                                          \
  }
#else
#define XGEMM_K_LOOP(slices, LOAD)                                                         \
  if ((slices) > 0) LOAD(0);                                                               \
  for (int t = 0; t < (slices); ++t) {                                                     \
    STORE_A((__local T*)a_slices[0]);                                                      \
    STORE_B((__local T*)b_slices[0]);                                                      \
    barrier(CLK_LOCAL_MEM_FENCE);                                                          \
    if (t + 1 < (slices)) LOAD(t + 1);                                                     \
    XGEMM_MULTIPLY((__local T*)a_slices[0], (__local T*)b_slices[0]);                     \
    barrier(CLK_LOCAL_MEM_FENCE);                                                          \
  }
#endif

/* STORE(m, n, v) for each accumulator v of the work-item: row m, column n of the product
 * (m0, n0: the work-group tile's origin). */
#define XGEMM_FOR_EACH_RESULT(STORE)                                                       \
  _Pragma("unroll") for (int i = 0; i < MWI / VWM; ++i)                                    \
  _Pragma("unroll") for (int e = 0; e < VWM; ++e)                                          \
  _Pragma("unroll") for (int j = 0; j < NWI / VWN; ++j) {                                  \
    LanesN c_;                                                                             \
    c_.v = acc[i * VWM + e][j];                                                            \
    _Pragma("unroll") for (int f = 0; f < VWN; ++f)                                        \
        STORE(m0 + ROW(i) + e, n0 + COL(j) + f, c_.s[f])                                   \
  }

/* STORE(m, n, v) for each accumulator vector v: row m, columns n .. n + VWN - 1. */
#define XGEMM_FOR_EACH_VECTOR(STORE)                                                       \
  _Pragma("unroll") for (int i = 0; i < MWI / VWM; ++i)                                    \
  _Pragma("unroll") for (int e = 0; e < VWM; ++e)                                          \
  _Pragma("unroll") for (int j = 0; j < NWI / VWN; ++j)                                    \
      STORE(m0 + ROW(i) + e, n0 + COL(j), acc[i * VWM + e][j])

/* The epilogue on VWN columns at once (EPILOGUE's, without Ci), one aligned vector store. */
#define XGEMM_STORE_VECTOR(m, n, x) EPILOGUE_VECTOR(VTN, LanesN, VWN, VTN, m, n, x)

/* XGEMM_STORE_VECTOR where the tile ends inside C: rows from M on are skipped, and a vector
 * that N cuts is stored lane by lane. */
#define XGEMM_STORE_EDGE(m, n, x)                                                          \
  if ((m) < M) {                                                                           \
    if ((n) + VWN <= N) {                                                                  \
      XGEMM_STORE_VECTOR(m, n, x)                                                          \
    } else {                                                                               \
      LanesN l_;                                                                           \
      l_.v = (x);                                                                          \
      _Pragma("unroll") for (int f = 0; f < VWN; ++f)                                      \
          if ((n) + f < N) EPILOGUE(m, (n) + f, l_.s[f])                                   \
    }                                                                                      \
  }

/* The work-group's local slices, its work-item's place and its zeroed accumulators. */
#define XGEMM_PROLOGUE                                                                     \
  __local VTM a_slices[NBUF][KWG * LDA / VWM]; /* vector-typed: aligned for vector reads */ \
  __local VTN b_slices[NBUF][KWG * LDB / VWN];                                             \
  const int tn = get_local_id(0), tm = get_local_id(1), tid = tm * NDIMC + tn;            \
  VTN acc[MWI][NWI / VWN];                                                                 \
  _Pragma("unroll") for (int i = 0; i < MWI; ++i)                                          \
  _Pragma("unroll") for (int j = 0; j < NWI / VWN; ++j) acc[i][j] = (VTN)0;

#ifndef XGEMM_ENGINE_ONLY
__kernel __attribute__((reqd_work_group_size(NDIMC, MDIMC, 1)))
void xgemm(const int M, const int N, const int K, const int row0, BATCH_ARGS,
           __global const TA* A, const View va, const long lda,
           __global const TB* B, const View vb, const long ldb, const int splits,
           __global T* part, EPI_ARGS) {
  XGEMM_PROLOGUE
  int tile_m, tile_n;
  tile_of(GROUP_M, &tile_m, &tile_n);
  const int m0 = row0 + tile_m * MWG, n0 = tile_n * NWG;
  const long z = batch0 + get_global_id(2), b = z / splits;
  __global const TA* pa = A + batch_offset(b, nbd, batch, va) + (long)m0 * (A_KC ? lda : 1);
  __global const TB* pb = B + batch_offset(b, nbd, batch, vb) + (long)n0 * (B_KC ? ldb : 1);

  RTA ra[NLA];
  RTB rb[NLB];
  int t0;
  const int slices = split_share((K + KWG - 1) / KWG, splits, (int)(z % splits), &t0);
  pa += (long)t0 * KWG * (A_KC ? 1 : lda);
  pb += (long)t0 * KWG * (B_KC ? 1 : ldb);
#define LOAD_AB(t) \
  load_slice(pa, lda, pb, ldb, (t) * KWG, K - t0 * KWG, M - m0, N - n0, tid, ra, rb)
  XGEMM_K_LOOP(slices, LOAD_AB)

  const long oci = batch_offset(b, nbd, batch, vci);
  const long oco = batch_offset(b, nbd, batch, vco);
  __global T* pz = part + z * M * N;
#define XGEMM_STORE(m, n, v)                                                               \
  if ((m) < M && (n) < N) {                                                                \
    if (splits > 1)                                                                        \
      pz[(long)(m) * N + (n)] = (v);                                                       \
    else                                                                                   \
      EPILOGUE(m, n, v)                                                                    \
  }
  /* An unsplit product into row-contiguous C aligned to VWN, without Ci: one vector store per
   * accumulator vector (products with small K are bound by their stores); in a tile that
   * ends inside C, per vector inside it (XGEMM_STORE_EDGE). */
  if (splits == 1 && beta == (T)0 && co_cs == 1 && oco % VWN == 0 && co_rs % VWN == 0) {
    if (m0 + MWG <= M && n0 + NWG <= N) {
      XGEMM_FOR_EACH_VECTOR(XGEMM_STORE_VECTOR)
    } else {
      XGEMM_FOR_EACH_VECTOR(XGEMM_STORE_EDGE)
    }
  } else {
    XGEMM_FOR_EACH_RESULT(XGEMM_STORE)
  }
}

__kernel void xgemm_reduce(const int M, const int N, const int splits, BATCH_ARGS,
                           __global const T* part, EPI_ARGS) {
  const long e = get_global_id(0);
  if (e >= (long)M * N) return;
  const long b = batch0 + get_global_id(1);
  const int m = e / N, n = e % N;
  __global const T* p = part + b * splits * M * N + e;
  T acc = 0;
  for (int s = 0; s < splits; ++s) acc += p[(long)s * M * N];
  const long oci = batch_offset(b, nbd, batch, vci);
  const long oco = batch_offset(b, nbd, batch, vco);
  EPILOGUE(m, n, acc)
}
#endif /* XGEMM_ENGINE_ONLY */
