/*
 * norm.cl: local response normalization (across channels) and batch normalization, forward
 * and backward.
 *
 * Layout: a tensor is an (N, C, S) view, S the spatial dims collapsed: an element offset and a
 * stride per dim (View3, in elements: contiguous NCHW, channels_last and sliced inputs alike).
 * Elementwise kernels are launched over a 2-d range, (S, N * C), or (C, N * S) when the argument
 * c_last is set (channels_last outputs), so neighbouring work-items write neighbouring memory.
 *
 * Local response norm (torch's formula: zero padding, the window always divided by `size`):
 *   scale[n,c,s] = k + alpha / size * sum_{c' = c - size/2 .. c + (size-1)/2} x[n,c',s]^2
 *   y = x * scale^-beta
 *   gx[j] = g[j] scale[j]^-beta - 2 alpha beta / size * x[j] * sum_{c: j in window(c)} g y / scale
 *   lrn_fwd  one work-item per element; writes scale too when save_scale (for the backward)
 *   lrn_bwd  one work-item per element, gathering over the channels whose window holds it
 *
 * Batch norm, per channel c over its M = N * S elements:
 *   bn_reduce         partial sums over chunks of a channel: the LANES work-items (p, c) along
 *                     dim 0 (a work-group when LANES > 1) sum chunk p (elements k in
 *                     [p * chunk, (p + 1) * chunk), k = n * S + s);
 *                     lanes meet in a local-memory tree when LANES > 1. It sums d and d^2 with
 *                     d = x - x[first element of c] (a shift that keeps the sums small), or
 *                     when grad is set g and g * (x - mean[c]). Partials:
 *                     part[(c * P + p) * 2 + {0, 1}].
 *   bn_stats          one work-item per channel: mean, biased variance, invstd = 1/sqrt(var + eps),
 *                     the affine map y = a x + b (a = w invstd, b = bias - mean a) and, when
 *                     the running stats are given, running = (1 - momentum) running +
 *                     momentum stat (the variance unbiased, M / (M - 1)).
 *   bn_eval_coeffs    a, b from the running statistics.
 *   bn_grads          one work-item per channel: gw = invstd sum g (x - mean), gb = sum g, and
 *                     gx = k1 g + k2 x + k3 with k1 = w invstd and (training only, batch
 *                     statistics) k2 = -k1 invstd sum g (x - mean) / M,
 *                     k3 = -k2 mean - k1 sum g / M.
 *   bn_apply          one work-item per element: y = a[c] x + b[c], or when grad is set
 *                     gx = k1[c] g + k2[c] x + k3[c].
 * A convolution's fused ReLU taken back, with its bias gradient, per channel c over its M = N * S
 * elements (conv/function.py, where no algorithm folds the bias gradient in):
 *   relu_bias_grad    gm = y <= 0 ? 0 : g (torch's ReLU backward: a NaN y passes g) written, and
 *                     gb[c] = sum of channel c's gm (compensated), in one pass: one work-group of
 *                     LANES work-items per channel, lane l taking k = l, l + LANES, ...
 *   relu_bias_grad_vec16  (CPUs, VEC16, T float) one work-item per channel, rows of g, y and gm
 *                     walked 16 elements at a time where all three are contiguous
 *                     g, y, gm and gb are DATA_T (16-bit data: read into float, the sums float,
 *                     gb rounded once)
 *   MASKED_OUT 0 (both): gm is not written, gb alone is the result (a pass whose kernels mask
 *                     g themselves needs only the bias gradient); default 1
 * Build options (after compensated.cl, whose ksum the batch-norm sums take):
 *   T            data and accumulation type (float or double)
 *   DATA_T       batch norm's, LRN's and relu_bias_grad's data storage type (default T; half or bf16 with T
 *                float, through common.cl's LD/ST); statistics and parameters stay T
 *   LANES        bn_reduce lanes per work-group, a power of two (default 1: no local memory)
 * Kernel flags (arguments, to keep builds few): c_last, save_scale, grad, and `opt`, which says
 * which optional per-channel inputs are given: OPT_WEIGHT, OPT_BIAS, OPT_RUNNING (absent ones
 * are unread; weight 1, bias 0).
 * Tunables: LANES and the chunk count (the launcher picks them per device).
 */
