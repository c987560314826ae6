/*
 * softmax.cl: softmax and log_softmax over one dim with their backward, and the fused softmax
 * cross-entropy loss (class-index targets, class weights, ignore_index, label smoothing).
 *
 * Layout: the input is a set of rows: a strided (O, D, I) view (the dims before the softmax
 * dim, the softmax dim, the dims after it, each group collapsed to one dim). Row r = (o, i) =
 * (r / I, r % I) holds the D elements at off + o * so + d * sd + i * si (a View3). Per-row values
 * (loss, weight, lse, gradient scale) are per (o, i): contiguous arrays of O * I, or a View2 for
 * the targets and scales, which may be strided or broadcast (stride 0).
 *
 * Work decomposition, the LANES build option:
 *   LANES == 1  one work-item per row (r = get_global_id(0)), no local memory and no barriers:
 *               CPUs (PoCL runs every barrier as a loop over the work-items), and GPUs when
 *               I > 1 (neighbouring work-items read neighbouring i, which coalesces) or D is small.
 *   LANES > 1   one work-group of LANES work-items (a power of two) per row: lane l takes
 *               d = l, l + LANES, ... and the lanes' partial results meet in a local-memory tree.
 *               The launch must have exactly one work-group per row (no bounds check).
 *
 * Numerics: the row max m and s = sum exp(x - m) come from one pass that rescales s whenever m
 * grows (online softmax), so each kernel reads a row twice at most. -inf elements add nothing;
 * a row of only -inf gives NaN, as torch; a NaN becomes the max, so it spreads to its whole row.
 * A work-item's sums are compensated (compensated.cl's ksum, prepended by the launcher; the
 * online sum by Kahan's): one work-item sums a whole row on CPUs, and
 * plain float32 sums of 1e5 classes were 0.7% off (cross entropy, 12 against zeros).
 *
 * Kernels:
 *   softmax_fwd  y = exp(x - m) / s, or (x - m) - log(s) when log_ != 0
 *   softmax_bwd  gx = y * (g - sum(g * y)), or with log_ gx = g - exp(y) * sum(g)
 *   xent_fwd     per row with target t (class weights w, W = sum of w, smoothing eps):
 *                lse = m + log(s);
 *                loss = (1 - eps) w_t (lse - x_t) + eps / D * sum_c w_c (lse - x_c)
 *                and the row's weight w_t; both 0 when t == ignore_index. Without class
 *                weights (weighted == 0) every w_c is 1 and w is not read. An out-of-range t is
 *                written to bad[0] (the caller raises).
 *   xent_bwd     one work-item per element (a 3-d range (I, D, O)), gx contiguous over (O, D, I):
 *                gx = scale_r * (exp(x - lse) * A - a_d),
 *                a_d = (1 - eps) w_t [d == t] + eps / D w_d,
 *                A = sum_d a_d = (1 - eps) w_t + eps / D W, W read from wsum[0] (D without weights)
 * Build options (after compensated.cl):
 *   T           data and accumulation type (float or double)
 *   S           softmax_fwd/bwd's storage type (default T; half or bf16 with T float, read and
 *               written through common.cl's LD/ST); the cross-entropy kernels take T data
 *   LANES       work-items per row (see above), default 1
 * Tunables: LANES (the launcher picks it per device). Variants that do not change the memory
 * traffic (log_, weighted) are kernel arguments, not build options, to keep builds few.
 */
#ifndef LANES
#define LANES 1
#endif
#ifndef S
#define S T
#endif
#include "common.cl"

typedef struct { long off, o, d, i; } View3;
typedef struct { long off, o, i; } View2;

/* NOTE: with LANES > 1 the launch has exactly `rows` work-groups, so no row is past the end and
 * nothing returns ahead of the barriers. Such a return is legal (it is uniform over the
 * work-group), but PoCL 3.1's default work-group method (loopvec) corrupts the heap when one
 * precedes barriers and a loop after the last barrier runs zero times for some lanes (rows
 * shorter than LANES); docs/oclgrind.md has the reproduction. */
