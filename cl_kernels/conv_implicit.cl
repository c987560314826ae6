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
 *   out   any strided 4-d view (NCHW, channels_last, ...), bias added when HAS_BIAS, then
 *         max(., 0) when the argument relu is set (NaN kept).
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
 *   wgrad_blocks weight gradient, for CPUs: part[s][g][k][co] = sum over the flat positions
 *                f = n*HO*WO + q of split s (FPS of them) of x(k, q) * go[n][g*Cog + co][q].
 *                A work-item takes KB rows of K (a multiple of MR) and CB channels (of NR) of
 *                one split and group. It walks its positions in blocks of BQ: copies the
 *                block's output gradient channels-minor (gp, local) and its taps positions-
 *                minor (xp, local: the im2col of the block, zeros outside the image), both in
 *                runs along output rows, then adds each MR x NR tile of its part over the
 *                block in registers (NR/VW vectors). part is KROWS x COLS (K, Cog rounded up to
 *                MR, NR) per split and group. Global (S*G*KCH*CCH), local (1).
 *   wgrad_sum    gw[g*Cog + co][k] = sum over s of part[s][g][k][co] (deterministic). 1-d.
 *
 * Storage: x, go, wpk, bias, out and gw are TS (default T; half or bf16 with T float: read
 * through common.cl's LD and stored through ST, rounded once from the float sums); part and
 * the private and local copies are T. pack_weight copies elements exactly (the host builds it
 * with T a 16-bit integer type for half and bf16).
 *
 * Build options: T; TS; MASK_T (int, or long for double); KH, KW, SH, SW, DH, DW, UH, UW (shape
 *   constants); HAS_BIAS; FLIP; TAPS_OUTER (pack_weight's rows k = (kh*KW + kw)*C + c,
 *   the order conv_cpu reads);
 *   KERNEL_<name> compiles only that kernel (ALL_KERNELS: every one):
 *   PoCL's build time grows with every kernel in the program, and each kernel takes different
 *   shape constants.
 * Tunables: MR, NR, VW, BQ. (GPUs run conv_xgemm.cl's kernels.)
 */
#include "common.cl"
#ifndef T
#define T float
#endif
#ifndef TS
#define TS T
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
#ifndef BQ
#define BQ 128
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VT CAT(T, VW)
#define VLOAD CAT(vload, VW)
#define VSTORE CAT(vstore, VW)
#define NV (NR / VW)
#define KK (KH * KW)

typedef union { VT v; T s[VW]; } Lanes;
/* select()'s lane masks for VT: an integer vector of T's width */
#ifndef MASK_T
#define MASK_T int
#endif
typedef union { CAT(MASK_T, VW) v; MASK_T s[VW]; } Mask;

/* 16-bit storage, converted a vector at a time (float16's scalar conversions in the inner loops
 * tripled conv_cpu's time): Panel holds MR packed weights (LOAD_PANEL), Raw VW gathered
 * elements as stored (RAW_AT), widened to VT by WIDEN. */
#define IS_HALF_half 1
#define IS_BF16_bf16 1
#if CAT(IS_HALF_, TS) || CAT(IS_BF16_, TS)
#if MR % 4
#error "MR must be a multiple of 4 for 16-bit panels"
#endif
typedef union { float4 v[MR / 4]; float s[MR]; } Panel;
#if CAT(IS_HALF_, TS)
#define PANEL4(p, i) vload_half4((i), (p))
#else
#define PANEL4(p, i) as_float4(convert_uint4(vload4((i), (__global const ushort*)(p))) << 16)
#endif
#define LOAD_PANEL(pn, p)                                                                  \
  _Pragma("unroll") for (int i_ = 0; i_ < MR / 4; ++i_) (pn).v[i_] = PANEL4((p), i_)
#else
typedef union { T s[MR]; } Panel;
#define LOAD_PANEL(pn, p)                                                                  \
  _Pragma("unroll") for (int i_ = 0; i_ < MR; ++i_) (pn).s[i_] = LD(TS, (p), i_)
#endif
#if CAT(IS_HALF_, TS) || CAT(IS_BF16_, TS)
typedef union { CAT(ushort, VW) v; ushort s[VW]; } Raw;
#define RAW_AT(p, i) (((__global const ushort*)(p))[i])
#if CAT(IS_HALF_, TS)
#define WIDEN(r) CAT(vload_half, VW)(0, (const __private half*)(r).s)
#else
#define WIDEN(r) CAT(as_float, VW)(CAT(convert_uint, VW)((r).v) << 16)
#endif
#else
typedef Lanes Raw;
#define RAW_AT(p, i) ((p)[i])
#define WIDEN(r) ((r).v)
#endif

/* tap_load without a branch, for CPUs: an out-of-image tap loads the channel's first element
 * and drops it. */
inline T tap_load_cpu(__global const TS* xc, const int ty, const int tx, const int H,
                      const int W, const long xs2, const long xs3) {
  const bool in = TAP_IN(ty, tx);
  const T v = LD(TS, xc, in ? TAP_INDEX(ty, tx) : 0);
  return in ? v : (T)0;
}

/* Tap k = (c, kh, kw) (c relative to the group): its channel and its (dy, dx) in the plane. */
#define TAP_SPLIT(k, c, dy, dx)                                                            \
  const int c = (k) / KK, dy = ((k) % KK) / KW * DH, dx = ((k) % KK) % KW * DW;

#define SRC_ARGS                                                                           \
  const int H, const int W, const int OY, const int OX, __global const TS* x, const long xo, \
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
    if (HAS_BIAS_) r_ += LD(TS, bias, bo + ch_ * bs);                                    \
    if (relu && r_ < (T)0) r_ = (T)0;                                                    \
    ST(TS, out, oo + n * os0 + ch_ * os1 + ((q) / WQ) * os2 + ((q) % WQ) * os3, r_);      \
  }
#ifdef HAS_BIAS
#define HAS_BIAS_ 1
#else
#define HAS_BIAS_ 0
#endif

#define CONV_ARGS                                                                          \
  const int n0, const int G, const int CG, const int COG, const int K, const int KP,      \
      const int QN, const int WO, const int WQ, SRC_ARGS, __global const TS* wpk,          \
      __global const TS* bias, const long bo, const long bs, const int relu,               \
      __global TS* out, const long oo,                                                     \
      const long os0, const long os1, const long os2, const long os3

#if defined(ALL_KERNELS) || defined(KERNEL_conv_cpu)
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void conv_cpu(CONV_ARGS) {
  /* Without STRIP: taps outer, channels inner (wpk packed TAPS_OUTER): a lane's bounds check
   * and offset hold for every channel of a tap, so the channel loop is a plain gather and a
   * select. */
  const int q0 = get_global_id(0) * NR, panel = get_global_id(1);
  const int n = n0 + get_global_id(2) / G, g = get_global_id(2) % G;
  __global const TS* xb = x + xo + n * xs0 + (long)g * CG * xs1;
  __global const TS* wp = wpk + ((long)g * get_global_size(1) + panel) * KP * MR;
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
    __global const TS* xc = xb + c * xs1;
    /* the strip, row segment by row segment of the padded plane: pads, then a plain copy */
    for (int e = 0, run; e < STRIP; e += run) {
      const int p = q0 + e, px = p % WQ, ty = p / WQ - OY;
      run = min(STRIP - e, WQ - px);
#if UH == 1
      const bool row = (uint)ty < (uint)H;
      __global const TS* xr = xc + ty * xs2;
#else
      const bool row = ty >= 0 && ty % UH == 0 && ty / UH < H;
      __global const TS* xr = xc + (ty / UH) * xs2;
#endif
#if UW == 1
      const int a = row ? clamp(OX - px, 0, run) : run, b = row ? clamp(OX + W - px, a, run) : run;
      for (int t = 0; t < a; ++t) strip[e + t] = (T)0;
      if (xs3 == 1) {  /* a contiguous row: a copy the compiler vectorizes */
        __global const TS* xs = xr + px - OX;
        for (int t = a; t < b; ++t) strip[e + t] = LD(TS, xs, t);
      } else {
        for (int t = a; t < b; ++t) strip[e + t] = LD(TS, xr, (px + t - OX) * xs3);
      }
      for (int t = b; t < run; ++t) strip[e + t] = (T)0;
#else
      for (int t = 0; t < run; ++t) {
        const int tx = px + t - OX;
        strip[e + t] =
            row && tx >= 0 && tx % UW == 0 && tx / UW < W ? LD(TS, xr, (tx / UW) * xs3) : (T)0;
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
        Panel pn;
        LOAD_PANEL(pn, wp);
#pragma unroll
        for (int i = 0; i < MR; ++i) {
          const T a = pn.s[i];
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
      __global const TS* xc = xb;
      for (int c = 0; c < CG; ++c) {
        VT bv[NV];
#pragma unroll
        for (int j = 0; j < NV; ++j) {
          Raw l;
#pragma unroll
          for (int v = 0; v < VW; ++v) l.s[v] = RAW_AT(xc, off[j * VW + v]);
          bv[j] = select((VT)0, WIDEN(l), ok[j].v);
        }
        Panel pn;
        LOAD_PANEL(pn, wp);
#pragma unroll
        for (int i = 0; i < MR; ++i) {
          const T a = pn.s[i];
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


#if defined(ALL_KERNELS) || defined(KERNEL_wgrad_blocks)
/* A run of a block's positions along one output row: block entries j .. j+len-1 are
 * positions (n, oh, ow .. ow+len-1). A block of nq positions from flat position b is walked
 * for (Run r = first_run(b, nq, HO, WO); r.len > 0; next_run(&r, nq, HO, WO)). */
typedef struct {
  long n;
  int oh, ow, j, len;
} Run;

inline Run first_run(const long b, const int nq, const int HO, const int WO) {
  const int q = b % (HO * WO);
  Run r = {b / (HO * WO), q / WO, q % WO, 0, 0};
  r.len = min(nq, WO - r.ow);
  return r;
}

inline void next_run(Run* r, const int nq, const int HO, const int WO) {
  r->j += r->len;
  r->len = min(nq - r->j, WO);
  r->ow = 0;
  if (++r->oh == HO) r->oh = 0, ++r->n;
}

/* xp[i][j] = tap k0 + i (i < kn) of block position j (j < nq; the block from flat position
 * b): the block's im2col, 0 outside the image and past K. UH = UW = 1 (no upsampling). */
inline void copy_taps(__local T* xp, const int k0, const int kn, const int K, const long b,
                      const int nq, const int HO, const int WO, const int H, const int W,
                      const int OY, const int OX, __global const TS* xg, const long xs0,
                      const long xs1, const long xs2, const long xs3) {
  for (int i = 0; i < kn; ++i) {
    __local T* d = xp + i * BQ;
    if (k0 + i >= K) {
      for (int j = 0; j < nq; ++j) d[j] = (T)0;
      continue;
    }
    TAP_SPLIT(k0 + i, c, dy, dx)
    for (Run r = first_run(b, nq, HO, WO); r.len > 0; next_run(&r, nq, HO, WO)) {
      const int ty = r.oh * SH + dy - OY, tx = r.ow * SW + dx - OX;
      /* the run's taps inside the image: e in [lo, hi) (a negative quotient clamps to 0) */
      const bool row_in = (uint)ty < (uint)H;
      const int lo = row_in ? clamp((SW - 1 - tx) / SW, 0, r.len) : r.len;
      const int hi = row_in ? clamp((W - tx + SW - 1) / SW, lo, r.len) : r.len;
      __global const TS* src =
          xg + c * xs1 + r.n * xs0 + (row_in ? ty : 0) * xs2 + (tx + lo * SW) * xs3;
      __local T* dr = d + r.j;
      for (int e = 0; e < lo; ++e) dr[e] = (T)0;
      for (int e = lo; e < hi; ++e) dr[e] = LD(TS, src, (e - lo) * SW * xs3);
      for (int e = hi; e < r.len; ++e) dr[e] = (T)0;
    }
  }
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void wgrad_blocks(const int G, const int CG, const int COG, const int K, const int KB,
                  const int CB, const int KROWS, const int COLS, const int KCH, const int CCH,
                  const int HO, const int WO, const long FN, const long FPS, SRC_ARGS,
                  __global const TS* go, const long goo, const long gs0, const long gs1,
                  const long gs2, const long gs3, __global T* part, __local T* gp,
                  __local T* xp) {
  long id = get_global_id(0);
  const int cc = id % CCH, kc = (id / CCH) % KCH;
  id /= (long)CCH * KCH;
  const int g = id % G;
  const long s = id / G;
  const int k0 = kc * KB, co0 = cc * CB;
  const int kn = min(KB, KROWS - k0), cn = min(CB, COLS - co0); /* multiples of MR, NR */
  const long f0 = s * FPS, f1 = min(FN, f0 + FPS);
  __global const TS* xg = x + xo + (long)g * CG * xs1;
  __global const TS* gg = go + goo + ((long)g * COG + co0) * gs1;
  __global T* dst = part + ((s * G + g) * KROWS + k0) * COLS + co0;
  for (long b = f0; b < f1 || b == f0; b += BQ) { /* once at least: the sums get written */
    const int nq = (int)max(0L, min((long)BQ, f1 - b));
    /* gp[ct][j][v]: channel co0 + ct*NR + v of position j (0 past Cog) */
    for (int c = 0; c < cn; ++c) {
      __local T* d = gp + (c / NR) * BQ * NR + c % NR;
      if (co0 + c >= COG) {
        for (int j = 0; j < nq; ++j) d[j * NR] = (T)0;
        continue;
      }
      for (Run r = first_run(b, nq, HO, WO); r.len > 0; next_run(&r, nq, HO, WO)) {
        __global const TS* src = gg + c * gs1 + r.n * gs0 + r.oh * gs2 + r.ow * gs3;
        for (int e = 0; e < r.len; ++e) d[(r.j + e) * NR] = LD(TS, src, e * gs3);
      }
    }
    copy_taps(xp, k0, kn, K, b, nq, HO, WO, H, W, OY, OX, xg, xs0, xs1, xs2, xs3);
    for (int kt = 0; kt < kn / MR; ++kt)
      for (int ct = 0; ct < cn / NR; ++ct) {
        __global T* at = dst + (long)kt * MR * COLS + ct * NR;
        VT acc[MR][NV];
#pragma unroll
        for (int i = 0; i < MR; ++i)
#pragma unroll
          for (int v = 0; v < NV; ++v)
            acc[i][v] = b == f0 ? (VT)0 : VLOAD(0, at + i * COLS + v * VW);
        __local const T* xr = xp + kt * MR * BQ;
        __local const T* gr = gp + ct * BQ * NR;
        for (int j = 0; j < nq; ++j) {
          VT gv[NV];
#pragma unroll
          for (int v = 0; v < NV; ++v) gv[v] = VLOAD(0, gr + j * NR + v * VW);
#pragma unroll
          for (int i = 0; i < MR; ++i) {
            const T xv = xr[i * BQ + j];
#pragma unroll
            for (int v = 0; v < NV; ++v) acc[i][v] += xv * gv[v];
          }
        }
#pragma unroll
        for (int i = 0; i < MR; ++i)
#pragma unroll
          for (int v = 0; v < NV; ++v) VSTORE(acc[i][v], 0, at + i * COLS + v * VW);
      }
  }
}
#endif


#if defined(ALL_KERNELS) || defined(KERNEL_wgrad_sum)
__kernel void wgrad_sum(const int S, const int G, const int COG, const int K, const int KROWS,
                        const int COLS, __global const T* part, __global TS* gw) {
  const long e = get_global_id(0);
  if (e >= (long)G * COG * K) return;
  const int k = e % K;
  const long gco = e / K;
  const int co = gco % COG, g = gco / COG;
  T acc = (T)0;
  for (int s = 0; s < S; ++s) acc += part[(((long)s * G + g) * KROWS + k) * COLS + co];
  ST(TS, gw, e, acc);
}
#endif