#ifndef LANES
#define LANES 1
#endif
#ifndef DATA_T
#define DATA_T T
#endif
#include "common.cl"

typedef struct { long off, n, c, s; } View3;

#define OPT_WEIGHT 1
#define OPT_BIAS 2
#define OPT_RUNNING 4

/* This work-item's element (n, c, s) of the N x C x S tensor it walks, and whether it lies
 * inside: the 2-d range is (S, N * C), or (C, N * S) with c_last, so neighbouring work-items
 * touch neighbouring memory of the tensor written and only the outer index needs a division. */
inline int element(const long N, const long C, const long S, const int c_last, long4* q) {
  const long i0 = get_global_id(0), i1 = get_global_id(1);
  if (c_last) {
    *q = (long4)(i1 / S, i0, i1 % S, 0);
    return i0 < C && i1 < N * S;
  }
  *q = (long4)(i1 / C, i1 % C, i0, 0);
  return i0 < S && i1 < N * C;
}

/* The row-major (walk order) index of element q in a contiguous tensor. */
inline long walk_index(const long4 q, const long C, const long S, const int c_last) {
  return c_last ? (q.x * S + q.z) * C + q.y : (q.x * C + q.y) * S + q.z;
}

inline long at(const View3 v, const long n, const long c, const long s) {
  return v.off + n * v.n + c * v.c + s * v.s;
}

/* ---- local response norm --------------------------------------------------------------------- */


/* sc^-beta; the usual beta = 0.75 as r sqrt(r), r = 1/sqrt(sc) (far cheaper than pow). */
inline T pow_neg(const T sc, const T beta) {
  if (beta == (T)0.75) {
    const T r = rsqrt(sc);
    return r * sqrt(r);
  }
  return exp(-beta * log(sc));
}
__kernel void lrn_fwd(const long N, const long C, const long S, const int c_last,
                      const int size, const T alpha, const T beta, const T k, const int save_scale,
                      __global const DATA_T* x, const View3 vx, __global DATA_T* y,
                      const View3 vy, __global T* scale) {
  long4 q;
  if (!element(N, C, S, c_last, &q)) return;
  const long lo = max(q.y - size / 2, 0L), hi = min(q.y + (size - 1) / 2, C - 1);
  T acc = 0;
  for (long c = lo; c <= hi; ++c) {
    const T v = LD(DATA_T, x, at(vx, q.x, c, q.z));
    acc += v * v;
  }
  const T sc = k + alpha / (T)size * acc;
  const long o = at(vy, q.x, q.y, q.z);
  ST(DATA_T, y, o, LD(DATA_T, x, at(vx, q.x, q.y, q.z)) * pow_neg(sc, beta));
  if (save_scale) scale[o] = sc;
}

/* y and scale share the layout of gx (vy). */
__kernel void lrn_bwd(const long N, const long C, const long S, const int c_last,
                      const int size, const T alpha, const T beta, __global const DATA_T* g,
                      const View3 vg, __global const DATA_T* x, const View3 vx,
                      __global const DATA_T* y, __global const T* scale, const View3 vy,
                      __global DATA_T* gx) {
  long4 q;
  if (!element(N, C, S, c_last, &q)) return;
  const long lo = max(q.y - (size - 1) / 2, 0L), hi = min(q.y + size / 2, C - 1);
  T acc = 0;
  for (long c = lo; c <= hi; ++c) {
    const long o = at(vy, q.x, c, q.z);
    acc += LD(DATA_T, g, at(vg, q.x, c, q.z)) * LD(DATA_T, y, o) / scale[o];
  }
  const long o = at(vy, q.x, q.y, q.z);
  ST(DATA_T, gx, o, LD(DATA_T, g, at(vg, q.x, q.y, q.z)) * pow_neg(scale[o], beta)
                    - (T)2 * alpha * beta / (T)size * LD(DATA_T, x, at(vx, q.x, q.y, q.z)) * acc);
}

/* ---- batch norm ------------------------------------------------------------------------------ */

/* (n, s) of element k + LANES from element k's (dn, ds: LANES / S and LANES % S): no division
 * per element */
inline void next_element(long* n, long* s, const long dn, const long ds, const long S) {
  *n += dn;
  *s += ds;
  if (*s >= S) {
    *s -= S;
    ++*n;
  }
}

