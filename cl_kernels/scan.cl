/*
 * scan.cl: inclusive prefix sums and products (cumsum, cumprod) along one dim of a strided
 * N-d view.
 *
 * Layout: the input is seen as lines: the other dims (at most MAX_DIMS, which must match
 * cltensor/ops/elementwise.py) x the scanned dim of n elements. Line m (row-major over the other
 * dims) starts at xv.offset + offset_of(m, xv) in x and at ov.offset + offset_of(m, ov) in out,
 * and steps by xs (x) and os (out) along the scanned dim.
 *
 * Work decomposition (no local memory, no barriers): each line is cut into B blocks of `block`
 * elements; work-item g = m * B + b handles block b of line m serially.
 *   scan_totals  carry[g] = the State (sum or product) of block b            (only when B > 1)
 *   scan_carry   one work-item per line turns its B block States into exclusive prefixes (in place)
 *   scan_blocks  out = carry[g] (nothing for b = 0) followed by the running prefix of block b
 * A saved State is CARRY_PARTS accumulators: a sum and its compensation for float sums, else one.
 *
 * Build options:
 *   T          input storage type (uchar for bool)
 *   ACC_T      accumulator and output type; ACC_FLOAT defined when it is float or double
 *   SCAN_SUM or SCAN_PROD   the operation (sums over floats are Neumaier-compensated)
 * Tunables: none; the launcher picks B and the work sizes.
 */
#define MAX_DIMS 8

typedef struct { long size[MAX_DIMS]; } Shape;
typedef struct { long offset; long stride[MAX_DIMS]; } View;

inline long offset_of(long i, const int nd, const Shape shape, const View v) {
  if (nd == 1) return i * v.stride[0];
  long o = 0;
  for (int d = nd - 1; d >= 0; --d) {
    const long n = shape.size[d];
    o += (i % n) * v.stride[d];
    i /= n;
  }
  return o;
}

#if defined(SCAN_SUM) && defined(ACC_FLOAT)
#define CARRY_PARTS 2
typedef struct { ACC_T s; ACC_T c; } State;

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

/* NOTE: once s is infinite or NaN, c holds NaN (inf - inf); s alone is then the answer. */
inline ACC_T st_value(const State a) { return isfinite(a.s) ? a.s + a.c : a.s; }
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
  const long base = xv.offset + offset_of(m, nd, shape, xv);
  const long end = min((b + 1) * block, n);
  State st = st_init();
  for (long k = b * block; k < end; ++k) st = st_add(st, (ACC_T)x[base + k * xs]);
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

__kernel void scan_blocks(LINE_ARGS, __global const ACC_T* carry, __global ACC_T* out,
                          const View ov, const long os) {
  const long g = get_global_id(0);
  if (g >= lines * B) return;
  const long m = g / B, b = g % B;
  const long base = xv.offset + offset_of(m, nd, shape, xv);
  const long obase = ov.offset + offset_of(m, nd, shape, ov);
  const long end = min((b + 1) * block, n);
  State st = b > 0 ? st_load(carry, g) : st_init();
  for (long k = b * block; k < end; ++k) {
    st = st_add(st, (ACC_T)x[base + k * xs]);
    out[obase + k * os] = st_value(st);
  }
}
