/*
 * random.cl: random numbers from Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy
 * as 1, 2, 3", SC 2011), the counter-based generator torch and curand use.
 *
 * The stream: a 64-bit seed is the key (k0 = low word, k1 = high word). Block b of a call whose
 * generator offset is `ctr` is philox4x32_10(counter = (lo(ctr + b), hi(ctr + b), 0, 0), key):
 * four 32-bit words. Work-item b computes block b and writes the outputs that block feeds, so
 * the numbers are a pure function of (seed, counter): the same on every device and for every
 * work-group size.
 *
 * Layout: `out` is contiguous, starting at element `off`; output i comes from block i / PER.
 *   - 32-bit words (philox_words): 4 per block, in lane order x, y, z, w.
 *   - float uniforms: 4 per block, u = (word >> 8) * 2^-24, in [0, 1).
 *   - double uniforms: 2 per block from 64-bit values x | y << 32 and z | w << 32,
 *     u = (value >> 11) * 2^-53, in [0, 1).
 *   - normals: Box-Muller on consecutive uniform pairs (u0, u1), both outputs used:
 *     r = sqrt(-2 log(1 - u0)), z0 = r cos(2 pi u1), z1 = r sin(2 pi u1).
 *   - integers (randint_fill): 2 per block from the same 64-bit values, low + value % range
 *     (modulo bias below range / 2^64).
 * randperm_fill draws no blocks: it uses one counter value as part of a Feistel key.
 * poisson_fill, gamma_fill and binomial_fill draw output i from counter ctr + i alone, through as
 * many rounds of it as their rejection loops take (see their section).
 *
 * Build options:
 *   OUT_T      storage type of the output (uchar for bool; half and bf16 through common.cl's ST)
 *   OUT_DIGITS the significand bits of a 16-bit float OUT_T (uniform_fill's grid)
 *   FT         uniform/compute float type, float (24-bit uniforms) or double (53-bit uniforms);
 *              FT_DOUBLE is defined when it is double
 *   P_T        storage type of the probability tensor of bernoulli_tensor and of check_range,
 *              of poisson's rates, gamma's shapes and binomial's counts
 *   Q_T        storage type of binomial's probabilities
 * Tunables:
 *   FEISTEL_ROUNDS  rounds of the Feistel permutation in randperm_fill (default 8)
 */
#ifndef OUT_T
#define OUT_T float
#endif
#ifndef FT
#define FT float
#endif
#ifndef P_T
#define P_T FT
#endif
#ifndef Q_T
#define Q_T FT
#endif
#ifndef FEISTEL_ROUNDS
#define FEISTEL_ROUNDS 8
#endif

#include "common.cl"

/* ---- Philox4x32-10 ------------------------------------------------------------------------- */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