#if LANES > 1
/* b[0] = the sum of b[0 .. LANES - 1], b[l] written by lane l; every lane calls it */
inline void tree_sum(__local T* b, const int l) {
  for (int h = LANES / 2; h > 0; h >>= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l < h) b[l] += b[l + h];
  }
}
#endif

__kernel void bn_reduce(const long N, const long S, const long chunk, const int grad,
                        __global const DATA_T* x, const View3 vx, __global const DATA_T* g,
                        const View3 vg, __global const T* mean, __global T* part) {
  const long p = get_global_id(0) / LANES, c = get_global_id(1), P = get_global_size(0) / LANES;
#if LANES > 1
  const int l = get_local_id(0);
#else
  const int l = 0;
#endif
  const long M = N * S;
  const long k0 = p * chunk, k1 = min(k0 + chunk, M);
  const T center = grad ? mean[c] : (M > 0 ? LD(DATA_T, x, at(vx, 0, c, 0)) : (T)0);
  T s1 = 0, s2 = 0, c1 = 0, c2 = 0;  /* ksum (compensated.cl): a CPU work-item sums 4096+ */
  /* element k = n * S + s, stepped by LANES without a division per element */
  const long dn = LANES / S, ds = LANES % S;
  long n = (k0 + l) / S, s = (k0 + l) % S;
  for (long k = k0 + l; k < k1; k += LANES) {
    const T d = LD(DATA_T, x, at(vx, n, c, s)) - center;
    const T e = grad ? LD(DATA_T, g, at(vg, n, c, s)) : d;  /* g, or d itself for the statistics */
    ksum(&s1, &c1, e);
    ksum(&s2, &c2, e * d);
    next_element(&n, &s, dn, ds, S);
  }
  s1 += c1;
  s2 += c2;
#if LANES > 1
  __local T b1[LANES], b2[LANES];
  b1[l] = s1;
  b2[l] = s2;
  tree_sum(b1, l);
  tree_sum(b2, l);
  if (l != 0) return;
  s1 = b1[0];
  s2 = b2[0];
#endif
  part[(c * P + p) * 2] = s1;
  part[(c * P + p) * 2 + 1] = s2;
}

#ifndef MASKED_OUT
#define MASKED_OUT 1
#endif
#if MASKED_OUT
#define STORE_MASKED(st) st
#else
#define STORE_MASKED(st)
#endif

__kernel void relu_bias_grad(const long N, const long S, __global const DATA_T* g,
                             const View3 vg, __global const DATA_T* y, const View3 vy,
                             __global DATA_T* gm, const View3 vm, __global DATA_T* gb) {
  const long c = get_global_id(1), M = N * S;
#if LANES > 1
  const int l = get_local_id(0);
#else
  const int l = 0;
#endif
  T s1 = 0, c1 = 0;
  const long dn = LANES / S, ds = LANES % S;
  long n = l / S, s = l % S;
  for (long k = l; k < M; k += LANES) {
    const T e = LD(DATA_T, y, at(vy, n, c, s)) <= 0 ? (T)0 : LD(DATA_T, g, at(vg, n, c, s));
    STORE_MASKED(ST(DATA_T, gm, at(vm, n, c, s), e));
    ksum(&s1, &c1, e);
    next_element(&n, &s, dn, ds, S);
  }
  s1 += c1;
#if LANES > 1
  __local T b1[LANES];
  b1[l] = s1;
  tree_sum(b1, l);
  if (l != 0) return;
  s1 = b1[0];
#endif
  ST(DATA_T, gb, c, s1);
}

/* The sums of channel c's P partials: *s1 and *s2 (compensated: GPUs cut a channel finely). */
inline void sum_parts(__global const T* part, const long c, const long P, T* s1, T* s2) {
  T a = 0, b = 0, ca = 0, cb = 0;
  for (long p = 0; p < P; ++p) {
    ksum(&a, &ca, part[(c * P + p) * 2]);
    ksum(&b, &cb, part[(c * P + p) * 2 + 1]);
  }
  *s1 = a + ca;
  *s2 = b + cb;
}

#define W_AT(c) ((opt & OPT_WEIGHT) ? w[c] : (T)1)
#define B_AT(c) ((opt & OPT_BIAS) ? b[c] : (T)0)

