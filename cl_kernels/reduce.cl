/*
 * reduce.cl: reductions (sum, prod, variance, max/min with their index) of a strided N-d view
 * over a set of its dims, with a per-element map before and a per-output finish after.
 *
 * Layout: the input is seen as (kept dims) x (reduced dims), each group of at most MAX_DIMS dims
 * (common.cl). Output m (row-major over the kept dims) reduces
 * the R elements r = 0..R-1 (row-major over the reduced dims) found at
 *   x[kv.offset + strided_offset(m, kept shape, kv) + strided_offset(r, reduced shape, rv)].
 * Results are contiguous: out[m], and out_idx[m] (the r of the chosen element) for max/min.
 *
 * Work decomposition: a work-group is L0 x L1 work-items. Dim 0 picks the output
 * (m = get_global_id(0)). Along dim 1 each row is cut into G chunks (chunk c = get_group_id(1));
 * lane l of chunk c accumulates a private State over
 *   r = c * chunk_stride + l + k * step,   r < min(c * chunk_stride + chunk_len, R),
 * so the caller picks interleaved chunks (chunk_stride = L1, chunk_len = R, step = G * L1: lanes
 * read neighbouring elements, which coalesces on GPUs) or blocked ones (chunk_stride = chunk_len,
 * step = L1: one lane streams through a contiguous block, which suits CPU caches). The L1 lanes
 * then combine their States with a tree in local memory (L1 a power of two).
 *
 * Kernels (one build gives all three):
 *   reduce_full   G == 1: each row's result goes straight to out
 *   reduce_part   G > 1: one partial State per (m, c), saved at k = m * G + c in pval/pidx
 *   reduce_merge  combines the G partials of each row (lanes along dim 1, no chunks)
 *
 * Build options:
 *   T          input storage type (uchar for bool; half and bf16 read through common.cl's LD,
 *              ACC_T then float)
 *   ACC_T      accumulator type; ACC_FLOAT defined when it is float or double
 *   OUT_T      output storage type; OUT_BOOL defined when the output is bool (uchar 0/1)
 *   RED_SUM    sum (Neumaier-compensated when ACC_FLOAT, so long float sums stay accurate)
 *   RED_PROD   product
 *   RED_VAR    compensated sums of d and d^2 (d the mapped value, a deviation from a shift);
 *              its value is S2 - S1^2 / p, p being the element count (corrected two-pass)
 *   RED_MAX, RED_MIN   value and index: NaN beats every number, ties go to the lower index
 *   MAP(x, a, p)   what element x (type T) contributes: MAP_ID, MAP_NZ (x != 0), MAP_ABS,
 *                  MAP_SQ, MAP_POWABS (|x|^p), MAP_DEV (x - a), MAP_EXPSUB (exp(x - a))
 *   AUX(aux, m)    the per-output value a: AUX_NONE, AUX_MEAN (aux[m]), AUX_SHIFT (aux[m], or 0
 *                  where it is infinite: logsumexp's shift)
 *   FIN(v, a, p, d) the result from the reduced value v: FIN_ID, FIN_DIV (v / d), FIN_SQRT_DIV,
 *                  FIN_ROOT (v^(1/p)), FIN_LOGADD (log(v) + a)
 * Tunables:
 *   USE_TREE   (default 1) combine lanes through local memory; 0 when L1 is always 1 (CPUs,
 *              where every barrier costs a loop over the work-items)
 *   VEC_SUM    (set by the host for plain float sums, T == ACC_T or T a 16-bit float with
 *              VEC_HALF or VEC_BF16 defined, on CPUs) a lane that walks
 *              contiguous elements (step 1) sums them VEC_SUM at a time in compensated vector
 *              lanes, merged at the end: the scalar chain of compensated additions ran at ~2.5
 *              GB/s on PoCL (one reduced dim, or two with the inner one contiguous)
 *   WIDE_SUM   (set with VEC_HALF or VEC_BF16 on PoCL, with doubles) those 16-bit runs
 *              sum in double lanes instead (see add_run_wide)
 */
