/*
 * conv_winograd.cl: the transforms of Winograd's minimal filtering F(m x m, r x r) (Lavin &
 * Gray 2015) for r x r, stride-1, dilation-1 convolutions (cltensor/conv/winograd.py), with
 * tiles of A = m + r - 1 positions a side:
 *
 *   U = G g G^T (filter, A x A per channel pair), V = B^T d B (A x A input tile d, one per
 *   m x m output block), M[e] = U[e] @ V[e] for the A*A elements e (a batched GEMM, run by the
 *   GEMM engine between these kernels), Y = A^T m A (the m x m outputs of each tile).
 *
 * The matrices come from winograd.py (Toom-Cook, A - 1 points and infinity) as brace lists:
 *   WINO_AT (m x A), WINO_G (A x r), WINO_BT (A x A); WINO_M = m, WINO_R = r, WINO_A = A.
 * Every loop below runs over these compile-time sizes and is unrolled, so each coefficient is
 * a constant: madd() drops the zero terms and turns +-1 into an add or a subtract, and the
 * transforms cost what hand-written ones would.
 *
 * Layouts (e = A*row + column of the A x A transform):
 *   U[e][g][o][c]   o < COG outputs, c < CG inputs of group g; with o_fast, U[e][g][c][o]
 *                   (the host's choice per GEMM family, see winograd.py). flip != 0
 *                   transforms the flipped transposed weight of the input gradient:
 *                   g'[o][c] = W[g][c][o] rotated 180.
 *   V[e][c][t]      c over all G*CG input channels, t = (n*TH + ty)*TW + tx over NB images;
 *                   rows of TP >= NB*TH*TW tiles (the GEMM engine reads whole tiles in place
 *                   when TP is a multiple of its tile), the padding tiles zero
 *   M[e][o][t]      o over all G*COG output channels, rows of TP
 * Tile (ty, tx) reads input rows m*ty - PT .. + A - 1 and columns m*tx - PL .. + A - 1 (zero
 * outside; PT and PL may be negative) and produces the outputs (m*ty .. + m - 1, m*tx ..
 * + m - 1) that fall inside HO x WO. Input and output are strided 4-d views.
 *
 * The weight gradient runs the same product backwards: with Z the m x m block of the output
 * gradient of tile t (zero outside HO x WO), dU[e] = sum_t (A Z A^T)[e] V[e] (a batched GEMM
 * over the tiles, dU[e][o][c] = P[e][o][t] V[e][c][t]) and dW = G^T dU G.
 *   P[e][o][t]      o over all G*COG output channels (layout of M)
 *   dU[e][g][o][c]  (the inputs contiguous)
 *
 * Kernels (any local size), each taking VEC tiles or filters per work-item as the lanes of
 * vectors of T (ceil(count / VEC) work-items along dim 0):
 *   filter_transform  per VEC consecutive elements e of U[e], 1-d: A*A values of U each.
 *   input_transform   per (VEC tiles t < TP, c), 2-d (dim 0 the tiles, dim 1 the channels, as
 *                     below): A*A values of V each.
 *   output_transform  per (VEC tiles t < NB*TH*TW, o): up to m*m outputs each (+ bias[o]
 *                     when has_bias; then max(., 0) when relu, NaN kept).
 *   grad_transform    per (VEC tiles t < TP, o): A*A values of P each.
 *   weight_transform  per VEC filters (g, o, c), 1-d: the r x r weight gradient
 *                     dW[g*COG + o][c] (contiguous).
 * A lane's gathered inputs (a tile of x, a filter) are loaded one lane at a time, and its
 * scattered outputs (a tile of y, a filter's gradient) stored one lane at a time; the
 * transforms and the reads and writes of V, M, P, U and dU run on whole vectors.
 * NOTE: the tile kernels take the channel from dim 1, not from a flat index: on PoCL the
 * 64-bit divisions of one index per work-item cost more than the transforms.
 * NOTE: VEC is 1 on GPUs; on CPUs the host sets the device's vector width (winograd.py,
 * items_per_work_item): PoCL 3.1 vectorized none of the one-tile-per-work-item kernels across
 * work-items on AVX2, and VEC lanes made them 1.5-3x faster (docs/performance.md).
 * Build options: T; WINO_M, WINO_R, WINO_A, WINO_AT, WINO_G, WINO_BT; VEC; TS, the storage type
 * of the filters, images, outputs, biases and gradients (default T; half or bf16 with T float:
 * read through common.cl's LD and stored through ST, the transforms and their buffers U, V, M,
 * P and dU in float).
 */
