/*
 * conv_implicit.cl: implicit-GEMM convolution for CPUs (cltensor/conv/implicit.py): the im2col gather
 * happens inside the GEMM's operand loads, so no column buffer and no padded copy exist.
 *
 * Operands:
 *   x     the source, any strided (N, C, H, W) view (xo, xs0..xs3). The kernels read a virtual
 *         padded plane: padded (py, px) is x[(py-OY)/UH][(px-OX)/UW] where that is an exact,
 *         in-range index, else 0 (conv_taps.cl, prepended by the host). The forward reads the
 *         input (OY, OX = top, left padding; UH = UW = 1); the input gradient reads the output
 *         gradient upsampled by the stride (UH, UW) and shifted so that the gradient is a
 *         stride-1 convolution of it with the flipped weight.
 *   wpk   the weight of each group in panels of PW output channels (pack_weight):
 *         wpk[g][panel][k][i] = W[g][panel*PW + i][k], k = (c*KH + kh)*KW + kw < KP (zero for
 *         rows past K and channels past Cog). FLIP packs the flipped transposed weight that
 *         the input gradient convolves with: W'[g][o][c][kh][kw] = W[g][c][o][KH-1-kh][KW-1-kw].
 *   out   any strided 4-d view (NCHW, channels_last, ...), bias added when HAS_BIAS.
 *   go    the output gradient, any strided (N, Co, HO, WO) view (weight gradient).
 *
 * Positions: output (oh, ow) of an image is position q = oh*WO + ow, q < QN = HO*WO; it reads
 * padded (oh*SH + kh*DH, ow*SW + kw*DW) for tap (c, kh, kw). Consecutive q are consecutive
 * columns of a row, so on NCHW sources consecutive work-items read consecutive addresses.
 *
 * Kernels:
 *   pack_weight  wpk above. 1-d over G * panels * KP * PW.
 *   conv_cpu     forward, for CPUs: one work-item computes MR output channels x NR positions
 *                in registers (NR/VW vectors, gathered lane by lane), over all of K (taps
 *                outer: wpk packed with TAPS_OUTER); no local memory, local size (1, 1, 1). Global (ceil(QN/NR), ceil(Cog/MR), NB*G) for
 *                images n0 .. n0+NB-1.
 *   grad_rows    gq[n][q - QA][c] = go[n][c][q/WO][q%WO] for positions QA <= q < QB of N
 *                images, zero for Co <= c < COP: a chunk of the output gradient
 *                positions-major, for wgrad_cpu. 1-d over rows (n, q).
 *   wgrad_cpu    weight gradient, for CPUs: part[s][g][k][co] (+ part with ACC) = sum over the
 *                images of split s and positions QA <= q < QB of x(k, q) * go[n][g*Cog + co][q];
 *                go is grad_rows' chunk, passed as (gs0 = rows per image * COP, gs3 = COP) and
 *                read in vectors of NR channels (COP >= Co + NR); a work-item holds MR rows of
 *                k x NR channels (NR/VW vectors). Global (ceil(Cog/NR), ceil(K/MR), G*S).
 *   wgrad_sum    gw[g*Cog + co][k] = sum over s of part[s][g][k][co] (deterministic). 1-d.
 *
 * Build options: T; MASK_T (int, or long for double); KH, KW, SH, SW, DH, DW, UH, UW (shape
 *   constants); HAS_BIAS; FLIP; TAPS_OUTER (pack_weight's rows k = (kh*KW + kw)*C + c,
 *   the order conv_cpu reads);
 *   KERNEL_<name> compiles only that kernel (ALL_KERNELS: every one):
 *   PoCL's build time grows with every kernel in the program, and each kernel takes different
 *   shape constants.
 * Tunables: MR, NR, VW. (GPUs run conv_xgemm.cl's kernels.)
 */
#ifndef T
#define T float
#endif
#ifndef KH
#define KH 1
#endif
#ifndef KW
#define KW 1
#endif
#ifndef SH
#define SH 1
#endif
#ifndef SW
#define SW 1
#endif
#ifndef DH
#define DH 1
#endif
#ifndef DW
#define DW 1
#endif
#ifndef MR
#define MR 12
#endif
#ifndef NR
#define NR 32
#endif
#ifndef VW
#define VW 16
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VT CAT(T, VW)
#define VLOAD CAT(vload, VW)
#define NV (NR / VW)
#define KK (KH * KW)

typedef union { VT v; T s[VW]; } Lanes;
/* select()'s lane masks for VT: an integer vector of T's width */
#ifndef MASK_T
#define MASK_T int
#endif
typedef union { CAT(MASK_T, VW) v; MASK_T s[VW]; } Mask;

