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
 *
 * Build options:
 *   OUT_T      storage type of the output (uchar for bool; half and bf16 through common.cl's ST)
 *   OUT_DIGITS the significand bits of a 16-bit float OUT_T (uniform_fill's grid)
 *   FT         uniform/compute float type, float (24-bit uniforms) or double (53-bit uniforms);
 *              FT_DOUBLE is defined when it is double
 *   P_T        storage type of the probability tensor of bernoulli_tensor and of check_range
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

/* ---- poisson: one draw per work-item ---------------------------------------------------------
 * out[i] ~ Poisson(rate[i]), rate read through a strided view over out's shape. Rates below
 * POISSON_PTRS_FROM draw by inversion (the count of k whose CDF stays below one uniform), the
 * others by Hormann's transformed rejection with squeeze (PTRS, 1993: about 1.1 attempts a draw).
 * Draw i reads blocks (counter ctr + i, round j), j = 0, 1, ...: round 0 is the stream's own
 * block i, rounds from 1 put j in the counter's third word, which no stream block sets.
 * *bad = 1 when some rate is negative or NaN, 2 when one is infinite (nothing is drawn for it). */
#ifndef POISSON_PTRS_FROM
#define POISSON_PTRS_FROM 10
#endif
#define POISSON_MAX_ROUNDS 4096 /* PTRS refuses an attempt with probability < 0.15 */

inline uint4 round_block(uint k0, uint k1, ulong c, uint j) {
  return philox4x32_10((uint4)((uint)c, (uint)(c >> 32), j, 0u), (uint2)(k0, k1));
}

inline FT poisson_inversion(const FT lam, uint k0, uint k1, ulong c) {
  FT u[PER];
  uniforms(round_block(k0, k1, c, 0u), u);
  FT p = exp(-lam), cdf = p, k = 0;
  /* NOTE: a pmf underflowing to 0 ends the tail (u above every CDF value reached) */
  while (u[0] > cdf && p > (FT)0) {
    k += (FT)1;
    p *= lam / k;
    cdf += p;
  }
  return k;
}

inline FT poisson_ptrs(const FT lam, uint k0, uint k1, ulong c) {
  const FT slam = sqrt(lam), loglam = log(lam);
  const FT b = (FT)0.931 + (FT)2.53 * slam, a = (FT)-0.059 + (FT)0.02483 * b;
  const FT log_invalpha = log((FT)1.1239 + (FT)1.1328 / (b - (FT)3.4));
  const FT vr = (FT)0.9277 - (FT)3.6224 / (b - (FT)2);
  FT k = floor(lam);
  for (uint j = 0; j < POISSON_MAX_ROUNDS; ++j) {
    FT u[PER];
    uniforms(round_block(k0, k1, c, j), u);
    for (int t = 0; t + 1 < PER; t += 2) {
      const FT us = (FT)0.5 - fabs(u[t] - (FT)0.5), v = u[t + 1];
      k = floor(((FT)2 * a / us + b) * (u[t] - (FT)0.5) + lam + (FT)0.43);
      if (us >= (FT)0.07 && v <= vr) return k;
      if (k < (FT)0 || (us < (FT)0.013 && v > us)) continue;
      if (log(v) + log_invalpha - log(a / (us * us) + b) <= -lam + k * loglam - lgamma(k + (FT)1))
        return k;
    }
  }
  return k; /* not reached in practice: every round refuses with probability < 0.02 */
}

__kernel void poisson_fill(STREAM_ARGS, __global const P_T* rate, const View vr, const int nd,
                           const Shape shape, __global int* bad) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const FT lam = (FT)LD(P_T, rate, view_offset((long)i, nd, shape, vr));
  FT draw = 0;
  if (!(lam >= (FT)0))
    *bad = 1;
  else if (isinf(lam))
    *bad = 2;
  else if (lam > (FT)0)
    draw = lam < (FT)POISSON_PTRS_FROM ? poisson_inversion(lam, k0, k1, ctr + i)
                                       : poisson_ptrs(lam, k0, k1, ctr + i);
  ST(OUT_T, out, off + i, draw);
}
