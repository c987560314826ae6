/*
 * fractional_pool.cl: fractional max pooling forward (torch's fractional_max_pool2d and
 * fractional_max_pool3d), the maximum of each window and its int64 index in the plane.
 *
 * Layout: contiguous planes x (P, D, H, W) and outputs y, idx (P, OD, OH, OW), a 2-d pooling
 * being D = OD = KD = 1; samples (P, NS) contiguous, NS = 2 (2-d) or 3 (3-d). Offsets in
 * elements. One work-item per output element.
 * Windows (torch's generate_intervals, computed in T as torch's CPU kernels compute them in the
 * input's type): output i of n_out along a dim of n_in inputs with window k starts at
 * (int)((i + u) * alpha) - (int)(u * alpha), alpha = (n_in - k) / (n_out - 1), the last at
 * n_in - k, u the plane's sample for that dim: samples[sw], samples[sh], samples[sd] (sd < 0:
 * no depth). The index is d * H * W + h * W + w; ties keep the first in (d, h, w) order and a
 * NaN beats every number (the window's last NaN gives the index), as torch's CPU kernels.
 * Build options: T (float or double), KEEP_BITS (with T float: 11 or 8, the windows computed
 * with float16's or bfloat16's rounding, for inputs of those types). Tunables: none.
 */

#ifndef T
#define T float
#endif

#ifdef KEEP_BITS
// x (float) rounded to nearest even at KEEP_BITS significant bits, as float16 (11) and bfloat16
// (8) arithmetic rounds each result: windows of 16-bit inputs (exact in the normal range; a
// subnormal result is below 1, which truncates to 0 either way)
inline float narrow(const float x) {
  const uint drop = 24 - KEEP_BITS;
  const uint b = as_uint(x);
  return as_float((b + (1u << (drop - 1)) - 1 + ((b >> drop) & 1)) & ~((1u << drop) - 1));
}
#else
#define narrow(x) (x)
#endif

inline long window_start(const T u, const long i, const long n_in, const long n_out,
                         const long k) {
  if (i == n_out - 1) return n_in - k;
  const T alpha = narrow(narrow((T)(n_in - k)) / narrow((T)(n_out - 1)));
  return (long)((int)narrow(narrow(narrow((T)i) + u) * alpha) - (int)narrow(u * alpha));
}

__kernel void fractional_max_pool(const long total, const long D, const long H, const long W,
                                  const long OD, const long OH, const long OW, const long KD,
                                  const long KH, const long KW, const int ns, const int sd,
                                  const int sh, const int sw, __global const T* x,
                                  const long x_off, __global const T* samples, const long s_off,
                                  __global T* y, const long y_off, __global long* idx,
                                  const long i_off) {
  const long e = get_global_id(0);
  if (e >= total) return;
  const long ow = e % OW, oh = e / OW % OH, od = e / (OW * OH) % OD, p = e / (OW * OH * OD);
  __global const T* u = samples + s_off + p * ns;
  const long d0 = sd < 0 ? 0 : window_start(u[sd], od, D, OD, KD);
  const long h0 = window_start(u[sh], oh, H, OH, KH);
  const long w0 = window_start(u[sw], ow, W, OW, KW);
  __global const T* plane = x + x_off + p * D * H * W;
  T best = -INFINITY;
  long at = (d0 * H + h0) * W + w0;
  for (long d = d0; d < d0 + KD; ++d)
    for (long h = h0; h < h0 + KH; ++h)
      for (long w = w0; w < w0 + KW; ++w) {
        const long pos = (d * H + h) * W + w;
        const T v = plane[pos];
        if (v > best || isnan(v)) {
          best = v;
          at = pos;
        }
      }
  y[y_off + e] = best;
  idx[i_off + e] = at;
}
