/*
 * scan.cl: inclusive prefix sums, products and log-sum-exps (cumsum, cumprod, logcumsumexp)
 * along one dim of a strided N-d view, and the running extremes' positions of cummax and cummin
 * (at the end).
 *
 * Layout: the input is seen as lines: the other dims (at most MAX_DIMS of
 * common.cl) x the scanned dim of n elements. Line m (row-major over the other
 * dims) starts at xv.offset + strided_offset(m, xv) in x and at ov.offset + strided_offset(m, ov) in out,
 * and steps by xs (x) and os (out) along the scanned dim.
 *
 * Work decomposition (no local memory, no barriers): each line is cut into B blocks of `block`
 * elements; work-item g = m * B + b handles block b of line m serially.
 *   scan_totals  carry[g] = the State (sum or product) of block b            (only when B > 1)
 *   scan_carry   one work-item per line turns its B block States into exclusive prefixes (in place)
 *   scan_blocks  out = carry[g] (nothing for b = 0) followed by the running prefix of block b
 * A saved State is CARRY_PARTS accumulators: a sum and its compensation for float sums, the
 * running max and the sum of exp(x - max) for log-sum-exps, else one.
 *
 * Build options (the sums and products are compiled when ACC_T is defined):
 *   T          input storage type (uchar for bool; half and bf16 read through LD)
 *   ACC_T      accumulator and carry type; ACC_FLOAT defined when it is float or double
 *   OUT_T      output storage type (default ACC_T; half or bf16 with a float ACC_T: each
 *              prefix is rounded once from the float32 accumulator, as torch's)
 *   SCAN_SUM, SCAN_PROD or SCAN_LSE   the operation (sums and products over floats are
 *              compensated, Neumaier's and Graillat's;
 *              SCAN_LSE, floats only: log(sum(exp(x))) with a running max, so nothing overflows)
 *   EXT_T      instead of ACC_T: the cummax / cummin family over that storage type (IS_FLOAT:
 *              NaN checks; 16-bit floats compared as floats, the carried extremes REG(EXT_T))
 * Tunables: none; the launcher picks B and the work sizes.
 */
#include "common.cl"

#ifdef ACC_T
#ifndef OUT_T
#define OUT_T ACC_T
#endif
#if defined(SCAN_LSE) || (defined(ACC_FLOAT) && (defined(SCAN_SUM) || defined(SCAN_PROD)))
#define CARRY_PARTS 2
/* Sums: s and its compensation c (Neumaier). Products: s and c, the product being s + c
 * (Graillat's compensated product). SCAN_LSE: s = sum(exp(x - c)), c the running max. */
typedef struct { ACC_T s; ACC_T c; } State;

inline State st_load(__global const ACC_T* p, const long k) {
  State a;
  a.s = p[2 * k];
  a.c = p[2 * k + 1];
  return a;
}
inline void st_save(__global ACC_T* p, const long k, const State a) {
  p[2 * k] = a.s;
  p[2 * k + 1] = a.c;
}
#endif

#ifdef SCAN_LSE
inline State st_init(void) { State a; a.s = 0; a.c = -INFINITY; return a; }

/* exp(m - to), exactly 1 when m == to (so infinite maxima give no inf - inf) */
inline ACC_T lse_scale(const ACC_T m, const ACC_T to) { return m == to ? 1 : exp(m - to); }

inline State st_merge(const State a, const State b) {
  State r;
  r.c = isnan(a.c) || a.c >= b.c ? a.c : b.c;  /* a NaN max stays NaN: NaN propagates */
  r.s = a.s * lse_scale(a.c, r.c) + b.s * lse_scale(b.c, r.c);
  return r;
}

inline State st_add(const State a, const ACC_T v) {
  State b;
  b.s = 1;
  b.c = v;
  return st_merge(a, b);
}

/* all -inf so far: c = -inf and s = 1 (or 0 before any element): -inf, not NaN */
inline ACC_T st_value(const State a) { return a.c + log(a.s); }