#include "common.cl"
#ifndef T
#define T float
#endif
#ifndef TS
#define TS T
#endif
#ifndef VEC
#define VEC 1
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define MM WINO_M
#define RR WINO_R
#define AA WINO_A

__constant T AT[MM][AA] = WINO_AT;
__constant T GM[AA][RR] = WINO_G;
__constant T BT[AA][AA] = WINO_BT;

/* acc + c * x for a coefficient c known at compile time */
#define madd(acc, c, x) \
  ((c) == (T)0 ? (acc) : (c) == (T)1 ? (acc) + (x) : (c) == (T)-1 ? (acc) - (x) : (acc) + (c) * (x))

/* VEC tiles or filters per work-item, as the lanes of vectors (1: one a work-item) */
#if VEC == 1
#define TV T
#else
#define TV CAT(T, VEC)
#endif
typedef TV __attribute__((aligned(sizeof(T)))) TVU; /* runs start anywhere */
typedef union { TV v; T s[VEC]; } Lanes;

/* src[at .. at + lanes - 1] as a vector, zero past lanes */
inline TV load_run(__global const T* src, const long at, const int lanes) {
  if (lanes == VEC) return *(__global const TVU*)(src + at);
  Lanes x;
  for (int l = 0; l < VEC; ++l) x.s[l] = l < lanes ? src[at + l] : (T)0;
  return x.v;
}

/* the first `lanes` lanes of v to dst[at ..] */
inline void store_run(__global T* dst, const long at, const Lanes v, const int lanes) {
  if (lanes == VEC) {
    *(__global TVU*)(dst + at) = v.v;
    return;
  }
  for (int l = 0; l < lanes; ++l) dst[at + l] = v.s[l];
}

__kernel void filter_transform(const int G, const int COG, const int CG, const int flip,
                               const int o_fast, __global const TS* w, const long wo,
                               const long ws0, const long ws1, const long ws2, const long ws3,
                               __global T* U) {
  const long per_e = (long)G * COG * CG, e0 = get_global_id(0) * VEC;
  if (e0 >= per_e) return; /* U's elements e0 .. e0 + lanes - 1 within a transform position */
  const int lanes = (int)min((long)VEC, per_e - e0);
  const int inner = o_fast ? COG : CG, outer = o_fast ? CG : COG;
  Lanes f[RR][RR];
  for (int l = 0; l < VEC; ++l) {
    const long e = min(e0 + l, per_e - 1); /* dead lanes repeat the last filter */
    const int fast = e % inner, slow = (e / inner) % outer, g = e / ((long)CG * COG);
    const int o = o_fast ? fast : slow, c = o_fast ? slow : fast;
#pragma unroll
    for (int i = 0; i < RR; ++i)
#pragma unroll
      for (int j = 0; j < RR; ++j)
        f[i][j].s[l] = flip ? LD(TS, w, wo + ((long)g * CG + c) * ws0 + o * ws1 +
                                           (RR - 1 - i) * ws2 + (RR - 1 - j) * ws3)
                            : LD(TS, w, wo + ((long)g * COG + o) * ws0 + c * ws1 + i * ws2 +
                                           j * ws3);
  }
  TV t[AA][RR]; /* G f */
#pragma unroll
  for (int i = 0; i < AA; ++i)
#pragma unroll
    for (int j = 0; j < RR; ++j) {
      TV s = (TV)0;
#pragma unroll
      for (int k = 0; k < RR; ++k) s = madd(s, GM[i][k], f[k][j].v);
      t[i][j] = s;
    }
#pragma unroll
  for (int i = 0; i < AA; ++i) /* (G f) G^T */
#pragma unroll
    for (int j = 0; j < AA; ++j) {
      Lanes s;
      s.v = (TV)0;
#pragma unroll
      for (int k = 0; k < RR; ++k) s.v = madd(s.v, GM[j][k], t[i][k]);
      store_run(U, (AA * i + j) * per_e + e0, s, lanes);
    }
}

