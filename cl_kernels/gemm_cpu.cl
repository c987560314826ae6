/*
 * gemm_cpu.cl: GEMM for CPU devices (family 2), over operands packed by gemm_pack.cl's
 * pack_panels. Prepended with gemm_common.cl.
 *
 *   Co[b] = act(alpha * A[b] @ B[b] + beta * Ci[b] + biases)     (epilogue: gemm_common.cl)
 *
 * Layout: Ap holds panels of MR rows of A, Ap[b][p][k][i] = A[b][p*MR + i][k]; Bp panels of NR
 * columns of B, Bp[b][q][k][j] = B[b][k][q*NR + j]; both zero past M and N, batch strides
 * ap_bs and bp_bs (0: shared by every batch). With B_INPLACE, Bp is B itself, rows contiguous
 * along N: element (k, n) at Bp[batch_offset(b, vb) + k*ldb + n], any offset and ldb (no
 * copy; a last, partial panel is computed as the panel that ends at column N, its columns
 * before the panel's own recomputed and not stored, or with N < NR from whole vectors, lanes
 * and zeros past N). With A_INPLACE, Ap is A itself, rows contiguous along K: element (m, k)
 * at Ap[batch_offset(b, va) + m*lda + k]. Ci and Co are strided views as in gemm_direct.cl;
 * whole tiles of row-contiguous Co (without Ci) are stored as vectors.
 *
 * A work-item computes TPI MR x NR tiles of C, each in registers (MR * NR / VW vectors of T: 28
 * AVX-512 registers for 14 x 32 floats) over the whole of K: per k one row of B's panel as
 * NR / VW vector loads, MR scalars of A's panel, MR * NR / VW vector multiply-adds. No local
 * memory and no barriers; local size (1, 1, 1) (PoCL then runs one work-item per work-group
 * with no work-item loop). Plain `s += a * b` on vectors and direct vector loads: PoCL 3.0
 * compiles fma() and vloadN to out-of-line calls. Rows start at row0 (a multiple of MR).
 * Global size (ceil(ceil(M/MR) / TPI), ceil(N/NR), batches), or dims 0 and 1 swapped (and
 * ceil(N/NR) divided by TPI) when walk_n is 1: consecutive tiles then walk along N (sharing
 * A's panel), else down M (sharing B's).
 *
 * SUM_BATCHES 1 (set by the host: ops/gemm/engine.py gemm_sum_into): Co = the sum over the first batch
 * dim of the products, C seen with batch stride 0 along it; the grid covers the other batch
 * dims, and each work-item adds its tile's products over the first dim's batches in
 * registers (a 1x1 convolution's weight gradient, summed over images read in place).
 *
 * Tunables (the parameter database, cltensor/tuning/gemm.json, sets them):
 *   MR, NR     the register tile; VW, the vector width, divides NR
 *   A_INPLACE, B_INPLACE  1: A / B read in place (set by the host: ops/gemm/packed.py
 *              packed_reads_a_in_place, packed_reads_b_in_place)
 *   A_CONVERTS, B_CONVERTS  1: A / B (read in place, or its packed panels) is stored as TA /
 *              TB (float16 or bfloat16: gemm_common.cl), converted to T as it is loaded; a
 *              16-bit panel's MR values of A for one k and its rows of B convert as vectors
 *   KB         blocked sums: the tile's registers sum KB steps of K, then are added into a
 *              second tile of sums (tot, untouched in the inner loop: 1/KB more adds) and
 *              restart from zero, so a sum's error grows like sqrt(KB) + sqrt(K / KB) instead
 *              of sqrt(K) (docs/conv_precision.md); 0: one running sum over the whole of K
 *   C_NT       1: whole tiles of C go out as streaming stores (gemm_common.cl; the host sets
 *              it: ops/gemm/packed.py streams_c)
 *   TPI        tiles a work-item computes, one after another along dim 0 (the walk: the
 *              tiles share one panel of the operand the walk keeps); the host divides dim 0
 *              of the grid by it (ops/gemm/packed.py tiles_per_item)
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
#ifndef B_INPLACE
#define B_INPLACE 0
#endif
#ifndef A_INPLACE
#define A_INPLACE 0
#endif
#ifndef SUM_BATCHES
#define SUM_BATCHES 0
#endif
#ifndef KB
#define KB 64
#endif
#ifndef TPI
#define TPI 1
#endif
/* NOTE: LLVM tunes AVX-512 CPUs to prefer 256-bit vectors and splits each VT of 16 floats in
 * two there: twice the registers (a 8 x 32 tile's 32 accumulators spill to the stack) and
 * half-width FMAs. min_vector_width(512) keeps 512-bit vectors where the target has them and
 * changes nothing where it has not (PoCL, 2 AVX-512 cores: docs/performance.md). */
