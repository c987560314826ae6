/*
 * conv_xgemm.cl: implicit-GEMM convolution for GPUs on the xgemm engine (cltensor/conv/xgemm.py).
 * Built as gemm_common.cl + gemm_xgemm.cl (with XGEMM_ENGINE_ONLY: its local-memory slices,
 * register tiles and K loop, no kernels) + conv_taps.cl + this file. The engine's loads are replaced by
 * gathers, so nothing but the packed weight is ever copied.
 *
 * Convolution as a product (one group g, positions of all images in one GEMM dim):
 *   cx_conv   out[m][p] = sum over taps k of wpk[m][k] * X[k][p] (+ bias[m], then max(., 0)
 *             when the argument relu is set, NaN kept), m an output
 *             channel, p = img * QN + q a position (q = oh * WO + ow, QN = HO * WO), tap
 *             k = (c * KH + kh) * KW + kw reading the virtual padded source at
 *             (oh * SH - OY + kh * DH, ow * SW - OX + kw * DW), upsampled by (UH, UW) (see
 *             TAP_IN): the forward (UH = UW = 1) and the input gradient (the stride-1
 *             convolution of the upsampled output gradient with the flipped weight).
 *             A = wpk, the weight of each group in panels of MWG channels x KP taps,
 *             channels fastest (conv_implicit.cl's pack_weight with PW = MWG), read as
 *             xgemm's A with A_KC 0, lda MWG. B = X gathered (VWB 1, B_KC 0): work-item tid
 *             gathers the position n0 + tid % NWG of every slice.
 *             Global (ceil(NB*QN/NWG)*NDIMC, panels*MDIMC, G), local (NDIMC, MDIMC, 1).
 *   cx_wgrad  gw[m][k] = sum over positions p of go[m][p] * X[k][p], m an output channel, k a
 *             tap: A = the output gradient (A_KC 1, VWA 1), B = X gathered (B_KC 1, VWB 1);
 *             work-item tid reads position tid % KWG of each slice. The positions are cut
 *             into `splits` shares: work-group z = g * splits + s writes its share's sums to
 *             part[z] (COG x KB, dense) when splits > 1, else gw directly.
 *             WITH_BIAS 1 adds the bias gradient as tap K, a row of ones in X: gb[g*COG + m]
 *             = sum over p of go[m][p] (the host asks for it where the column tiles
 *             already pad K, so it costs no extra tile); KB = K + WITH_BIAS columns.
 *             Global (ceil(KB/NWG)*NDIMC, ceil(COG/MWG)*MDIMC, G*splits).
 *   cx_wgrad_sum  gw[g*COG + m][k] = sum over s of part[g*splits + s][m][k], and gb[g*COG + m]
 *             from column K with WITH_BIAS. 1-d over G*COG*KB.
 *   RELU_MASK 1 (cx_conv's input gradient, cx_wgrad): the output gradient is taken back through
 *             the forward's fused ReLU as it is read, y <= 0 ? 0 : g (torch's: a NaN y passes
 *             g), y (the ReLU's output: arguments ym, ymo, ys0 after the others) laid out
 *             with the gradient's strides but its own image stride ys0 (a gradient that is a
 *             channel slice of a concatenation's); no relu_backward pass over the gradient.
 *
 * Storage (gemm_common.cl's TA, TB, TC; default T, or half or bf16 with T float, loaded as bits
 * (gemm_xgemm.cl's LDR), converted as the engine stores a slice into local memory, the ReLU
 * masks applied there too, and stored through ST, rounded once from the float sums): cx_conv's
 * wpk is TA, its source TB, bias and out TC; cx_wgrad's output gradient is TA, its source TB,
 * gw and gb TC, part (the split partial sums) T; XGEMM_MMA builds too (16-bit values are exact
 * in TF32).
 *
 * Build options: the engine's tunables (gemm_xgemm.cl: MWG, NWG, KWG, MDIMC, NDIMC, VWM, VWN,
 *   STRM, STRN, PADA, PADB, NBUF; VWA) with WGS a multiple of NWG (cx_conv) and of KWG
 *   (cx_wgrad); XGEMM_MMA 1 with xgemm_mma.cl built before this file (tensor cores, TF32);
 *   shape constants KH, KW, SH, SW, DH, DW, UH, UW, H, W (source plane), OY, OX,
 *   WO, QN (output plane), CG (channels per group read), COG (per group written), K = CG*KH*KW,
 *   KP (K rounded up to KWG); HAS_BIAS; WITH_BIAS (0 or 1); RELU_MASK (0 or 1); KERNEL_<name>.
 */