#if LANES > 1
#define ROW() get_group_id(0)
#define LANE() get_local_id(0)
#define RETURN_PAST_LAST_ROW(r)
#else
#define ROW() get_global_id(0)
#define LANE() 0
#define RETURN_PAST_LAST_ROW(r) if ((r) >= rows) return;
#endif

#define WEIGHT(c) (weighted ? w[c] : (T)1)

/* ---- compensated sums and the online max-and-sum state ---------------------------------------- */

/* (m, s - c) += x: the max so far and the sum of exp(. - m), compensated by Kahan's c (no
 * branch as in ksum: each term, at most 1, is at most s, which holds the max's 1). */
inline void ms_add(T* m, T* s, T* c, const T x) {
  if (x > *m || isnan(x)) {
    const T scale = exp(*m - x);
    *s = *s * scale + exp(x - x);  /* exp(x - x): NaN for x = +inf, as torch */
    *c *= scale;
    *m = x;
  } else if (x != -INFINITY) {
    const T v = exp(x - *m) - *c, t = *s + v;
    *c = (t - *s) - v;
    *s = t;
  }
}

inline void ms_merge(T* m, T* s, const T m2, const T s2) {
  if (m2 > *m || isnan(m2)) {
    *s = *s * exp(*m - m2) + s2;
    *m = m2;
  } else if (m2 != -INFINITY) {
    *s += s2 * exp(m2 - *m);
  }
}

