/*
 * pool.cl: 2-d pooling over NCHW tensors: max (with its argmax), average and adaptive average,
 * forward and backward. One work-item per output element forward; one work-item per input
 * element backward, gathering from every output whose window holds it (no atomics, so the
 * result does not depend on scheduling).
 *
 * Layout: a tensor is an N x C x H x W view: an element offset and one stride per dim (View4,
 * in elements, any values: channels_last and sliced inputs read in place). The launch is a 3-d
 * range over the tensor the kernel writes, (W, H, N * C), or (C, W, N * H) when the argument
 * c_last is set (channels_last outputs), so neighbouring work-items write neighbouring memory.
 * The argmax of a max-pool output is the int h * W + w, the input position in its (n, c) plane,
 * as torch's return_indices gives.
 *
 * Window rules (torch's): output oh of max_pool reads rows oh * sh - ph + a * dh, a < kh, that
 * lie inside the input (padding never wins); ties keep the first, and NaN beats every number
 * (the window's last NaN gives the argmax). avg_pool sums the rows [oh * sh - ph,
 * oh * sh - ph + kh) inside the input and divides by `divisor` when it is nonzero, else by the
 * window's size clipped to the padded input (include_pad) or to the input; a window wholly in
 * the padding gives 0. adaptive_avg_pool averages rows [floor(oh * H / OH),
 * ceil((oh + 1) * H / OH)).
 *
 * Kernels: max_pool2d_fwd, max_pool2d_bwd, avg_pool2d_fwd, avg_pool2d_bwd,
 *          adaptive_avg_pool2d_fwd, adaptive_avg_pool2d_bwd.
 * Build options:
 *   T        data type (float or double)
 * Kernel flags (arguments, to keep builds few): c_last (NHWC work order), with_idx
 * (max_pool2d_fwd also writes the argmax).
 * Tunables: none; the launcher picks work sizes.
 */

typedef struct { long off, n, c, h, w; } View4;
typedef struct {
  int N, C, H, W, OH, OW;        /* input and output sizes */
  int kh, kw, sh, sw, ph, pw, dh, dw;
  int divisor, include_pad;      /* avg_pool only */
} Pool;

/* This work-item's element (n, c, y, x) of the N x C x Y x X tensor it walks, and whether it
 * lies inside: the 3-d range is (X, Y, N * C), or (C, X, N * Y) with c_last, so neighbouring
 * work-items touch neighbouring memory of the tensor written and only the outermost index
 * needs a division. */
inline int element(const int N, const int C, const int Y, const int X, const int c_last,
                   int4* q) {
  const int i0 = get_global_id(0), i1 = get_global_id(1), i2 = get_global_id(2);
  if (c_last) {
    *q = (int4)(i2 / Y, i0, i2 % Y, i1);
    return i0 < C && i1 < X && i2 < N * Y;
  }
  *q = (int4)(i2 / C, i2 % C, i1, i0);
  return i0 < X && i1 < Y && i2 < N * C;
}

inline long at(const View4 v, const int4 q) {
  return v.off + q.x * v.n + q.y * v.c + q.z * v.h + q.w * v.w;
}

inline long plane(const View4 v, const int4 q) { return v.off + q.x * v.n + q.y * v.c; }

/* ---- max ------------------------------------------------------------------------------------ */

/* The taps a0 <= a < a1 of a window starting at s0 (step d, k taps) that land in [0, n). */
inline int first_tap(const int s0, const int d) { return s0 < 0 ? (-s0 + d - 1) / d : 0; }

inline int end_tap(const int s0, const int d, const int k, const int n) {
  return s0 >= n ? 0 : min(k, (n - 1 - s0) / d + 1);
}

