/*
 * conv_winograd.cl: the transforms of Winograd's minimal filtering F(2x2, 3x3)
 * (Lavin & Gray 2015) for 3x3, stride-1, dilation-1 convolutions (cltensor/conv/winograd.py):
 *
 *   U = G g G^T (filter, 4x4 per channel pair), V = B^T d B (4x4 input tile d, one per 2x2
 *   output block), M[e] = U[e] @ V[e] for the 16 elements e (a batched GEMM, run by the GEMM
 *   engine between these kernels), Y = A^T m A (the 2x2 outputs of each tile).
 *
 *   G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *   A^T = [1 1 1 0; 0 1 -1 -1]
 *
 * Layouts (e = 4*row + column of the 4x4 transform):
 *   U[e][g][o][c]   o < COG outputs, c < CG inputs of group g. FLIP transforms the flipped
 *                   transposed weight of the input gradient: g'[o][c] = W[g][c][o] rotated 180.
 *   V[e][c][t]      c over all G*CG input channels, t = (n*TH + ty)*TW + tx over NB images;
 *                   rows of TP >= NB*TH*TW tiles (the GEMM engine reads whole tiles in place
 *                   when TP is a multiple of its tile), the padding tiles zero
 *   M[e][o][t]      o over all G*COG output channels, rows of TP
 * Tile (ty, tx) reads input rows 2*ty - PT .. +3 and columns 2*tx - PL .. +3 (zero outside;
 * PT and PL may be negative) and produces outputs (2*ty .. +1, 2*tx .. +1) that fall inside
 * HO x WO. Input and output are strided 4-d views.
 *
 * The weight gradient runs the same product backwards: with Z the 2x2 block of the output
 * gradient of tile t (zero outside HO x WO), dU[e] = sum_t (A Z A^T)[e] V[e] (a batched GEMM
 * over the tiles, dU[e][o][c] = P[e][o][t] V[e][c][t]) and dW = G^T dU G.
 *   P[e][o][t]      o over all G*COG output channels (layout of M)
 *   dU[e][g][o][c]  layout of U
 *
 * Kernels (one work-item each; 1-d launches, any local size):
 *   filter_transform  per (g, o, c): 16 values of U.
 *   input_transform   per (c, t < TP): 16 values of V.
 *   output_transform  per (o, t < NB*TH*TW): up to 4 outputs (+ bias[o] when HAS_BIAS).
 *   grad_transform    per (o, t < TP): 16 values of P.
 *   weight_transform  per (g, o, c): the 3x3 weight gradient dW[g*COG + o][c] (contiguous).
 * Build options: T; FLIP; HAS_BIAS.
 */
#ifndef T
#define T float
#endif

__kernel void filter_transform(const int G, const int COG, const int CG, __global const T* w,
                               const long wo, const long ws0, const long ws1, const long ws2,
                               const long ws3, __global T* U) {
  const long e = get_global_id(0);
  const long per_e = (long)G * COG * CG;
  if (e >= per_e) return;
  const int c = e % CG, o = (e / CG) % COG, g = e / ((long)CG * COG);
  T f[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
#ifdef FLIP
      f[i][j] = w[wo + ((long)g * CG + c) * ws0 + o * ws1 + (2 - i) * ws2 + (2 - j) * ws3];
#else
      f[i][j] = w[wo + ((long)g * COG + o) * ws0 + c * ws1 + i * ws2 + j * ws3];
#endif
    }
  T t[4][3]; /* G f */
  for (int j = 0; j < 3; ++j) {
    t[0][j] = f[0][j];
    t[1][j] = (T)0.5 * (f[0][j] + f[1][j] + f[2][j]);
    t[2][j] = (T)0.5 * (f[0][j] - f[1][j] + f[2][j]);
    t[3][j] = f[2][j];
  }
  for (int i = 0; i < 4; ++i) { /* (G f) G^T */
    U[(4 * i + 0) * per_e + e] = t[i][0];
    U[(4 * i + 1) * per_e + e] = (T)0.5 * (t[i][0] + t[i][1] + t[i][2]);
    U[(4 * i + 2) * per_e + e] = (T)0.5 * (t[i][0] - t[i][1] + t[i][2]);
    U[(4 * i + 3) * per_e + e] = t[i][2];
  }
}

