/*
 * pool_strips.cl: max_pool2d forward of windows that overlap down the columns (KH > SH), for
 * CPUs, built appended to pool.cl (its View4, Pool, window helpers and VECTOR_ROWS row loads)
 * with pool.cl's build options and the window geometry baked.
 *
 * Separable: the max of a window is the max over its rows of each row's max, with the same
 * ties and NaNs (the first largest, the last NaN). A work-item takes a band of a plane's output
 * rows and walks down it a strip of 16 output columns at a time, keeping the row maxima and
 * their taps of the window's KH input rows: each input row's is computed once per strip
 * instead of KH / SH times, and a 16-bit element is converted KW / SW times instead of
 * KH * KW / (SH * SW). The row edges are strips too, their columns outside the row masked by
 * constant lane shifts. Taps and row maxima are compared without NaN checks; a strip whose
 * taps met a NaN is done again with NaN-aware compares.
 *
 * Layout: x's, y's and idx's rows contiguous (w stride 1), any other strides (View4).
 * Needs: unit dilation, stride 1 or 2 across, KH <= STRIP_MAX_ROWS, KH * KW <= 255 (IDX_T
 * uchar), rows holding a strip inside (the launcher's _strips_fit).
 * Kernel: max_pool2d_fwd_strips(Pool, flags (pool.cl's POOL_IDX, POOL_RELU), band (output rows
 *         a work-item), x, vx, y, vy, idx, vi).
 * Tunables: none; the launcher picks the band.
 */

/* windows of more rows keep the rows form (their row maxima would not stay in registers) */
#define STRIP_MAX_ROWS 8
#if !VECTOR_ROWS
#error "max_pool2d_fwd_strips needs the baked geometry, unit dilation across, stride 1 or 2"
#elif !(DH == 1 && KH > SH && KH <= STRIP_MAX_ROWS && KH * KW <= 255)
#error "max_pool2d_fwd_strips needs DH 1, SH < KH <= STRIP_MAX_ROWS, KH * KW <= 255"
#endif

typedef __typeof__((VT(16))0 > (VT(16))0) MASK16;  /* int16, long16 for double */
/* stride 1, up to 17 wide: the first and last taps of 16 windows hold all their columns */
#if SW == 1 && KW <= 17
#define NAN_ENDS 1
#else
#define NAN_ENDS 0
#endif

/* 16 elements of a row from column w as T lanes. NOTE: bfloat16 through a ushort16 pointer:
 * PoCL assembles vload16 of ushort from 8-byte loads (3x3 stride 1 pooling 10% slower) */
#ifdef DATA_BF16
#define STRIP_LOAD(r, w) as_float16(convert_uint16(*(__global const ushort16_a2*)((r) + (w))) << 16)
#else
#define STRIP_LOAD(r, w) ROW_LOAD(16, r, w)
#endif

#define LANES16 ((int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))

/* v's lanes moved up s lanes (lane i takes lane i - s; s < 0: down), -inf moved in. NOTE: s is
 * a constant once the tap loops unroll, and the shuffle one vpermt2ps */
ALWAYS_INLINE VT(16) shift16(const VT(16) v, const int s) {
  const int16 from = LANES16 - s;
  const int16 lane = ((from < 0) | (from > 15)) ? (int16)16 : from;
  return s == 0 ? v : shuffle2(v, (VT(16))(-INFINITY), CAT(convert_, UMASK(16))(lane));
}

/* Tap b of the 16 outputs of an edge strip of row r, columns outside the row -inf, loaded
 * inside it and moved by constant lane shifts: edge 1 the left strip (outputs 0 to 15, window
 * columns SW * i + b - PW), edge >= 2 the right one (its last output the row's last): stride 1
 * has OW = W + 2 * PW - KW + 1; stride 2's 2 * OW - W (W's parity, ceil_mode) is
 * 2 * PW - KW + edge - 1 (the kernel picks the edge that matches) */