#ifndef USE_TREE
#define USE_TREE 1
#endif
#include "common.cl"

/* ---- maps, aux values and finishes ---------------------------------------------------------- */
#define MAP_ID(x, a, p) ((ACC_T)(x))
#define MAP_NZ(x, a, p) ((ACC_T)((x) != 0))
#define MAP_ABS(x, a, p) fabs((ACC_T)(x))
#define MAP_SQ(x, a, p) ((ACC_T)(x) * (ACC_T)(x))
#define MAP_POWABS(x, a, p) pow(fabs((ACC_T)(x)), p)
#define MAP_DEV(x, a, p) ((ACC_T)(x) - (a))
#define MAP_EXPSUB(x, a, p) exp((ACC_T)(x) - (a))

#define AUX_NONE(aux, m) ((ACC_T)0)
#define AUX_MEAN(aux, m) (aux[m])
#define AUX_SHIFT(aux, m) (isinf(aux[m]) ? (ACC_T)0 : aux[m])

#define FIN_ID(v, a, p, d) (v)
#define FIN_DIV(v, a, p, d) ((v) / (d))
#define FIN_SQRT_DIV(v, a, p, d) sqrt((v) / (d))
#define FIN_ROOT(v, a, p, d) pow(v, (ACC_T)1 / (p))
#define FIN_LOGADD(v, a, p, d) (log(v) + (a))

#ifdef OUT_BOOL
#define STORE(v) ((uchar)((v) != 0))
#else
#define STORE(v) ((REG(OUT_T))(v))
#endif

/* ---- the accumulator State of each kind -------------------------------------------------------
 * st_init() is the identity, st_add(s, v, i) takes element i of mapped value v, st_merge(a, b)
 * combines two States, st_value(s, p) reads the result (before FIN) and st_index(s) the index.
 * reduce_part saves a whole State with st_save (two accumulators for compensated sums, four for
 * RED_VAR, else one, plus the index for max/min); reduce_merge reads it back with st_load. */
#ifdef ACC_FLOAT
/* Neumaier's compensated sum: c collects the rounding error of every addition. */
typedef struct { ACC_T s; ACC_T c; } Comp;

inline Comp comp_of(const ACC_T v) { Comp a; a.s = v; a.c = 0; return a; }

inline Comp comp_add(Comp a, const ACC_T v) {
  const ACC_T t = a.s + v;
  a.c += fabs(a.s) >= fabs(v) ? (a.s - t) + v : (v - t) + a.s;
  a.s = t;
  return a;
}

inline Comp comp_merge(Comp a, const Comp b) {
  a = comp_add(a, b.s);
  a.c += b.c;
  return a;
}

/* NOTE: once s is infinite or NaN, c holds NaN (inf - inf); s alone is then the answer. */
inline ACC_T comp_value(const Comp a) { return isfinite(a.s) ? a.s + a.c : a.s; }
#endif

#if defined(RED_SUM) && defined(ACC_FLOAT)
typedef Comp State;
inline State st_init(void) { return comp_of(0); }
inline State st_add(const State a, const ACC_T v, const long i) { return comp_add(a, v); }
inline State st_merge(const State a, const State b) { return comp_merge(a, b); }
inline ACC_T st_value(const State a, const ACC_T p) { return comp_value(a); }
inline State st_load(__global const ACC_T* pv, __global const long* pi, const long k) {
  State a;
  a.s = pv[2 * k];
  a.c = pv[2 * k + 1];
  return a;
}
inline void st_save(__global ACC_T* pv, __global long* pi, const long k, const State a) {
  pv[2 * k] = a.s;
  pv[2 * k + 1] = a.c;
}

#elif defined(RED_VAR)
/* Sums of the deviations d = x - shift and of d^2 (shift: a mean that may be off by rounding);
 * with p = n the variance's numerator is S2 - S1^2 / n, exact for any shift. */