/* tap_load without a branch, for CPUs: an out-of-image tap loads the channel's first element
 * and drops it. */
inline T tap_load_cpu(__global const T* xc, const int ty, const int tx, const int H,
                      const int W, const long xs2, const long xs3) {
  const bool in = TAP_IN(ty, tx);
  const T v = xc[in ? TAP_INDEX(ty, tx) : 0];
  return in ? v : (T)0;
}

/* Tap k = (c, kh, kw) (c relative to the group): its channel and its (dy, dx) in the plane. */
#define TAP_SPLIT(k, c, dy, dx)                                                            \
  const int c = (k) / KK, dy = ((k) % KK) / KW * DH, dx = ((k) % KK) % KW * DW;

#define SRC_ARGS                                                                           \
  const int H, const int W, const int OY, const int OX, __global const T* x, const long xo, \
      const long xs0, const long xs1, const long xs2, const long xs3

#if defined(ALL_KERNELS) || defined(KERNEL_pack_weight)
__kernel void pack_weight(const int COG, const int CG, const int K, const int KP,
                          const int PANELS, const int PW, __global const T* w, const long wo,
                          const long ws0, const long ws1, const long ws2, const long ws3,
                          __global T* wpk, const long total) {
  /* COG: channels the packed weight produces, CG: channels it reads (swapped for FLIP). */
  const long e = get_global_id(0);
  if (e >= total) return;
  const int i = e % PW;
  const int k = (e / PW) % KP;
  const long gp = e / ((long)PW * KP);
  const int panel = gp % PANELS, g = gp / PANELS;
  const int o = panel * PW + i;
  T v = (T)0;
  if (k < K && o < COG) {
#ifdef TAPS_OUTER
    const int c = k % (K / KK), kh = k / (K / KK) / KW, kw = k / (K / KK) % KW;
#else
    const int c = k / KK, kh = (k % KK) / KW, kw = k % KW;
#endif
#ifdef FLIP
    v = w[wo + ((long)g * CG + c) * ws0 + o * ws1 + (KH - 1 - kh) * ws2 + (KW - 1 - kw) * ws3];
#else
    v = w[wo + ((long)g * COG + o) * ws0 + c * ws1 + kh * ws2 + kw * ws3];
#endif
  }
  wpk[e] = v;
}
#endif

/* The stores shared by both forward kernels: out[n][g*COG + co][q/WQ][q%WQ] (+ bias). */
#define STORE_OUT(co, q, val)                                                            \
  if ((co) < COG && (q) < QN && (q) % WQ < WO) {                                      \
    const int ch_ = g * COG + (co);                                                      \
    T r_ = (val);                                                                        \
    if (HAS_BIAS_) r_ += bias[bo + ch_ * bs];                                            \
    out[oo + n * os0 + ch_ * os1 + ((q) / WQ) * os2 + ((q) % WQ) * os3] = r_;             \
  }
#ifdef HAS_BIAS
#define HAS_BIAS_ 1
#else
#define HAS_BIAS_ 0
#endif

#define CONV_ARGS                                                                          \
  const int n0, const int G, const int CG, const int COG, const int K, const int KP,      \
      const int QN, const int WO, const int WQ, SRC_ARGS, __global const T* wpk, __global const T* bias, \
      const long bo, const long bs, __global T* out, const long oo, const long os0,        \
      const long os1, const long os2, const long os3

#if defined(ALL_KERNELS) || defined(KERNEL_conv_cpu)
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void conv_cpu(CONV_ARGS) {
  /* Without STRIP: taps outer, channels inner (wpk packed TAPS_OUTER): a lane's bounds check
   * and offset hold for every channel of a tap, so the channel loop is a plain gather and a
   * select. */
  const int q0 = get_global_id(0) * NR, panel = get_global_id(1);
  const int n = n0 + get_global_id(2) / G, g = get_global_id(2) % G;
  __global const T* xb = x + xo + n * xs0 + (long)g * CG * xs1;
  __global const T* wp = wpk + ((long)g * get_global_size(1) + panel) * KP * MR;
  VT acc[MR][NV];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NV; ++j) acc[i][j] = (VT)0;
