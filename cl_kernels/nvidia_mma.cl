/*
 * nvidia_mma.cl: TF32 tensor-core GEMM for NVIDIA GPUs (sm_80 and later) through inline PTX,
 * the kernels of the NVIDIA plug-in (cltensor/plugins/nvidia.py). Prepended with gemm_common.cl
 * (argument lists, batches, epilogue), except with NVMMA_PROBE.
 *
 *   Co[b] = act(alpha * A[b] @ B[b] + beta * Ci[b] + biases)   (epilogue: gemm_common.cl)
 *
 * with the products of A and B taken in TF32 (10-bit mantissas) by mma.sync.m16n8k8 and summed
 * in fp32: about 3e-4 norm-relative error when rounded (ROUND), as cuBLAS with TF32 on.
 *
 * nvmma_gemm: a work-group of WARPS_M x WARPS_N warps (1-d, NT = 32 * WARPS_M * WARPS_N
 * work-items) computes a BM x BN tile of C (BM = WARPS_M * WM, BN = WARPS_N * WN), each warp a
 * WM x WN tile of (WM/16) x (WN/8) mma tiles held in registers. K is walked in slices of BK
 * (8, 16 or 32): with ASYNC 1, cp.async copies the slices global -> local memory STAGES - 1
 * slices ahead of the one being multiplied (one barrier per slice); with ASYNC 0 the next
 * slice is loaded into registers while the current one is multiplied, and stored into the
 * other of two local buffers. PREFETCH 1 (ASYNC) reads the first fragments of the next slice
 * while the mmas of the current one run. Tiles run in GROUP_M-row bands (L2 reuse of B's
 * columns).
 *
 * Layout (set by the host): A element (m, k) at A[oa + m*lda + k] (A_KC 1, K contiguous) or
 * A[oa + k*lda + m] (A_KC 0); B element (k, n) at B[ob + n*ldb + k] (B_KC 1) or
 * B[ob + k*ldb + n] (B_KC 0); oa, ob the batch offsets of the Views. lda, ldb and every offset
 * are multiples of 4 floats (16-byte copies); no other padding: every copy is bounds-checked
 * (zero-filled past M, N and K). Local memory keeps each operand's contiguous dim, in 16-byte
 * chunks placed by XOR swizzles (KSW, MSW) that make the fragment reads conflict-free.
 * C is stored through its strides with bounds checks, rows from row0.
 *
 * K order: the mma's k index is a permutation of the slice's. The slice is cut in blocks of
 * 8*KS (KS = 2, or 1 when BK is 8); for block kk, lane (g, t) (g = lane / 4, t = lane % 4)
 * feeds k = kk + 2*KS*t + 2s and that + 1 to its k = t and k = t + 4 fragment registers of the
 * block's mma s (0 .. KS-1), so that a K-contiguous operand's fragments of the block's mmas
 * come from one 8*KS-byte local read. A and B share the permutation.
 *
 * Rounding to TF32, to nearest (cvt.rna.tf32.f32): ROUND 1 when a slice is stored into local
 * memory (ASYNC 0) or when fragments are read (ASYNC 1); ROUND 2 as 1 with ASYNC 0, and with
 * ASYNC 1 in local memory, each work-item its own copies once they have landed (fewer
 * conversions than per fragment); ROUND 3 as 1 with an integer add in place of the conversion
 * (the same results, NaN payloads aside: see TF32); ROUND 0 lets the tensor cores drop the low
 * 13 mantissa bits (truncation: about 2.5x the error, biased towards zero).
 *
 * Split K (for products with too few tiles to fill the device): with splits > 1, work-group z
 * of dim 2 multiplies batch z / splits over its share z % splits of the K slices and stores
 * the raw sums in part[z] (dense M x N); gemm_xgemm.cl's xgemm_reduce adds them and applies
 * the epilogue.
 *
 * Global size (ceil(N/BN) * NT, ceil(M/BM), batches * splits), local size (NT, 1, 1). Local
 * memory: (ASYNC ? STAGES : 2) * BK * (BM + BN) * 4 bytes; NVIDIA's OpenCL allows 48 KiB in all
 * and adds 16 bytes of its own, so 48 KiB of buffers do not fit.
 *
 * Tunables: WM, WN (multiples of 16 and 8), WARPS_M, WARPS_N, BK (8, 16 or 32), STAGES (2 to 5,
 * with ASYNC), ASYNC, ROUND, GROUP_M, PREFETCH; BM and BN multiples of 32, BM*BK/4 and BN*BK/4
 * multiples of NT. A_KC, B_KC: the layouts above.
 * HALF 1 or 2: float16 or bfloat16 operands (see MMA_OP), both K-contiguous, K counted in
 * 32-bit words of two values; C and the biases through gemm_common.cl's TC and TR.
 * EMULATE 1 replaces every PTX instruction by plain OpenCL (mma.sync by an exchange of the
 * fragments through local memory, with the hardware's fragment layout and TF32 truncation), so
 * that the tests check this file's indexing on any device; it is not fast.
 *
 * nvmma_probe (built alone with NVMMA_PROBE): one mma.sync, cvt.rna.tf32 and cp.async, the
 * plug-in's test that the device's compiler takes them.
 *
 * nvmma_peak (built alone with NVMMA_PEAK): the ceiling of mma.sync TF32 on the device, for
 * benchmarks/gemm.py --tf32: each warp runs `iters` rounds of CHAINS (default 8) independent
 * m16n8k8 mma.syncs on registers (2 * 16 * 8 * 8 flops each), no memory traffic; one sum per
 * work-item is stored so that the compiler keeps the chains.
 */