inline uint4 philox_round(uint4 c, uint2 k) {
  const uint hi0 = mul_hi(PHILOX_M0, c.x), lo0 = PHILOX_M0 * c.x;
  const uint hi1 = mul_hi(PHILOX_M1, c.z), lo1 = PHILOX_M1 * c.z;
  return (uint4)(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
}

inline uint4 philox4x32_10(uint4 c, uint2 k) {
  for (int r = 0; r < 10; ++r) {
    c = philox_round(c, k);
    k += (uint2)(PHILOX_W0, PHILOX_W1);
  }
  return c;
}

inline uint4 stream_block(uint k0, uint k1, ulong ctr, ulong block) {
  const ulong c = ctr + block;
  return philox4x32_10((uint4)((uint)c, (uint)(c >> 32), 0u, 0u), (uint2)(k0, k1));
}

/* ---- uniforms in [0, 1) ------------------------------------------------------------------ */
#ifdef FT_DOUBLE
#define PER 2
inline void uniforms(uint4 w, FT u[PER]) {
  u[0] = (double)((((ulong)w.y << 32) | w.x) >> 11) * 0x1.0p-53;
  u[1] = (double)((((ulong)w.w << 32) | w.z) >> 11) * 0x1.0p-53;
}
#else
#define PER 4
inline void uniforms(uint4 w, FT u[PER]) {
  u[0] = (float)(w.x >> 8) * 0x1.0p-24f;
  u[1] = (float)(w.y >> 8) * 0x1.0p-24f;
  u[2] = (float)(w.z >> 8) * 0x1.0p-24f;
  u[3] = (float)(w.w >> 8) * 0x1.0p-24f;
}
#endif

/* The work-item's block, its first output and how many of its outputs fall inside n. */
#define BLOCK_PROLOGUE(per)                                  \
  const ulong b = get_global_id(0);                          \
  const ulong first = b * (per);                             \
  if (first >= n) return;                                    \
  const uint4 w = stream_block(k0, k1, ctr, b);              \
  const int cnt = (int)min((ulong)(per), n - first);         \
  __global OUT_T* o = out + off + first;

#define STREAM_ARGS const ulong n, const uint k0, const uint k1, const ulong ctr, \
                    __global OUT_T* out, const long off

__kernel void philox_words(STREAM_ARGS) {
  BLOCK_PROLOGUE(4)
  const uint v[4] = {w.x, w.y, w.z, w.w};
  for (int k = 0; k < cnt; ++k) ST(OUT_T, o, k, v[k]);
}

/* lo + (hi - lo) * u, kept below hi when rounding would reach it (the range is [lo, hi)). */
__kernel void uniform_fill(STREAM_ARGS, const FT lo, const FT hi) {
  BLOCK_PROLOGUE(PER)
  FT u[PER];
  uniforms(w, u);
  for (int k = 0; k < cnt; ++k) {
#ifdef OUT_DIGITS /* a 16-bit float: u on its grid, so that [0, 1) stays below 1 when stored */
    u[k] = floor(u[k] * (FT)(1 << OUT_DIGITS)) / (FT)(1 << OUT_DIGITS);
#endif
    FT r = lo + (hi - lo) * u[k];
    if (r >= hi && hi > lo) r = nextafter(hi, lo);
    ST(OUT_T, o, k, r);
  }
}

__kernel void normal_fill(STREAM_ARGS, const FT mean, const FT std) {
  BLOCK_PROLOGUE(PER)
  FT u[PER];
  uniforms(w, u);
  for (int k = 0; k < cnt; k += 2) {
    const FT r = sqrt((FT)-2 * log((FT)1 - u[k]));  /* 1 - u is in (0, 1]: log is finite */
    const FT t = (FT)2 * u[k + 1];
    ST(OUT_T, o, k, mean + std * r * cospi(t));
    if (k + 1 < cnt) ST(OUT_T, o, k + 1, mean + std * r * sinpi(t));
  }
}

__kernel void exponential_fill(STREAM_ARGS, const FT lambd) {
  BLOCK_PROLOGUE(PER)
  FT u[PER];
  uniforms(w, u);
  for (int k = 0; k < cnt; ++k) ST(OUT_T, o, k, -log1p(-u[k]) / lambd);
}

/* low + x % range for 64-bit x; range is high - low as an unsigned 64-bit number, where 0
 * stands for 2^64 (the whole int64 range: low + x). */
__kernel void randint_fill(STREAM_ARGS, const long low, const ulong range) {
  BLOCK_PROLOGUE(2)
  const ulong x[2] = {((ulong)w.y << 32) | w.x, ((ulong)w.w << 32) | w.z};
  for (int k = 0; k < cnt; ++k) ST(OUT_T, o, k, (long)((ulong)low + (range ? x[k] % range : x[k])));
}

__kernel void bernoulli_scalar(STREAM_ARGS, const FT p) {
  BLOCK_PROLOGUE(PER)
  FT u[PER];
  uniforms(w, u);
  for (int k = 0; k < cnt; ++k) ST(OUT_T, o, k, (REG(OUT_T))(u[k] < p));
}

/* out[i] = u_i < p[i], p read through a strided view over out's shape; *bad = 1 when some
 * probability is outside [0, 1] or NaN (every writer stores the same value). */
__kernel void bernoulli_tensor(STREAM_ARGS, __global const P_T* p, const View vp, const int nd,
                               const Shape shape, __global int* bad) {
  BLOCK_PROLOGUE(PER)
  FT u[PER];
  uniforms(w, u);
  for (int k = 0; k < cnt; ++k) {
    const FT pk = (FT)LD(P_T, p, view_offset((long)(first + k), nd, shape, vp));
    if (!(pk >= (FT)0 && pk <= (FT)1)) *bad = 1;
    ST(OUT_T, o, k, (REG(OUT_T))(u[k] < pk));
  }
}

/* *bad = 1 when some x[i] is outside [lo, hi] or NaN. */
__kernel void check_range(const ulong n, __global const P_T* x, const View vx, const int nd,
                          const Shape shape, const REG(P_T) lo, const REG(P_T) hi,
                          __global int* bad) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const REG(P_T) v = LD(P_T, x, view_offset((long)i, nd, shape, vx));
  if (!(v >= lo && v <= hi)) *bad = 1;
}