__kernel void max_pool2d_fwd(const Pool p, const int c_last, const int with_idx,
                             __global const T* x, const View4 vx, __global T* y, const View4 vy,
                             __global int* idx, const View4 vi) {
  int4 q;
  if (!element(p.N, p.C, p.OH, p.OW, c_last, &q)) return;
  const long base = plane(vx, q);
  const int h0 = q.z * p.sh - p.ph, w0 = q.w * p.sw - p.pw;
  const int a0 = first_tap(h0, p.dh), a1 = end_tap(h0, p.dh, p.kh, p.H);
  const int b0 = first_tap(w0, p.dw), b1 = end_tap(w0, p.dw, p.kw, p.W);
  T best = -INFINITY;
  int arg = (h0 + a0 * p.dh) * p.W + w0 + b0 * p.dw;  /* the first tap: when none beats -inf */
  int nan = 0;
  for (int a = a0; a < a1; ++a) {
    const int h = h0 + a * p.dh;
    const long row = base + h * vx.h;
    for (int b = b0; b < b1; ++b) {
      const int w = w0 + b * p.dw;
      const T v = x[row + w * vx.w];
      const int take = v > best;
      best = take ? v : best;
      arg = take ? h * p.W + w : arg;
      nan |= isnan(v);
    }
  }
  /* NOTE: NaN is kept out of the hot loop above (it halves its speed on CPUs); a window with
   * a NaN gives NaN and the last NaN's position, as torch. */
  if (nan) {
    for (int a = a0; a < a1; ++a) {
      const int h = h0 + a * p.dh;
      for (int b = b0; b < b1; ++b) {
        const int w = w0 + b * p.dw;
        const T v = x[base + h * vx.h + w * vx.w];
        if (isnan(v)) {
          best = v;
          arg = h * p.W + w;
        }
      }
    }
  }
  y[at(vy, q)] = best;
  if (with_idx) idx[at(vi, q)] = arg;
}

/* The outputs o whose window (start o * s - pad, step d, k taps) holds position h: the o with
 * o * s <= h + pad <= o * s + (k - 1) * d, as [o0, o1]; with d > 1, (h + pad - o * s) % d == 0
 * must hold too. */
inline int2 outputs_holding(const int h, const int s, const int pad, const int d, const int k,
                            const int n_out) {
  const int hi = h + pad, lo = hi - (k - 1) * d;
  return (int2)(lo <= 0 ? 0 : (lo + s - 1) / s, min(hi / s, n_out - 1));
}

/* Input (h, w) gets g of every output whose argmax is (h, w). */
__kernel void max_pool2d_bwd(const Pool p, const int c_last,
                             __global const T* g, const View4 vg, __global const int* idx,
                             const View4 vi, __global T* gx, const View4 vgx) {
  int4 q;
  if (!element(p.N, p.C, p.H, p.W, c_last, &q)) return;
  const int h = q.z, w = q.w, me = h * p.W + w;
  const int2 ro = outputs_holding(h, p.sh, p.ph, p.dh, p.kh, p.OH);
  const int2 co = outputs_holding(w, p.sw, p.pw, p.dw, p.kw, p.OW);
  const long gb = plane(vg, q), ib = plane(vi, q);
  T acc = 0;
  for (int oh = ro.x; oh <= ro.y; ++oh) {
    if (p.dh > 1 && (h + p.ph - oh * p.sh) % p.dh) continue;
    for (int ow = co.x; ow <= co.y; ++ow) {
      if (p.dw > 1 && (w + p.pw - ow * p.sw) % p.dw) continue;
      if (idx[ib + oh * vi.h + ow * vi.w] == me) acc += g[gb + oh * vg.h + ow * vg.w];
    }
  }
  gx[at(vgx, q)] = acc;
}

/* ---- average -------------------------------------------------------------------------------- */

/* The window of output (oh, ow) clipped to the input, as (h0, h1, w0, w1), and its divisor. */
inline int4 avg_window(const Pool p, const int oh, const int ow, int* div) {
  int h0 = oh * p.sh - p.ph, w0 = ow * p.sw - p.pw;
  int h1 = min(h0 + p.kh, p.H + p.ph), w1 = min(w0 + p.kw, p.W + p.pw);
  const int padded = (h1 - h0) * (w1 - w0);
  h0 = max(h0, 0);
  w0 = max(w0, 0);
  h1 = min(h1, p.H);
  w1 = min(w1, p.W);
  *div = p.divisor ? p.divisor : (p.include_pad ? padded : (h1 - h0) * (w1 - w0));
  return (int4)(h0, h1, w0, w1);
}

