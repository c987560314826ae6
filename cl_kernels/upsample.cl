/*
 * upsample.cl: 2-d resampling of N x C x H x W tensors (torch's interpolate, modes nearest,
 * nearest-exact, bilinear and bicubic), forward and backward, deterministic (no atomics).
 *
 * Layout: a tensor is an N x C x Y x X view: an element offset and one stride per dim (View4,
 * in elements: contiguous, channels_last and sliced tensors alike). Work-item (x, y, n * C + c)
 * of a 3-d range over the tensor written handles its element (n, c, y, x).
 *
 * Source positions (torch's, so results match it bit for bit where the arithmetic allows), per
 * dim with `scale` the input size over the output size (or 1 / scale_factor when the caller
 * gives one; with align_corners (in - 1) / (out - 1), 0 for one output):
 *   nearest         src = min(floor(dst * scale), in - 1), in float as torch; dst itself when
 *                   out == in, dst / 2 when out == 2 * in
 *   nearest-exact   src = min(floor((dst + 0.5) * scale), in - 1)
 *   bilinear        s = align_corners ? dst * scale : max((dst + 0.5) * scale - 0.5, 0);
 *                   i0 = floor(s), i1 = min(i0 + 1, in - 1), weights 1 - (s - i0) and s - i0
 *   bicubic         s as bilinear but not clamped at 0; i0 = floor(s), t = s - i0; the four
 *                   sources i0 - 1 .. i0 + 2, each clamped to [0, in - 1], weighted by Keys'
 *                   cubic convolution with a = -0.75 at distances t + 1, t, 1 - t, 2 - t
 * Backward, an input element gathers the gradients of the outputs that read it: it scans the
 * outputs near dst = src / scale (src +- 1.5 inputs, 2.5 for bicubic, and two outputs more) and
 * keeps those whose forward sources, computed as above, include this element, with the
 * forward's weights (summed where clamping repeats a source).
 *
 * Kernels: upsample_fwd, upsample_bwd. Build options: T (float, double, half or bf16: the
 * storage type, read and written through LD/ST; R = REG(T) is the compute type, so 16-bit
 * data interpolates in float32 and its backward sums in float32, rounded once, as torch's).
 * Kernel arguments: mode (NEAREST, NEAREST_EXACT, LINEAR or CUBIC below), align_corners; the
 * scales (float for the nearest modes, R for bilinear and bicubic, as torch computes them).
 * Tunables: none; the launcher picks work sizes.
 */
#include "common.cl"
#define R REG(T)
#define NEAREST 0
#define NEAREST_EXACT 1
#define LINEAR 2
#define CUBIC 3
#define CUBIC_A ((R)-0.75)

typedef struct { long off, n, c, h, w; } View4;
typedef struct { int N, C, H, W, OH, OW; } Sizes;

inline long at(const View4 v, const int n, const int c, const int y, const int x) {
  return v.off + n * v.n + c * v.c + y * v.h + x * v.w;
}

/* This work-item's element (n, c, y, x) of the N x C x Y x X tensor it walks, and whether it
 * lies inside */
inline int element(const Sizes z, const int Y, const int X, int* n, int* c, int* y, int* x) {
  const int nc = get_global_id(2);
  *x = get_global_id(0);
  *y = get_global_id(1);
  *n = nc / z.C;
  *c = nc % z.C;
  return *x < X && *y < Y && nc < z.N * z.C;
}

inline int nearest_src(const int dst, const float scale, const int in, const int out,
                       const int mode) {
  if (mode == NEAREST_EXACT) return min((int)floor((dst + 0.5f) * scale), in - 1);
  if (out == in) return dst;
  if (out == 2 * in) return dst >> 1;
  return min((int)floor(dst * scale), in - 1);
}

/* Bilinear: the first source *i0, the step to the second (0 at the last input) and its weight */
inline void linear_src(const int dst, const R scale, const int in, const int align, int* i0,
                       int* step, R* weight) {
  const R s = align ? scale * dst : fmax(scale * (dst + (R)0.5) - (R)0.5, (R)0);
  *i0 = (int)s;
  *step = *i0 < in - 1;
  *weight = s - *i0;
}

/* Bicubic: *i0 = floor(s), the second of the four sources i0 - 1 .. i0 + 2, and *t = s - *i0 */
inline void cubic_src(const int dst, const R scale, const int align, int* i0, R* t) {
  const R s = align ? scale * dst : scale * (dst + (R)0.5) - (R)0.5;
  const R f = floor(s);
  *i0 = (int)f;
  *t = s - f;
}