/* ---- randperm: a keyed Feistel permutation of [0, 2^(2 half_bits)), with cycle walking ----
 * The round function is Philox on counter (right half, ctr lo, ctr hi, round + 1); the last word
 * is never 0, so these counters never meet the stream's (which end in 0, 0). Walking the cycle
 * of i until it lands below n gives a permutation of [0, n) (2^(2 half_bits) < 4 n: < 4 steps on
 * average). */
inline ulong feistel(ulong x, const int half_bits, uint k0, uint k1, ulong ctr) {
  const uint mask = (uint)((1UL << half_bits) - 1);
  uint l = (uint)(x >> half_bits), r = (uint)x & mask;
  for (uint round = 0; round < FEISTEL_ROUNDS; ++round) {
    const uint4 c = (uint4)(r, (uint)ctr, (uint)(ctr >> 32), round + 1);
    const uint f = philox4x32_10(c, (uint2)(k0, k1)).x;
    const uint t = l ^ (f & mask);
    l = r;
    r = t;
  }
  return ((ulong)l << half_bits) | r;
}

__kernel void randperm_fill(STREAM_ARGS, const int half_bits) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  ulong x = i;
  do {
    x = feistel(x, half_bits, k0, k1, ctr);
  } while (x >= n);
  ST(OUT_T, out, off + i, x);
}

/* ---- draws of distributions with tensor parameters: one draw per work-item -------------------
 * Draw i reads blocks (counter ctr + i, round j), j = 0, 1, ...: round 0 is the stream's own block
 * i, rounds from 1 put j in the counter's third word, which no stream block sets. The parameters
 * are read through strided views over out's shape. *bad = 1 (or 2, 3) flags a parameter outside
 * the distribution's domain (nothing is drawn for it); every writer stores its own flag.
 * Rejection loops stop after MAX_ROUNDS blocks (each refuses with probability < 0.3). */
#ifndef POISSON_PTRS_FROM
#define POISSON_PTRS_FROM 10
#endif
#ifndef BINOMIAL_BTRS_FROM
#define BINOMIAL_BTRS_FROM 10
#endif
#define MAX_ROUNDS 4096

/* The work-item's uniforms in [0, 1), PER at a time from successive rounds. */
typedef struct {
  uint k0, k1, j;
  int used;
  ulong c;
  FT u[PER];
} Draws;

inline Draws draws_of(uint k0, uint k1, ulong c) {
  Draws d;
  d.k0 = k0;
  d.k1 = k1;
  d.c = c;
  d.j = 0;
  d.used = PER;
  return d;
}

inline FT next_u(__private Draws* d) {
  if (d->used == PER) {
    uniforms(philox4x32_10((uint4)((uint)d->c, (uint)(d->c >> 32), d->j, 0u), (uint2)(d->k0, d->k1)),
             d->u);
    d->j += 1;
    d->used = 0;
  }
  return d->u[d->used++];
}