ALWAYS_INLINE VT(16) edge_tap16(const Pool p, __global const DATA_T* r, const int b,
                                const int edge) {
  VT(16) even = 0, odd = 0;
  if (edge >= 2) {
    if (SW == 1) {
      const int e = b + 1 + PW - KW;  /* lane 15's column past W - 1 */
      return e <= 0 ? STRIP_LOAD(r, p.W - 16 + e) : shift16(STRIP_LOAD(r, p.W - 16), -e);
    }
    const int c = 2 * PW - KW + edge - 1 - PW + b;  /* lane i's column W - 32 + c + 2 * i */
    ROW_PAIRS(16, r, p.W - 32 + (min(c, 0) & ~1), even, odd);
    return shift16(c & 1 ? odd : even, c > 1 ? -(c / 2) : 0);
  }
  const int d = b - PW;
  if (SW == 1) return d >= 0 ? STRIP_LOAD(r, d) : shift16(STRIP_LOAD(r, 0), -d);
  ROW_PAIRS(16, r, max(d, 0) & ~1, even, odd);  /* column 2 * i + d: lane i - (1 - d) / 2 */
  return shift16(d & 1 ? odd : even, d < 0 ? (1 - d) / 2 : 0);
}

/* The largest of taps b < KW of the windows of 16 outputs from column w0 in input row h (or
 * -inf outside the input), and each one's tap b. exact: NaN-aware compares (the last NaN wins);
 * else ordered ones, with *nan marking the lanes that met a NaN, whose strip is then done
 * again exactly (NaN-aware compares took 1.6x the time of 16-bit 3x3 stride 1 pooling) */
ALWAYS_INLINE VT(16) row_max16(const Pool p, __global const DATA_T* xp, const OFF vxh,
                               const int h, const int w0, uchar16* tap, const int exact,
                               MASK16* nan, const int edge) {
  const int h_in = h >= 0 && h < p.H;
  __global const DATA_T* r = xp + clamp(h, 0, p.H - 1) * vxh;  /* no branch: masked below */
  VT(16) best = 0, first = 0, prev = 0, cols = 0, odd = 0;
  uchar16 pos = 0;  /* NOTE: taps in bytes, blended as bytes: 32-bit lanes cost 20% more */
  UNROLL for (int b = 0; b < KW; ++b) {
    if (edge) {
      cols = edge_tap16(p, r, b, edge);
    } else if (SW == 1) {
      cols = STRIP_LOAD(r, w0 + b);
    } else if ((b & 1) == 0) {
      ROW_PAIRS(16, r, w0 + b, cols, odd);
    } else {
      cols = odd;
    }
    /* NOTE: masked per tap, not once at the end: LLVM narrows an unmasked float16 tap's NaN
     * test to half, which x86 without AVX512-FP16 does lane by lane (PoCL: 6x slower) */
    cols = h_in ? cols : (VT(16))(-INFINITY);
    if (!exact) {  /* every column of the windows checked: the first and last taps, or pairs */
      if (NAN_ENDS) {
        if (b == KW - 1) *nan |= isunordered(first, cols);
      } else if (b & 1) {
        *nan |= isunordered(prev, cols);
      } else if (b == KW - 1) {
        *nan |= isunordered(cols, cols);
      }
    }
    prev = cols;
    if (b == 0) {  /* the first tap: no compare (against -inf it would lose only as -inf) */
      best = first = cols;
      continue;
    }
    const MASK16 take = exact ? (cols > best) | (cols != cols) : cols > best;
    best = take ? cols : best;
    pos = convert_char16(take) ? (uchar16)b : pos;
  }
  *tap = pos;
  return best;
}

/* row_max16 of one output (column w0 on, the taps outside the input masked), always exact */
ALWAYS_INLINE T row_max1(const Pool p, __global const DATA_T* xp, const OFF vxh, const int h,
                         const int w0, uchar* tap, const int exact, int* nan, const int edge) {
  __global const DATA_T* r = xp + clamp(h, 0, p.H - 1) * vxh;
  T best = -INFINITY;
  int pos = 0;
  UNROLL for (int b = 0; b < KW; ++b) {
    const int w = w0 + b;
    const T v = w >= 0 && w < p.W ? LD(DATA_T, r, w) : (T)-INFINITY;
    if (b == 0) {
      best = v;
      continue;
    }
    const int take = v > best || v != v;
    best = take ? v : best;
    pos = take ? b : pos;
  }
  *tap = pos;
  return h >= 0 && h < p.H ? best : (T)-INFINITY;
}

/* Outputs oh0 <= oh < oh1 of the strip of N (16 or 1) columns from ow: the row maxima m[a] of
 * the window's rows, shifted up SH rows an output. The first tap inside is the argmax when
 * every tap is -inf. Returns whether a lane met a NaN (not exact: do the strip again). */
