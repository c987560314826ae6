/*
 * conv_implicit.cl: implicit-GEMM convolution (cltensor/conv/implicit.py): the im2col gather
 * happens inside the GEMM's operand loads, so no column buffer exists.
 *
 * Operands:
 *   xpad  the input, zero-padded: contiguous (N, C, HP, WP) followed by slack (zeros or
 *         anything: it only feeds discarded outputs). pad_input writes it; for the input
 *         gradient it holds the output gradient upsampled by the stride and padded so that the
 *         gradient is a stride-1 convolution of it with the flipped weight.
 *   wpk   the weight of each group in panels of PW output channels (pack_weight):
 *         wpk[g][panel][k][i] = W[g][panel*PW + i][k], k = (c*KH + kh)*KW + kw < KP (zero for
 *         rows past K and channels past Cog). FLIP packs the flipped transposed weight that
 *         the input gradient convolves with: W'[g][o][c][kh][kw] = W[g][c][o][KH-1-kh][KW-1-kw].
 *   out   any strided 4-d view (NCHW, channels_last, ...), bias added when HAS_BIAS.
 *
 * Positions: output (oh, ow) of an image is position q = oh*WQ + ow. With CONTIG (stride 1x1)
 * WQ = WP, so position q reads xpad at plane offset q + kh*DH*WP + kw*DW: consecutive q are
 * consecutive in memory (vector loads); columns ow >= WO are computed and dropped. Otherwise
 * WQ = WO and position q reads plane offset SH*WP*oh + SW*ow + kh*DH*WP + kw*DW. QN is the
 * number of positions per image ((HO-1)*WQ + WO).
 *
 * Kernels:
 *   pad_input    dst[n][c][y][x] = src[n][c][(y-OY)/UH][(x-OX)/UW] where that is an exact,
 *                in-range index, else 0; elements past N*C*HP*WP (the slack) get 0. 1-d.
 *   pack_weight  wpk above. 1-d over G * panels * KP * PW.
 *   conv_cpu     forward, for CPUs: one work-item computes MR output channels x NR positions
 *                in registers (NR/VW vectors), over all of K; no local memory, local size
 *                (1, 1, 1). Global (ceil(QN/NR), ceil(Cog/MR), NB*G) for images n0 .. n0+NB-1.
 *   conv_gpu     forward, for GPUs: a (TSN/WPTN, TSM/WPTM) work-group computes TSM channels x
 *                TSN positions, staging TSK-deep slices of wpk and of the gathered input in
 *                local memory; WPTM x WPTN register tile per work-item. Global
 *                (ceil(QN/TSN)*TSN/WPTN, ceil(Cog/TSM)*TSM/WPTM, NB*G); KP a multiple of TSK.
 *   pad_grad     gq[n][q][c] = gout[n][c][q/WQ][q%WQ] for q%WQ < WO, else 0 (WQ passed as WQR): the output
 *                gradient positions-major, COP >= Co + NR columns (zero past Co). 1-d over
 *                elements, or over rows (n, q) with ROWS (CPUs).
 *   wgrad_cpu    weight gradient, for CPUs: part[s][g][k][co] = sum over the images of split
 *                s and all positions of xpad(k, q) * gq[n][q][g*Cog + co]; a work-item holds
 *                MR rows of k x NR channels (NR/VW vectors). Global (ceil(Cog/NR),
 *                ceil(K/MR), G*S).
 *   wgrad_gpu    the same with local-memory tiles: TSM rows of k x TSN channels per
 *                work-group, TSK positions per slice. Global (ceil(Cog/TSN)*TSN/WPTN,
 *                ceil(K/TSM)*TSM/WPTM, G*S).
 *   wgrad_sum    gw[g*Cog + co][k] = sum over s of part[s][g][k][co] (deterministic). 1-d.
 *
 * Build options: T; KH, KW, SH, SW, DH, DW (shape constants); CONTIG; HAS_BIAS; FLIP;
 *   KERNEL_<name> compiles only that kernel (ALL_KERNELS: every one): PoCL's build time grows
 *   with every kernel in the program, and each kernel takes different shape constants.
 * Tunables: MR, NR, VW (CPU kernels); TSM, TSN, TSK, WPTM, WPTN (GPU kernels).
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
#ifndef TSM
#define TSM 64
#endif
#ifndef TSN
#define TSN 64
#endif
#ifndef TSK
#define TSK 16
#endif
#ifndef WPTM
#define WPTM 4
#endif
#ifndef WPTN
#define WPTN 4
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VT CAT(T, VW)
#define VLOAD CAT(vload, VW)
#define NV (NR / VW)
#define RTSM (TSM / WPTM)
#define RTSN (TSN / WPTN)
#define KK (KH * KW)

typedef union { VT v; T s[VW]; } Lanes;

/* The plane offset of kernel tap k = (c, kh, kw) (c relative to the group). */
inline long tap_offset(const int k, const long plane, const int WP) {
  const int c = k / KK, r = k % KK;
  return c * plane + (r / KW) * DH * WP + (r % KW) * DW;
}