inline int drawing(const __private Draws* d) { return d->j < MAX_ROUNDS; }

/* ---- poisson: rates below POISSON_PTRS_FROM by inversion (the count of k whose CDF stays below
 * one uniform), the others by Hormann's transformed rejection with squeeze (PTRS, 1993). Flags:
 * 1 a negative or NaN rate, 2 an infinite one. */
inline FT poisson_inversion(const FT lam, __private Draws* d) {
  const FT u = next_u(d);
  FT p = exp(-lam), cdf = p, k = 0;
  /* NOTE: a pmf underflowing to 0 ends the tail (u above every CDF value reached) */
  while (u > cdf && p > (FT)0) {
    k += (FT)1;
    p *= lam / k;
    cdf += p;
  }
  return k;
}

inline FT poisson_ptrs(const FT lam, __private Draws* d) {
  const FT slam = sqrt(lam), loglam = log(lam);
  const FT b = (FT)0.931 + (FT)2.53 * slam, a = (FT)-0.059 + (FT)0.02483 * b;
  const FT log_invalpha = log((FT)1.1239 + (FT)1.1328 / (b - (FT)3.4));
  const FT vr = (FT)0.9277 - (FT)3.6224 / (b - (FT)2);
  FT k = floor(lam);
  while (drawing(d)) {
    const FT u = next_u(d) - (FT)0.5, v = next_u(d), us = (FT)0.5 - fabs(u);
    k = floor(((FT)2 * a / us + b) * u + lam + (FT)0.43);
    if (us >= (FT)0.07 && v <= vr) return k;
    if (k < (FT)0 || (us < (FT)0.013 && v > us)) continue;
    if (log(v) + log_invalpha - log(a / (us * us) + b) <= -lam + k * loglam - lgamma(k + (FT)1))
      return k;
  }
  return k;
}

#define PARAM(P, t, i) ((FT)LD(P, t##_p, view_offset((long)(i), nd, shape, t##_v)))

__kernel void poisson_fill(STREAM_ARGS, __global const P_T* rate_p, const View rate_v,
                           const int nd, const Shape shape, __global int* bad) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const FT lam = PARAM(P_T, rate, i);
  Draws d = draws_of(k0, k1, ctr + i);
  FT draw = 0;
  if (!(lam >= (FT)0))
    *bad = 1;
  else if (isinf(lam))
    *bad = 2;
  else if (lam > (FT)0)
    draw = lam < (FT)POISSON_PTRS_FROM ? poisson_inversion(lam, &d) : poisson_ptrs(lam, &d);
  ST(OUT_T, out, off + i, draw);
}

/* ---- gamma (shape alpha, scale 1): Marsaglia and Tsang's squeeze-and-reject (2000) on
 * Box-Muller normals, shapes below 1 boosted (a draw of alpha + 1 times u^(1 / alpha)); draws
 * are at least `tiny` (the output type's smallest normal number, as torch clamps them). Flag 1:
 * a shape that is not positive (or NaN). An infinite shape draws infinity. */
inline FT std_normal(__private Draws* d) {
  const FT r = sqrt((FT)-2 * log((FT)1 - next_u(d)));
  return r * cospi((FT)2 * next_u(d));
}

inline FT gamma_mt(FT alpha, __private Draws* d) {
  FT boost = 1;
  if (alpha < (FT)1) {
    boost = pow((FT)1 - next_u(d), (FT)1 / alpha);
    alpha += (FT)1;
  }
  const FT dd = alpha - (FT)1 / (FT)3, cc = (FT)1 / sqrt((FT)9 * dd);
  FT v = 1;
  while (drawing(d)) {
    const FT x = std_normal(d);
    v = (FT)1 + cc * x;
    if (v <= (FT)0) continue;
    v = v * v * v;
    const FT u = (FT)1 - next_u(d), x2 = x * x;
    if (u < (FT)1 - (FT)0.0331 * x2 * x2 || log(u) < (FT)0.5 * x2 + dd * ((FT)1 - v + log(v)))
      break;
  }
  return boost * dd * v;
}