#include "common.cl"
#ifndef TC /* cx_wgrad_sum is built without gemm_common.cl */
#define TC T
#endif
#define KK (KH * KW)
#ifndef WITH_BIAS
#define WITH_BIAS 0
#endif
#define KB (K + WITH_BIAS)
#ifndef RELU_MASK
#define RELU_MASK 0
#endif
#if RELU_MASK
#define MASK_ARGS(TY) , __global const TY *ym, const long ymo, const long ys0
/* g through the ReLU whose output at the same place is yv */
#define RELU_PASS(yv, g) ((yv) <= (T)0 ? (T)0 : (g))
/* the same from the storage bits (of type X) of y and g */
#define RELU_PASS_BITS(X, y, g) RELU_PASS(CAT(CVT_, X)(1, y), CAT(CVT_, X)(1, g))
#else
#define MASK_ARGS(TY)
#endif

/* TAP_IN, TAP_INDEX: conv_taps.cl */
#define SRC_ARGS                                                                           \
  __global const TB *x, const long xo, const long xs0, const long xs1, const long xs2,    \
      const long xs3

/* The bits of a one in storage type X (cx_wgrad's row of ones for the bias gradient) */
#define ONE_BITS(X) CAT(ONE_BITS_, X)
#define ONE_BITS_float 1.0f
#define ONE_BITS_double 1.0
#define ONE_BITS_half ((ushort)0x3c00u)
#define ONE_BITS_bf16 ((ushort)0x3f80u)

#if defined(KERNEL_cx_conv)
/* Where tap k of the position whose image starts at xb and whose window starts at (ty0, tx0)
 * lies from xb, or -1 outside the source (a zero). */
inline long tap_offset(const int k, const int ty0, const int tx0, const bool valid,
                       const long xs1, const long xs2, const long xs3) {
  const int c = k / KK, r = k % KK;
  const int ty = ty0 + (r / KW) * DH, tx = tx0 + (r % KW) * DW;
  return valid && k < K && TAP_IN(ty, tx) ? c * xs1 + TAP_INDEX(ty, tx) : -1;
}
#if RELU_MASK /* B's values through the ReLU, its output's bits in mb (xgemm's B_VALUE) */
#undef B_VALUE
#define B_VALUE(l) RELU_PASS_BITS(TB, mb[l], rb[l])
#endif

