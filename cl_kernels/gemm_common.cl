/*
 * gemm_common.cl: definitions shared by the GEMM kernel files (gemm_direct.cl, gemm_cpu.cl,
 * gemm_xgemm.cl, gemm_pack.cl). cltensor/ops/gemm/kit.py prepends this file to each of them before
 * the build, so every kernel there sees the same argument lists, batch indexing and epilogue.
 *
 * Batches: a launch covers the flat batch indices batch0 .. batch0 + global_size(2) - 1, split
 * over the `nbd` batch dims of `batch` (row-major, at most MAX_DIMS of
 * common.cl); each operand's View gives its offset and per-dim batch strides
 * (0 broadcasts), all in elements.
 *
 * Epilogue (every GEMM kernel, applied when C is stored):
 *   Co[m, n] = act(alpha * acc + beta * Ci[m, n] + rbias[m] + cbias[n])
 * Ci is not read when beta == 0 (NaN/Inf in it do not propagate, as in BLAS and torch); the
 * biases are added when bits EPI_ROW_BIAS / EPI_COL_BIAS of `epi` are set, and act is ReLU
 * (NaN stays NaN, as torch.relu) when bit EPI_RELU is set, else the identity.
 *
 * Build options: T, the compute type (float, double, int or long); TA, TB, TC and TR, the
 * storage types of A, B, C (Ci and Co) and the biases (default T; half or bf16 with T float:
 * 16-bit operands are read in place through common.cl's LD and C stored through ST, rounded
 * once from the float sums); C_ROUNDS, set by the host when TC is not T (vector stores of C
 * then go lane by lane through ST).
 */
#include "common.cl"

#ifndef T
#define T float
#endif
#ifndef TA
#define TA T
#endif
#ifndef TB
#define TB T
#endif
#ifndef TC
#define TC T
#endif
#ifndef TR
#define TR TC
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

/* d[0..3] += the product of a 16x8 TF32 fragment (a0..a3) and an 8x8 one (b0, b1), fp32 sums:
 * NVIDIA's mma.sync.m16n8k8 through inline PTX (expanded only by the NVIDIA plug-in's files,
 * nvidia_mma.cl and xgemm_mma.cl, which give the fragment layouts). */