#elif CARRY_PARTS == 2 && defined(SCAN_PROD)
inline State st_init(void) { State a; a.s = 1; a.c = 0; return a; }

/* (s + c) * v: s * v rounds to t, and fma gives that rounding's error exactly. A float32
 * product of 20000 factors near 1 was 5.5e-6 off this way uncompensated (torch: 5e-8). */
inline State st_add(State a, const ACC_T v) {
  const ACC_T t = a.s * v;
  a.c = fma(a.s, v, -t) + a.c * v;
  a.s = t;
  return a;
}

inline State st_merge(State a, const State b) {
  const ACC_T t = a.s * b.s;
  a.c = fma(a.s, b.s, -t) + (a.s * b.c + a.c * b.s);
  a.s = t;
  return a;
}

/* NOTE: once s is infinite or NaN, c may hold NaN (inf - inf); s alone is then the answer,
 * as it is when c is 0 (s + 0 would turn a -0 into 0) */
inline ACC_T st_value(const State a) { return isfinite(a.s) && a.c != 0 ? a.s + a.c : a.s; }

#elif CARRY_PARTS == 2
inline State st_init(void) { State a; a.s = 0; a.c = 0; return a; }

/* Neumaier's compensated addition: c collects the rounding error of every sum. */
inline State st_add(State a, const ACC_T v) {
  const ACC_T t = a.s + v;
  a.c += fabs(a.s) >= fabs(v) ? (a.s - t) + v : (v - t) + a.s;
  a.s = t;
  return a;
}

inline State st_merge(State a, const State b) {
  a = st_add(a, b.s);
  a.c += b.c;
  return a;
}

/* NOTE: once s is infinite or NaN, c holds NaN (inf - inf); s alone is then the answer, as
 * it is when c is 0 (s + 0 would turn a -0 into 0) */
inline ACC_T st_value(const State a) { return isfinite(a.s) && a.c != 0 ? a.s + a.c : a.s; }

#else
#define CARRY_PARTS 1
typedef ACC_T State;
#ifdef SCAN_SUM
inline State st_init(void) { return 0; }
inline State st_add(const State a, const ACC_T v) { return a + v; }
#else
inline State st_init(void) { return 1; }
inline State st_add(const State a, const ACC_T v) { return a * v; }
#endif
inline State st_merge(const State a, const State b) { return st_add(a, b); }
inline ACC_T st_value(const State a) { return a; }
inline State st_load(__global const ACC_T* p, const long k) { return p[k]; }
inline void st_save(__global ACC_T* p, const long k, const State a) { p[k] = a; }
#endif

#define LINE_ARGS                                                                            \
  __global const T *x, const View xv, const long xs, const Shape shape, const int nd,       \
      const long lines, const long n, const long B, const long block

__kernel void scan_totals(LINE_ARGS, __global ACC_T* carry) {
  const long g = get_global_id(0);
  if (g >= lines * B) return;
  const long m = g / B, b = g % B;
  const long base = xv.offset + strided_offset(m, nd, shape, xv);
  const long end = min((b + 1) * block, n);
  State st = st_init();
  for (long k = b * block; k < end; ++k) st = st_add(st, (ACC_T)LD(T, x, base + k * xs));
  st_save(carry, g, st);
}

__kernel void scan_carry(const long lines, const long B, __global ACC_T* carry) {
  const long m = get_global_id(0);
  if (m >= lines) return;
  State acc = st_init();
  for (long b = 0; b < B; ++b) {
    const State total = st_load(carry, m * B + b);
    st_save(carry, m * B + b, acc);
    acc = st_merge(acc, total);
  }
}