__kernel __attribute__((reqd_work_group_size(NDIMC, MDIMC, 1)))
void cx_conv(const int NB, SRC_ARGS, __global const TA* wpk, __global const TC* bias,
             const long bo, const long bs, const int relu, __global TC* out, const long oo,
             const long os0, const long os1, const long os2, const long os3 MASK_ARGS(TB)) {
  XGEMM_PROLOGUE
  const int m0 = get_group_id(1) * MWG, g = get_global_id(2); /* launches may be split on dim 2 */
  const long n0 = (long)get_group_id(0) * NWG, npos = (long)NB * QN;
  __global const TA* pa = wpk + ((long)g * get_num_groups(1) + get_group_id(1)) * KP * MWG;
  const long lda = MWG;
  /* the one position this work-item gathers in every slice */
  const long pos = n0 + tid % NWG;
  const bool valid = pos < npos;
  const int img = valid ? pos / QN : 0, q = valid ? pos % QN : 0;
  const int ty0 = (q / WO) * SH - OY, tx0 = (q % WO) * SW - OX;
  __global const TB* xb = x + xo + img * xs0 + (long)g * CG * xs1;
#if RELU_MASK
  __global const TB* yb = ym + ymo + img * ys0 + (long)g * CG * xs1;
#endif
  RTA ra[NLA];
  RTB rb[NLB];
#if RELU_MASK
  RTB mb[NLB];
#define GATHER_MASK(l, i) mb[l] = (i) < 0 ? (RTB)0 : LDR(TB, 1, yb + (i));
#else
#define GATHER_MASK(l, i)
#endif
#define LOAD_CONV(t)                                                                       \
  {                                                                                        \
    const int k0 = (t) * KWG;                                                              \
    _Pragma("unroll") for (int l = 0; l < NLA; ++l) ra[l] =                                \
        LDR(TA, VWA, A_AT(l * WGS + tid));                                                 \
    _Pragma("unroll") for (int l = 0; l < NLB; ++l) {                                      \
      const long i_ = tap_offset(k0 + l * (WGS / NWG) + tid / NWG, ty0, tx0, valid, xs1,   \
                                 xs2, xs3);                                                \
      rb[l] = i_ < 0 ? (RTB)0 : LDR(TB, 1, xb + i_);                                       \
      GATHER_MASK(l, i_)                                                                   \
    }                                                                                      \
  }
  XGEMM_K_LOOP(KP / KWG, LOAD_CONV)

#if XGEMM_MMA
#ifdef HAS_BIAS
#define CONV_BIAS(m) LD(TC, bias, bo + (g * COG + (m)) * bs)
#else
#define CONV_BIAS(m) 0
#endif
#define CONV_STORE(m, p, v)                                                                \
  if ((m) < COG && (p) < npos) {                                                           \
    const int im = (p) / QN, qq = (p) % QN;                                                \
    const T r_ = (v) + CONV_BIAS(m);                                                       \
    ST(TC, out, oo + im * os0 + (long)(g * COG + (m)) * os1 + (qq / WO) * os2 +           \
                    (qq % WO) * os3, relu && r_ < (T)0 ? (T)0 : r_);                       \
  }
  XGEMM_FOR_EACH_RESULT(CONV_STORE)
#else
  /* the output offsets of this work-item's columns (positions), then its rows */
  long col_off[NWI];
  bool col_ok[NWI];
#pragma unroll
  for (int j = 0; j < NWI / VWN; ++j)
#pragma unroll
    for (int f = 0; f < VWN; ++f) {
      const long p = n0 + COL(j) + f;
      const int im = p / QN, qq = p % QN;
      col_ok[j * VWN + f] = p < npos;
      col_off[j * VWN + f] = oo + im * os0 + (qq / WO) * os2 + (qq % WO) * os3;
    }
#pragma unroll
  for (int i = 0; i < MWI / VWM; ++i)
#pragma unroll
    for (int e = 0; e < VWM; ++e) {
      const int m = m0 + ROW(i) + e;
      if (m >= COG) continue;
      const long row = (long)(g * COG + m) * os1;
#ifdef HAS_BIAS
      const T b = LD(TC, bias, bo + (g * COG + m) * bs);
#else
      const T b = 0;
#endif
#pragma unroll
      for (int j = 0; j < NWI / VWN; ++j) {
        LanesN c;
        c.v = acc[i * VWM + e][j];
#pragma unroll
        for (int f = 0; f < VWN; ++f) {
          const T r = c.s[f] + b;
          if (col_ok[j * VWN + f])
            ST(TC, out, col_off[j * VWN + f] + row, relu && r < (T)0 ? (T)0 : r);
        }
      }
    }
#endif
}
#endif

