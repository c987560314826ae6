/*
 * xgemm_mma.cl: the multiply of gemm_xgemm.cl's engine on NVIDIA tensor cores, TF32 inputs and
 * fp32 sums (inline PTX mma.sync.m16n8k8), for the implicit-GEMM convolution kernels of
 * conv_xgemm.cl under the NVIDIA plug-in (cltensor/plugins/nvidia.py, allow_tf32). Built as
 * gemm_common.cl + gemm_xgemm.cl (XGEMM_ENGINE_ONLY, XGEMM_MMA 1) + this file + the kernels:
 * the engine's loads, local-memory slices and K loop stay; this file replaces its register
 * tiles, its multiply and its walk over the results.
 *
 * The work-group's MWG x NWG tile is cut among its WGS / 32 warps, MMA_WARPS_N along N: warp w
 * computes the WTM x WTN tile at ((w / MMA_WARPS_N) * WTM, (w % MMA_WARPS_N) * WTN), as
 * (WTM / 16) x (WTN / 8) mma tiles. Per 8-deep step of a slice, lane (g, t) = (lane / 4,
 * lane % 4) reads its fragments from the slices gemm_xgemm.cl stored (as[k][m], bs[k][n]):
 * A's rows g and g + 8 at k = t and t + 4, B's column g at k = t and t + 4, and holds the
 * results of rows g, g + 8 and columns 2t, 2t + 1 (the PTX ISA's m16n8k8 tf32 layouts).
 * Values are rounded to TF32 as they are stored into local memory (gemm_xgemm.cl's TO_LOCAL:
 * half a TF32 unit added, the tensor cores then drop the low 13 bits: nearest, ties away).
 * Padding LDA and LDB to 8 (mod 32) elements makes the fragment reads conflict-free.
 *
 * 16-bit operands (MMA_HALF 1 float16, 2 bfloat16; the slices hold their exact values as
 * floats) take mma.sync.m16n8k16 instead, twice the work per instruction: each register holds
 * two values of K, packed from two floats of the slice. The sum over a slice's 16 values of K
 * may run in any order, so the fragments' K pairs (2t, 2t + 1) and (2t + 8, 2t + 9) are read
 * at rows (t, t + 4) and (t + 8, t + 12): the same conflict-free addresses as TF32's steps.
 *
 * Tunables: MMA_WARPS_N (divides WGS / 32); WTM = MWG / (WGS / 32 / MMA_WARPS_N) a multiple of
 * 16 and WTN = NWG / MMA_WARPS_N of 8; KWG a multiple of 16 with MMA_HALF. MMA_EMULATE 1
 * computes each lane's results in plain OpenCL from the same local memory, with the tensor
 * cores' truncation (tests on any device).
 */
#ifndef MMA_WARPS_N
#define MMA_WARPS_N 2
#endif
#ifndef MMA_EMULATE
#define MMA_EMULATE 0
#endif
#define MMA_WARPS (WGS / 32)
#define MMA_WARPS_M (MMA_WARPS / MMA_WARPS_N)
#define WTM (MWG / MMA_WARPS_M)
#define WTN (NWG / MMA_WARPS_N)
#define MI (WTM / 16)
#define NJ (WTN / 8)
#if MMA_HALF
#define MMA_K 16
#else
#define MMA_K 8
#endif