#define MMA_TF32(d, a0, a1, a2, a3, b0, b1)                                               \
  asm volatile(                                                                            \
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "                 \
      "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                                             \
      : "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3])                             \
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))
/* A TF32 operand as the tensor cores read it, from a float's bits: the low 13 mantissa bits
 * dropped (the plug-in files' plain-OpenCL emulation of MMA_TF32). */
#define TF32_TRUNC(bits) as_float((bits) & 0xffffe000u)

/* W elements of storage type X at p as a vector of W compute values (floatW for half and
 * bf16, the type itself for the others; W 1 gives a scalar): VLDA where p is aligned to W
 * elements, VLD anywhere (W > 1). */
#define VSUF_1
#define VSUF_2 2
#define VSUF_4 4
#define VSUF_8 8
#define VSUF_16 16
#define VTYPE(S, W) CAT(S, CAT(VSUF_, W))
#define BITS_OF(X) CAT(BITS_, X)
#define BITS_half ushort
#define BITS_bf16 ushort
#define BITS_float float
#define BITS_double double
#define BITS_int int
#define BITS_long long
#define VLDA(X, W, p) CAT(CVT_, X)(W, *(__global const VTYPE(BITS_OF(X), W)*)(p))
#define VLD(X, W, p) CAT(VLD_, X)(W, p)
#define VLD_float(W, p) CAT(vload, W)(0, p)
#define VLD_double(W, p) CAT(vload, W)(0, p)
#define VLD_int(W, p) CAT(vload, W)(0, p)
#define VLD_long(W, p) CAT(vload, W)(0, p)
/* NOTE: 16-bit vectors through a type aligned like their elements, not vloadN: PoCL compiles
 * vloadN to out-of-line calls */
#define VLD_half(W, p) CVT_half(W, *(__global const CAT(CAT(ushort, W), _u)*)(p))
#define VLD_bf16(W, p) CVT_bf16(W, *(__global const CAT(CAT(ushort, W), _u)*)(p))
typedef ushort2 __attribute__((aligned(2))) ushort2_u;
typedef ushort4 __attribute__((aligned(2))) ushort4_u;
typedef ushort8 __attribute__((aligned(2))) ushort8_u;
typedef ushort16 __attribute__((aligned(2))) ushort16_u;
#define CVT_float(W, v) (v)
#define CVT_double(W, v) (v)
#define CVT_int(W, v) (v)
#define CVT_long(W, v) (v)
#define CVT_half(W, v) CAT(half_lanes, CAT(VSUF_, W))(v)
#define CVT_bf16(W, v) CAT(bf16_lanes, CAT(VSUF_, W))(v)
#define half_lanes half_bits_to_float
inline float bf16_lanes(const ushort h) { return as_float((uint)h << 16); }
/* float16 and bfloat16 lanes as float lanes, converted as common.cl's LD_half and LD_bf16 */
#define GEMM_16BIT_LANES(W)                                                              \
  inline CAT(float, W) CAT(bf16_lanes, W)(const CAT(ushort, W) h) {                      \
    return CAT(as_float, W)(CAT(convert_uint, W)(h) << 16);                              \
  }                                                                                      \
  inline CAT(float, W) CAT(half_lanes, W)(const CAT(ushort, W) h) {                      \
    const CAT(uint, W) e = CAT(convert_uint, W)(h) & 0x7fffu;                            \
    CAT(float, W) f = CAT(as_float, W)(e << 13) * 0x1p112f;                              \
    f = select(f, CAT(convert_float, W)(e) * 0x1p-24f, e < 0x400u);      \
    f = select(f, CAT(as_float, W)((e << 13) | 0x7f800000u), e >= 0x7c00u); \
    return CAT(as_float, W)(CAT(as_uint, W)(f) | ((CAT(convert_uint, W)(h) & 0x8000u) << 16)); \
  }
GEMM_16BIT_LANES(2)
GEMM_16BIT_LANES(4)
GEMM_16BIT_LANES(8)
GEMM_16BIT_LANES(16)

#define EPI_ROW_BIAS 1
#define EPI_COL_BIAS 2
#define EPI_RELU 4


/* The batch range and the output side: C's input and output views and the epilogue. */
#define BATCH_ARGS const long batch0, const int nbd, const Shape batch
#define EPI_ARGS                                                                          \
  const T alpha, const T beta,                                                            \
      __global const TC* Ci, const View vci, const long ci_rs, const long ci_cs,          \
      __global TC* Co, const View vco, const long co_rs, const long co_cs, const int epi, \
      __global const TR* rbias, const long rb_off, const long rb_st,                      \
      __global const TR* cbias, const long cb_off, const long cb_st

/* The element offsets of flat batch `b` in up to four views. */
inline long batch_offset(long b, const int nbd, const Shape batch, const View v) {
  long o = v.offset;
  for (int d = nbd - 1; d > 0; --d) {
    const long i = b % batch.size[d];
    b /= batch.size[d];
    o += i * v.stride[d];
  }
  /* NOTE: what is left of b indexes the outermost dim (b < size[0]): no division for it, and
   * none at all for one batch dim (64-bit divisions cost CPU kernels with short loops) */
  return nbd > 0 ? o + b * v.stride[0] : o;
}

/* This work-group's tile (pm, pn) of a 2-D grid of tiles, in bands of group_m tile rows:
 * consecutive work-groups go down a band before moving to its next column, so that the groups
 * running at once share panels of A and B in the cache (group_m 1: rows in launch order). */
inline void tile_of(const int group_m, int* pm, int* pn) {
  const int ngn = get_num_groups(0), ngm = get_num_groups(1);
  const int gid = get_group_id(1) * ngn + get_group_id(0);
  const int per = group_m * ngn, first = gid / per * group_m;
  const int rows = min(ngm - first, group_m);
  *pm = first + gid % per % rows;
  *pn = gid % per / rows;
}

/* Streaming (non-temporal) stores where the compiler has them (HAS_NT_STORE): a line is
 * written without being read first. NT_FENCE() orders them before a work-item ends (x86's
 * are weakly ordered). Used by gemm_pack.cl's NT_STORE and by C_NT. */
#if defined(__has_builtin)
#if __has_builtin(__builtin_nontemporal_store)
#define HAS_NT_STORE 1
#endif
#endif
#ifndef HAS_NT_STORE
#define HAS_NT_STORE 0
#endif
#if HAS_NT_STORE && (defined(__x86_64__) || defined(__i386__))
#define NT_FENCE() __builtin_ia32_sfence()
#else
#define NT_FENCE()
#endif
/* C_NT 1 (gemm_cpu.cl's gemm_packed, which ends with NT_FENCE(); the host sets it for a large
 * C whose rows, offset and batch strides are multiples of the vector, in a vector-aligned
 * buffer): C's vectors go out as streaming stores. */
#if defined(C_NT) && C_NT && HAS_NT_STORE
#define C_VECTOR_STORE_(W, P, at, r)                                                    \
  __builtin_nontemporal_store((r), (__global CL_CAT(T, W)*)(Co + (at)));
#else
#define C_VECTOR_STORE_(W, P, at, r) *(__global P*)(Co + (at)) = (r);
#endif
/* EPILOGUE without Ci on W columns at once, n .. n + W - 1 of row m, for x of vector type V
 * (L: a union of V with its lanes), stored through a pointer to P (V, or V with a smaller
 * alignment for stores that may start anywhere; with C_ROUNDS lane by lane through ST);
 * Co's columns are contiguous. */
#ifdef C_ROUNDS
#define STORE_VECTOR_(L, W, P, at, r)                                                   \
  {                                                                                     \
    L o_;                                                                               \
    o_.v = (r);                                                                         \
    _Pragma("unroll") for (int f = 0; f < (W); ++f) ST(TC, Co, (at) + f, o_.s[f]);      \
  }
#else
#define STORE_VECTOR_(L, W, P, at, r) C_VECTOR_STORE_(W, P, at, r)
#endif
#define EPILOGUE_VECTOR(V, L, W, P, m, n, x)                                            \
  {                                                                                     \
    V r_ = alpha * (x);                                                                 \
    if (epi & EPI_ROW_BIAS) r_ += LD(TR, rbias, rb_off + (long)(m) * rb_st);            \
    if (epi & EPI_COL_BIAS) {                                                           \
      L cb_;                                                                            \
      _Pragma("unroll") for (int f = 0; f < (W); ++f)                                   \
          cb_.s[f] = LD(TR, cbias, cb_off + (long)((n) + f) * cb_st);                   \
      r_ += cb_.v;                                                                      \
    }                                                                                   \
    if (epi & EPI_RELU) r_ = r_ < (V)0 ? (V)0 : r_;                                     \
    STORE_VECTOR_(L, W, P, oco + (long)(m) * co_rs + (n), r_)                           \
  }

/* Co[m, n] = act(alpha * acc + beta * Ci[m, n] + biases); oci and oco are the batch offsets. */
#define EPILOGUE(m, n, acc)                                                       \
  {                                                                               \
    T r_ = alpha * (acc);                                                         \
    if (beta != (T)0) r_ += beta * LD(TC, Ci, oci + (long)(m) * ci_rs + (long)(n) * ci_cs); \
    if (epi & EPI_ROW_BIAS) r_ += LD(TR, rbias, rb_off + (long)(m) * rb_st);      \
    if (epi & EPI_COL_BIAS) r_ += LD(TR, cbias, cb_off + (long)(n) * cb_st);      \
    if ((epi & EPI_RELU) && r_ < (T)0) r_ = (T)0;                                 \
    ST(TC, Co, oco + (long)(m) * co_rs + (long)(n) * co_cs, r_);                  \
  }