#ifndef WIDE_VECTORS
#define WIDE_VECTORS 1
#endif
#if WIDE_VECTORS && defined(__has_attribute)
#if __has_attribute(min_vector_width)
#define WIDE_VECTORS_ATTR __attribute__((min_vector_width(512)))
#endif
#endif
#ifndef WIDE_VECTORS_ATTR
#define WIDE_VECTORS_ATTR
#endif
#define NV (NR / VW)
#define VT CAT(T, VW)
/* NOTE: a vector type aligned like its elements: loads and stores through it need no more
 * (C's rows and B's read in place start anywhere), and the compiler emits unaligned vector
 * moves for them (vloadN / vstoreN are out-of-line calls on PoCL). */
typedef VT __attribute__((aligned(sizeof(T)))) VTU;

typedef union { VT v; T s[VW]; } Lanes;

/* A read in place: element i at pointer p (TA). */
#if defined(A_CONVERTS) && A_INPLACE
#define LOAD_A(p, i) LD(TA, p, i)
#else
#define LOAD_A(p, i) ((p)[i])
#endif
/* B read in place: a vector of row elements and a single element, at pointer p (TB; float16
 * vectors through vload_halfW, F16C on PoCL: PoCL, ms, bit operations against vload_half16,
 * 64x288 @ 8x288x1024 1.65 vs 1.16, 512^3 1.44 vs 1.01). */
#if defined(B_CONVERTS) && B_INPLACE
#define LOAD_B_VECTOR(p) CAT(LOAD_B_VECTOR_, TB)(p)
#define LOAD_B_VECTOR_half(p) CAT(vload_half, VW)(0, (__global const half*)(p))
#define LOAD_B_VECTOR_bf16(p) VLD(bf16, VW, p)
#define LOAD_B_ELEMENT(p, f) LD(TB, p, f)
#else
#define LOAD_B_VECTOR(p) (*(__global const VTU*)(p))
#define LOAD_B_ELEMENT(p, f) ((p)[f])
#endif

/* W 16-bit panel values at p (aligned to W) as float lanes: float16 through vload_halfW, which
 * PoCL compiles to F16C's conversions (VLDA's bit operations cost about a dozen instructions
 * a lane: float16 panels of 1024^3 took 1.8x as long), bfloat16 shifted (VLDA). */
#define PANEL_VLD(X, W, p) CAT(PANEL_VLD_, X)(W, p)
#define PANEL_VLD_half(W, p) CAT(vload_half, W)(0, (__global const half*)(p))
#define PANEL_VLD_bf16(W, p) VLDA(bf16, W, p)

/* A's packed panels stored as TA (A_CONVERTS without A_INPLACE): column k of a panel (MR
 * values at p, aligned to MR) into col[]: float16 as one vector where MR is a vector width,
 * bfloat16 lane by lane (PoCL, bfloat16 panels of 1024^3: 5.7 ms against 6.3 as one
 * vector). */
#define PANEL_A_VECTOR_half 1
#define A_LANES16_half 1
#if (MR == 2 || MR == 4 || MR == 8 || MR == 16) && CAT(PANEL_A_VECTOR_, TA)
#define LOAD_PANEL_A(p, col)                                                     \
  {                                                                              \
    union { CAT(T, MR) v; T s[MR]; } u_;                                         \
    u_.v = PANEL_VLD(TA, MR, p);                                                 \
    _Pragma("unroll") for (int i = 0; i < MR; ++i) (col)[i] = u_.s[i];          \
  }
#else
#define LOAD_PANEL_A(p, col) _Pragma("unroll") for (int i = 0; i < MR; ++i) (col)[i] = LD(TA, p, i);
#endif
/* B's packed panels: vectors of T, or of TB converted as loaded (B_CONVERTS without B_INPLACE);
 * a panel row holds B_PANEL_ROW of B_PANEL_T. */