#define MAX_STRIP(N, VN, IN, MASKN, TAKE_ARG, STORE, STORE_IDX, ANY, FIRST_COLS)                 \
  ALWAYS_INLINE int max_strip##N(const Pool p, __global const DATA_T* xp, const OFF vxh,         \
                                 const int oh0, const int oh1, const int ow,                     \
                                 __global DATA_T* yp, const OFF vyh, __global IDX_T* ip,         \
                                 const OFF vih, const int relu, const int with_idx,              \
                                 const int exact, const int edge) {                              \
    const int w0 = ow * SW - PW;                                                                 \
    VN m[KH];                                                                                    \
    IN t[KH];                                                                                    \
    MASKN nan = 0;                                                                               \
    UNROLL for (int a = 0; a < KH; ++a) m[a] = row_max##N(p, xp, vxh, oh0 * SH - PH + a, w0,     \
                                                          &t[a], exact, &nan, edge);             \
    for (int oh = oh0;;) {                                                                       \
      const int h0 = oh * SH - PH;                                                               \
      VN best = m[0];                                                                            \
      IN pos = (IN)(first_tap(h0, 1) * KW) + FIRST_COLS(w0, edge);                               \
      if (with_idx) pos = TAKE_ARG((m[0] > (VN)(-INFINITY)) | (m[0] != m[0])) ? t[0] : pos;      \
      UNROLL for (int a = 1; a < KH; ++a) {                                                      \
        const MASKN take = exact ? (m[a] > best) | (m[a] != m[a]) : m[a] > best;                 \
        best = take ? m[a] : best;                                                               \
        pos = TAKE_ARG(take) ? t[a] + (IN)(a * KW) : pos;                                        \
      }                                                                                          \
      if (relu) best = best < (VN)0 ? (VN)0 : best;                                              \
      STORE(yp + oh * vyh, ow, best);                                                            \
      if (with_idx) STORE_IDX(ip + oh * vih, ow, pos);                                           \
      if (++oh == oh1) return ANY(nan);                                                          \
      UNROLL for (int a = 0; a < KH; ++a) {                                                      \
        if (a + SH < KH) {                                                                       \
          m[a] = m[a + SH];                                                                      \
          t[a] = t[a + SH];                                                                      \
        } else {                                                                                 \
          m[a] = row_max##N(p, xp, vxh, oh * SH - PH + a, w0, &t[a], exact, &nan, edge);         \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
  }
#ifdef DATA_BF16
/* a max is one of the inputs (or relu's 0): exact in bf16, truncated without rounding (a NaN
 * keeps its bits) */
#define STORE16(r, w, v) (*(__global ushort16_a2*)((r) + (w)) = convert_ushort16(as_uint16(v) >> 16))
#else
#define STORE16(r, w, v) ROW_STORE(16, r, w, v)
#endif
#define STORE_IDX16(r, w, v) (*(__global IDX16_U*)((r) + (w)) = (v))
#define STORE1(r, w, v) ST(DATA_T, r, w, v)
#define STORE_IDX1(r, w, v) ((r)[w] = (IDX_T)(v))
/* Whether a lane of m is set. NOTE: halves or-ed, not any(), which PoCL compiles to a test of
 * each lane in turn */
inline int any16(const MASK16 m) {
  const __typeof__(m.lo) a = m.lo | m.hi;
  const __typeof__(a.lo) b = a.lo | a.hi;
  const __typeof__(b.lo) c = b.lo | b.hi;
  return (c.x | c.y) != 0;
}
#define NONE(nan) 0
/* each lane's first column inside (the left edge strip's lanes start at SW * i - PW) */
#define FIRST_COLS16(w0, edge) \
  ((edge) == 1 ? convert_uchar16(max((int16)PW - SW * LANES16, 0)) : (uchar16)0)
#define FIRST_COLS1(w0, edge) (uchar)first_tap(w0, 1)
MAX_STRIP(16, VT(16), uchar16, MASK16, convert_char16, STORE16, STORE_IDX16, any16, FIRST_COLS16)
MAX_STRIP(1, T, uchar, int, , STORE1, STORE_IDX1, NONE, FIRST_COLS1)

/* The last strip's first output: the last whose loads (SW * 16 elements from the last load's
 * column) stay inside the row; strips from `begin` cover [begin, last + 16), the last one
 * overlapping the one before (the launcher's strips_fit mirrors this) */
inline int last_strip(const Pool p, const int begin) {
  return min(inner_end(p, begin) - 16, (p.W + PW - LAST_LOAD) / SW - 16);
}

/* Strip `edge` (0 inside, 1 left, 2 right) from ow, done again NaN-aware where it met a NaN */
/* A strip done again NaN-aware: one copy, not inlined (the edge and the flags as arguments),
 * where inlined copies for every edge and flag doubled the build (PoCL, 3x3 stride 2: 4.4 s) */
__attribute__((noinline)) void max_strip16_nan(const Pool p, __global const DATA_T* xp,
                                               const OFF vxh, const int oh0, const int oh1,
                                               const int ow, __global DATA_T* yp, const OFF vyh,
                                               __global IDX_T* ip, const OFF vih, const int relu,
                                               const int with_idx, const int edge) {
  max_strip16(p, xp, vxh, oh0, oh1, ow, yp, vyh, ip, vih, relu, with_idx, 1, edge);
}

#define STRIP16(ow, edge)                                                                      \
  {                                                                                            \
    if (max_strip16(p, xp, vxh, oh0, oh1, ow, yp, vyh, ip, vih, relu, with_idx, 0, edge))      \
      max_strip16_nan(p, xp, vxh, oh0, oh1, ow, yp, vyh, ip, vih, relu, with_idx, edge);       \
  }

/* The band's outputs by strips of 16 columns: the edges' (outputs 0 to 15 and the last 16,
 * their columns outside the row masked by lane shifts), then the inside's between, at
 * multiples of 16 (whole cache lines of y) but the first and the last (which may overlap the
 * one before: rewritten with the same values) */
ALWAYS_INLINE void max_band(const Pool p, __global const DATA_T* xp, const OFF vxh,
                            const int oh0, const int oh1, __global DATA_T* yp, const OFF vyh,
                            __global IDX_T* ip, const OFF vih, const int relu,
                            const int with_idx) {
  const int begin = inner_begin(p), last = last_strip(p, begin);
  int from = begin, to = last + 16;  /* the outputs left to the inside's strips */
  if (begin > 0) {
    STRIP16(0, 1)
    from = 16;
  }
  if (to < p.OW) {
    /* stride 2: 3 - (W + 2 * PW - KW) % 2 + 2 * (one more output of ceil_mode): 2, 3 or 4 */
    const int edge = SW == 1 ? 2 : 2 * p.OW - p.W - (2 * PW - KW + 1) + 2;
    if (SW == 1 || p.W >= 34 + KW) {
      if (edge == 2) STRIP16(p.OW - 16, 2)
      else if (edge == 3) STRIP16(p.OW - 16, 3)
      else STRIP16(p.OW - 16, 4)
      to = p.OW - 16;
    } else {
      for (int ow = to; ow < p.OW; ++ow)
        max_strip1(p, xp, vxh, oh0, oh1, ow, yp, vyh, ip, vih, relu, with_idx, 1, 0);
    }
  }
  if (from >= to) return;
  for (int ow = min(from, last);; ow = min((ow + 16) & ~15, to - 16)) {
    STRIP16(ow, 0)
    if (ow >= to - 16) break;
  }
}

/* Work-item i takes output rows [band * (i % bands), + band) of plane i / bands; with_idx
 * and relu as separate inlined copies, so the step without the argmax computes none */
__kernel void max_pool2d_fwd_strips(const Pool p, const int flags, const int band,
                                    __global const DATA_T* x, const View4 vx, __global DATA_T* y,
                                    const View4 vy, __global IDX_T* idx, const View4 vi) {
  const int bands = (p.OH + band - 1) / band, i = get_global_id(0);
  if (i >= p.N * p.C * bands) return;
  const Pos q = {i / bands / p.C, i / bands % p.C, 0, 0};
  const int oh0 = i % bands * band, oh1 = min(oh0 + band, p.OH);
  __global const DATA_T* xp = x + plane(vx, q);
  __global DATA_T* yp = y + plane(vy, q);
  __global IDX_T* ip = idx + plane(vi, q);
  const int relu = flags & POOL_RELU;
  if (flags & POOL_IDX)
    max_band(p, xp, vx.h, oh0, oh1, yp, vy.h, ip, vi.h, relu, 1);
  else
    max_band(p, xp, vx.h, oh0, oh1, yp, vy.h, ip, vi.h, relu, 0);
}