/* stats: mean[c], invstd[c]; coef: a[c] = coef[c], b[c] = coef[C + c]. */
__kernel void bn_stats(const long C, const long M, const long P, const int opt,
                       __global const T* part, __global const DATA_T* x, const View3 vx,
                       const T eps, const T momentum,
                       __global const T* w, __global const T* b, __global T* run_mean,
                       __global T* run_var, __global T* mean, __global T* invstd,
                       __global T* coef) {
  const long c = get_global_id(0);
  if (c >= C) return;
  T s1, s2;
  sum_parts(part, c, P, &s1, &s2);
  const T shift = LD(DATA_T, x, at(vx, 0, c, 0));
  const T mu = s1 / (T)M;
  const T var = max((s2 - s1 * mu) / (T)M, (T)0);
  const T m = shift + mu, is = (T)1 / sqrt(var + eps);
  mean[c] = m;
  invstd[c] = is;
  const T a = W_AT(c) * is;
  coef[c] = a;
  coef[C + c] = B_AT(c) - m * a;
  if (opt & OPT_RUNNING) {
    run_mean[c] = ((T)1 - momentum) * run_mean[c] + momentum * m;
    run_var[c] = ((T)1 - momentum) * run_var[c] + momentum * var * (T)M / (T)(M - 1);
  }
}

__kernel void bn_eval_coeffs(const long C, const int opt, const T eps, __global const T* w,
                             __global const T* b,
                             __global const T* run_mean, __global const T* run_var,
                             __global T* invstd, __global T* coef) {
  const long c = get_global_id(0);
  if (c >= C) return;
  const T is = (T)1 / sqrt(run_var[c] + eps);
  const T a = W_AT(c) * is;
  invstd[c] = is;
  coef[c] = a;
  coef[C + c] = B_AT(c) - run_mean[c] * a;
}

/* grads: gw[c] = grads[c], gb[c] = grads[C + c]; coef: k1, k2, k3 at c, C + c, 2C + c. */
__kernel void bn_grads(const long C, const long M, const long P, const int opt, const int train,
                       __global const T* part, __global const T* w, __global const T* mean,
                       __global const T* invstd, __global T* grads, __global T* coef) {
  const long c = get_global_id(0);
  if (c >= C) return;
  T s1, s2;
  sum_parts(part, c, P, &s1, &s2);
  const T is = invstd[c];
  grads[c] = s2 * is;
  grads[C + c] = s1;
  const T k1 = W_AT(c) * is;
  const T k2 = train ? -k1 * is * is * s2 / (T)M : (T)0;
  coef[c] = k1;
  coef[C + c] = k2;
  coef[2 * C + c] = train ? -k2 * mean[c] - k1 * s1 / (T)M : (T)0;
}

/* out is contiguous in the walk order. */
__kernel void bn_apply(const long N, const long C, const long S, const int c_last,
                       const int grad, __global const DATA_T* x, const View3 vx, __global const DATA_T* g,
                       const View3 vg, __global const T* coef, __global DATA_T* out) {
  long4 q;
  if (!element(N, C, S, c_last, &q)) return;
  const long i = walk_index(q, C, S, c_last);
  const T xv = LD(DATA_T, x, at(vx, q.x, q.y, q.z));
  if (grad)
    ST(DATA_T, out, i,
       coef[q.y] * LD(DATA_T, g, at(vg, q.x, q.y, q.z)) + coef[C + q.y] * xv + coef[2 * C + q.y]);
  else
    ST(DATA_T, out, i, coef[q.y] * xv + coef[C + q.y]);
}

#ifdef VEC16
/* ---- CPUs' vector forms (VEC16: T float; DATA_T float, half or bf16), 16 elements of a row at a
 * time through common.cl's VLD16/VST16 where the rows are contiguous. PoCL's per-element
 * 16-bit conversions left bn_apply 2 to 3x slower than on float32, and its float32 bn_apply
 * divided per element. */

/* The sums of e and e * d over 4 vectors from element i of the contiguous rows of x at xo and
 * g at go (d = x - center; e = d, or g with grad), each summed plainly and pairwise */