__kernel void scan_blocks(LINE_ARGS, __global const ACC_T* carry, __global OUT_T* out,
                          const View ov, const long os) {
  const long g = get_global_id(0);
  if (g >= lines * B) return;
  const long m = g / B, b = g % B;
  const long base = xv.offset + strided_offset(m, nd, shape, xv);
  const long obase = ov.offset + strided_offset(m, nd, shape, ov);
  const long end = min((b + 1) * block, n);
  State st = b > 0 ? st_load(carry, g) : st_init();
  for (long k = b * block; k < end; ++k) {
    st = st_add(st, (ACC_T)LD(T, x, base + k * xs));
    ST(OUT_T, out, obase + k * os, st_value(st));
  }
}
#endif  /* ACC_T */

/* ---- cummax, cummin: the position of the running extreme -----------------------------------
 * x: `rows` contiguous rows of n elements of EXT_T; out (same layout, long) gets, for every k,
 * the position in its row of the extreme of elements 0..k, with torch's rule: a later element
 * equal to the extreme takes over (the last occurrence), a NaN takes over and stays, except
 * from a later NaN. is_min picks cummin (a run-time argument: one build serves both).
 * As the sums above, rows are cut into B blocks of `block` elements, one work-item each:
 *   cumext_totals  the extreme of each block: value cv[g], position ci[g]  (only when B > 1)
 *   cumext_carry   one work-item per row turns its blocks' extremes into the extremes of the
 *                  blocks before each (in place; entry 0 unused)
 *   cumext_blocks  each block's positions, starting from its carry
 * The rule is associative (a block's extreme replaces the carry exactly when it would have
 * replaced it element by element), so blocks give the sequential answer.
 */
#ifdef EXT_T
#ifdef IS_FLOAT
#define EXT_NAN(v) isnan(v)
#else
#define EXT_NAN(v) 0
#endif

#define EXT_R REG(EXT_T)

inline bool ext_takes_over(const EXT_R v, const EXT_R best, const int is_min) {
  if (EXT_NAN(v)) return true;
  if (EXT_NAN(best)) return false;
  return is_min ? v <= best : v >= best;
}

__kernel void cumext_totals(__global const EXT_T* x, const long rows, const long n,
                            const long B, const long block, const int is_min,
                            __global EXT_R* cv, __global long* ci) {
  const long g = get_global_id(0);
  if (g >= rows * B) return;
  __global const EXT_T* r = x + (g / B) * n;
  const long start = (g % B) * block, end = min(start + block, n);
  EXT_R best = LD(EXT_T, r, start);
  long at = start;
  for (long k = start + 1; k < end; ++k) {
    const EXT_R v = LD(EXT_T, r, k);
    if (ext_takes_over(v, best, is_min)) {
      best = v;
      at = k;
    }
  }
  cv[g] = best;
  ci[g] = at;
}

__kernel void cumext_carry(const long rows, const long B, const int is_min,
                           __global EXT_R* cv, __global long* ci) {
  const long row = get_global_id(0);
  if (row >= rows) return;
  const long first = row * B;
  EXT_R best = cv[first];
  long at = ci[first];
  for (long g = first + 1; g < first + B; ++g) {
    const EXT_R v = cv[g];
    const long i = ci[g];
    cv[g] = best;
    ci[g] = at;
    if (ext_takes_over(v, best, is_min)) {
      best = v;
      at = i;
    }
  }
}

__kernel void cumext_blocks(__global const EXT_T* x, const long rows, const long n,
                            const long B, const long block, const int is_min,
                            __global const EXT_R* cv, __global const long* ci,
                            __global long* out) {
  const long g = get_global_id(0);
  if (g >= rows * B) return;
  const long row = g / B, b = g % B;
  __global const EXT_T* r = x + row * n;
  const long start = b * block, end = min(start + block, n);
  EXT_R best = b > 0 ? cv[g] : LD(EXT_T, r, 0);
  long at = b > 0 ? ci[g] : 0;
  for (long k = start; k < end; ++k) {
    const EXT_R v = LD(EXT_T, r, k);
    if (ext_takes_over(v, best, is_min)) {
      best = v;
      at = k;
    }
    out[row * n + k] = at;
  }
}
#endif  /* EXT_T */