#if defined(B_CONVERTS) && !B_INPLACE
#define B_PANEL_T TB
#define B_PANEL_LOAD(p, j) PANEL_VLD(TB, VW, (p) + (j) * VW)
#define B_PANEL_ROW NR
#else
#define B_PANEL_T VT
#define B_PANEL_LOAD(p, j) (p)[j]
#define B_PANEL_ROW NV
#endif
#define B_PANEL_PTR(p) ((__global const B_PANEL_T*)(p))

/* acc += the outer product of column k of A's panel (a: MR scalars) and row k of B's (bv). */
#define MULTIPLY_ROW(a, bv)                                                      \
  _Pragma("unroll") for (int i = 0; i < MR; ++i) {                               \
    const T av = (a)[i];                                                         \
    _Pragma("unroll") for (int j = 0; j < NV; ++j) acc[i][j] += av * (bv)[j];    \
  }

/* After each block of KB steps of K: its sums added into tot, acc restarted from zero. */
#if KB
#define KSTEP KB
#define END_BLOCK                                                                      \
  _Pragma("unroll") for (int i = 0; i < MR; ++i)                                       \
  _Pragma("unroll") for (int j = 0; j < NV; ++j) {                                     \
    tot[i][j] += acc[i][j];                                                            \
    acc[i][j] = (VT)0;                                                                 \
  }
#else
#define KSTEP K
#define END_BLOCK
#endif

/* The whole tile at (m0, n0) into row-contiguous C (co_cs 1) without Ci: the epilogue on
 * vectors, one vector store per row and vector of columns. */
#define STORE_TILE_VECTORS                                                             \
  _Pragma("unroll") for (int i = 0; i < MR; ++i)                                       \
  _Pragma("unroll") for (int j = 0; j < NV; ++j)                                       \
      EPILOGUE_VECTOR(VT, Lanes, VW, VTU, m0 + i, n0 + j * VW, acc[i][j])

/* acc (the tile at m0, n0 of batch b, its columns from nb0 computed) through the epilogue into
 * C: whole tiles of row-contiguous C without Ci as vectors, the rest element by element.
 * NOTE: acc is copied out with constant indices first; indexing it with the run-time bounds
 * would make the compiler keep the whole register tile in memory. */