#if defined(KERNEL_cx_wgrad)
__kernel __attribute__((reqd_work_group_size(NDIMC, MDIMC, 1)))
void cx_wgrad(const int NB, SRC_ARGS, __global const TA* go, const long goo, const long gs0,
              const long gs1, const long gs2, const long gs3, const int splits,
              __global T* part, __global TC* gb MASK_ARGS(TA)) {
  XGEMM_PROLOGUE
  const int m0 = get_group_id(1) * MWG, n0 = get_group_id(0) * NWG;
  const int z = get_global_id(2), g = z / splits; /* launches may be split on dim 2 */
  const long npos = (long)NB * QN;
  /* this work-group's share of the position slices */
  int t0;
  const int slices = split_share((int)((npos + KWG - 1) / KWG), splits, z % splits, &t0);
  /* the rows (channels) and columns (taps) this work-item loads: fixed over the slices */
  long a_off[NLA], b_off[NLB];
  int b_dy[NLB], b_dx[NLB];
  bool a_ok[NLA], b_ok[NLB], b_one[NLB];
#pragma unroll
  for (int l = 0; l < NLA; ++l) {
    const int m = m0 + (l * WGS + tid) / KWG;
    a_ok[l] = m < COG;
    a_off[l] = goo + (long)(g * COG + min(m, COG - 1)) * gs1;
  }
#pragma unroll
  for (int l = 0; l < NLB; ++l) {
    const int k = n0 + (l * WGS + tid) / KWG, kc = min(k, K - 1), r = kc % KK;
    b_ok[l] = k < K;
    b_one[l] = WITH_BIAS && k == K; /* the bias gradient's row of ones */
    b_dy[l] = (r / KW) * DH;
    b_dx[l] = (r % KW) * DW;
    b_off[l] = xo + (long)(g * CG + kc / KK) * xs1;
  }
  RTA ra[NLA];
  RTB rb[NLB];
#if RELU_MASK /* A's values through the ReLU, its output's bits in ma (xgemm's A_VALUE) */
  RTA ma[NLA];
#define LOAD_MASK(l, ok, i) ma[l] = (ok) ? LDR(TA, 1, ym + (i) - goo + ymo) : (RTA)0;
#define MASK_IMAGE(im) ((im) * (ys0 - gs0)) /* y's image offset from the gradient's */
#undef A_VALUE
#define A_VALUE(l) RELU_PASS_BITS(TA, ma[l], ra[l])
#else
#define LOAD_MASK(l, ok, i)
#define MASK_IMAGE(im) 0
#endif
#define LOAD_WGRAD(t)                                                                      \
  {                                                                                        \
    const long p = (long)(t0 + (t)) * KWG + tid % KWG;                                     \
    const bool pv = p < npos;                                                              \
    const int im = pv ? p / QN : 0, qq = pv ? p % QN : 0;                                  \
    const int oh = qq / WO, ow = qq % WO;                                                  \
    const long ga = im * gs0 + oh * gs2 + ow * gs3, xa = im * xs0;                         \
    const int ty0 = oh * SH - OY, tx0 = ow * SW - OX;                                      \
    _Pragma("unroll") for (int l = 0; l < NLA; ++l) {                                      \
      ra[l] = pv && a_ok[l] ? LDR(TA, 1, go + a_off[l] + ga) : (RTA)0;                     \
      LOAD_MASK(l, pv && a_ok[l], a_off[l] + ga + MASK_IMAGE(im))                          \
    }                                                                                      \
    _Pragma("unroll") for (int l = 0; l < NLB; ++l) {                                      \
      const int ty = ty0 + b_dy[l], tx = tx0 + b_dx[l];                                    \
      rb[l] = !pv ? (RTB)0                                                                \
              : b_ok[l] && TAP_IN(ty, tx) ? LDR(TB, 1, x + b_off[l] + xa + TAP_INDEX(ty, tx)) \
              : b_one[l] ? ONE_BITS(TB) : (RTB)0;                                          \
    }                                                                                      \
  }
  XGEMM_K_LOOP(slices, LOAD_WGRAD)

  const bool whole = splits == 1; /* this share is the whole sum: part is gw (TC) then */
  __global T* dst = part + (long)z * COG * KB;
  __global TC* gw = (__global TC*)part + (long)g * COG * K;
#define WGRAD_STORE(m, n, v)                                                               \
  if ((m) < COG && (n) < KB) {                                                             \
    if (!whole) dst[(long)(m) * KB + (n)] = (v);                                           \
    else if ((n) < K) ST(TC, gw, (long)(m) * K + (n), (v));                                \
    else ST(TC, gb, g * COG + (m), (v));                                                   \
  }
  XGEMM_FOR_EACH_RESULT(WGRAD_STORE)
}
#endif

#if defined(KERNEL_cx_wgrad_sum)
__kernel void cx_wgrad_sum(const int G, const int splits, __global const T* part,
                           __global TC* gw, __global TC* gb) {
  const long e = get_global_id(0);
  if (e >= (long)G * COG * KB) return;
  const long gm = e / KB; /* g * COG + m */
  const int n = e % KB, g = gm / COG;
  __global const T* p = part + (long)g * splits * COG * KB + e % ((long)COG * KB);
  T acc = 0;
  for (int s = 0; s < splits; ++s) acc += p[(long)s * COG * KB];
  if (n < K)
    ST(TC, gw, gm * K + n, acc);
  else
    ST(TC, gb, gm, acc);
}
#endif