__kernel void input_transform(const int C, const int H, const int W, const int PT,
                              const int PL, const int TH, const int TW, const int NB,
                              const int TP, __global const TS* x, const long xo,
                              const long xs0, const long xs1, const long xs2, const long xs3,
                              __global T* V) {
  const int t0 = get_global_id(0) * VEC, c = get_global_id(1);
  if (t0 >= TP) return;
  const int lanes = min(VEC, TP - t0);
  Lanes d[AA][AA];
  for (int l = 0; l < VEC; ++l) {
    const int t = t0 + l, tx = t % TW, ty = (t / TW) % TH, n = t / (TW * TH);
    const int y0 = MM * ty - PT, x0 = MM * tx - PL;
    const bool live = l < lanes && n < NB;
#pragma unroll
    for (int i = 0; i < AA; ++i)
#pragma unroll
      for (int j = 0; j < AA; ++j) {
        const int y = y0 + i, xx = x0 + j;
        d[i][j].s[l] = (live && y >= 0 && y < H && xx >= 0 && xx < W)
                           ? LD(TS, x, xo + n * xs0 + c * xs1 + y * xs2 + xx * xs3) : (T)0;
      }
  }
  TV b[AA][AA]; /* B^T d */
#pragma unroll
  for (int i = 0; i < AA; ++i)
#pragma unroll
    for (int j = 0; j < AA; ++j) {
      TV s = (TV)0;
#pragma unroll
      for (int k = 0; k < AA; ++k) s = madd(s, BT[i][k], d[k][j].v);
      b[i][j] = s;
    }
  const long stride_e = (long)C * TP, e = (long)c * TP + t0;
#pragma unroll
  for (int i = 0; i < AA; ++i) /* (B^T d) B */
#pragma unroll
    for (int j = 0; j < AA; ++j) {
      Lanes s;
      s.v = (TV)0;
#pragma unroll
      for (int k = 0; k < AA; ++k) s.v = madd(s.v, BT[j][k], b[i][k]);
      store_run(V, (AA * i + j) * stride_e + e, s, lanes);
    }
}

__kernel void output_transform(const int CO, const int HO, const int WO, const int TH,
                               const int TW, const int NB, const int TP,
                               __global const T* M, const int has_bias, const int relu,
                               __global const TS* bias, const long bo, const long bs,
                               __global TS* y, const long yo, const long ys0, const long ys1,
                               const long ys2, const long ys3) {
  const int t0 = get_global_id(0) * VEC, o = get_global_id(1);
  if (t0 >= NB * TH * TW) return;
  const int lanes = min(VEC, NB * TH * TW - t0);
  const long stride_e = (long)CO * TP, at = (long)o * TP + t0;
  TV m[AA][AA];
#pragma unroll
  for (int i = 0; i < AA; ++i)
#pragma unroll
    for (int j = 0; j < AA; ++j) m[i][j] = load_run(M, (AA * i + j) * stride_e + at, lanes);
  TV a[MM][AA]; /* A^T m */
#pragma unroll
  for (int i = 0; i < MM; ++i)
#pragma unroll
    for (int j = 0; j < AA; ++j) {
      TV s = (TV)0;
#pragma unroll
      for (int k = 0; k < AA; ++k) s = madd(s, AT[i][k], m[k][j]);
      a[i][j] = s;
    }
  const T b = has_bias ? LD(TS, bias, bo + o * bs) : (T)0;
  Lanes out[MM][MM]; /* (A^T m) A */
#pragma unroll
  for (int i = 0; i < MM; ++i)
#pragma unroll
    for (int j = 0; j < MM; ++j) {
      TV s = (TV)b;
#pragma unroll
      for (int k = 0; k < AA; ++k) s = madd(s, AT[j][k], a[i][k]);
      out[i][j].v = relu ? (s < (TV)0 ? (TV)0 : s) : s; /* NaN kept */
    }
  for (int l = 0; l < lanes; ++l) {
    const int t = t0 + l, tx = t % TW, ty = (t / TW) % TH, n = t / (TW * TH);
#pragma unroll
    for (int i = 0; i < MM; ++i)
#pragma unroll
      for (int j = 0; j < MM; ++j) {
        const int oh = MM * ty + i, ow = MM * tx + j;
        if (oh < HO && ow < WO)
          ST(TS, y, yo + n * ys0 + o * ys1 + oh * ys2 + ow * ys3, out[i][j].s[l]);
      }
  }
}