/* The plane offset of position q (before the tap's offset). */
inline long pos_offset(const int q, const int WP, const int WO) {
#ifdef CONTIG
  return q;
#else
  return (long)SH * WP * (q / WO) + SW * (q % WO);
#endif
}

#ifdef CONTIG
#define WQ WP
#else
#define WQ WO
#endif

#if defined(ALL_KERNELS) || defined(KERNEL_pad_input)
__kernel void pad_input(const int N, const int C, const int H, const int W, const int HP,
                        const int WP, const int OY, const int OX, const int UH, const int UW,
                        __global const T* x, const long xo, const long xs0, const long xs1,
                        const long xs2, const long xs3, __global T* dst, const long total) {
  const long e = get_global_id(0);
  if (e >= total) return;
  T v = (T)0;
  if (e < (long)N * C * HP * WP) {
    const int px = e % WP, py = (e / WP) % HP;
    const long nc = e / ((long)WP * HP);
    const int c = nc % C, n = nc / C;
    const int ty = py - OY, tx = px - OX;
    if (ty >= 0 && tx >= 0 && ty % UH == 0 && tx % UW == 0 && ty / UH < H && tx / UW < W)
      v = x[xo + n * xs0 + c * xs1 + (ty / UH) * xs2 + (tx / UW) * xs3];
  }
  dst[e] = v;
}
#endif

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
    const int c = k / KK, kh = (k % KK) / KW, kw = k % KW;
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
  if ((co) < COG && (q) < QN && ((q) % WQ) < WO) {                                         \
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
  const int n0, const int G, const int CG, const int COG, const int K, const int KP, const int WP,      \
      const long plane, const int QN, const int WO, __global const T* xpad,              \
      __global const T* wpk, __global const T* bias, const long bo, const long bs,         \
      __global T* out, const long oo, const long os0, const long os1, const long os2,     \
      const long os3

#if defined(ALL_KERNELS) || defined(KERNEL_conv_cpu)
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void conv_cpu(CONV_ARGS) {
  const int q0 = get_global_id(0) * NR, panel = get_global_id(1);
  const int n = n0 + get_global_id(2) / G, g = get_global_id(2) % G;
  __global const T* xb = xpad + ((long)n * G + g) * CG * plane;
  __global const T* wp = wpk + ((long)g * get_global_size(1) + panel) * KP * MR;
  VT acc[MR][NV];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NV; ++j) acc[i][j] = (VT)0;
#ifndef CONTIG
  long lane[NR];
  for (int j = 0; j < NR; ++j) lane[j] = pos_offset(min(q0 + j, QN - 1), WP, WO);
#endif
  for (int c = 0; c < CG; ++c) {
    __global const T* xc = xb + c * plane;
    for (int kh = 0; kh < KH; ++kh) {
#pragma unroll
      for (int kw = 0; kw < KW; ++kw) {
        __global const T* src = xc + kh * DH * WP + kw * DW;
        VT bv[NV];
#ifdef CONTIG
#pragma unroll
        for (int j = 0; j < NV; ++j) bv[j] = VLOAD(0, src + q0 + j * VW);
#else
#pragma unroll
        for (int j = 0; j < NV; ++j) {
          Lanes l;
#pragma unroll
          for (int v = 0; v < VW; ++v) l.s[v] = src[lane[j * VW + v]];
          bv[j] = l.v;
        }
#endif
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

#if defined(ALL_KERNELS) || defined(KERNEL_conv_gpu)
__kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1)))
void conv_gpu(CONV_ARGS) {
  __local T As[TSK][TSM];
  __local T Bs[TSK][TSN];
  const int lx = get_local_id(0), ly = get_local_id(1);
  const int tid = ly * RTSN + lx;
  const int q0 = get_group_id(0) * TSN, panel = get_group_id(1);
  const int n = n0 + get_global_id(2) / G, g = get_global_id(2) % G;
  __global const T* xb = xpad + ((long)n * G + g) * CG * plane;
  __global const T* wp = wpk + ((long)g * get_num_groups(1) + panel) * KP * TSM;
  /* each work-item loads the same column j of the input tile in every slice */
  const int bj = tid % TSN, bk0 = tid / TSN;
  const long bpos = pos_offset(min(q0 + bj, QN - 1), WP, WO);
  T acc[WPTM][WPTN];
  for (int i = 0; i < WPTM; ++i)
    for (int j = 0; j < WPTN; ++j) acc[i][j] = (T)0;
  for (int k0 = 0; k0 < KP; k0 += TSK) {
    for (int e = tid; e < TSK * TSM; e += RTSM * RTSN) As[e / TSM][e % TSM] = wp[k0 * TSM + e];
    for (int kk = bk0; kk < TSK; kk += (RTSM * RTSN) / TSN) {
      const int k = k0 + kk;
      Bs[kk][bj] = k < K ? xb[tap_offset(k, plane, WP) + bpos] : (T)0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int kk = 0; kk < TSK; ++kk) {
      T a[WPTM], b[WPTN];
      for (int i = 0; i < WPTM; ++i) a[i] = As[kk][ly + i * RTSM];
      for (int j = 0; j < WPTN; ++j) b[j] = Bs[kk][lx + j * RTSN];
      for (int i = 0; i < WPTM; ++i)
        for (int j = 0; j < WPTN; ++j) acc[i][j] += a[i] * b[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int i = 0; i < WPTM; ++i)
    for (int j = 0; j < WPTN; ++j)
      STORE_OUT(panel * TSM + ly + i * RTSM, q0 + lx + j * RTSN, acc[i][j])
}
#endif

#if defined(ALL_KERNELS) || defined(KERNEL_pad_grad)
__kernel void pad_grad(const int N, const int C, const int QW, const int WQR, const int WO,
                       const int COP, __global const T* go, const long goo, const long gs0,
                       const long gs1, const long gs2, const long gs3, __global T* gq) {
  /* one work-item per row (n, q) of COP channels (ROWS) or per element */
#ifdef ROWS
  const long r = get_global_id(0);
  if (r >= (long)N * QW) return;
  const int q = r % QW, n = r / QW;
  const int ow = q % WQR;
  __global T* dst = gq + r * COP;
  if (ow >= WO) {
    for (int c = 0; c < COP; ++c) dst[c] = (T)0;
    return;
  }
  __global const T* src = go + goo + n * gs0 + (q / WQR) * gs2 + ow * gs3;
  for (int c = 0; c < C; ++c) dst[c] = src[c * gs1];
  for (int c = C; c < COP; ++c) dst[c] = (T)0;
#else
  const long e = get_global_id(0);
  if (e >= (long)N * QW * COP) return;
  const int c = e % COP;
  const int q = (e / COP) % QW;
  const int n = e / ((long)COP * QW);
  const int ow = q % WQR;
  T v = (T)0;
  if (c < C && ow < WO) v = go[goo + n * gs0 + c * gs1 + (q / WQR) * gs2 + ow * gs3];
  gq[e] = v;
#endif
}
#endif

#define WGRAD_ARGS                                                                         \
  const int N, const int G, const int CG, const int COG, const int K, const int WP,       \
      const long plane, const int QW, const int WO, const int COP, const int IPS,          \
      __global const T* xpad, __global const T* gq, __global T* part, const int KROWS,    \
      const int COLS

#if defined(ALL_KERNELS) || defined(KERNEL_wgrad_cpu)
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void wgrad_cpu(WGRAD_ARGS) {
  const int co0 = get_global_id(0) * NR, k0 = get_global_id(1) * MR;
  const int g = get_global_id(2) % G, s = get_global_id(2) / G;
  long tap[MR];
  for (int i = 0; i < MR; ++i) tap[i] = tap_offset(min(k0 + i, K - 1), plane, WP);
  VT acc[MR][NV];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NV; ++j) acc[i][j] = (VT)0;
  const int n1 = min(N, (s + 1) * IPS);
  for (int n = s * IPS; n < n1; ++n) {
    __global const T* xb = xpad + ((long)n * G + g) * CG * plane;
    __global const T* gp = gq + (long)n * QW * COP + g * COG + co0;
    for (int q = 0; q < QW; ++q) {
      const long po = pos_offset(q, WP, WO);
      VT gv[NV];
#pragma unroll
      for (int j = 0; j < NV; ++j) gv[j] = VLOAD(0, gp + j * VW);
      gp += COP;
#pragma unroll
      for (int i = 0; i < MR; ++i) {
        const T xv = xb[tap[i] + po];
#pragma unroll
        for (int j = 0; j < NV; ++j) acc[i][j] += xv * gv[j];
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
      if (k0 + i < K && co0 + j < COG) dst[(long)(k0 + i) * COLS + co0 + j] = res[i][j / VW].s[j % VW];
}
#endif

#if defined(ALL_KERNELS) || defined(KERNEL_wgrad_gpu)
__kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1)))
void wgrad_gpu(WGRAD_ARGS) {
  __local T As[TSK][TSM];
  __local T Bs[TSK][TSN];
  const int lx = get_local_id(0), ly = get_local_id(1);
  const int tid = ly * RTSN + lx;
  const int co0 = get_group_id(0) * TSN, k0 = get_group_id(1) * TSM;
  const int g = get_global_id(2) % G, s = get_global_id(2) / G;
  /* each work-item loads the same tap (row of A) and channel (column of B) in every slice */
  const int ai = tid % TSM, aq0 = tid / TSM;
  const long tap = tap_offset(min(k0 + ai, K - 1), plane, WP);
  const int bj = tid % TSN, bq0 = tid / TSN;
  T acc[WPTM][WPTN];
  for (int i = 0; i < WPTM; ++i)
    for (int j = 0; j < WPTN; ++j) acc[i][j] = (T)0;
  const int n1 = min(N, (s + 1) * IPS);
  for (int n = s * IPS; n < n1; ++n) {
    __global const T* xb = xpad + ((long)n * G + g) * CG * plane + tap;
    __global const T* gp = gq + (long)n * QW * COP + g * COG + co0 + bj;
    for (int r0 = 0; r0 < QW; r0 += TSK) {
      for (int qq = aq0; qq < TSK; qq += (RTSM * RTSN) / TSM) {
        const int q = r0 + qq;
        As[qq][ai] = q < QW ? xb[pos_offset(q, WP, WO)] : (T)0;
      }
      for (int qq = bq0; qq < TSK; qq += (RTSM * RTSN) / TSN) {
        const int q = r0 + qq;
        Bs[qq][bj] = q < QW ? gp[(long)q * COP] : (T)0;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
      for (int qq = 0; qq < TSK; ++qq) {
        T a[WPTM], b[WPTN];
        for (int i = 0; i < WPTM; ++i) a[i] = As[qq][ly + i * RTSM];
        for (int j = 0; j < WPTN; ++j) b[j] = Bs[qq][lx + j * RTSN];
        for (int i = 0; i < WPTM; ++i)
          for (int j = 0; j < WPTN; ++j) acc[i][j] += a[i] * b[j];
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }
  __global T* dst = part + ((long)s * G + g) * KROWS * COLS;
  for (int i = 0; i < WPTM; ++i) {
    const int k = k0 + ly + i * RTSM;
    for (int j = 0; j < WPTN; ++j) {
      const int co = co0 + lx + j * RTSN;
      if (k < K && co < COG) dst[(long)k * COLS + co] = acc[i][j];
    }
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