#ifdef STRIP
  /* stride 1: the padded plane from offset q0 on, STRIP elements, staged per channel in
   * private memory; then every tap of the channel is NR/VW vector loads from it */
  T strip[STRIP];
  for (int c = 0; c < CG; ++c) {
    __global const T* xc = xb + c * xs1;
    /* the strip, row segment by row segment of the padded plane: pads, then a plain copy */
    for (int e = 0, run; e < STRIP; e += run) {
      const int p = q0 + e, px = p % WQ, ty = p / WQ - OY;
      run = min(STRIP - e, WQ - px);
#if UH == 1
      const bool row = (uint)ty < (uint)H;
      __global const T* xr = xc + ty * xs2;
#else
      const bool row = ty >= 0 && ty % UH == 0 && ty / UH < H;
      __global const T* xr = xc + (ty / UH) * xs2;
#endif
#if UW == 1
      const int a = row ? clamp(OX - px, 0, run) : run, b = row ? clamp(OX + W - px, a, run) : run;
      for (int t = 0; t < a; ++t) strip[e + t] = (T)0;
      if (xs3 == 1) {  /* a contiguous row: a copy the compiler vectorizes */
        __global const T* xs = xr + px - OX;
        for (int t = a; t < b; ++t) strip[e + t] = xs[t];
      } else {
        for (int t = a; t < b; ++t) strip[e + t] = xr[(px + t - OX) * xs3];
      }
      for (int t = b; t < run; ++t) strip[e + t] = (T)0;
#else
      for (int t = 0; t < run; ++t) {
        const int tx = px + t - OX;
        strip[e + t] = row && tx >= 0 && tx % UW == 0 && tx / UW < W ? xr[(tx / UW) * xs3] : (T)0;
      }
#endif
    }
    for (int kh = 0; kh < KH; ++kh) {
#pragma unroll
      for (int kw = 0; kw < KW; ++kw) {
        const T* src = strip + kh * DH * WQ + kw * DW;
        VT bv[NV];
#pragma unroll
        for (int j = 0; j < NV; ++j) bv[j] = VLOAD(0, src + j * VW);
#pragma unroll
        for (int i = 0; i < MR; ++i) {
          const T a = wp[i];
#pragma unroll
          for (int j = 0; j < NV; ++j) acc[i][j] += a * bv[j];
        }
        wp += MR;
      }
    }
  }
#else
  int ty0[NR], tx0[NR];
  long lo[NR];
  int ylo = INT_MAX, yhi = INT_MIN, xlo = INT_MAX, xhi = INT_MIN;
  for (int j = 0; j < NR; ++j) {
    const int q = min(q0 + j, QN - 1);
    ty0[j] = (q / WQ) * SH - OY;
    tx0[j] = (q % WQ) * SW - OX;
    lo[j] = (long)ty0[j] * xs2 + (long)tx0[j] * xs3;
    ylo = min(ylo, ty0[j]), yhi = max(yhi, ty0[j]), xlo = min(xlo, tx0[j]), xhi = max(xhi, tx0[j]);
  }
  for (int kh = 0; kh < KH; ++kh) {
    for (int kw = 0; kw < KW; ++kw) {
      long off[NR];
      Mask ok[NV];
      const int dy = kh * DH, dx = kw * DW;
      /* a tap inside the image for every lane: offsets without checks */
#if UH == 1 && UW == 1
      const bool inside = ylo + dy >= 0 && yhi + dy < H && xlo + dx >= 0 && xhi + dx < W;
#else
      const bool inside = false;
#endif
      for (int j = 0; j < NV; ++j) {
#pragma unroll
        for (int v = 0; v < VW; ++v) {
          const int ty = ty0[j * VW + v] + dy, tx = tx0[j * VW + v] + dx;
          const bool in = inside || TAP_IN(ty, tx);
          off[j * VW + v] = inside ? lo[j * VW + v] + dy * xs2 + dx * xs3 :
                            in ? TAP_INDEX(ty, tx) : 0;
          ok[j].s[v] = in ? -1 : 0;
        }
      }
      __global const T* xc = xb;
      for (int c = 0; c < CG; ++c) {
        VT bv[NV];
#pragma unroll
        for (int j = 0; j < NV; ++j) {
          Lanes l;
#pragma unroll
          for (int v = 0; v < VW; ++v) l.s[v] = xc[off[j * VW + v]];
          bv[j] = select((VT)0, l.v, ok[j].v);
        }
#pragma unroll
        for (int i = 0; i < MR; ++i) {
          const T a = wp[i];
#pragma unroll
          for (int j = 0; j < NV; ++j) acc[i][j] += a * bv[j];
        }
        wp += MR;
        xc += xs1;
      }
    }
  }
#endif
  /* NOTE: copied out with constant indices first, so the tile stays in registers above. */
  Lanes res[MR][NV];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NV; ++j) res[i][j].v = acc[i][j];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) STORE_OUT(panel * MR + i, q0 + j, res[i][j / VW].s[j % VW])
}
#endif