__kernel void grad_transform(const int CO, const int HO, const int WO, const int TH,
                             const int TW, const int NB, const int TP, __global const TS* z,
                             const long zo, const long zs0, const long zs1, const long zs2,
                             const long zs3, __global T* P) {
  const int t0 = get_global_id(0) * VEC, o = get_global_id(1);
  if (t0 >= TP) return;
  const int lanes = min(VEC, TP - t0);
  Lanes d[MM][MM];
  for (int l = 0; l < VEC; ++l) {
    const int t = t0 + l, tx = t % TW, ty = (t / TW) % TH, n = t / (TW * TH);
    const bool live = l < lanes && n < NB;
#pragma unroll
    for (int i = 0; i < MM; ++i)
#pragma unroll
      for (int j = 0; j < MM; ++j) {
        const int oh = MM * ty + i, ow = MM * tx + j;
        d[i][j].s[l] = (live && oh < HO && ow < WO)
                           ? LD(TS, z, zo + n * zs0 + o * zs1 + oh * zs2 + ow * zs3) : (T)0;
      }
  }
  TV a[AA][MM]; /* A Z */
#pragma unroll
  for (int i = 0; i < AA; ++i)
#pragma unroll
    for (int j = 0; j < MM; ++j) {
      TV s = (TV)0;
#pragma unroll
      for (int k = 0; k < MM; ++k) s = madd(s, AT[k][i], d[k][j].v);
      a[i][j] = s;
    }
  const long stride_e = (long)CO * TP, e = (long)o * TP + t0;
#pragma unroll
  for (int i = 0; i < AA; ++i) /* (A Z) A^T */
#pragma unroll
    for (int j = 0; j < AA; ++j) {
      Lanes s;
      s.v = (TV)0;
#pragma unroll
      for (int k = 0; k < MM; ++k) s.v = madd(s.v, AT[k][j], a[i][k]);
      store_run(P, (AA * i + j) * stride_e + e, s, lanes);
    }
}

__kernel void weight_transform(const int G, const int COG, const int CG, __global const T* dU,
                               __global TS* dw) {
  const long per_e = (long)G * COG * CG, e0 = get_global_id(0) * VEC;
  if (e0 >= per_e) return;
  const int lanes = (int)min((long)VEC, per_e - e0); /* filters e0 .. e0 + lanes - 1 */
  TV u[AA][AA];
#pragma unroll
  for (int i = 0; i < AA; ++i)
#pragma unroll
    for (int j = 0; j < AA; ++j) u[i][j] = load_run(dU, (AA * i + j) * per_e + e0, lanes);
  TV t[RR][AA]; /* G^T dU */
#pragma unroll
  for (int i = 0; i < RR; ++i)
#pragma unroll
    for (int j = 0; j < AA; ++j) {
      TV s = (TV)0;
#pragma unroll
      for (int k = 0; k < AA; ++k) s = madd(s, GM[k][i], u[k][j]);
      t[i][j] = s;
    }
#pragma unroll
  for (int i = 0; i < RR; ++i) /* (G^T dU) G */
#pragma unroll
    for (int j = 0; j < RR; ++j) {
      Lanes s;
      s.v = (TV)0;
#pragma unroll
      for (int k = 0; k < AA; ++k) s.v = madd(s.v, GM[k][j], t[i][k]);
      for (int l = 0; l < lanes; ++l) ST(TS, dw, RR * RR * (e0 + l) + RR * i + j, s.s[l]);
    }
}