__kernel void gamma_fill(STREAM_ARGS, __global const P_T* alpha_p, const View alpha_v,
                         const int nd, const Shape shape, const FT tiny, __global int* bad) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const FT alpha = PARAM(P_T, alpha, i);
  Draws d = draws_of(k0, k1, ctr + i);
  FT draw = 0;
  if (!(alpha > (FT)0))
    *bad = 1;
  else
    draw = isinf(alpha) ? alpha : max(gamma_mt(alpha, &d), tiny);
  ST(OUT_T, out, off + i, draw);
}

/* ---- binomial (count n, probability p): counts floor(n) as torch; n p below BINOMIAL_BTRS_FROM
 * (p at most 1/2, else n minus a draw of 1 - p) by inversion, the others by Hormann's BTRS
 * (1993). Flags: 1 a negative or NaN count, 2 an infinite one, 3 a probability outside [0, 1]. */
inline FT binomial_inversion(const FT n, const FT p, __private Draws* d) {
  const FT q = (FT)1 - p, s = p / q, a = (n + (FT)1) * s;
  FT k = 0, r = pow(q, n), u = next_u(d);
  while (u > r && drawing(d)) {
    u -= r;
    k += (FT)1;
    r *= a / k - s;
    if (k > n || r <= (FT)0) { /* the rounding of the pmf's sum ran past n: draw again */
      k = 0;
      r = pow(q, n);
      u = next_u(d);
    }
  }
  return k;
}

inline FT binomial_btrs(const FT n, const FT p, __private Draws* d) {
  const FT q = (FT)1 - p, spq = sqrt(n * p * q);
  const FT b = (FT)1.15 + (FT)2.53 * spq, a = (FT)-0.0873 + (FT)0.0248 * b + (FT)0.01 * p;
  const FT c = n * p + (FT)0.5, vr = (FT)0.92 - (FT)4.2 / b;
  const FT alpha = ((FT)2.83 + (FT)5.1 / b) * spq, lpq = log(p / q);
  const FT m = floor((n + (FT)1) * p), h = lgamma(m + (FT)1) + lgamma(n - m + (FT)1);
  FT k = m;
  while (drawing(d)) {
    const FT u = next_u(d) - (FT)0.5, us = (FT)0.5 - fabs(u);
    const FT v = next_u(d);
    k = floor(((FT)2 * a / us + b) * u + c);
    if (k < (FT)0 || k > n) continue;
    if (us >= (FT)0.07 && v <= vr) return k;
    const FT lv = log(v * alpha / (a / (us * us) + b));
    if (lv <= h - lgamma(k + (FT)1) - lgamma(n - k + (FT)1) + (k - m) * lpq) return k;
  }
  return k;
}

__kernel void binomial_fill(STREAM_ARGS, __global const P_T* count_p, const View count_v,
                            __global const Q_T* prob_p, const View prob_v, const int nd,
                            const Shape shape, __global int* bad) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const FT cnt = floor(PARAM(P_T, count, i)), p = PARAM(Q_T, prob, i);
  Draws d = draws_of(k0, k1, ctr + i);
  FT draw = 0;
  if (!(cnt >= (FT)0))
    *bad = 1;
  else if (isinf(cnt))
    *bad = 2;
  else if (!(p >= (FT)0 && p <= (FT)1))
    *bad = 3;
  else if (cnt > (FT)0 && p > (FT)0) {
    const FT pl = min(p, (FT)1 - p);
    const FT k = pl == (FT)0 ? (FT)0
                 : cnt * pl < (FT)BINOMIAL_BTRS_FROM ? binomial_inversion(cnt, pl, &d)
                                                     : binomial_btrs(cnt, pl, &d);
    draw = p > (FT)0.5 ? cnt - k : k;
  }
  ST(OUT_T, out, off + i, draw);
}