__kernel void input_transform(const int C, const int H, const int W, const int PT,
                              const int PL, const int TH, const int TW, const int NB,
                              const int TP, __global const T* x, const long xo,
                              const long xs0, const long xs1, const long xs2, const long xs3,
                              __global T* V) {
  const long e = get_global_id(0);
  if (e >= (long)C * TP) return;
  const int t = e % TP, c = e / TP;
  const int tx = t % TW, ty = (t / TW) % TH, n = t / (TW * TH);
  const int y0 = 2 * ty - PT, x0 = 2 * tx - PL;
  T d[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int y = y0 + i, xx = x0 + j;
      d[i][j] = (n < NB && y >= 0 && y < H && xx >= 0 && xx < W)
                    ? x[xo + n * xs0 + c * xs1 + y * xs2 + xx * xs3] : (T)0;
    }
  T b[4][4]; /* B^T d */
  for (int j = 0; j < 4; ++j) {
    b[0][j] = d[0][j] - d[2][j];
    b[1][j] = d[1][j] + d[2][j];
    b[2][j] = d[2][j] - d[1][j];
    b[3][j] = d[1][j] - d[3][j];
  }
  const long stride_e = (long)C * TP;
  for (int i = 0; i < 4; ++i) { /* (B^T d) B */
    V[(4 * i + 0) * stride_e + e] = b[i][0] - b[i][2];
    V[(4 * i + 1) * stride_e + e] = b[i][1] + b[i][2];
    V[(4 * i + 2) * stride_e + e] = b[i][2] - b[i][1];
    V[(4 * i + 3) * stride_e + e] = b[i][1] - b[i][3];
  }
}

__kernel void output_transform(const int CO, const int HO, const int WO, const int TH,
                               const int TW, const int NB, const int TP,
                               __global const T* M, __global const T* bias, const long bo,
                               const long bs, __global T* y, const long yo, const long ys0,
                               const long ys1, const long ys2, const long ys3) {
  const long e = get_global_id(0);
  const int ntiles = NB * TH * TW;
  if (e >= (long)CO * ntiles) return;
  const int t = e % ntiles, o = e / ntiles;
  const int tx = t % TW, ty = (t / TW) % TH, n = t / (TW * TH);
  const long stride_e = (long)CO * TP, at = (long)o * TP + t;
  T m[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) m[i][j] = M[(4 * i + j) * stride_e + at];
  T a[2][4]; /* A^T m */
  for (int j = 0; j < 4; ++j) {
    a[0][j] = m[0][j] + m[1][j] + m[2][j];
    a[1][j] = m[1][j] - m[2][j] - m[3][j];
  }
  T b = (T)0;
#ifdef HAS_BIAS
  b = bias[bo + o * bs];
#endif
  for (int i = 0; i < 2; ++i) { /* (A^T m) A */
    const T r[2] = {a[i][0] + a[i][1] + a[i][2], a[i][1] - a[i][2] - a[i][3]};
    const int oh = 2 * ty + i;
    for (int j = 0; j < 2; ++j) {
      const int ow = 2 * tx + j;
      if (oh < HO && ow < WO) y[yo + n * ys0 + o * ys1 + oh * ys2 + ow * ys3] = r[j] + b;
    }
  }
}

__kernel void grad_transform(const int CO, const int HO, const int WO, const int TH,
                             const int TW, const int NB, const int TP, __global const T* z,
                             const long zo, const long zs0, const long zs1, const long zs2,
                             const long zs3, __global T* P) {
  const long e = get_global_id(0);
  if (e >= (long)CO * TP) return;
  const int t = e % TP, o = e / TP;
  const int tx = t % TW, ty = (t / TW) % TH, n = t / (TW * TH);
  T d[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      const int oh = 2 * ty + i, ow = 2 * tx + j;
      d[i][j] = (n < NB && oh < HO && ow < WO)
                    ? z[zo + n * zs0 + o * zs1 + oh * zs2 + ow * zs3] : (T)0;
    }
  T a[4][2]; /* A Z */
  for (int j = 0; j < 2; ++j) {
    a[0][j] = d[0][j];
    a[1][j] = d[0][j] + d[1][j];
    a[2][j] = d[0][j] - d[1][j];
    a[3][j] = -d[1][j];
  }
  const long stride_e = (long)CO * TP;
  for (int i = 0; i < 4; ++i) { /* (A Z) A^T */
    P[(4 * i + 0) * stride_e + e] = a[i][0];
    P[(4 * i + 1) * stride_e + e] = a[i][0] + a[i][1];
    P[(4 * i + 2) * stride_e + e] = a[i][0] - a[i][1];
    P[(4 * i + 3) * stride_e + e] = -a[i][1];
  }
}

__kernel void weight_transform(const int G, const int COG, const int CG, __global const T* dU,
                               __global T* dw) {
  const long e = get_global_id(0);
  const long per_e = (long)G * COG * CG;
  if (e >= per_e) return;
  T u[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) u[i][j] = dU[(4 * i + j) * per_e + e];
  T t[3][4]; /* G^T dU */
  for (int j = 0; j < 4; ++j) {
    const T half_sum = (T)0.5 * (u[1][j] + u[2][j]);
    t[0][j] = u[0][j] + half_sum;
    t[1][j] = (T)0.5 * (u[1][j] - u[2][j]);
    t[2][j] = half_sum + u[3][j];
  }
  for (int i = 0; i < 3; ++i) { /* (G^T dU) G */
    const T half_sum = (T)0.5 * (t[i][1] + t[i][2]);
    dw[9 * e + 3 * i + 0] = t[i][0] + half_sum;
    dw[9 * e + 3 * i + 1] = (T)0.5 * (t[i][1] - t[i][2]);
    dw[9 * e + 3 * i + 2] = half_sum + t[i][3];
  }
}