__kernel void avg_pool2d_fwd(const Pool p, const int c_last,
                             __global const T* x, const View4 vx, __global T* y, const View4 vy) {
  int4 q;
  if (!element(p.N, p.C, p.OH, p.OW, c_last, &q)) return;
  int div;
  const int4 r = avg_window(p, q.z, q.w, &div);
  const long base = plane(vx, q);
  T acc = 0;
  for (int h = r.x; h < r.y; ++h)
    for (int w = r.z; w < r.w; ++w) acc += x[base + h * vx.h + w * vx.w];
  /* a window wholly in the padding: 0, as torch */
  y[at(vy, q)] = (r.x < r.y && r.z < r.w) ? acc / (T)div : (T)0;
}

/* Input (h, w) lies in the windows of outputs oh with oh * sh - ph <= h < oh * sh - ph + kh. */
__kernel void avg_pool2d_bwd(const Pool p, const int c_last,
                             __global const T* g, const View4 vg, __global T* gx,
                             const View4 vgx) {
  int4 q;
  if (!element(p.N, p.C, p.H, p.W, c_last, &q)) return;
  const int2 ro = outputs_holding(q.z, p.sh, p.ph, 1, p.kh, p.OH);
  const int2 co = outputs_holding(q.w, p.sw, p.pw, 1, p.kw, p.OW);
  const long gb = plane(vg, q);
  T acc = 0;
  for (int oh = ro.x; oh <= ro.y; ++oh) {
    for (int ow = co.x; ow <= co.y; ++ow) {
      int div;
      avg_window(p, oh, ow, &div);
      acc += g[gb + oh * vg.h + ow * vg.w] / (T)div;
    }
  }
  gx[at(vgx, q)] = acc;
}

/* ---- adaptive average ----------------------------------------------------------------------- */

inline int start_of(const int o, const int in, const int out) {
  return (int)(((long)o * in) / out);
}

inline int end_of(const int o, const int in, const int out) {
  return (int)(((long)(o + 1) * in + out - 1) / out);
}

__kernel void adaptive_avg_pool2d_fwd(const Pool p, const int c_last,
                                      __global const T* x, const View4 vx, __global T* y,
                                      const View4 vy) {
  int4 q;
  if (!element(p.N, p.C, p.OH, p.OW, c_last, &q)) return;
  const int oh = q.z, ow = q.w;
  const int h0 = start_of(oh, p.H, p.OH), h1 = end_of(oh, p.H, p.OH);
  const int w0 = start_of(ow, p.W, p.OW), w1 = end_of(ow, p.W, p.OW);
  const long base = plane(vx, q);
  T acc = 0;
  for (int h = h0; h < h1; ++h)
    for (int w = w0; w < w1; ++w) acc += x[base + h * vx.h + w * vx.w];
  y[at(vy, q)] = acc / (T)((h1 - h0) * (w1 - w0));
}

/* Input row h lies in the windows of outputs floor(h * OH / H) .. ceil((h + 1) * OH / H) - 1;
 * each candidate is checked against its window. */
__kernel void adaptive_avg_pool2d_bwd(const Pool p, const int c_last,
                                      __global const T* g, const View4 vg, __global T* gx,
                                      const View4 vgx) {
  int4 q;
  if (!element(p.N, p.C, p.H, p.W, c_last, &q)) return;
  const int h = q.z, w = q.w;
  const int oh0 = start_of(h, p.OH, p.H), oh1 = min(end_of(h, p.OH, p.H), p.OH);
  const int ow0 = start_of(w, p.OW, p.W), ow1 = min(end_of(w, p.OW, p.W), p.OW);
  const long gb = plane(vg, q);
  T acc = 0;
  for (int oh = oh0; oh < oh1; ++oh) {
    const int h0 = start_of(oh, p.H, p.OH), h1 = end_of(oh, p.H, p.OH);
    if (h < h0 || h >= h1) continue;
    for (int ow = ow0; ow < ow1; ++ow) {
      const int w0 = start_of(ow, p.W, p.OW), w1 = end_of(ow, p.W, p.OW);
      if (w < w0 || w >= w1) continue;
      acc += g[gb + oh * vg.h + ow * vg.w] / (T)((h1 - h0) * (w1 - w0));
    }
  }
  gx[at(vgx, q)] = acc;
}