/* The weight of source k (0..3: i0 - 1 .. i0 + 2) at position t: Keys' cubic convolution */
inline R cubic_weight(const R t, const int k) {
  const R d = k == 0 ? t + (R)1 : k == 1 ? t : k == 2 ? (R)1 - t : (R)2 - t;
  if (k == 1 || k == 2) return ((CUBIC_A + (R)2) * d - (CUBIC_A + (R)3)) * d * d + (R)1;
  return ((CUBIC_A * d - (R)5 * CUBIC_A) * d + (R)8 * CUBIC_A) * d - (R)4 * CUBIC_A;
}

/* The weight with which output dst reads input src along one dim (0: it does not) */
inline R weight_of(const int dst, const int src, const R scale_t, const float scale_f,
                   const int in, const int out, const int mode, const int align) {
  if (mode == CUBIC) {
    int i0;
    R t, w = 0;
    cubic_src(dst, scale_t, align, &i0, &t);
    for (int k = 0; k < 4; ++k)
      if (clamp(i0 - 1 + k, 0, in - 1) == src) w += cubic_weight(t, k);
    return w;
  }
  if (mode != LINEAR) return nearest_src(dst, scale_f, in, out, mode) == src ? (R)1 : (R)0;
  int i0, step;
  R l1;
  linear_src(dst, scale_t, in, align, &i0, &step, &l1);
  return (i0 == src ? (R)1 - l1 : (R)0) + (i0 + step == src ? l1 : (R)0);
}

/* The outputs [*lo, *hi] whose sources can include src along one dim: around src / scale,
 * reach the farthest source an output reads from its position */
inline void candidates(const int src, const float scale, const int out, const float reach,
                       int* lo, int* hi) {
  if (scale <= 0.0f) {
    *lo = 0;
    *hi = out - 1;
    return;
  }
  *lo = max(0, (int)floor((src - reach) / scale) - 2);
  *hi = min(out - 1, (int)ceil((src + reach) / scale) + 2);
}

__kernel void upsample_fwd(const Sizes z, const int mode, const int align, const float fh,
                           const float fw, const R th, const R tw, __global const T* x,
                           const View4 vx, __global T* y, const View4 vy) {
  int n, c, oy, ox;
  if (!element(z, z.OH, z.OW, &n, &c, &oy, &ox)) return;
  R r;
  if (mode == CUBIC) {
    int h0, w0;
    R ty, tx;
    cubic_src(oy, th, align, &h0, &ty);
    cubic_src(ox, tw, align, &w0, &tx);
    r = 0;
    for (int i = 0; i < 4; ++i) {
      const int sy = clamp(h0 - 1 + i, 0, z.H - 1);
      R row = 0;
      for (int j = 0; j < 4; ++j)
        row += cubic_weight(tx, j) * LD(T, x, at(vx, n, c, sy, clamp(w0 - 1 + j, 0, z.W - 1)));
      r += cubic_weight(ty, i) * row;
    }
  } else if (mode != LINEAR) {
    r = LD(T, x, at(vx, n, c, nearest_src(oy, fh, z.H, z.OH, mode),
                    nearest_src(ox, fw, z.W, z.OW, mode)));
  } else {
    int h0, hs, w0, ws;
    R lh, lw;
    linear_src(oy, th, z.H, align, &h0, &hs, &lh);
    linear_src(ox, tw, z.W, align, &w0, &ws, &lw);
    const long r0 = at(vx, n, c, h0, w0), r1 = r0 + hs * vx.h, dw = ws * vx.w;
    r = ((R)1 - lh) * (((R)1 - lw) * LD(T, x, r0) + lw * LD(T, x, r0 + dw)) +
        lh * (((R)1 - lw) * LD(T, x, r1) + lw * LD(T, x, r1 + dw));
  }
  ST(T, y, at(vy, n, c, oy, ox), r);
}

__kernel void upsample_bwd(const Sizes z, const int mode, const int align, const float fh,
                           const float fw, const R th, const R tw, __global const T* g,
                           const View4 vg, __global T* gx, const View4 vgx) {
  int n, c, iy, ix, y0, y1, x0, x1;
  if (!element(z, z.H, z.W, &n, &c, &iy, &ix)) return;
  const float reach = mode == CUBIC ? 2.5f : 1.5f;
  candidates(iy, fh, z.OH, reach, &y0, &y1);
  candidates(ix, fw, z.OW, reach, &x0, &x1);
  R acc = 0;
  for (int oy = y0; oy <= y1; ++oy) {
    const R wy = weight_of(oy, iy, th, fh, z.H, z.OH, mode, align);
    if (wy == (R)0) continue;
    R row = 0;
    for (int ox = x0; ox <= x1; ++ox) {
      const R wx = weight_of(ox, ix, tw, fw, z.W, z.OW, mode, align);
      if (wx != (R)0) row += wx * LD(T, g, at(vg, n, c, oy, ox));
    }
    acc += wy * row;
  }
  ST(T, gx, at(vgx, n, c, iy, ix), acc);
}