#ifndef BN_ROWS
#define BN_ROWS 2
#endif
#define BN_QUAD(xo, go, i)                                                             \
  {                                                                                    \
    const float16 d0 = VLD16(DATA_T, x, (xo) + (i)) - center,                          \
                  d1 = VLD16(DATA_T, x, (xo) + (i) + 16) - center,                     \
                  d2 = VLD16(DATA_T, x, (xo) + (i) + 32) - center,                     \
                  d3 = VLD16(DATA_T, x, (xo) + (i) + 48) - center;                     \
    const float16 e0 = grad ? VLD16(DATA_T, g, (go) + (i)) : d0,                       \
                  e1 = grad ? VLD16(DATA_T, g, (go) + (i) + 16) : d1,                  \
                  e2 = grad ? VLD16(DATA_T, g, (go) + (i) + 32) : d2,                  \
                  e3 = grad ? VLD16(DATA_T, g, (go) + (i) + 48) : d3;                  \
    ksum16(&s1v, &c1v, (e0 + e1) + (e2 + e3));                                         \
    ksum16(&s2v, &c2v, (e0 * d0 + e1 * d1) + (e2 * d2 + e3 * d3));                     \
  }

/* The elements i0 .. len - 1 of the row span at xo, go: vectors of 16 where rows are
 * contiguous, then one by one */
#define BN_REST(xo, go, i0)                                                            \
  {                                                                                    \
    long j = (i0);                                                                     \
    for (; rows16 && j + 16 <= len; j += 16) {                                         \
      const float16 d = VLD16(DATA_T, x, (xo) + j) - center;                           \
      const float16 e = grad ? VLD16(DATA_T, g, (go) + j) : d;                         \
      ksum16(&s1v, &c1v, e);                                                           \
      ksum16(&s2v, &c2v, e * d);                                                       \
    }                                                                                  \
    for (; j < len; ++j) {                                                             \
      const T d = LD(DATA_T, x, (xo) + j * vx.s) - center;                             \
      const T e = grad ? LD(DATA_T, g, (go) + j * vg.s) : d;                           \
      ksum(&s1, &c1, e);                                                               \
      ksum(&s2, &c2, e * d);                                                           \
    }                                                                                  \
  }

/* bn_reduce's sums (LANES 1) walked row by row, BN_ROWS whole rows side by side where the
 * chunk holds them (walked one after the other, the 8 KiB rows of a 16-bit 64 x 64 image were
 * summed no faster than float32's 16 KiB ones; 4 side by side, 1.4x faster; float32 gained
 * most from 2, and lost 3% with 4): in contiguous rows
 * 64 elements at a time, into 16 lanes of compensated sums that meet at the end, each taking
 * the plain sum of 4 vectors (a compensated add per vector waited for the one before: its
 * latency bounded the sums), then vectors of 16, then element by element */
__kernel void bn_reduce_vec16(const long N, const long S, const long chunk, const int grad,
                              __global const DATA_T* x, const View3 vx, __global const DATA_T* g,
                              const View3 vg, __global const T* mean, __global T* part) {
  const long p = get_global_id(0), c = get_global_id(1), P = get_global_size(0);
  const long M = N * S, k0 = p * chunk, k1 = min(k0 + chunk, M);
  const T center = grad ? mean[c] : (M > 0 ? LD(DATA_T, x, at(vx, 0, c, 0)) : (T)0);
  const int rows16 = vx.s == 1 && (!grad || vg.s == 1);
  float16 s1v = 0, s2v = 0, c1v = 0, c2v = 0;
  T s1 = 0, s2 = 0, c1 = 0, c2 = 0;
  for (long k = k0; k < k1;) {  /* the span [s, s + len) of row n, and the rows after it */
    const long n = k / S, s = k % S, len = min(S - s, k1 - k);
    const long xo = at(vx, n, c, s), go = at(vg, n, c, s);
    const int side = rows16 && s == 0 && k + BN_ROWS * S <= k1;
    long i = 0;
    if (side) {
      long xr[BN_ROWS], gr[BN_ROWS];
      _Pragma("unroll") for (int r = 0; r < BN_ROWS; ++r) {
        xr[r] = at(vx, n + r, c, 0);
        gr[r] = at(vg, n + r, c, 0);
      }
      for (; i + 64 <= len; i += 64) {
        _Pragma("unroll") for (int r = 0; r < BN_ROWS; ++r) BN_QUAD(xr[r], gr[r], i)
      }
      _Pragma("unroll") for (int r = 1; r < BN_ROWS; ++r) BN_REST(xr[r], gr[r], i)
    } else {
      for (; rows16 && i + 64 <= len; i += 64) BN_QUAD(xo, go, i)
    }
    BN_REST(xo, go, i)
    k += side ? BN_ROWS * len : len;
  }
  T l1[16], l2[16];
  vstore16(s1v + c1v, 0, l1);
  vstore16(s2v + c2v, 0, l2);
  for (int l = 0; l < 16; ++l) {
    ksum(&s1, &c1, l1[l]);
    ksum(&s2, &c2, l2[l]);
  }
  part[(c * P + p) * 2] = s1 + c1;
  part[(c * P + p) * 2 + 1] = s2 + c2;
}