typedef struct { Comp d1; Comp d2; } State;
inline State st_init(void) { State a; a.d1 = comp_of(0); a.d2 = comp_of(0); return a; }
inline State st_add(State a, const ACC_T v, const long i) {
  a.d1 = comp_add(a.d1, v);
  a.d2 = comp_add(a.d2, v * v);
  return a;
}
inline State st_merge(State a, const State b) {
  a.d1 = comp_merge(a.d1, b.d1);
  a.d2 = comp_merge(a.d2, b.d2);
  return a;
}
inline ACC_T st_value(const State a, const ACC_T p) {
  const ACC_T s1 = comp_value(a.d1);
  const ACC_T v = comp_value(a.d2) - s1 * s1 / p;
  return v < 0 ? (ACC_T)0 : v;  /* rounding can leave -tiny; NaN stays NaN */
}
inline State st_load(__global const ACC_T* pv, __global const long* pi, const long k) {
  State a;
  a.d1.s = pv[4 * k];
  a.d1.c = pv[4 * k + 1];
  a.d2.s = pv[4 * k + 2];
  a.d2.c = pv[4 * k + 3];
  return a;
}
inline void st_save(__global ACC_T* pv, __global long* pi, const long k, const State a) {
  pv[4 * k] = a.d1.s;
  pv[4 * k + 1] = a.d1.c;
  pv[4 * k + 2] = a.d2.s;
  pv[4 * k + 3] = a.d2.c;
}

#elif defined(RED_SUM) || defined(RED_PROD)
typedef struct { ACC_T v; } State;
#ifdef RED_SUM
#define COMBINE(a, b) ((a) + (b))
#define IDENTITY 0
#else
#define COMBINE(a, b) ((a) * (b))
#define IDENTITY 1
#endif
inline State st_init(void) { State a; a.v = IDENTITY; return a; }
inline State st_add(State a, const ACC_T v, const long i) { a.v = COMBINE(a.v, v); return a; }
inline State st_merge(State a, const State b) { a.v = COMBINE(a.v, b.v); return a; }
inline ACC_T st_value(const State a, const ACC_T p) { return a.v; }
inline State st_load(__global const ACC_T* pv, __global const long* pi, const long k) {
  State a;
  a.v = pv[k];
  return a;
}
inline void st_save(__global ACC_T* pv, __global long* pi, const long k, const State a) {
  pv[k] = a.v;
}

#elif defined(RED_MAX) || defined(RED_MIN)
#define HAS_INDEX
/* i < 0 marks the identity: no element seen yet. */
typedef struct { ACC_T v; long i; } State;
#ifdef RED_MAX
#define BETTER(a, b) ((a) > (b))
#else
#define BETTER(a, b) ((a) < (b))
#endif
inline State st_init(void) { State a; a.v = 0; a.i = -1; return a; }

/* b replaces a when it is a NaN (the first NaN wins), or the better number, or an equal one
 * with a lower index. */
inline State st_merge(const State a, const State b) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
  int take_b;
#ifdef ACC_FLOAT
  const int an = isnan(a.v), bn = isnan(b.v);
  if (an || bn)
    take_b = bn && (!an || b.i < a.i);
  else
#endif
    take_b = BETTER(b.v, a.v) || (b.v == a.v && b.i < a.i);
  return take_b ? b : a;
}

inline State st_add(const State a, const ACC_T v, const long i) {
  State b;
  b.v = v;
  b.i = i;
  return st_merge(a, b);
}

inline ACC_T st_value(const State a, const ACC_T p) { return a.v; }
inline long st_index(const State a) { return a.i; }
inline State st_load(__global const ACC_T* pv, __global const long* pi, const long k) {
  State a;
  a.v = pv[k];
  a.i = pi[k];
  return a;
}
inline void st_save(__global ACC_T* pv, __global long* pi, const long k, const State a) {
  pv[k] = a.v;
  pi[k] = a.i;
}
#endif

#ifdef HAS_INDEX
#define STORE_INDEX(p, k, st) ((p)[k] = st_index(st))
#else
#define STORE_INDEX(p, k, st)
#endif

/* ---- the shared steps ---------------------------------------------------------------------- */