#define STORE_TILE                                                                     \
  {                                                                                    \
    const long oci = beta != (T)0 ? batch_offset(b, nbd, batch, vci) : 0;              \
    const long oco = batch_offset(b, nbd, batch, vco);                                 \
    const int rows = min(MR, M - m0), cols = min(NR, N - nb0);                         \
    if (rows == MR && cols == NR && nb0 == n0 && beta == (T)0 && co_cs == 1) {         \
      STORE_TILE_VECTORS                                                               \
    } else {                                                                           \
      Lanes out[MR][NV];                                                               \
      _Pragma("unroll") for (int i = 0; i < MR; ++i)                                   \
      _Pragma("unroll") for (int j = 0; j < NV; ++j) out[i][j].v = acc[i][j];          \
      for (int i = 0; i < rows; ++i)                                                   \
        for (int j = n0 - nb0; j < cols; ++j)                                          \
          EPILOGUE(m0 + i, nb0 + j, out[i][j / VW].s[j % VW])                          \
    }                                                                                  \
  }

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) WIDE_VECTORS_ATTR
void gemm_packed(const int M, const int N, const int K, const int row0, BATCH_ARGS,
                 __global const TA* Ap, const long ap_bs, const View va, const long lda,
                 __global const TB* Bp, const long bp_bs, const View vb, const long ldb,
                 const int walk_n, EPI_ARGS) {
  const int g0 = get_global_id(0), g1 = get_global_id(1);
  const long b = batch0 + get_global_id(2);
  /* SUM_BATCHES: the products of flat batches s * inner + b for every s of the first batch
   * dim (b indexes the other dims; C's stride along the first is 0); else batch b alone */
  long inner = 1;
  for (int d = 1; SUM_BATCHES && d < nbd; ++d) inner *= batch.size[d];
  const long nsum = SUM_BATCHES && nbd > 0 ? batch.size[0] : 1;
  /* TPI tiles a work-item, consecutive along dim 0 (sharing the walk's operand panel) */
  for (int t = 0; t < TPI; ++t) {
    const int w = g0 * TPI + t;
    const int pm = row0 / MR + (walk_n ? g1 : w), pn = walk_n ? w : g1;
    if (walk_n ? pn * NR >= N : pm * MR >= M) break;
    const int m0 = pm * MR, n0 = pn * NR;
    /* B read in place: the last, partial panel of N >= NR columns is computed as the panel that
     * ends at column N (nb0 < n0), of which only the columns from n0 on are stored */
    const int nb0 = B_INPLACE && n0 + NR > N && N >= NR ? N - NR : n0;

    VT acc[MR][NV];
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int j = 0; j < NV; ++j) acc[i][j] = (VT)0;
#if KB
    VT tot[MR][NV];
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int j = 0; j < NV; ++j) tot[i][j] = (VT)0;
#endif
    for (long s = 0; s < nsum; ++s) {
      const long ab = s * inner + b;
#if A_INPLACE
      /* A's rows read where they are (K contiguous): column k of the panel is a[i * lda + k];
       * rows past M repeat row M - 1 (their accumulators are never stored) */
      __global const TA* a = Ap + batch_offset(ab, nbd, batch, va) + (long)m0 * lda;
      long a_row[MR];
#pragma unroll
      for (int i = 0; i < MR; ++i) a_row[i] = (long)min(i, M - 1 - m0) * lda;
#if defined(A_CONVERTS) && CAT(A_LANES16_, TA)
      /* float16 A: every 16 steps of K, the next 16 columns of the MR rows converted at once
       * (vload_half16, F16C on PoCL) into a_buf, which the steps then read as floats (whole
       * columns past K - 16 element by element); per element, the bit operations doubled the
       * kernel's time */
      union { float16 v; float s[16]; } a_buf[MR];
      int a_lane = 16;
      long a_k = 0;
#define NEXT_A(a)                                                                      \
      if (a_lane == 16) {                                                                  \
        if (K - a_k >= 16) {                                                               \
          _Pragma("unroll") for (int i = 0; i < MR; ++i)                                   \
              a_buf[i].v = vload_half16(0, (__global const half*)(a + a_row[i]));          \
        } else {                                                                           \
          for (int i = 0; i < MR; ++i)                                                     \
            for (int f = 0; f < 16; ++f)                                                   \
              a_buf[i].s[f] = f < K - a_k ? LD(TA, a, a_row[i] + f) : 0.0f;                \
        }                                                                                  \
        a_lane = 0;                                                                        \
      }                                                                                    \
      T a_col[MR];                                                                         \
      _Pragma("unroll") for (int i = 0; i < MR; ++i) a_col[i] = a_buf[i].s[a_lane];        \
      ++a_lane;                                                                            \
      ++a_k;                                                                               \
      ++(a);
#else
#define NEXT_A(a)                                                          \
      T a_col[MR];                                                             \
      _Pragma("unroll") for (int i = 0; i < MR; ++i) a_col[i] = LOAD_A(a, a_row[i]); \
      ++(a);
#endif
#define A_COL a_col
#elif defined(A_CONVERTS)
      /* A's 16-bit panel: column k converted as one vector */
      __global const TA* a = Ap + ab * ap_bs + (long)pm * K * MR;
#define NEXT_A(a)                                                          \
      T a_col[MR];                                                             \
      LOAD_PANEL_A(a, a_col)                                                   \
      (a) += MR;
#define A_COL a_col
#else
      __global const T* a = Ap + ab * ap_bs + (long)pm * K * MR;
#define NEXT_A(a) (a) += MR;
#define A_COL (a - MR)
#endif

#if B_INPLACE
      /* B's rows read where they are: element (k, n) at Bp[batch offset + k*ldb + n] */
      __global const TB* bk = Bp + batch_offset(ab, nbd, batch, vb) + nb0;
      const int whole = nb0 + NR <= N ? NV : (N - n0) / VW, lanes = (N - n0) % VW;
      for (int kb = 0; kb < K; kb += KSTEP) {
        if (whole == NV) {
          for (int n = min(KSTEP, K - kb); n != 0; --n) {
            VT bv[NV];
#pragma unroll
            for (int j = 0; j < NV; ++j) bv[j] = LOAD_B_VECTOR(bk + j * VW);
            NEXT_A(a)
            MULTIPLY_ROW(A_COL, bv)
            bk += ldb;
          }
        } else { /* N < NR: whole vectors as above, then lanes up to N, zeros */
          for (int n = min(KSTEP, K - kb); n != 0; --n) {
            VT bv[NV];
#pragma unroll
            for (int j = 0; j < NV; ++j) {
              if (j < whole) {
                bv[j] = LOAD_B_VECTOR(bk + j * VW);
              } else if (j == whole) {
                Lanes l;
#pragma unroll
                for (int f = 0; f < VW; ++f) l.s[f] = f < lanes ? LOAD_B_ELEMENT(bk, j * VW + f) : (T)0;
                bv[j] = l.v;
              } else {
                bv[j] = (VT)0;
              }
            }
            NEXT_A(a)
            MULTIPLY_ROW(A_COL, bv)
            bk += ldb;
          }
        }
        END_BLOCK
      }
#else
      __global const B_PANEL_T* bp = B_PANEL_PTR(Bp + ab * bp_bs + (long)pn * K * NR);
      for (int kb = 0; kb < K; kb += KSTEP) {
        for (int n = min(KSTEP, K - kb); n != 0; --n) {
          VT bv[NV];
#pragma unroll
          for (int j = 0; j < NV; ++j) bv[j] = B_PANEL_LOAD(bp, j);
          NEXT_A(a)
          MULTIPLY_ROW(A_COL, bv)
          bp += B_PANEL_ROW;
        }
        END_BLOCK
      }
#endif
    }