#if defined(ALL_KERNELS) || defined(KERNEL_grad_rows)
__kernel void grad_rows(const int N, const int C, const int QA, const int QB, const int WO,
                        const int COP, __global const T* go, const long goo, const long gs0,
                        const long gs1, const long gs2, const long gs3, __global T* gq) {
  const long r = get_global_id(0);
  const int rows = QB - QA;
  if (r >= (long)N * rows) return;
  const int q = QA + r % rows, n = r / rows;
  __global const T* src = go + goo + n * gs0 + (q / WO) * gs2 + (q % WO) * gs3;
  __global T* dst = gq + r * COP;
  for (int c = 0; c < C; ++c) dst[c] = src[c * gs1];
  for (int c = C; c < COP; ++c) dst[c] = (T)0;
}
#endif

#define WGRAD_ARGS                                                                         \
  const int N, const int G, const int CG, const int COG, const int K, const int QA,       \
      const int QB, const int WO, const int IPS, SRC_ARGS, __global const T* go, const long goo,        \
      const long gs0, const long gs1, const long gs2, const long gs3, __global T* part,   \
      const int KROWS, const int COLS, const int ACC

#if defined(ALL_KERNELS) || defined(KERNEL_wgrad_cpu)
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void wgrad_cpu(WGRAD_ARGS) {
  const int co0 = get_global_id(0) * NR, k0 = get_global_id(1) * MR;
  const int g = get_global_id(2) % G, s = get_global_id(2) / G;
  long tc[MR];
  int tdy[MR], tdx[MR];
  for (int i = 0; i < MR; ++i) {
    TAP_SPLIT(min(k0 + i, K - 1), c, dy, dx)
    tc[i] = c * xs1;
    tdy[i] = dy - OY;
    tdx[i] = dx - OX;
  }
  VT acc[MR][NV];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NV; ++j) acc[i][j] = (VT)0;
  const int n1 = min(N, (s + 1) * IPS);
  /* the taps' extent: positions where every tap is inside the image load without checks */
  long toff[MR];
  int ylo = INT_MAX, yhi = INT_MIN, xlo = INT_MAX, xhi = INT_MIN;
  for (int i = 0; i < MR; ++i) {
    toff[i] = tc[i] + tdy[i] * xs2 + tdx[i] * xs3;
    ylo = min(ylo, tdy[i]), yhi = max(yhi, tdy[i]), xlo = min(xlo, tdx[i]), xhi = max(xhi, tdx[i]);
  }
  for (int n = s * IPS; n < n1; ++n) {
    __global const T* xb = x + xo + n * xs0 + (long)g * CG * xs1;
    __global const T* gp = go + goo + n * gs0 + g * COG + co0;
    int oh = QA / WO, ow = QA % WO;
    for (int q = QA; q < QB; ++q) {
      VT gv[NV];
#pragma unroll
      for (int j = 0; j < NV; ++j) gv[j] = VLOAD(0, gp + j * VW);
      gp += gs3;
      const int py = oh * SH, px = ow * SW;
      if (py + ylo >= 0 && py + yhi < H && px + xlo >= 0 && px + xhi < W) {
        __global const T* xq = xb + py * xs2 + px * xs3;
#pragma unroll
        for (int i = 0; i < MR; ++i) {
          const T xv = xq[toff[i]];
#pragma unroll
          for (int j = 0; j < NV; ++j) acc[i][j] += xv * gv[j];
        }
      } else {
#pragma unroll
        for (int i = 0; i < MR; ++i) {
          const T xv = tap_load_cpu(xb + tc[i], py + tdy[i], px + tdx[i], H, W, xs2, xs3);
#pragma unroll
          for (int j = 0; j < NV; ++j) acc[i][j] += xv * gv[j];
        }
      }
      if (++ow == WO) {
        ow = 0;
        ++oh;
      }
    }
  }
  Lanes res[MR][NV];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NV; ++j) res[i][j].v = acc[i][j];
  __global T* dst = part + ((long)s * G + g) * KROWS * COLS;
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j)
      if (k0 + i < K && co0 + j < COG) {
        const long e = (long)(k0 + i) * COLS + co0 + j;
        dst[e] = (ACC ? dst[e] : (T)0) + res[i][j / VW].s[j % VW];
      }
}
#endif


#if defined(ALL_KERNELS) || defined(KERNEL_wgrad_sum)
__kernel void wgrad_sum(const int S, const int G, const int COG, const int K, const int KROWS,
                        const int COLS, __global const T* part, __global T* gw) {
  const long e = get_global_id(0);
  if (e >= (long)G * COG * K) return;
  const int k = e % K;
  const long gco = e / K;
  const int co = gco % COG, g = gco / COG;
  T acc = (T)0;
  for (int s = 0; s < S; ++s) acc += part[(((long)s * G + g) * KROWS + k) * COLS + co];
  gw[e] = acc;
}
#endif