/* Four independent States per lane over r, r + step, ... (hiding the latency of compensated
 * additions), with ADDR(r) the element offset of r. */
#define ACCUMULATE(ADDR)                                                                      \
  for (; r + 3 * step < end; r += 4 * step) {                                                \
    s0 = st_add(s0, MAP(LD(T, x, ADDR(r)), a, p), r);                                               \
    s1 = st_add(s1, MAP(LD(T, x, ADDR(r + step)), a, p), r + step);                                 \
    s2 = st_add(s2, MAP(LD(T, x, ADDR(r + 2 * step)), a, p), r + 2 * step);                         \
    s3 = st_add(s3, MAP(LD(T, x, ADDR(r + 3 * step)), a, p), r + 3 * step);                         \
  }                                                                                           \
  for (; r < end; r += step) s0 = st_add(s0, MAP(LD(T, x, ADDR(r)), a, p), r);

#ifdef VEC_SUM
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VACC CAT(ACC_T, VEC_SUM)
/* NOTE: aligned like its elements: the runs start anywhere (an unaligned vector load) */
typedef VACC __attribute__((aligned(sizeof(ACC_T)))) VACC_U;
typedef union { VACC v; ACC_T s[VEC_SUM]; } VLanes;

/* VEC_SUM elements at x as float lanes: 16-bit floats (VEC_HALF, VEC_BF16) through common.cl's
 * vector loads (VEC_SUM is 16 for float lanes; PoCL's F16C conversions of vload_half16 ran the
 * float16 sums over rows 1.4x faster than the bit operations) */
#if defined(VEC_HALF) || defined(VEC_BF16)
inline VACC load_lanes(__global const T* x) { return CAT(VLD, VEC_SUM)(T, x, 0); }
#else
inline VACC load_lanes(__global const T* x) { return *(__global const VACC_U*)x; }
#endif

/* Adds the n contiguous elements at x to VEC_SUM lanes of Neumaier sums (*s, *c), the last
 * n % VEC_SUM to st. */
inline State add_run_comp(VACC* s, VACC* c, State st, __global const T* x, long n) {
  for (; n >= VEC_SUM; n -= VEC_SUM, x += VEC_SUM) {
    const VACC v = load_lanes(x);
    const VACC t = *s + v;
    *c += fabs(*s) >= fabs(v) ? (*s - t) + v : (v - t) + *s;
    *s = t;
  }
  for (; n > 0; --n, ++x) st = st_add(st, LD(T, x, 0), 0);
  return st;
}

#ifdef WIDE_SUM
/* 16-bit elements (WIDE_SUM: the device has doubles) add to four double8 lane sums instead:
 * a sum of float16 values is exact in double while it spans 53 bits (2^-24 to 2^29), and in
 * general off by n 2^-53 of the sum of magnitudes, finer than the float32 Neumaier lanes. A
 * Neumaier add took ten operations a vector, one chain through s: on one PoCL thread the
 * 16-bit sums were bound by those, not by their bytes (1.4x float32's speed); two
 * conversions and an add per 8 elements leave them bound by memory. */
typedef struct { double8 a, b, c, d; } Wide;

/* Adds 16 elements at x to lanes a and b. bfloat16: a 32-bit word holds two, the low one
 * shifted up and the high one masked are floats (their order does not matter to a sum): no
 * zero extension of each element, as PoCL compiles VLD8 */
#ifdef VEC_BF16
typedef uint8 __attribute__((aligned(2))) uint8_a2;
#define ADD16_WIDE(x, a, b)                                   \
  {                                                          \
    const uint8 u = *(__global const uint8_a2*)(x);          \
    a += convert_double8(as_float8(u << 16));                \
    b += convert_double8(as_float8(u & 0xffff0000u));        \
  }
#else
#define ADD16_WIDE(x, a, b)                                   \
  {                                                          \
    a += convert_double8(VLD8(T, x, 0));                     \
    b += convert_double8(VLD8(T, x, 8));                     \
  }
#endif