#ifdef NVMMA_PROBE

__kernel void nvmma_probe(__global const float* src, __global float* dst) {
  __local float4 buf[32];
  const int lane = get_local_id(0);
  const uint at = (uint)(size_t)(buf + lane);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, 16;" ::"r"(at), "l"(src + 4 * lane)
               : "memory");
  asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");
  barrier(CLK_LOCAL_MEM_FENCE);
  uint a[4], b[2];
  for (int e = 0; e < 4; ++e) asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(a[e]) : "f"(buf[lane].s0));
  b[0] = a[1];
  b[1] = a[2];
  float d[4] = {0, 0, 0, 0};
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  dst[lane] = d[0] + d[1] + d[2] + d[3];
}

#elif defined(NVMMA_PEAK)

#ifndef CHAINS
#define CHAINS 8
#endif

__kernel void nvmma_peak(const int iters, const float seed, __global float* dst) {
  const uint lane = get_local_id(0) % 32;
  uint a[4], b[2];
  for (int e = 0; e < 4; ++e) a[e] = as_uint(seed * (float)(lane + e + 1));
  b[0] = a[1];
  b[1] = a[2];
  float d[CHAINS][4];
  for (int c = 0; c < CHAINS; ++c)
    for (int e = 0; e < 4; ++e) d[c][e] = 0.0f;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
      asm volatile(
          "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
          "{%8,%9}, {%0,%1,%2,%3};"
          : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  float sum = 0.0f;
  for (int c = 0; c < CHAINS; ++c) sum += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  dst[get_global_id(0)] = sum;
}

#else

#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 32
#endif
#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 4
#endif
#ifndef BK
#define BK 16
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef ASYNC
#define ASYNC 1
#endif
#ifndef ROUND
#define ROUND 1
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef PREFETCH
#define PREFETCH 0
#endif
#ifndef A_KC
#define A_KC 1
#endif
#ifndef B_KC
#define B_KC 0
#endif
#ifndef EMULATE
#define EMULATE 0
#endif
#ifndef HALF
#define HALF 0
#endif

#define BM (WARPS_M * WM)
#define BN (WARPS_N * WN)
#define NT (32 * WARPS_M * WARPS_N)
#define MI (WM / 16) /* mma tiles per warp along M and N */
#define NJ (WN / 8)
#define NBUFS (ASYNC ? STAGES : 2)
#define KS (BK == 8 ? 1 : 2) /* mma steps (k8) per K block; a lane reads 2*KS floats of a row */
#if KS == 2
#define VK float4
#else
#define VK float2
#endif
typedef union { VK v; float s[2 * KS]; } LanesK;
#define A_CHUNKS (BM * BK / 4 / NT) /* 16-byte copies per work-item and slice */
#define B_CHUNKS (BN * BK / 4 / NT)

/* Local memory: chunk c (4 floats) of row r of a K-contiguous slice (rows of BK floats) is
 * stored at chunk c ^ KSW(r); of row k of an MN-contiguous slice (rows of W floats) at
 * c ^ MSW(k). KSW keeps each phase of the fragments' vector reads on distinct banks; MSW the
 * 32 scalar reads of a fragment (rows k = kk + 2*KS*t + ..., columns g). */
#if BK == 32
#define KSW(r) (((r) & 1) << 2)
#else
#define KSW(r) 0
#endif
#define MSW(k) ((((k) >> KS) & 3) << 1)
#define KC_AT(r, k) ((r) * BK + ((((k) >> 2) ^ KSW(r)) << 2) + ((k) & 3))
#define MC_AT(k, r, W) ((k) * (W) + ((((r) >> 2) ^ MSW(k)) << 2) + ((r) & 3))

/* ---- the PTX instructions, or their plain OpenCL emulation --------------------------------- */

/* The operands' type: TF32 (HALF 0, mma m16n8k8), float16 (1) or bfloat16 (2), m16n8k16 on
 * 32-bit words of two K-consecutive values, whose fragment layout in words is m16n8k8's: the
 * kernel runs unchanged on K-contiguous operands with K, lda, ldb and offsets in words (the
 * host sets ROUND 0). */
#if HALF
#define MMA_OP(d, a0, a1, a2, a3, b0, b1)                                                  \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32" HALF_TYPES ".f32 {%0,%1,%2,%3}, "  \
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                                    \
               : "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3])                    \
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))
#if HALF == 1
#define HALF_TYPES ".f16.f16"
/* a word's two values, the lower k first */
inline float2 pair_of(const uint w) {
  return (float2)(half_bits_to_float(w & 0xffffu), half_bits_to_float(w >> 16));
}
#else
#define HALF_TYPES ".bf16.bf16"
inline float2 pair_of(const uint w) { return (float2)(as_float(w << 16), as_float(w & 0xffff0000u)); }
#endif
#else
#define MMA_OP MMA_TF32
#endif

/* x rounded to TF32 (nearest, ties away from zero), as the bits of a float */
inline uint to_tf32(const float x) {
#if EMULATE
  const uint u = as_uint(x);
  return (u & 0x7f800000u) == 0x7f800000u ? u : (u + 0x1000u) & 0xffffe000u;
#else
  uint r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
#endif
}

#if ROUND == 3
/* NOTE: the tensor cores drop the low 13 bits, so adding half of their weight rounds to
 * nearest (ties away), infinities and overflow included; only a NaN whose payload lies in
 * those 13 bits alone turns into an infinity, as it does without rounding. */
#define TF32(x) (as_uint(x) + 0x1000u)
#elif ROUND
#define TF32(x) to_tf32(x)
#else
#define TF32(x) as_uint(x)
#endif
#define ROUND_FRAGMENTS (ASYNC && ROUND != 2) /* else rounded in local memory, if at all */

/* Copy `valid` (0..4) floats from src to the 16-byte chunk dst, zero-filling the rest. */
inline void copy_chunk(__local float* dst, __global const float* src, const int valid) {
#if EMULATE
  for (int e = 0; e < 4; ++e) dst[e] = e < valid ? src[e] : 0.0f;
#else
  const uint at = (uint)(size_t)dst;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(at), "l"(src),
               "r"(valid * 4)
               : "memory");
#endif
}

