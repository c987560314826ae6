/*
 * conv_depth.cl: the depth taps of a 3-d convolution as channels of a 2-d one
 * (cltensor/conv/volume.py). A conv3d of x (N, C, D, H, W) by w (Co, C/G, KD, Kh, Kw) is the
 * conv2d of the columns col (N*DO, C*KD, H, W) by w viewed as (Co, C/G*KD, Kh, Kw):
 *
 *   depth_gather   col[n*DO + od][c*KD + kd][h][w] = x[n][c][od*SD + kd*DD - PD][h][w],
 *                  0 outside the input's depth. One work-item per element of col (consecutive
 *                  ones along w: coalesced writes). Global size: at least N*DO*C*KD*H*W (1-d).
 *   depth_gather_rows  the same, one work-item per row of W elements (CPUs: the index
 *                  arithmetic once per row). Global size: at least N*DO*C*KD*H (1-d).
 *   depth_scatter  the adjoint, for the input gradient: gx[n][c][id][h][w] = the sum over the
 *                  taps kd with id = od*SD + kd*DD - PD, 0 <= od < DO, of gcol[n*DO + od]
 *                  [c*KD + kd][h][w]: gathered per element of gx (no atomics, deterministic).
 *                  One work-item per element of gx. Global size: at least N*C*D*H*W (1-d).
 *   depth_scatter_rows  the same, one work-item per row of W elements (CPUs: the taps that
 *                  reach the row found once). Global size: at least N*C*D*H (1-d).
 *
 * x is a strided 5-d view and gcol a strided 4-d view (offset and strides in elements); col
 * and gx are dense from their buffers' starts.
 * Build options (shape constants):
 *   T            element type: float or double (the gathers copy 16-bit floats as short
 *                bits; 16-bit gradients are scattered from float32 copies)
 *   KD, SD, DD   kernel depth, depth stride, depth dilation; PD the zero padding in front
 */
#include "common.cl"
#ifndef T
#define T float
#endif
#ifndef KD
#define KD 1
#endif
#ifndef SD
#define SD 1
#endif
#ifndef DD
#define DD 1
#endif
#ifndef PD
#define PD 0
#endif

#define XARGS __global const T* x, const long xo, const long xs0, const long xs1, \
              const long xs2, const long xs3, const long xs4

/* Where row r of col (its W elements) starts in x, or -1 where its depth falls in the
 * padding: the two gathers' one decode of r = ((n*DO + od)*C + c)*KD + kd)*H + ih. */
inline long gather_row(const long r, const int C, const int D, const int H, const int DO,
                       const long xo, const long xs0, const long xs1, const long xs2,
                       const long xs3) {
  const int ih = r % H;
  const long q = r / H;
  const int kd = q % KD;
  const int c = (q / KD) % C;
  const long nd = q / ((long)KD * C);
  const int od = nd % DO, n = nd / DO;
  const int id = od * SD + kd * DD - PD;
  return id < 0 || id >= D ? -1 : xo + n * xs0 + c * xs1 + id * xs2 + ih * xs3;
}

#ifdef KERNEL_depth_gather
__kernel void depth_gather(const int N, const int C, const int D, const int H, const int W,
                           const int DO, XARGS, __global T* col) {
  const long e = get_global_id(0);
  if (e >= (long)N * DO * C * KD * H * W) return;
  const long row = gather_row(e / W, C, D, H, DO, xo, xs0, xs1, xs2, xs3);
  REG(T) v = 0;
  if (row >= 0) v = LD(T, x, row + (e % W) * xs4);
  ST(T, col, e, v);
}
#endif

#ifdef KERNEL_depth_gather_rows
__kernel void depth_gather_rows(const int N, const int C, const int D, const int H,
                                const int W, const int DO, XARGS, __global T* col) {
  const long r = get_global_id(0);
  if (r >= (long)N * DO * C * KD * H) return;
  const long row = gather_row(r, C, D, H, DO, xo, xs0, xs1, xs2, xs3);
  __global T* dst = col + r * W;
  if (row < 0) {
    for (int iw = 0; iw < W; ++iw) ST(T, dst, iw, 0);
    return;
  }
  __global const T* src = x + row;
  if (xs4 == 1) {
    for (int iw = 0; iw < W; ++iw) ST(T, dst, iw, LD(T, src, iw));
  } else {
    for (int iw = 0; iw < W; ++iw) ST(T, dst, iw, LD(T, src, iw * xs4));
  }
}
#endif

#ifdef KERNEL_depth_scatter
__kernel void depth_scatter(const int N, const int C, const int D, const int H, const int W,
                            const int DO, __global const T* gcol, const long go, const long gs0,
                            const long gs1, const long gs2, const long gs3, __global T* gx) {
  const long e = get_global_id(0);
  if (e >= (long)N * C * D * H * W) return;
  const int iw = e % W;
  const int ih = (e / W) % H;
  const int id = (e / ((long)W * H)) % D;
  const int c = (e / ((long)W * H * D)) % C;
  const int n = e / ((long)W * H * D * C);
  REG(T) acc = 0;
  for (int kd = 0; kd < KD; ++kd) {
    const int t = id + PD - kd * DD;
    if (t < 0 || t % SD) continue;
    const int od = t / SD;
    if (od >= DO) continue;
    acc += LD(T, gcol, go + ((long)n * DO + od) * gs0 + ((long)c * KD + kd) * gs1 + ih * gs2
                           + iw * gs3);
  }
  ST(T, gx, e, acc);
}
#endif

#ifdef KERNEL_depth_scatter_rows
__kernel void depth_scatter_rows(const int N, const int C, const int D, const int H,
                                 const int W, const int DO, __global const T* gcol,
                                 const long go, const long gs0, const long gs1, const long gs2,
                                 const long gs3, __global T* gx) {
  const long r = get_global_id(0);
  if (r >= (long)N * C * D * H) return;
  const int ih = r % H;
  const int id = (r / H) % D;
  const long nc = r / ((long)H * D);
  const int c = nc % C, n = nc / C;
  long src[KD];  /* the rows of gcol that tap this row of gx */
  int taps = 0;
  for (int kd = 0; kd < KD; ++kd) {
    const int t = id + PD - kd * DD;
    if (t < 0 || t % SD || t / SD >= DO) continue;
    src[taps++] = go + ((long)n * DO + t / SD) * gs0 + ((long)c * KD + kd) * gs1 + ih * gs2;
  }
  __global T* dst = gx + r * W;
  for (int iw = 0; iw < W; ++iw) {
    REG(T) acc = 0;
    for (int j = 0; j < taps; ++j) acc += LD(T, gcol, src[j] + iw * gs3);
    ST(T, dst, iw, acc);
  }
}
#endif