inline State add_run_wide(Wide* w, State st, __global const T* x, long n) {
  for (; n >= 32; n -= 32, x += 32) {
    ADD16_WIDE(x, w->a, w->b)
    ADD16_WIDE(x + 16, w->c, w->d)
  }
  for (; n >= 16; n -= 16, x += 16) ADD16_WIDE(x, w->a, w->b)
  for (; n > 0; --n, ++x) st = st_add(st, LD(T, x, 0), 0);
  return st;
}

/* The lanes' total as a float State: its rounding and the rest as the compensation */
inline State wide_state(const Wide w) {
  const double8 v = (w.a + w.b) + (w.c + w.d);
  double l[8];
  vstore8(v, 0, l);
  double t = 0;
  for (int i = 0; i < 8; ++i) t += l[i];
  State st;
  st.s = (float)t;
  st.c = isfinite(st.s) ? (float)(t - st.s) : 0;
  return st;
}
#define LANES_T Wide
#define LANES_INIT(w) (w).a = (w).b = (w).c = (w).d = (double8)0
#define ADD_RUN(w, st, x, n) add_run_wide(&(w), st, x, n)
#define LANES_MERGE(st, w) st_merge(st, wide_state(w))
#else
typedef struct { VACC s, c; } Comps;

inline State merge_comps(State st, const Comps w) {
  VLanes ls, lc;
  ls.v = w.s;
  lc.v = w.c;
  for (int i = 0; i < VEC_SUM; ++i) {
    State l;
    l.s = ls.s[i];
    l.c = lc.s[i];
    st = st_merge(st, l);
  }
  return st;
}
#define LANES_T Comps
#define LANES_INIT(w) (w).s = (w).c = (VACC)0
#define ADD_RUN(w, st, x, n) add_run_comp(&(w).s, &(w).c, st, x, n)
#define LANES_MERGE(st, w) merge_comps(st, w)
#endif

/* A lane's elements r .. end - 1 as contiguous runs: one reduced dim of stride 1, or rows of
 * n1 contiguous elements rs0 apart. The vector lanes run on across the runs and are merged
 * once at the end (merging them per run cost more than the sums on short runs: PoCL, 2 cores,
 * the bias gradient of 8 images of 7 x 7 positions and 384 channels took 0.35-0.40 ms a call,
 * now 0.12-0.16; of 8 x 128 x 14 x 14, 0.20-0.24 -> 0.13-0.15). */
inline State sum_runs(__global const T* x, const long base, const View rv, const Shape rs,
                      const int rnd, long r, const long end) {
  State st = st_init();
  LANES_T w;
  LANES_INIT(w);
  if (rnd == 1) {
    st = ADD_RUN(w, st, x + base + r, end - r);
  } else {
    const long n1 = rs.size[1];
    while (r < end) {
      const long i = r % n1, len = min(n1 - i, end - r);
      st = ADD_RUN(w, st, x + base + r / n1 * rv.stride[0] + i, len);
      r += len;
    }
  }
  return LANES_MERGE(st, w);
}
#endif