inline void commit_copies(void) {
#if !EMULATE
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

/* Wait until at most STAGES - 2 groups of copies are in flight. */
#define STR_(x) #x
#define STR(x) STR_(x)
#if STAGES == 2
#define IN_FLIGHT 0
#elif STAGES == 3
#define IN_FLIGHT 1
#elif STAGES == 4
#define IN_FLIGHT 2
#else
#define IN_FLIGHT 3 /* STAGES 5 */
#endif
inline void wait_copies(void) {
#if !EMULATE
  asm volatile("cp.async.wait_group " STR(IN_FLIGHT) ";" ::: "memory");
#endif
}

/* ---- global -> local ------------------------------------------------------------------------ */

/* Where copy q of an operand's slice comes from and goes to: (offset in the tile's slice in
 * global memory, in elements; offset in local memory; valid floats). The tile has R rows
 * (BM or BN), rows_left of them in the matrix; k_left = K - k0. */
inline void chunk_of(const int q, const int kc, const int R, const long ld, const int rows_left,
                     const int k_left, long* from, int* to, int* valid) {
  if (kc) {
    const int r = q / (BK / 4), k = q % (BK / 4) * 4;
    *from = (long)r * ld + k;
    *to = KC_AT(r, k);
    *valid = r < rows_left ? clamp(k_left - k, 0, 4) : 0;
  } else {
    const int k = q / (R / 4), r = q % (R / 4) * 4;
    *from = (long)k * ld + r;
    *to = MC_AT(k, r, R);
    *valid = k < k_left ? clamp(rows_left - r, 0, 4) : 0;
  }
}

/* Start the copies of one operand's slice (ASYNC); `safe` is a readable address for the
 * copies that read nothing. tile: the tile's origin at k0. */
inline void copy_slice(__local float* dst, __global const float* tile, __global const float* safe,
                       const int kc, const int R, const int chunks, const long ld,
                       const int rows_left, const int k_left, const int tid) {
#pragma unroll
  for (int l = 0; l < chunks; ++l) {
    long from;
    int to, valid;
    chunk_of(l * NT + tid, kc, R, ld, rows_left, k_left, &from, &to, &valid);
    copy_chunk(dst + to, valid ? tile + from : safe, valid);
  }
}

/* ROUND 2 (ASYNC): round the chunks this work-item copied, once they have landed. */
inline void round_slice(__local float* dst, const int kc, const int R, const int chunks,
                        const int tid) {
#pragma unroll
  for (int l = 0; l < chunks; ++l) {
    long from;
    int to, valid;
    chunk_of(l * NT + tid, kc, R, 0, 0, 0, &from, &to, &valid);
    __local float4* p = (__local float4*)(dst + to);
    const float4 x = *p;
    *p = as_float4((uint4)(to_tf32(x.s0), to_tf32(x.s1), to_tf32(x.s2), to_tf32(x.s3)));
  }
}

/* ASYNC 0: load one operand's slice into registers ... */
inline void load_slice(float4* reg, __global const float* tile, const int kc, const int R,
                       const int chunks, const long ld, const int rows_left, const int k_left,
                       const int tid) {
#pragma unroll
  for (int l = 0; l < chunks; ++l) {
    long from;
    int to, valid;
    chunk_of(l * NT + tid, kc, R, ld, rows_left, k_left, &from, &to, &valid);
    if (valid == 4) {
      reg[l] = *(__global const float4*)(tile + from);
    } else {
      float v[4];
      for (int e = 0; e < 4; ++e) v[e] = e < valid ? tile[from + e] : 0.0f;
      reg[l] = (float4)(v[0], v[1], v[2], v[3]);
    }
  }
}

/* ... and store it into local memory, rounded to TF32 (ROUND). */
inline void store_slice(__local float* dst, const float4* reg, const int kc, const int R,
                        const int chunks, const int tid) {
#pragma unroll
  for (int l = 0; l < chunks; ++l) {
    long from;
    int to, valid;
    chunk_of(l * NT + tid, kc, R, 0, 0, 0, &from, &to, &valid);
    const float4 x = reg[l];
    *(__local float4*)(dst + to) =
        as_float4((uint4)(TF32(x.s0), TF32(x.s1), TF32(x.s2), TF32(x.s3)));
  }
}

/* ---- the warp's products -------------------------------------------------------------------- */

/* A fragment value read from local memory: rounded here when the copy could not (ASYNC). */
#if ROUND_FRAGMENTS
#define FRAG(x) TF32(x)
#else
#define FRAG(x) as_uint(x)
#endif

/* The fragments of K block kk: af[i][s] for mma tile row i and mma s, bf[j][s] likewise
 * (layout: the file's header, K order). wm0, wn0: the warp's tile in the work-group's. */
inline void read_fragments(__local const float* as, __local const float* bs, const int kk,
                           const int wm0, const int wn0, const int lane, uint af[MI][KS][4],
                           uint bf[NJ][KS][2]) {
  const int g = lane >> 2, t = lane & 3, k0 = kk + 2 * KS * t;
#pragma unroll
  for (int i = 0; i < MI; ++i) {
    const int r = wm0 + 16 * i + g;
#if A_KC
    LanesK x0, x1;
    x0.v = *(__local const VK*)(as + KC_AT(r, k0));
    x1.v = *(__local const VK*)(as + KC_AT(r + 8, k0));
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      af[i][s][0] = FRAG(x0.s[2 * s]), af[i][s][1] = FRAG(x1.s[2 * s]);
      af[i][s][2] = FRAG(x0.s[2 * s + 1]), af[i][s][3] = FRAG(x1.s[2 * s + 1]);
    }
#else
#pragma unroll
    for (int s = 0; s < KS; ++s)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        af[i][s][2 * h] = FRAG(as[MC_AT(k0 + 2 * s + h, r, BM)]);
        af[i][s][2 * h + 1] = FRAG(as[MC_AT(k0 + 2 * s + h, r + 8, BM)]);
      }
#endif
  }
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int n = wn0 + 8 * j + g;
#if B_KC
    LanesK y;
    y.v = *(__local const VK*)(bs + KC_AT(n, k0));
