/*
 * conv_im2col.cl: the column buffer of the im2col + GEMM convolution (cltensor/conv/im2col.py)
 * and its adjoint, col2im, for the input gradient.
 *
 * Column layout, for a chunk of NB images starting at the views' offsets:
 *   col[k][n][p], k = (c * KH + kh) * KW + kw over all C input channels (group g owns rows
 *   g*K/G ..), n < NB, p = oh * WO + ow; the (k, n) rows of P = HO * WO elements lie PS >= P
 *   elements apart. With PS == P col[k] is a (NB * P) row that one GEMM reads for every image,
 *   and col^T a plain transposed view for the weight gradient; a larger PS aligns the rows
 *   for the forward GEMM's vector loads (elements between P and PS are not written).
 *
 *   im2col  col[k][n][p] = x[n][c][oh*SH + kh*DH - PT][ow*SW + kw*DW - PL], 0 outside the input.
 *           One work-item per element of col, consecutive ones along p (coalesced writes).
 *           Global size: at least C*KH*KW*NB*P (1-d, any local size).
 *   im2col_rows  the same, one work-item per row (k, n, oh) of WO elements (CPUs: the index
 *           arithmetic is paid once per row, the padding columns are written apart from the
 *           copied ones). Global size: at least C*KH*KW*NB*HO (1-d).
 *   col2im  gx[n][c][ih][iw] = sum over (kh, kw) with ih = oh*SH + kh*DH - PT, iw likewise, of
 *           gcol[k][n][p]: the sum is gathered per input element (no atomics, deterministic).
 *           One work-item per element of gx. Global size: at least NB*C*H*W (1-d).
 *
 * x and gx are strided views (offset and strides in elements: NCHW, channels_last, any view).
 * Build options (shape constants, so that divisions by them compile to cheap code):
 *   T            element type of x, gx and col (float, double, half or bf16: read and written
 *                through common.cl's LD and ST, values copied exactly)
 *   TG           col2im's gcol type (default T; float for a 16-bit gx, which is then stored
 *                rounded once from float sums)
 *   KH, KW       kernel size; SH, SW stride; DH, DW dilation; PT, PL top and left padding
 *   COL_NK       columns image-major, col[n][k][p] (torch's F.unfold / F.fold layout,
 *                cltensor/conv/blocks.py) instead of col[k][n][p]
 */
#include "common.cl"
#ifndef T
#define T float
#endif
#ifndef TG
#define TG T
#endif

/* the (k, n) row of the columns */
#ifdef COL_NK
#define COL_ROW(k, n) ((long)(n) * C * KH * KW + (k))
#else
#define COL_ROW(k, n) ((long)(k) * NB + (n))
#endif

#define XARGS __global const T* x, const long xo, const long xs0, const long xs1, \
              const long xs2, const long xs3

__kernel void im2col(const int C, const int H, const int W, const int HO, const int WO,
                     const int NB, XARGS, __global T* col, const long PS) {
  const long e = get_global_id(0);
  const long P = (long)HO * WO;
  if (e >= (long)C * KH * KW * NB * P) return;
  const int p = e % P;
  const long r = e / P;
  const int n = r % NB;
  const int k = r / NB;
  const int kw = k % KW, kh = (k / KW) % KH, c = k / (KW * KH);
  const int oh = p / WO, ow = p % WO;
  const int ih = oh * SH + kh * DH - PT, iw = ow * SW + kw * DW - PL;
  REG(T) v = 0;
  if (ih >= 0 && ih < H && iw >= 0 && iw < W)
    v = LD(T, x, xo + n * xs0 + c * xs1 + ih * xs2 + iw * xs3);
  ST(T, col, COL_ROW(k, n) * PS + p, v);
}

__kernel void im2col_rows(const int C, const int H, const int W, const int HO, const int WO,
                          const int NB, XARGS, __global T* col, const long PS) {
  const long r = get_global_id(0);
  if (r >= (long)C * KH * KW * NB * HO) return;
  const int oh = r % HO;
  const long kn = r / HO;
  const int n = kn % NB;
  const int k = kn / NB;
  const int kw = k % KW, kh = (k / KW) % KH, c = k / (KW * KH);
  const int ih = oh * SH + kh * DH - PT;
  __global T* dst = col + COL_ROW(k, n) * PS + oh * WO;
  if (ih < 0 || ih >= H) {
    for (int ow = 0; ow < WO; ++ow) ST(T, dst, ow, 0);
    return;
  }
  /* iw = ow * SW + off lies in the input for lo <= ow < hi */
  const int off = kw * DW - PL;
  const int lo = min(off >= 0 ? 0 : (SW - 1 - off) / SW, WO);
  const int hi = clamp(off >= W ? 0 : (W - off + SW - 1) / SW, lo, WO);
  __global const T* src = x + xo + n * xs0 + c * xs1 + ih * xs2 + off * xs3;
  for (int ow = 0; ow < lo; ++ow) ST(T, dst, ow, 0);
  if (xs3 == 1) {
    for (int ow = lo; ow < hi; ++ow) ST(T, dst, ow, LD(T, src, ow * SW));
  } else {
    for (int ow = lo; ow < hi; ++ow) ST(T, dst, ow, LD(T, src, ow * SW * xs3));
  }
  for (int ow = hi; ow < WO; ++ow) ST(T, dst, ow, 0);
}

/* The output positions o with o*S + kk*D - P == i for some kk < K: [lo, hi). */
inline int first_out(const int i, const int kk, const int S, const int D, const int P) {
  const int t = i + P - kk * D;
  return t < 0 ? -1 : (t % S ? -1 : t / S);
}

__kernel void col2im(const int C, const int H, const int W, const int HO, const int WO,
                     const int NB, __global const TG* gcol, __global T* gx, const long go,
                     const long gs0, const long gs1, const long gs2, const long gs3) {
  const long e = get_global_id(0);
  if (e >= (long)NB * C * H * W) return;
  const int iw = e % W;
  const int ih = (e / W) % H;
  const int c = (e / ((long)W * H)) % C;
  const int n = e / ((long)W * H * C);
  const long P = (long)HO * WO;
  REG(TG) acc = 0;
  for (int kh = 0; kh < KH; ++kh) {
    const int oh = first_out(ih, kh, SH, DH, PT);
    if (oh < 0 || oh >= HO) continue;
    for (int kw = 0; kw < KW; ++kw) {
      const int ow = first_out(iw, kw, SW, DW, PL);
      if (ow < 0 || ow >= WO) continue;
      const long k = ((long)c * KH + kh) * KW + kw;
      acc += LD(TG, gcol, COL_ROW(k, n) * P + (long)oh * WO + ow);
    }
  }
  ST(T, gx, go + n * gs0 + c * gs1 + ih * gs2 + iw * gs3, acc);
}