#if MMA_HALF && !MMA_EMULATE
#if MMA_HALF == 1
#define MMA_TYPES ".f16.f16"
/* the word of two float16 values, lo in the low half (exact: both are float16 values) */
inline uint pack_pair(const float lo, const float hi) {
  uint w;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
}
#else
#define MMA_TYPES ".bf16.bf16"
/* the word of two bfloat16 values (the upper halves of the floats), lo in the low half */
inline uint pack_pair(const float lo, const float hi) {
  uint w;
  asm("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(w) : "r"(as_uint(lo)), "r"(as_uint(hi)));
  return w;
}
#endif
#define MMA_16(d, a0, a1, a2, a3, b0, b1)                                                  \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32" MMA_TYPES ".f32 {%0,%1,%2,%3}, "   \
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                                    \
               : "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3])                    \
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))
#endif

/* acc += slice (as, bs) for the warp's tile at (wm0, wn0), lane (g, t). */
inline void mma_slice(__local const float* as, __local const float* bs, const int wm0,
                      const int wn0, const int g, const int t, float acc[MI][NJ][4]) {
#pragma unroll
  for (int kk = 0; kk < KWG; kk += MMA_K) {
#if MMA_EMULATE
    for (int i = 0; i < MI; ++i)
      for (int j = 0; j < NJ; ++j)
        for (int e = 0; e < 4; ++e) {
          const int m = wm0 + 16 * i + g + 8 * (e >> 1), n = wn0 + 8 * j + 2 * t + (e & 1);
          float d = 0;
          for (int c = 0; c < MMA_K; ++c)
#if MMA_HALF  /* 16-bit values: their products are exact in float */
            d += as[(kk + c) * LDA + m] * bs[(kk + c) * LDB + n];
#else
            d += TF32_TRUNC(as_uint(as[(kk + c) * LDA + m])) *
                 TF32_TRUNC(as_uint(bs[(kk + c) * LDB + n]));
#endif
          acc[i][j][e] += d;
        }
#elif MMA_HALF
    uint af[MI][4], bf[NJ][2];
    __local const float* a0 = as + (kk + t) * LDA + wm0 + g;
    __local const float* b0 = bs + (kk + t) * LDB + wn0 + g;
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {  /* rows g, g + 8; K rows (t, t + 4), (t + 8, t + 12) */
        __local const float* a = a0 + 8 * (e >> 1) * LDA + 16 * i + 8 * (e & 1);
        af[i][e] = pack_pair(a[0], a[4 * LDA]);
      }
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      bf[j][0] = pack_pair(b0[8 * j], b0[4 * LDB + 8 * j]);
      bf[j][1] = pack_pair(b0[8 * LDB + 8 * j], b0[12 * LDB + 8 * j]);
    }
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NJ; ++j)
        MMA_16(acc[i][j], af[i][0], af[i][1], af[i][2], af[i][3], bf[j][0], bf[j][1]);
#else
    uint af[MI][4], bf[NJ][2];
    __local const float* a0 = as + (kk + t) * LDA + wm0 + g;
    __local const float* b0 = bs + (kk + t) * LDB + wn0 + g;
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      af[i][0] = as_uint(a0[16 * i]);
      af[i][1] = as_uint(a0[16 * i + 8]);
      af[i][2] = as_uint(a0[4 * LDA + 16 * i]);
      af[i][3] = as_uint(a0[4 * LDA + 16 * i + 8]);
    }
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      bf[j][0] = as_uint(b0[8 * j]);
      bf[j][1] = as_uint(b0[4 * LDB + 8 * j]);
    }
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NJ; ++j)
        MMA_TF32(acc[i][j], af[i][0], af[i][1], af[i][2], af[i][3], bf[j][0], bf[j][1]);
#endif
  }
}

#undef XGEMM_PROLOGUE
#define XGEMM_PROLOGUE                                                                     \
  __local float a_slices[NBUF][KWG * LDA];                                                 \
  __local float b_slices[NBUF][KWG * LDB];                                                 \
  const int tn = get_local_id(0), tm = get_local_id(1), tid = tm * NDIMC + tn;            \
  const int warp_ = tid / 32, lane_ = tid % 32;                                            \
  const int wm0_ = (warp_ / MMA_WARPS_N) * WTM, wn0_ = (warp_ % MMA_WARPS_N) * WTN;       \
  const int g_ = lane_ >> 2, t_ = lane_ & 3;                                               \
  float acc[MI][NJ][4];                                                                    \
  _Pragma("unroll") for (int i = 0; i < MI; ++i)                                           \
  _Pragma("unroll") for (int j = 0; j < NJ; ++j)                                           \
  _Pragma("unroll") for (int e = 0; e < 4; ++e) acc[i][j][e] = 0;

#undef XGEMM_MULTIPLY
#define XGEMM_MULTIPLY(as, bs) mma_slice(as, bs, wm0_, wn0_, g_, t_, acc)

#undef XGEMM_FOR_EACH_RESULT
#define XGEMM_FOR_EACH_RESULT(STORE)                                                       \
  _Pragma("unroll") for (int i = 0; i < MI; ++i)                                           \
  _Pragma("unroll") for (int j = 0; j < NJ; ++j)                                           \
  _Pragma("unroll") for (int e = 0; e < 4; ++e)                                            \
      STORE(m0 + wm0_ + 16 * i + g_ + 8 * (e >> 1), n0 + wn0_ + 8 * j + 2 * t_ + (e & 1),  \
            acc[i][j][e])