#pragma unroll
    for (int s = 0; s < KS; ++s) bf[j][s][0] = FRAG(y.s[2 * s]), bf[j][s][1] = FRAG(y.s[2 * s + 1]);
#else
#pragma unroll
    for (int s = 0; s < KS; ++s)
#pragma unroll
      for (int h = 0; h < 2; ++h) bf[j][s][h] = FRAG(bs[MC_AT(k0 + 2 * s + h, n, BN)]);
#endif
  }
}

#if EMULATE
/* mma.sync's result for one lane, from the fragments of the whole warp in x (xa: [MI][KS][4]
 * registers x 32 lanes, then xb: [NJ][KS][2] x 32): the hardware's layout, TF32 truncation. */
inline float emulated_dot(__local const uint* x, const int i, const int j, const int s,
                          const int row, const int col) {
  __local const uint* xa = x + (i * KS + s) * 4 * 32;
  __local const uint* xb = x + MI * KS * 4 * 32 + (j * KS + s) * 2 * 32;
  float d = 0;
  for (int c = 0; c < 8; ++c) {
    const uint a = xa[((row >> 3) + 2 * (c >> 2)) * 32 + (row & 7) * 4 + (c & 3)];
    const uint b = xb[(c >> 2) * 32 + col * 4 + (c & 3)];
#if HALF
    const float2 x = pair_of(a), y = pair_of(b);
    d += x.s0 * y.s0 + x.s1 * y.s1;
#else
    d += TF32_TRUNC(a) * TF32_TRUNC(b);
#endif
  }
  return d;
}