#if KB
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int j = 0; j < NV; ++j) acc[i][j] = tot[i][j];
#endif
    STORE_TILE
  }
#if defined(C_NT) && C_NT
  NT_FENCE();
#endif
}

#ifdef KC
/*
 * gemm_slabs: deep products in slabs of KC steps of K (cache blocking), over operands packed
 * by pack_panels with the same KC: slab s of an operand holds its panels for k in
 * [s*KC, s*KC + kc) (kc = min(KC, K - s*KC)), panel p at Ap[b][s*KC*pad_rows + (p*kc + kk)*MR
 * + i] (pad_rows: the rows rounded up to whole panels), so that a slab's panels of A and B
 * lie together. One work-item owns a block of BM x BN tiles of C and walks it slab by slab,
 * B's panels outer and A's inner: the slab's panel of B (kc x NR) stays in L1 while the
 * block's panels of A (BM*MR x kc) stay in L2, each read from memory once per block and slab
 * where gemm_packed reads a whole K panel of A once per panel of B. Between slabs a tile's
 * sums wait in `part` (tile (pm, pn) at part[b][(pn * ceil(M/MR) + pm) * MR * NV], batch
 * stride part_bs vectors); the last slab runs the epilogue. With KB dividing KC the sums are
 * gemm_packed's to the bit (part holds its tot; blocks of KB restart from zero); KB 0 sums
 * in blocks of KC. Global size (ceil(M / (BM*MR)),
 * ceil(N / (BN*NR)), batches), dims 0 and 1 swapped when walk_n is 1; row0 a multiple of
 * BM*MR. A launch may cover one slab of a longer K (the host's float32 slabs of 16-bit
 * operands, ops/gemm/packed.py): resume 1 starts from the sums in `part`, finish 0 leaves
 * them there instead of running the epilogue.
 *
 * B_INPLACE 1: B is read where it is (rows contiguous along N, element (k, n) at
 * Bp[batch_offset(b, vb) + k*ldb + n], N >= NR) instead of from panels: a tile's slab of B is
 * kc rows of NR floats ldb apart, and the last, partial panel of N is computed as the panel
 * that ends at column N (gemm_packed's rule); bp_bs is unused. No pack of B: the pack, a read
 * and a write of all of B, cost as much as the product on the convolutions' wide products.
 */