#if LANES > 1
/* The lanes' (m, s) combined; every lane gets the result. */
inline void ms_tree(T* m, T* s, __local T* lm, __local T* ls) {
  const int l = LANE();
  lm[l] = *m;
  ls[l] = *s;
  for (int k = LANES / 2; k > 0; k >>= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l < k) {
      T a = lm[l], b = ls[l];
      ms_merge(&a, &b, lm[l + k], ls[l + k]);
      lm[l] = a;
      ls[l] = b;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  *m = lm[0];
  *s = ls[0];
}

/* The lanes' sum; every lane gets the result (buf must not be read again before a barrier). */
inline T sum_tree(T v, __local T* buf) {
  const int l = LANE();
  barrier(CLK_LOCAL_MEM_FENCE);
  buf[l] = v;
  for (int k = LANES / 2; k > 0; k >>= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l < k) buf[l] += buf[l + k];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  return buf[0];
}
#define SUM_LANES(v, buf) sum_tree(v, buf)
#else
#define SUM_LANES(v, buf) (v)
#endif

inline long row_base(const View3 v, const long r, const long I) {
  return v.off + (r / I) * v.o + (r % I) * v.i;
}

inline long row_at(const View2 v, const long r, const long I) {
  return v.off + (r / I) * v.o + (r % I) * v.i;
}

/* ---- softmax / log_softmax ------------------------------------------------------------------- */

__kernel void softmax_fwd(const long rows, const long D, const long I, const int log_,
                          __global const S* x, const View3 vx, __global S* y, const View3 vy) {
  const long r = ROW();
  RETURN_PAST_LAST_ROW(r)
  const long xb = row_base(vx, r, I), yb = row_base(vy, r, I);
  T m = -INFINITY, s = 0, c = 0;
  for (long d = LANE(); d < D; d += LANES) ms_add(&m, &s, &c, LD(S, x, xb + d * vx.d));
  s -= c;
#if LANES > 1
  __local T lm[LANES], ls[LANES];
  ms_tree(&m, &s, lm, ls);
#endif
  if (log_) {
    /* (x - m) - log(s): x - (m + log(s)) rounded log(s) to m's scale (1e-6 at m = 12) */
    const T log_s = log(s);
    for (long d = LANE(); d < D; d += LANES)
      ST(S, y, yb + d * vy.d, (LD(S, x, xb + d * vx.d) - m) - log_s);
  } else {
    const T inv = (T)1 / s;
    for (long d = LANE(); d < D; d += LANES)
      ST(S, y, yb + d * vy.d, exp(LD(S, x, xb + d * vx.d) - m) * inv);
  }
}

#ifdef VEC16
/* softmax_fwd for CPUs (LANES 1, T float; S float, half or bf16) on rows whose elements are
 * contiguous (vx.d == vy.d == 1). The row is walked in blocks of SM_BLOCK elements (the last
 * one shorter, then a scalar tail): each block's max per lane first (the block then stays in
 * L1), then its sum of exp(x - m) per lane in four independent Kahan sums, added once per
 * block to the lanes' running sums (rescaled when a lane's max grew, compensated by
 * Neumaier's c). Before the blocks, one compensated sum per lane took every vector, each add
 * waiting for the one before (four dependent adds: about 12 cycles per vector, more than the
 * exp), and a test of the max per 16 elements (any()) compiled to a branch per lane. */
#define SM_BLOCK 1024
#define SM_MAX_BLOCKS 64

#ifdef S16
/* exp(v) for v <= 0 or NaN, for 16-bit outputs: 2^n 2^f with v log2(e) = n + f, |f| <= 1/2,
 * n rounded by adding 1.5 * 2^23 (its low bits are n), 2^n made in the exponent bits, 2^f of
 * degree 4 (3e-6 off, float16) or 3 (1e-4 off, bfloat16: a 39th of its half ulp). v is first
 * raised to -88 (NaN kept: max's operand order), where n = -127 gives 2^n = 0, so -inf gives 0
 * exactly. Five operations fewer than the float32 form with its two tests: 16-bit rows are
 * bound by this arithmetic, not by their bytes. */
inline float16 exp_neg16(float16 v) {
  v = (float16)(-88.0f) > v ? (float16)(-88.0f) : v;
  const float16 big = fma(v, (float16)1.44269504089f, (float16)12582912.0f);
  const float16 n = big - 12582912.0f;
  const float16 f = fma(v, (float16)1.44269504089f, -n);
#ifdef S_BF16
  float16 p = fma((float16)0.0550089292f, f, (float16)0.242210969f);
#else
  float16 p = fma((float16)0.00958285294f, f, (float16)0.0559064262f);
  p = fma(p, f, (float16)0.240240991f);
#endif
  p = fma(p, f, (float16)0.693124175f);
  p = fma(p, f, (float16)1.0f);
  return p * as_float16((as_int16(big) - 0x4B400000 + 127) << 23);
}
#else
/* exp(v) for v <= 0 or NaN, within 2 float32 ulps (0 below -87, where exp leaves the normal
 * floats): 2^n p(r) for v = n ln 2 + r, |r| <= ln 2 / 2, p of degree 6 (Cephes' expf), n
 * rounded by adding 1.5 * 2^23 (its low bits are n) and 2^n made in the exponent bits. */
inline float16 exp_neg16(const float16 v) {
  const float16 big = v * 1.44269504089f + 12582912.0f;
  const float16 n = big - 12582912.0f;
  float16 r = fma(n, (float16)-0.693359375f, v);
  r = fma(n, (float16)2.12194440e-4f, r);
  float16 p = fma((float16)1.9875691500e-4f, r, (float16)1.3981999507e-3f);
  p = fma(p, r, (float16)8.3334519073e-3f);
  p = fma(p, r, (float16)4.1665795894e-2f);
  p = fma(p, r, (float16)1.6666665459e-1f);
  p = fma(p, r, (float16)5.0000001201e-1f);
  p = fma(p, r * r, r + 1.0f);
  const float16 e = p * as_float16((as_int16(big) - 0x4B400000 + 127) << 23);
  return select(e, (float16)0, v < -87.0f);  /* NaN stays NaN */
}
#endif

/* exp(x - m), 0 for x = -inf (m may be -inf too: -inf - -inf is NaN) */
inline float16 exp_below(const float16 x, const float16 m) {
  return select(exp_neg16(x - m), (float16)0, x == -INFINITY);
}

/* s - c += v lane by lane: Kahan's sum, c the error (terms no larger than the sum so far) */
inline void kahan16(float16* s, float16* c, const float16 v) {
  const float16 y = v - *c, t = *s + y;
  *c = (t - *s) - y;
  *s = t;
}

/* The lanes' max of m and x[b .. b + n) (n a multiple of 16), NaN skipped by fmax */
inline float16 block_max16(__global const S* x, const long b, const int n, const float16 m) {
  float16 m0 = m, m1 = m, m2 = m, m3 = m;
  int k = 0;
  for (; k + 64 <= n; k += 64) {
    m0 = fmax(m0, VLD16(S, x, b + k));
    m1 = fmax(m1, VLD16(S, x, b + k + 16));
    m2 = fmax(m2, VLD16(S, x, b + k + 32));
    m3 = fmax(m3, VLD16(S, x, b + k + 48));
  }
  for (; k < n; k += 16) m0 = fmax(m0, VLD16(S, x, b + k));
  return fmax(fmax(m0, m1), fmax(m2, m3));
}

/* The 16 lanes' (m, s + c) over x[b .. b + n) (n a multiple of 16) added to the running ones;
 * a NaN is skipped by fmax, and its exp makes the sum NaN. The block's terms go to four
 * independent Kahan sums (each at most 1, so no larger than a sum that holds any term), which
 * join the running Neumaier sums: plain partial sums lost 2-3 float32 ulps of a row's sum. */
inline void ms_block16(__global const S* x, const long b, const int n, float16* m, float16* s,
                       float16* c) {
  const float16 bm = block_max16(x, b, n, *m);
  int k;
  float16 e0 = 0, e1 = 0, e2 = 0, e3 = 0, k0 = 0, k1 = 0, k2 = 0, k3 = 0;
  for (k = 0; k + 64 <= n; k += 64) {
    kahan16(&e0, &k0, exp_below(VLD16(S, x, b + k), bm));
    kahan16(&e1, &k1, exp_below(VLD16(S, x, b + k + 16), bm));
    kahan16(&e2, &k2, exp_below(VLD16(S, x, b + k + 32), bm));
    kahan16(&e3, &k3, exp_below(VLD16(S, x, b + k + 48), bm));
  }
  for (; k < n; k += 16) kahan16(&e0, &k0, exp_below(VLD16(S, x, b + k), bm));
  /* exp(-inf - -inf) is NaN: a lane still at -inf keeps its (zero) sum */
  const float16 scale = select(exp(*m - bm), (float16)1, *m == bm);
  *s *= scale;
  *c = *c * scale - ((k0 + k1) + (k2 + k3));
  ksum16(s, c, e0);
  ksum16(s, c, e1);
  ksum16(s, c, e2);
  ksum16(s, c, e3);
  *m = bm;
}

/* float16 rows through clang's __fp16 vectors where the launcher sets HALF_VECTORS (not on
 * Oclgrind): one conversion of 16 elements each way, where PoCL compiles vload_half16 and
 * vstore_half16_rte to two 8-wide ones and an insert or extract. NOTE: defined after
 * block_max16 and ms_block16, which keep vload_half16: LLVM narrows fmax of two widened
 * halves to a half-precision max, which PoCL's CPU code runs element by element
 * (log_softmax of 64 rows of 256K float16: 2.5 -> 23 ms) */
#if defined(HALF_VECTORS) && defined(__clang__) && defined(S16) && !defined(S_BF16)
typedef __fp16 H16 __attribute__((ext_vector_type(16)));
#undef VLD16_half
#undef VST16_half
#define VLD16_half(p, i) \
  __builtin_convertvector(__builtin_bit_cast(H16, *(__global const ushort16_a2*)((p) + (i))), float16)
#define VST16_half(p, i, v) \
  (*(__global ushort16_a2*)((p) + (i)) = __builtin_bit_cast(ushort16, __builtin_convertvector((v), H16)))
#endif

/* The largest of v's lanes that is not NaN (-inf when none is, or all are NaN: NaN). NOTE:
 * through memory, not v.lo and v.hi: Oclgrind's uninitialized-value checks flag those halves
 * (once per block of 1024 elements or more) */
inline float hmax16(const float16 v) {
  float l[16];
  vstore16(v, 0, l);
  float m = l[0];
  for (int i = 1; i < 16; ++i) m = fmax(m, l[i]);
  return m;
}

/* A block's sums of exp: compensated for float32 outputs; plain for 16-bit ones, whose blocks'
 * sums (at most a 64th of a block's terms per sum, 2e-6 off at most) are compensated
 * across blocks, as float32's */
#ifdef S16
#define BLOCK_ADD(e, kc, v) (e) += (v)
#else
#define BLOCK_ADD(e, kc, v) kahan16(&(e), &(kc), (v))
#endif

/* STEP(a, b, o) over a block's k = 0, 16, .. n - 16 (n a multiple of 16): four vectors a step,
 * each with its own accumulators (independent chains), then the last vectors one at a time */
#define BLOCK_STEPS(STEP, a0, b0, a1, b1, a2, b2, a3, b3)                    \
  for (k = 0; k + 64 <= n; k += 64) {                                        \
    STEP(a0, b0, 0) STEP(a1, b1, 16) STEP(a2, b2, 32) STEP(a3, b3, 48)       \
  }                                                                          \
  for (; k < n; k += 16) STEP(a0, b0, 0)

/* exp(x - bm) kept in y for the scaling pass. bfloat16: without VST16's NaN test (a NaN
 * makes s NaN, so every output of the row NaN whatever y keeps, and the scaling pass stores
 * those rows through VST16), rounded half up (positive finite values: no carry reaches the
 * sign); STORE_FINITE: the scaled outputs of a row whose scale is a number, rounded to
 * nearest even as torch, without the NaN test */
#ifdef S_BF16
#define STORE_EXP(y, i, v) \
  (*(__global ushort16_a2*)((y) + (i)) = convert_ushort16((as_uint16(v) + 0x8000u) >> 16))
inline void store_finite_bf16(__global S* y, const long i, const float16 v) {
  const uint16 u = as_uint16(v);
  *(__global ushort16_a2*)(y + i) = convert_ushort16((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#define STORE_FINITE(y, i, v) store_finite_bf16(y, i, v)
#else
#define STORE_EXP(y, i, v) VST16(S, y, i, v)
#endif

/* softmax's block [b, b + n) of a row (n a multiple of 16, y's block at yb): its max bm over
 * all lanes (returned), exp(x - bm) stored to y and summed in four independent Kahan sums per
 * lane, which join the running Neumaier sums (s + c, of exp(. - m)) as ms_block16's; *m is
 * the running max (scalar). */
inline float exp_block16(__global const S* x, const long b, __global S* y, const long yb,
                         const int n, float* m, float16* s, float16* c) {
  const float bm = hmax16(block_max16(x, b, n, (float16)(-INFINITY)));
  /* a block of only -inf (x - bm NaN): zeros */
  const float16 bmv = bm == -INFINITY ? 0.0f : bm;
  int k;
  float16 e0 = 0, e1 = 0, e2 = 0, e3 = 0, k0 = 0, k1 = 0, k2 = 0, k3 = 0;
#define EXP_STEP(e, kc, o)                                 \
  {                                                        \
    const float16 v = exp_neg16(VLD16(S, x, b + k + o) - bmv); \
    STORE_EXP(y, yb + k + o, v);                           \
    BLOCK_ADD(e, kc, v);                                   \
  }
  BLOCK_STEPS(EXP_STEP, e0, k0, e1, k1, e2, k2, e3, k3)
#undef EXP_STEP
  /* the running sums and the block's to the larger max (exp(-inf - -inf) is NaN: a max that
   * stays keeps its scale 1) */
  const float nm = fmax(*m, bm);
  const float sr = *m == nm ? 1.0f : exp(*m - nm), sb = bm == nm ? 1.0f : exp(bm - nm);
  *s *= sr;
  *c = *c * sr - ((k0 + k1) + (k2 + k3)) * sb;
  ksum16(s, c, e0 * sb);
  ksum16(s, c, e1 * sb);
  ksum16(s, c, e2 * sb);
  ksum16(s, c, e3 * sb);
  *m = nm;
  return bm;
}

#ifdef S16
/* A 16-bit row's block after its first: exp(x - ref) for ref the running max *m (finite), stored
 * and summed as exp_block16's, with the block's max found in the same loop: one read of the
 * block, so its loads from memory overlap the exp's arithmetic, where exp_block16's max pass
 * left the core waiting on memory, then its exp pass left the memory idle. A block whose max
 * passes ref + SM_SLACK (exp(8) = 2981 fits float16) is done again by exp_block16 (its max may
 * also be +inf). Returns the max its exps were taken from. */
#define SM_SLACK 8.0f
inline float exp_block16_run(__global const S* x, const long b, __global S* y, const long yb,
                             const int n, float* m, float16* s, float16* c) {
  const float ref = *m;
  if (!isfinite(ref)) return exp_block16(x, b, y, yb, n, m, s, c);
  const float16 rv = ref;
  float16 e0 = 0, e1 = 0, e2 = 0, e3 = 0, l0 = -INFINITY, l1 = l0, l2 = l0, l3 = l0;
  int k;
  /* the lanes' max by x86's max operand order (a NaN leaves l as it is: its exp makes s NaN) */
#define RUN_STEP(e, l, o)                                  \
  {                                                        \
    const float16 xv = VLD16(S, x, b + k + o);             \
    l = xv > l ? xv : l;                                   \
    const float16 v = exp_neg16(xv - rv);                  \
    STORE_EXP(y, yb + k + o, v);                           \
    e += v;                                                \
  }
  BLOCK_STEPS(RUN_STEP, e0, l0, e1, l1, e2, l2, e3, l3)
#undef RUN_STEP
  if (hmax16(fmax(fmax(l0, l1), fmax(l2, l3))) > ref + SM_SLACK)
    return exp_block16(x, b, y, yb, n, m, s, c);
  ksum16(s, c, e0);
  ksum16(s, c, e1);
  ksum16(s, c, e2);
  ksum16(s, c, e3);
  return ref;
}
#define NEXT_BLOCK exp_block16_run
#else
#define NEXT_BLOCK exp_block16
#endif

/* softmax (not log) of a row of D16 >= 16 vector elements and D - D16 scalar ones, one exp
 * per element: each block's exp(x - bm) goes to y as it is summed (exp_block16; 16-bit rows'
 * later blocks by exp_block16_run), then a pass over y, last block first (those still in
 * cache), scales block k by exp(bm_k - m) / s. Before, a second exp
 * per element in place of that scaling made float32 compute-bound: 16-bit rows ran no faster
 * than float32's. 16-bit outputs are rounded twice (exp(x - bm), then the scaled value):
 * within an ulp. */
inline void softmax_row16(__global const S* x, const long xb, __global S* y, const long yb,
                          const long D, const long D16) {
  /* blocks of at least SM_BLOCK elements, at most SM_MAX_BLOCKS of them */
  const long blk = max((long)SM_BLOCK, (D16 + SM_MAX_BLOCKS * 64 - 1) / (SM_MAX_BLOCKS * 64) * 64);
  float bms[SM_MAX_BLOCKS];
  float mb = -INFINITY;
  float16 sv = 0, cv = 0;
  int nb = 0;
  for (long d = 0; d < D16; d += blk, ++nb)
    bms[nb] = nb == 0 ? exp_block16(x, xb + d, y, yb + d, (int)min(blk, D16 - d), &mb, &sv, &cv)
                      : NEXT_BLOCK(x, xb + d, y, yb + d, (int)min(blk, D16 - d), &mb, &sv, &cv);
  T ls[16], m = mb, s = 0, c = 0;
  vstore16(sv + cv, 0, ls);
  for (int l = 0; l < 16; ++l) ksum(&s, &c, ls[l]);
  s += c;
  c = 0;
  for (long d = D16; d < D; ++d) ms_add(&m, &s, &c, LD(S, x, xb + d));
  s -= c;
  const T inv = (T)1 / s;
  /* last block first: the blocks written last are the ones still in cache */
  for (--nb; nb >= 0; --nb) {
    const T f = exp(bms[nb] - m) * inv;
    const long d = nb * blk, end = min(d + blk, D16);
#ifdef S_BF16
    if (isnan(f))  /* a NaN row: VST16 keeps NaN a NaN */
      for (long e = d; e < end; e += 16) VST16(S, y, yb + e, VLD16(S, y, yb + e) * f);
    else
      for (long e = d; e < end; e += 16) STORE_FINITE(y, yb + e, VLD16(S, y, yb + e) * f);
#else
    for (long e = d; e < end; e += 16) VST16(S, y, yb + e, VLD16(S, y, yb + e) * f);
#endif
  }
  for (long d = D16; d < D; ++d) ST(S, y, yb + d, exp(LD(S, x, xb + d) - m) * inv);
}

__kernel void softmax_fwd_vec16(const long rows, const long D, const long I, const int log_,
                                __global const S* x, const View3 vx, __global S* y,
                                const View3 vy) {
  const long r = ROW();
  RETURN_PAST_LAST_ROW(r)
  const long xb = row_base(vx, r, I), yb = row_base(vy, r, I);
  const long D16 = D / 16 * 16;
  if (!log_ && D16 > 0) {
    softmax_row16(x, xb, y, yb, D, D16);
    return;
  }
  float16 mv = -INFINITY, sv = 0, cv = 0;
  for (long d = 0; d < D16; d += SM_BLOCK)
    ms_block16(x, xb + d, (int)min((long)SM_BLOCK, D16 - d), &mv, &sv, &cv);
  T lm[16], ls[16];
  vstore16(mv, 0, lm);
  vstore16(sv + cv, 0, ls);
  T m = -INFINITY, s = 0, c = 0;
  for (int l = 0; l < 16; ++l) ms_merge(&m, &s, lm[l], ls[l]);
  for (long d = D16; d < D; ++d) ms_add(&m, &s, &c, LD(S, x, xb + d));
  s -= c;
  const T log_s = log(s), inv = (T)1 / s;
  for (long d = 0; d < D16; d += 16) {
    const float16 v = VLD16(S, x, xb + d) - m;
    VST16(S, y, yb + d, log_ ? v - log_s : exp(v) * inv);
  }
  for (long d = D16; d < D; ++d) {
    const T v = LD(S, x, xb + d) - m;
    ST(S, y, yb + d, log_ ? v - log_s : exp(v) * inv);
  }
}
#endif

/* softmax_bwd's arguments, and its row r's first elements of g, y and gx */
#define SOFTMAX_BWD_ARGS                                                                   \
  const long rows, const long D, const long I, const int log_, __global const S* g,        \
      const View3 vg, __global const S* y, const View3 vy, __global S* gx, const View3 vgx
#define SOFTMAX_BWD_ROW(r)                                                                 \
  const long gb = row_base(vg, r, I), yb = row_base(vy, r, I), ob = row_base(vgx, r, I);

__kernel void softmax_bwd(SOFTMAX_BWD_ARGS) {
  const long r = ROW();
  RETURN_PAST_LAST_ROW(r)
  SOFTMAX_BWD_ROW(r)
  T acc = 0, c = 0;
  for (long d = LANE(); d < D; d += LANES)
    ksum(&acc, &c, LD(S, g, gb + d * vg.d) * (log_ ? (T)1 : LD(S, y, yb + d * vy.d)));
  acc += c;
#if LANES > 1
  __local T buf[LANES];
#endif
  acc = SUM_LANES(acc, buf);
  for (long d = LANE(); d < D; d += LANES) {
    const T gd = LD(S, g, gb + d * vg.d), yd = LD(S, y, yb + d * vy.d);
    ST(S, gx, ob + d * vgx.d, log_ ? gd - exp(yd) * acc : yd * (gd - acc));
  }
}

#ifdef VEC16
/* softmax_bwd for CPUs on contiguous rows of g, y and gx (as softmax_fwd_vec16): the row's
 * sum in 16 Kahan-compensated lanes, then gx 16 elements at a time */
__kernel void softmax_bwd_vec16(SOFTMAX_BWD_ARGS) {
  const long r = ROW();
  RETURN_PAST_LAST_ROW(r)
  SOFTMAX_BWD_ROW(r)
  const long D16 = D / 16 * 16;
  float16 sv = 0, cv = 0;
  for (long d = 0; d < D16; d += 16) {
    const float16 v = VLD16(S, g, gb + d) * (log_ ? (float16)1 : VLD16(S, y, yb + d)) - cv;
    const float16 t = sv + v;
    cv = (t - sv) - v;
    sv = t;
  }
  T lanes[16], acc = 0, c = 0;
  vstore16(sv - cv, 0, lanes);
  for (int l = 0; l < 16; ++l) ksum(&acc, &c, lanes[l]);
  for (long d = D16; d < D; ++d)
    ksum(&acc, &c, LD(S, g, gb + d) * (log_ ? (T)1 : LD(S, y, yb + d)));
  acc += c;
  for (long d = 0; d < D16; d += 16) {
    const float16 gd = VLD16(S, g, gb + d), yd = VLD16(S, y, yb + d);
    VST16(S, gx, ob + d, log_ ? gd - exp(yd) * acc : yd * (gd - acc));
  }
  for (long d = D16; d < D; ++d) {
    const T gd = LD(S, g, gb + d), yd = LD(S, y, yb + d);
    ST(S, gx, ob + d, log_ ? gd - exp(yd) * acc : yd * (gd - acc));
  }
}
#endif

/* ---- cross entropy --------------------------------------------------------------------------- */

/* sum_c w_c (lse - x_c) is found as W (lse - x_0) - sum_c w_c (x_c - x_0): shifting by the row's
 * first element keeps the sum small when the logits are large. */
__kernel void xent_fwd(const long rows, const long D, const long I, __global const T* x,
                       const View3 vx, __global const long* target, const View2 vt,
                       const int weighted, __global const T* w, const long ignore_index,
                       const T eps, __global T* loss, __global T* wt, __global T* lse,
                       __global long* bad) {
  const long r = ROW();
  RETURN_PAST_LAST_ROW(r)
  const long xb = row_base(vx, r, I);
  const T x0 = x[xb];
  T m = -INFINITY, s = 0, c = 0, swx = 0, cwx = 0, sw = 0, cw = 0;
  for (long d = LANE(); d < D; d += LANES) {
    const T v = x[xb + d * vx.d];
    ms_add(&m, &s, &c, v);
    if (eps != 0) {
      ksum(&swx, &cwx, WEIGHT(d) * (v - x0));
      ksum(&sw, &cw, WEIGHT(d));
    }
  }
  s -= c;
  swx += cwx;
  sw += cw;
#if LANES > 1
  __local T lm[LANES], ls[LANES];
  ms_tree(&m, &s, lm, ls);
  if (eps != 0) {
    swx = sum_tree(swx, lm);
    sw = sum_tree(sw, ls);
  }
  if (LANE() != 0) return;
#endif
  const T log_s = log(s), l = m + log_s;
  lse[r] = l;
  const long t = target[row_at(vt, r, I)];
  if (t == ignore_index || t < 0 || t >= D) {
    if (t != ignore_index) *bad = t;
    loss[r] = 0;
    wt[r] = 0;
    return;
  }
  const T w_t = WEIGHT(t);
  /* lse - x as (m - x) + log(s), as softmax_fwd */
  T out = ((T)1 - eps) * w_t * ((m - x[xb + t * vx.d]) + log_s);
  if (eps != 0) out += eps / (T)D * (sw * ((m - x0) + log_s) - swx);
  loss[r] = out;
  wt[r] = w_t;
}

/* A 3-d launch over (I, D, O): neighbouring work-items write neighbouring memory. */
__kernel void xent_bwd(const long O, const long D, const long I, __global const T* x,
                       const View3 vx, __global const long* target, const View2 vt,
                       const int weighted, __global const T* w, __global const T* wsum,
                       const long ignore_index,
                       const T eps, __global const T* lse, __global const T* scale, const View2 vs,
                       __global T* gx) {
  const long i = get_global_id(0), d = get_global_id(1), o = get_global_id(2);
  if (i >= I || d >= D || o >= O) return;
  const long e = (o * D + d) * I + i, r = o * I + i;
  const long t = target[row_at(vt, r, I)];
  if (t == ignore_index) {
    gx[e] = 0;
    return;
  }
  const T W = weighted ? wsum[0] : (T)D;
  const T w_t = WEIGHT(t);
  const T A = ((T)1 - eps) * w_t + eps / (T)D * W;
  const T a = (d == t ? ((T)1 - eps) * w_t : (T)0) + eps / (T)D * WEIGHT(d);
  const T p = exp(x[vx.off + o * vx.o + d * vx.d + i * vx.i] - lse[r]);
  gx[e] = scale[row_at(vs, r, I)] * (p * A - a);
}