inline void multiply_fragments(float acc[MI][NJ][4], uint af[MI][KS][4], uint bf[NJ][KS][2],
                               __local uint* x, const int lane) {
  barrier(CLK_LOCAL_MEM_FENCE); /* the previous block's reads of x are done */
  for (int i = 0; i < MI; ++i)
    for (int s = 0; s < KS; ++s)
      for (int e = 0; e < 4; ++e) x[((i * KS + s) * 4 + e) * 32 + lane] = af[i][s][e];
  for (int j = 0; j < NJ; ++j)
    for (int s = 0; s < KS; ++s)
      for (int e = 0; e < 2; ++e)
        x[MI * KS * 4 * 32 + ((j * KS + s) * 2 + e) * 32 + lane] = bf[j][s][e];
  barrier(CLK_LOCAL_MEM_FENCE);
  const int g = lane >> 2, t = lane & 3;
  for (int s = 0; s < KS; ++s)
    for (int i = 0; i < MI; ++i)
      for (int j = 0; j < NJ; ++j)
        for (int e = 0; e < 4; ++e)
          acc[i][j][e] += emulated_dot(x, i, j, s, g + 8 * (e >> 1), 2 * t + (e & 1));
}
#else
inline void multiply_fragments(float acc[MI][NJ][4], uint af[MI][KS][4], uint bf[NJ][KS][2],
                               const int lane) {
#pragma unroll
  for (int s = 0; s < KS; ++s)
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NJ; ++j)
        MMA_OP(acc[i][j], af[i][s][0], af[i][s][1], af[i][s][2], af[i][s][3], bf[j][s][0],
               bf[j][s][1]);
}
#endif