/* This lane's State over its share of chunk c of row m (an empty State past the last row). */
inline State accumulate_chunk(__global const T* x, const View kv, const Shape ks, const int knd,
                              const View rv, const Shape rs, const int rnd,
                              const long m, const long M, const long R, const long chunk_stride,
                              const long chunk_len, const long step, const ACC_T a, const ACC_T p) {
  State s0 = st_init(), s1 = st_init(), s2 = st_init(), s3 = st_init();
  if (m >= M) return s0;
  const long base = kv.offset + strided_offset(m, knd, ks, kv);
  const long first = get_group_id(1) * chunk_stride;
  const long end = min(first + chunk_len, R);
  long r = first + get_local_id(1);
#ifdef VEC_SUM
  if (step == 1 && ((rnd == 1 && rv.stride[0] == 1) || (rnd == 2 && rv.stride[1] == 1)))
    return sum_runs(x, base, rv, rs, rnd, r, end);
#endif
  if (rnd <= 1) {  /* one reduced dim (or none, R = 1): no index arithmetic in the loop */
    const long rs0 = rv.stride[0];
#define DIRECT(r) (base + (r) * rs0)
    ACCUMULATE(DIRECT)
  } else if (rnd == 2 && R <= INT_MAX) {
    /* two reduced dims (a bias gradient's batch and positions): 32-bit index arithmetic, as
     * 64-bit division is a long software routine on GPUs. NOTE: a 32-bit path inside
     * offset_of's loop over the dims did not help (H200, VGG-A's bias gradients: 3.5 ms, as
     * the 64-bit loop; this unrolled form 1.1 ms). */
    const int n1 = rs.size[1];
    const long rs0 = rv.stride[0], rs1 = rv.stride[1];
#define TWO_DIMS(r) (base + ((int)(r) / n1) * rs0 + ((int)(r) % n1) * rs1)
    ACCUMULATE(TWO_DIMS)
  } else {
#define GENERAL(r) (base + strided_offset(r, rnd, rs, rv))
    ACCUMULATE(GENERAL)
  }
  return st_merge(st_merge(s0, s1), st_merge(s2, s3));
}

/* Lane 0 of each row of the work-group gets the merge of the row's L1 lane States. */
inline State combine_lanes(State st, __local State* scratch) {
#if USE_TREE
  const int lanes = get_local_size(1), lane = get_local_id(1);
  __local State* row = scratch + get_local_id(0) * lanes;
  row[lane] = st;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = lanes / 2; s > 0; s >>= 1) {
    if (lane < s) {
      st = st_merge(st, row[lane + s]);
      row[lane] = st;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif
  return st;
}

#define ROW_ARGS                                                                              \
  __global const T *x, const View kv, const Shape ks, const int knd, const View rv,           \
      const Shape rs, const int rnd, const long M, const long R, const long chunk_stride,     \
      const long chunk_len, const long step, __global const ACC_T *aux, const ACC_T p

__kernel void reduce_full(ROW_ARGS, const ACC_T divisor, __global OUT_T* out,
                          __global long* out_idx, __local State* scratch) {
  const long m = get_global_id(0);
  const ACC_T a = m < M ? AUX(aux, m) : (ACC_T)0;
  State st = accumulate_chunk(x, kv, ks, knd, rv, rs, rnd, m, M, R, chunk_stride, chunk_len,
                              step, a, p);
  st = combine_lanes(st, scratch);
  if (m < M && get_local_id(1) == 0) {
    ST(OUT_T, out, m, STORE(FIN(st_value(st, p), a, p, divisor)));
    STORE_INDEX(out_idx, m, st);
  }
}

__kernel void reduce_part(ROW_ARGS, __global ACC_T* pval, __global long* pidx,
                          __local State* scratch) {
  const long m = get_global_id(0);
  const ACC_T a = m < M ? AUX(aux, m) : (ACC_T)0;
  State st = accumulate_chunk(x, kv, ks, knd, rv, rs, rnd, m, M, R, chunk_stride, chunk_len,
                              step, a, p);
  st = combine_lanes(st, scratch);
  if (m < M && get_local_id(1) == 0)
    st_save(pval, pidx, m * get_num_groups(1) + get_group_id(1), st);
}

__kernel void reduce_merge(__global const ACC_T* pval, __global const long* pidx, const long M,
                           const long G, __global const ACC_T* aux, const ACC_T p,
                           const ACC_T divisor, __global OUT_T* out, __global long* out_idx,
                           __local State* scratch) {
  const long m = get_global_id(0);
  State st = st_init();
  ACC_T a = 0;
  if (m < M) {
    a = AUX(aux, m);
    for (long j = get_local_id(1); j < G; j += get_local_size(1))
      st = st_merge(st, st_load(pval, pidx, m * G + j));
  }
  st = combine_lanes(st, scratch);
  if (m < M && get_local_id(1) == 0) {
    ST(OUT_T, out, m, STORE(FIN(st_value(st, p), a, p, divisor)));
    STORE_INDEX(out_idx, m, st);
  }
}