/* bn_apply for outputs written in NCHW order: work-item (j, c, n) does elements
 * s = 16 BN_VECS j .. 16 BN_VECS (j + 1) - 1 of row (n, c) (a 3-d range: no division per
 * work-item), BN_VECS vectors of 16 (one vector per work-item spent as long on each item's
 * indices and coefficients as on its elements) */
#define BN_VECS 8
__kernel void bn_apply_vec16(const long N, const long C, const long S, const int grad,
                             __global const DATA_T* x, const View3 vx, __global const DATA_T* g,
                             const View3 vg, __global const T* coef, __global DATA_T* out) {
  const long s0 = get_global_id(0) * 16 * BN_VECS, c = get_global_id(1), n = get_global_id(2);
  if (s0 >= S || c >= C || n >= N) return;
  const T a = coef[c], b = coef[C + c], k3 = grad ? coef[2 * C + c] : (T)0;
  const long end = min(s0 + 16 * BN_VECS, S);
  const long o = (n * C + c) * S, ox = at(vx, n, c, 0), og = at(vg, n, c, 0);
  long s = s0;
  if (vx.s == 1 && (!grad || vg.s == 1)) {
    for (; s + 16 <= end; s += 16) {
      const float16 xv = VLD16(DATA_T, x, ox + s);
      VST16(DATA_T, out, o + s, grad ? a * VLD16(DATA_T, g, og + s) + b * xv + k3 : a * xv + b);
    }
  }
  for (; s < end; ++s) {
    const T xv = LD(DATA_T, x, ox + s * vx.s);
    ST(DATA_T, out, o + s, grad ? a * LD(DATA_T, g, og + s * vg.s) + b * xv + k3 : a * xv + b);
  }
}
/* relu_bias_grad on CPUs: work-item c walks its channel row by row, 16 elements at a time into
 * 16 lanes of compensated sums where the rows of g, y and gm are contiguous */
__kernel void relu_bias_grad_vec16(const long N, const long S, __global const DATA_T* g,
                                   const View3 vg, __global const DATA_T* y, const View3 vy,
                                   __global DATA_T* gm, const View3 vm, __global DATA_T* gb) {
  const long c = get_global_id(1);
  const int rows16 = vg.s == 1 && vy.s == 1 && vm.s == 1;
  float16 sv = 0, cv = 0;
  T s1 = 0, c1 = 0;
  for (long n = 0; n < N; ++n) {
    const long go = at(vg, n, c, 0), yo = at(vy, n, c, 0), mo = at(vm, n, c, 0);
    long s = 0;
    for (; rows16 && s + 16 <= S; s += 16) {
      const float16 e = select(VLD16(DATA_T, g, go + s), (float16)0,
                               islessequal(VLD16(DATA_T, y, yo + s), (float16)0));
      STORE_MASKED(VST16(DATA_T, gm, mo + s, e));
      ksum16(&sv, &cv, e);
    }
    for (; s < S; ++s) {
      const T e = LD(DATA_T, y, yo + s * vy.s) <= 0 ? (T)0 : LD(DATA_T, g, go + s * vg.s);
      STORE_MASKED(ST(DATA_T, gm, mo + s * vm.s, e));
      ksum(&s1, &c1, e);
    }
  }
  T l1[16];
  vstore16(sv + cv, 0, l1);
  for (int l = 0; l < 16; ++l) ksum(&s1, &c1, l1[l]);
  ST(DATA_T, gb, c, s1 + c1);
}
#endif