#ifndef BM
#define BM 16
#endif
#ifndef BN
#define BN 8
#endif
#define SLAB_STEP (KB ? KB : KC)
/* PF: A's panels (from L2) are prefetched PF elements ahead of the loads; 0: not */
#ifndef PF
#define PF 0
#endif
#if PF && defined(__has_builtin)
#if __has_builtin(__builtin_prefetch)
#define PREFETCH_A(p) __builtin_prefetch(p)
#endif
#endif
#ifndef PREFETCH_A
#define PREFETCH_A(p)
#endif
/* vector j of a row of B's slab at p, and the step to the next row */
#if B_INPLACE
#define SLAB_B_LOAD(p, j) (*(__global const VTU*)((p) + (j) * VW))
#define SLAB_B_STEP ldb
#else
#define SLAB_B_LOAD(p, j) ((p)[j])
#define SLAB_B_STEP NV
#endif

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) WIDE_VECTORS_ATTR
void gemm_slabs(const int M, const int N, const int K, const int row0, BATCH_ARGS,
                __global const T* Ap, const long ap_bs, __global const T* Bp, const long bp_bs,
                const View vb, const long ldb, __global VT* part, const long part_bs,
                const int walk_n, const int resume, const int finish, EPI_ARGS) {
  const int g0 = get_global_id(0), g1 = get_global_id(1);
  const int bm = row0 / (MR * BM) + (walk_n ? g1 : g0), bn = walk_n ? g0 : g1;
  const long b = batch0 + get_global_id(2);
  const int pms = (M + MR - 1) / MR, pns = (N + NR - 1) / NR;
  const int pm1 = min(bm * BM + BM, pms), pn1 = min(bn * BN + BN, pns);
  __global const T* ab = Ap + b * ap_bs;
#if B_INPLACE
  __global const T* bb = Bp + batch_offset(b, nbd, batch, vb);
#else
  __global const VT* bb = (__global const VT*)(Bp + b * bp_bs);
#endif
  __global VT* pb = part + b * part_bs;
  for (int k0 = 0; k0 < K; k0 += KC) {
    const int kc = min(KC, K - k0);
    for (int pn = bn * BN; pn < pn1; ++pn) {
      /* B in place: the last, partial panel computed as the panel that ends at column N */
      const int n0 = pn * NR, nb0 = B_INPLACE && n0 + NR > N ? N - NR : n0;
      for (int pm = bm * BM; pm < pm1; ++pm) {
        __global const T* a = ab + (long)k0 * pms * MR + (long)pm * kc * MR;
#if B_INPLACE
        __global const T* bp = bb + (long)k0 * ldb + nb0;
#else
        __global const VT* bp = bb + ((long)k0 * pns + (long)pn * kc) * NV;
#endif
        __global VT* pt = pb + ((long)pn * pms + pm) * (MR * NV);
        VT acc[MR][NV], tot[MR][NV];
#pragma unroll
        for (int i = 0; i < MR; ++i)
#pragma unroll
          for (int j = 0; j < NV; ++j) tot[i][j] = k0 || resume ? pt[i * NV + j] : (VT)0;
        for (int kb = 0; kb < kc; kb += SLAB_STEP) {
#pragma unroll
          for (int i = 0; i < MR; ++i)
#pragma unroll
            for (int j = 0; j < NV; ++j) acc[i][j] = (VT)0;
          for (int n = min(SLAB_STEP, kc - kb); n != 0; --n) {
            VT bv[NV];
#pragma unroll
            for (int j = 0; j < NV; ++j) bv[j] = SLAB_B_LOAD(bp, j);
            PREFETCH_A(a + PF);
            MULTIPLY_ROW(a, bv)
            a += MR;
            bp += SLAB_B_STEP;
          }
#pragma unroll
          for (int i = 0; i < MR; ++i)
#pragma unroll
            for (int j = 0; j < NV; ++j) tot[i][j] += acc[i][j];
        }
        if (k0 + KC < K || !finish) {
#pragma unroll
          for (int i = 0; i < MR; ++i)
#pragma unroll
            for (int j = 0; j < NV; ++j) pt[i * NV + j] = tot[i][j];
        } else {
#pragma unroll
          for (int i = 0; i < MR; ++i)
#pragma unroll
            for (int j = 0; j < NV; ++j) acc[i][j] = tot[i][j];
          const int m0 = pm * MR;
          STORE_TILE
        }
      }
    }
  }
}
#endif