/* acc += the slice in local memory (as, bs); x: the warp's exchange area (EMULATE). */
#if EMULATE
#define X_PARAM , __local uint* x
#define X_ARG(x) , x
#else
#define X_PARAM
#define X_ARG(x)
#endif
inline void multiply_slice(__local const float* as, __local const float* bs, const int kk0,
                           const int wm0, const int wn0, const int lane,
                           float acc[MI][NJ][4] X_PARAM) {
#pragma unroll
  for (int kk = kk0; kk < BK; kk += 8 * KS) {
    uint af[MI][KS][4], bf[NJ][KS][2];
    read_fragments(as, bs, kk, wm0, wn0, lane, af, bf);
    multiply_fragments(acc, af, bf X_ARG(x), lane);
  }
}

/* ---- the kernels ---------------------------------------------------------------------------- */

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void nvmma_gemm(const int M, const int N, const int K, const int row0, BATCH_ARGS,
                __global const float* A, const View va, const long lda,
                __global const float* B, const View vb, const long ldb, const int splits,
                __global float* part, EPI_ARGS) {
  __local float4 a_bufs[NBUFS][BM * BK / 4]; /* float4: 16-byte aligned chunks */
  __local float4 b_bufs[NBUFS][BN * BK / 4];
#if EMULATE
  __local uint xch[NT / 32][(MI * 4 + NJ * 2) * KS * 32];
#endif
  const int tid = get_local_id(0), warp = tid / 32, lane = tid % 32;
  const int wm0 = warp / WARPS_N * WM, wn0 = warp % WARPS_N * WN;
  int pm, pn;
  tile_of(GROUP_M, &pm, &pn);
  const int m0 = row0 + pm * BM, n0 = pn * BN;
  const long z = batch0 + get_global_id(2), b = z / splits;
  __global const float* sa = A + batch_offset(b, nbd, batch, va);
  __global const float* sb = B + batch_offset(b, nbd, batch, vb);

  /* this work-group's share of the K slices: [t0, t0 + slices) */
  const int total = (K + BK - 1) / BK, share = (total + splits - 1) / splits;
  const int t0 = (int)(z % splits) * share, slices = max(min(total - t0, share), 0);
  /* the tiles' origins at slice t0, and the step from a slice to the next */
  __global const float* pa = sa + (A_KC ? (long)m0 * lda + t0 * BK : (long)t0 * BK * lda + m0);
  __global const float* pb = sb + (B_KC ? (long)n0 * ldb + t0 * BK : (long)t0 * BK * ldb + n0);
  const long step_a = A_KC ? BK : BK * lda, step_b = B_KC ? BK : BK * ldb;
  const int k_left0 = K - t0 * BK;

  float acc[MI][NJ][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#if ASYNC
#define COPY_SLICE(t)                                                                        \
  {                                                                                          \
    copy_slice((__local float*)a_bufs[(t) % STAGES], pa + (t) * step_a, sa, A_KC, BM,        \
               A_CHUNKS, lda, M - m0, k_left0 - (t) * BK, tid);                              \
    copy_slice((__local float*)b_bufs[(t) % STAGES], pb + (t) * step_b, sb, B_KC, BN,        \
               B_CHUNKS, ldb, N - n0, k_left0 - (t) * BK, tid);                              \
  }
#if ROUND == 2
#define LANDED(t)                                                                            \
  {                                                                                          \
    wait_copies();                                                                           \
    round_slice((__local float*)a_bufs[(t) % STAGES], A_KC, BM, A_CHUNKS, tid);              \
    round_slice((__local float*)b_bufs[(t) % STAGES], B_KC, BN, B_CHUNKS, tid);              \
    barrier(CLK_LOCAL_MEM_FENCE);                                                            \
  }
#else
#define LANDED(t)                                                                            \
  {                                                                                          \
    wait_copies();                                                                           \
    barrier(CLK_LOCAL_MEM_FENCE);                                                            \
  }
#endif
#define BUF_A(t) ((__local const float*)a_bufs[(t) % STAGES])
#define BUF_B(t) ((__local const float*)b_bufs[(t) % STAGES])
#pragma unroll
  for (int t = 0; t < STAGES - 1; ++t) {
    if (t < slices) COPY_SLICE(t)
    commit_copies();
  }
#if PREFETCH
  /* The first K block's fragments of slice t + 1 are read right after the barrier that
   * follows the mmas of slice t have been issued: their latency and the barrier's overlap the
   * mmas. NOTE: the copy of slice t + STAGES - 1 overwrites slice t - 1's buffer, whose
   * fragments every work-item read before the barrier of the previous iteration. */
  uint af[MI][KS][4], bf[NJ][KS][2];
  if (slices > 0) {
    LANDED(0)
    read_fragments(BUF_A(0), BUF_B(0), 0, wm0, wn0, lane, af, bf);
  }
  for (int t = 0; t < slices; ++t) {
    if (t + STAGES - 1 < slices) COPY_SLICE(t + STAGES - 1)
    commit_copies();
    multiply_fragments(acc, af, bf X_ARG(xch[warp]), lane);
    multiply_slice(BUF_A(t), BUF_B(t), 8 * KS, wm0, wn0, lane, acc X_ARG(xch[warp]));
    if (t + 1 < slices) {
      LANDED(t + 1)
      read_fragments(BUF_A(t + 1), BUF_B(t + 1), 0, wm0, wn0, lane, af, bf);
    }
  }
#else
  for (int t = 0; t < slices; ++t) {
    LANDED(t)
    /* the buffer of slice t + STAGES - 1 held slice t - 1: everyone is past it */
    if (t + STAGES - 1 < slices) COPY_SLICE(t + STAGES - 1)
    commit_copies();
    multiply_slice(BUF_A(t), BUF_B(t), 0, wm0, wn0, lane, acc X_ARG(xch[warp]));
  }
#endif
#else
  float4 ra[A_CHUNKS], rb[B_CHUNKS];
#define LOAD_SLICE(t)                                                                        \
  {                                                                                          \
    load_slice(ra, pa + (t) * step_a, A_KC, BM, A_CHUNKS, lda, M - m0, k_left0 - (t) * BK,   \
               tid);                                                                         \
    load_slice(rb, pb + (t) * step_b, B_KC, BN, B_CHUNKS, ldb, N - n0, k_left0 - (t) * BK,   \
               tid);                                                                         \
  }
#define STORE_SLICE(buf)                                                                     \
  {                                                                                          \
    store_slice((__local float*)a_bufs[buf], ra, A_KC, BM, A_CHUNKS, tid);                   \
    store_slice((__local float*)b_bufs[buf], rb, B_KC, BN, B_CHUNKS, tid);                   \
  }
  if (slices > 0) {
    LOAD_SLICE(0)
    STORE_SLICE(0)
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int t = 0; t < slices; ++t) {
    if (t + 1 < slices) LOAD_SLICE(t + 1)
    multiply_slice((__local const float*)a_bufs[t & 1], (__local const float*)b_bufs[t & 1], 0,
                   wm0, wn0, lane, acc X_ARG(xch[warp]));
    if (t + 1 < slices) STORE_SLICE((t + 1) & 1)
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif

  const long oci = batch_offset(b, nbd, batch, vci);
  const long oco = batch_offset(b, nbd, batch, vco);
  __global float* pz = part + z * M * N;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = m0 + wm0 + 16 * i + g + 8 * (e >> 1);
        const int n = n0 + wn0 + 8 * j + 2 * t + (e & 1);
        if (m < M && n < N) {
          if (splits > 1)
            pz[(long)m * N + n] = acc[i][j][e];
          else
            EPILOGUE(m, n, acc[i][j][e])
        }
      }
}

#endif
