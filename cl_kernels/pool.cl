/*
 * pool.cl: 2-d pooling over NCHW tensors: max (with its argmax) and average, forward and
 * backward, deterministic (no atomics: the result does not depend on scheduling); the adaptive
 * kernels (pool_adaptive.cl) and the strips form of max (pool_strips.cl) are built appended.
 *
 * Layout: a tensor is an N x C x H x W view: an element offset and one stride per dim (View4,
 * in elements, any values: channels_last and sliced inputs read in place). max_pool2d keeps
 * the argmax of an output as its tap a * KW + b within the window (IDX_T: one byte for windows
 * of up to 255 taps, where torch's int64 h * W + w takes eight), or IDX_NONE for a window with
 * no tap inside the input; max_pool2d_indices turns taps into torch's h * W + w (int64) and
 * max_pool2d_taps back. adaptive_max_pool2d's argmax is the int h * W + w.
 *
 * Two forms of the max and avg kernels; the launcher picks one per device kind:
 *   items   one work-item per element written (GPUs, and channels_last outputs forward on CPUs):
 *           a 3-d range over the tensor written, (W, H, N * C), or (C, W, N * H) when the
 *           argument c_last is set, so neighbouring work-items write neighbouring memory.
 *           Backward, an input gathers from the outputs whose window can hold it.
 *   rows    (suffix _rows / _planes; CPUs) one work-item per output row (n, c, oh) forward, and
 *           per (n, c) plane backward: the plane's work-item zeroes its plane of gx and adds
 *           each output's gradient to its window in (oh, ow) order, as torch's CPU kernels do.
 *           It runs in cache and needs no window search; on PoCL it beats the items form,
 *           whose strided gathers cost more than a work-item walking memory in order.
 * The adaptive kernels have the items form only.
 *
 * Window rules (torch's): output oh of max_pool reads rows oh * sh - ph + a * dh, a < kh, that
 * lie inside the input (padding never wins); ties keep the first, and NaN beats every number
 * (the window's last NaN gives the argmax). avg_pool sums the rows [oh * sh - ph,
 * oh * sh - ph + kh) inside the input and divides by `divisor` when it is nonzero, else by the
 * window's size clipped to the padded input (include_pad) or to the input; a window wholly in
 * the padding gives 0. adaptive_avg_pool averages rows [floor(oh * H / OH),
 * ceil((oh + 1) * H / OH)) (and the columns likewise); adaptive_max_pool takes their largest,
 * by max_pool's rules.
 *
 * Kernels: max_pool2d_fwd, max_pool2d_fwd_rows, max_pool2d_bwd, max_pool2d_bwd_planes,
 *          max_pool2d_bwd_ring, max_pool2d_indices, max_pool2d_taps,
 *          avg_pool2d_fwd, avg_pool2d_fwd_rows, avg_pool2d_bwd, avg_pool2d_bwd_planes,
 *          avg_pool2d_bwd_ring.
 * Build options:
 *   T        data type (float or double)
 *   DATA_T   the tensors' storage type (default T; half or bf16 with T float, through
 *            common.cl's LD/ST and, in VECTOR_ROWS, vectors of 4, 8 and 16 (ROW_LOAD, ROW_STORE,
 *            ROW_PAIRS); DATA_16 then defined, and DATA_BF16 for bf16
 *   HALF_VECTORS  (half) convert through clang's __fp16 vectors, vectors and single elements
 *            (the launcher sets it on CPUs but Oclgrind, whose interpreter has no half
 *            conversions)
 *   KH, KW, SH, SW, PH, PW, DH, DW   (optional, all or none) the window geometry baked in:
 *            divisions by it become multiplies and the window loops of up to UNROLL_MAX_TAPS
 *            taps unroll to straight code.
 *            Without them the kernels read it from their Pool argument (one build serves all).
 *   FORM_ROWS or FORM_ITEMS   with the geometry: the form whose kernels the build holds
 *   IDX_T    max_pool2d's argmax type: uchar (default), short or int, holding KH * KW - 1 and
 *            IDX_NONE, its all-ones value (255 for uchar, -1 otherwise)
 *   OFF      the type of element offsets and of View4's fields: long (default), or int when every
 *            buffer of the launch holds fewer than 2^31 elements (GPUs do 64-bit multiplies in
 *            several instructions, and the window's address arithmetic bounds these kernels)
 * Kernel flags (arguments, to keep builds few): c_last (NHWC work order), with_idx
 * (adaptive_max_pool2d forward also writes the argmax), flags of max_pool2d forward: POOL_IDX (also write the argmax), POOL_RELU (store max(y, 0), NaN kept: relu of the
 * pooled output, whose argmax and gradient mask are those of relu(max_pool2d(x))).
 * Tunables: none; the launcher picks work sizes. With the geometry baked, unit dilation and
 * stride 1 or 2, the rows form computes the inside of contiguous rows 8 outputs at a time
 * (VECTOR_ROWS, below). pool_strips.cl, built appended to this file, holds
 * max_pool2d_fwd_strips: windows that overlap down the columns, separably.
 */

#ifndef OFF
#define OFF long
#endif
#ifndef DATA_T
#define DATA_T T
#endif
#ifndef IDX_T
#define IDX_T uchar
#endif
#define IDX_NONE ((IDX_T)-1)
#include "common.cl"
#if defined(HALF_VECTORS) && defined(__clang__)
/* float16 elements through clang's __fp16 (one conversion), not common.cl's bit operations
 * (a dozen): the window loop's taps at the rows' edges (PoCL, one thread, float16 3x3 stride 1
 * padding 1 on 64 x 64 planes: 24.4 -> 21.0 ms, float32 18.9) */
typedef __fp16 H2 __attribute__((ext_vector_type(2)));
#undef LD_half
#define LD_half(p, i) \
  __builtin_convertvector(__builtin_bit_cast(H2, (ushort2)(((__global const ushort*)(p))[i], 0)), \
                          float2).x
#endif

#define POOL_IDX 1
#define POOL_RELU 2

typedef struct { OFF off, n, c, h, w; } View4;
typedef struct {
  int N, C, H, W, OH, OW;        /* input and output sizes */
  int kh, kw, sh, sw, ph, pw, dh, dw;
  int divisor, include_pad;      /* avg_pool only */
} Pool;

/* The window geometry: the -D constants, or the fields of the Pool argument, which every
 * function that uses these names calls `p`. */
#ifdef KH
#define BAKED 1
/* NOTE: windows of more taps keep their loops: unrolled, a 64 x 64 window took PoCL 44 s to
 * build (24 x 24: 2.3 s, with "loop not unrolled" warnings; 8 x 8: 0.4 s) */
#define UNROLL_MAX_TAPS 64
#if KH * KW <= UNROLL_MAX_TAPS
#define UNROLL _Pragma("unroll")
#else
#define UNROLL
#endif
#else
#define BAKED 0
#define UNROLL
#define KH p.kh
#define KW p.kw
#define SH p.sh
#define SW p.sw
#define PH p.ph
#define PW p.pw
#define DH p.dh
#define DW p.dw
#endif

/* The kernels a build holds: the generic build every kernel; a baked one the max and avg
 * kernels of the form named by the define FORM_ROWS or FORM_ITEMS. NOTE: few kernels per build,
 * as PoCL compiles each kernel of a program (0.1-0.3 s) when its binary is cached. */
#if !BAKED
#define FORM_ITEMS
#define FORM_ROWS
#endif

/* NOTE: a helper called inside a loop must be inlined for the window loops to unroll into the
 * caller; LLVM declines to on its own for the larger ones. */
#define ALWAYS_INLINE __attribute__((always_inline)) inline

/* An element (n, c, y, x) of an N x C x Y x X tensor. NOTE: scalars, not an int4: PoCL
 * vectorizes a work-group's loop over work-items, and LLVM cannot widen vector values. */
typedef struct { int n, c, y, x; } Pos;

/* This work-item's element of the N x C x Y x X tensor it walks (items form), and whether it
 * lies inside: only the outermost index needs a division. */
inline int element(const int N, const int C, const int Y, const int X, const int c_last,
                   Pos* q) {
  const int i0 = get_global_id(0), i1 = get_global_id(1), i2 = get_global_id(2);
  if (c_last) {
    q->n = i2 / Y;
    q->c = i0;
    q->y = i2 % Y;
    q->x = i1;
    return i0 < C && i1 < X && i2 < N * Y;
  }
  q->n = i2 / C;
  q->c = i2 % C;
  q->y = i1;
  q->x = i0;
  return i0 < X && i1 < Y && i2 < N * C;
}

/* This work-item's output row (n, c, oh) of an N x C x OH x OW tensor (rows form), x = 0. */
inline int row_of(const Pool p, Pos* q) {
  const int i = get_global_id(0);
  q->n = i / p.OH / p.C;
  q->c = i / p.OH % p.C;
  q->y = i % p.OH;
  q->x = 0;
  return i < p.N * p.C * p.OH;
}

inline OFF plane(const View4 v, const Pos q) { return v.off + q.n * v.n + q.c * v.c; }

inline OFF at(const View4 v, const Pos q) { return plane(v, q) + q.y * v.h + q.x * v.w; }

/* The input at (h, w) of the plane of x at base, or `pad` outside the input. Away from the
 * `edge` columns (w known inside) the load is unconditional, from a row clamped into the
 * input: the rows form's loop over ow then vectorizes on PoCL (max_pool2d 3x3 stride 1
 * forward 3x faster). */
ALWAYS_INLINE T tap(const Pool p, __global const DATA_T* x, const View4 vx, const OFF base,
                    const int h, const int w, const int edge, const T pad) {
  const int h_in = h >= 0 && h < p.H;
  if (edge) return (h_in && w >= 0 && w < p.W) ? LD(DATA_T, x, base + h * vx.h + w * vx.w) : pad;
  const T v = LD(DATA_T, x, base + clamp(h, 0, p.H - 1) * vx.h + w * vx.w);
  return h_in ? v : pad;
}

/* The outputs inner_begin <= ow < inner_end of a row have all their window's columns inside
 * the input. */
inline int inner_begin(const Pool p) { return min((PW + SW - 1) / SW, p.OW); }

inline int inner_end(const Pool p, const int begin) {
  const int last = p.W - 1 + PW - (KW - 1) * DW;  /* the last window start inside, + PW */
  return clamp(last < 0 ? 0 : last / SW + 1, begin, p.OW);
}

/* ---- max ------------------------------------------------------------------------------------ */

/* The first tap a >= 0 of a window starting at s0 (step d) that lands at or after 0. */
inline int first_tap(const int s0, const int d) { return s0 < 0 ? (-s0 + d - 1) / d : 0; }

/* Whether a window starting at s0 (step d, k taps) has a tap in [0, n). A max-pool output
 * whose window has none (possible with dilation) gives -inf and an argmax that is no tap of it
 * (torch's: the first row and column past the padding, which may lie outside the input). */
inline int has_tap(const int s0, const int d, const int k, const int n) {
  const int a0 = first_tap(s0, d);
  return a0 < k && s0 + a0 * d < n;
}

/* The largest tap of output (oh, ow)'s window in the plane of x at base, and that tap
 * a * KW + b (IDX_NONE when the window has no tap inside the input). `edge` says whether the
 * window's columns may leave the input; see inner_begin. */
ALWAYS_INLINE T max_window(const Pool p, __global const DATA_T* x, const View4 vx, const OFF base,
                           const int oh, const int ow, const int edge, int* arg) {
  const int h0 = oh * SH - PH, w0 = ow * SW - PW;
  T best = -INFINITY;
  /* the first tap inside: when none beats -inf */
  int pos = has_tap(h0, DH, KH, p.H) && has_tap(w0, DW, KW, p.W)
                ? first_tap(h0, DH) * KW + first_tap(w0, DW) : -1;
  UNROLL for (int a = 0; a < KH; ++a) {
    const int h = h0 + a * DH;
    UNROLL for (int b = 0; b < KW; ++b) {
      const int w = w0 + b * DW;
      const T v = tap(p, x, vx, base, h, w, edge, -INFINITY);
      /* as torch: the first largest number, or the last NaN. NOTE: v != v, not isnan(v),
       * which PoCL compiles to slower code here (max_pool2d forward 1.8x slower) */
      const int take = v > best || v != v;
      best = take ? v : best;
      pos = take ? a * KW + b : pos;
    }
  }
  *arg = pos;
  return best;
}

#ifdef FORM_ITEMS
__kernel void max_pool2d_fwd(const Pool p, const int c_last, const int flags,
                             __global const DATA_T* x, const View4 vx, __global DATA_T* y,
                             const View4 vy,
                             __global IDX_T* idx, const View4 vi) {
  Pos q;
  if (!element(p.N, p.C, p.OH, p.OW, c_last, &q)) return;
  int arg;
  const T v = max_window(p, x, vx, plane(vx, q), q.y, q.x, 1, &arg);
  ST(DATA_T, y, at(vy, q), (flags & POOL_RELU) && v < (T)0 ? (T)0 : v);
  if (flags & POOL_IDX) idx[at(vi, q)] = (IDX_T)arg;
}
#endif

/* NOTE: nested: unbaked, SW and DW are expressions */
#if defined(FORM_ROWS) && BAKED
#if DW == 1 && (SW == 1 || SW == 2)
#define VECTOR_ROWS 1
#endif
#endif
#ifndef VECTOR_ROWS
#define VECTOR_ROWS 0
#endif

#if VECTOR_ROWS
/* VECTOR_ROWS: with the geometry baked, unit dilation and stride 1 or 2, the inside of a row
 * (see inner_begin) is computed 16 outputs at a time, then 8, then 4, from vector loads of the
 * window's rows (stride 2: two loads, their even or odd lanes), when x's, y's and idx's rows
 * are contiguous: PoCL did not vectorize the scalar loop's strided taps (max_pool2d ~1 Gtap/s
 * on 2 cores). 16-bit rows convert whole vectors (ROW_LOAD, ROW_PAIRS). Measured on PoCL, 2x2
 * stride 2, 16-bit: called as a function (not inlined) these loops ran at half the speed
 * (4.5 ms against 2.1 of CPU time for 16M inputs), and 16 outputs a step (512-bit vectors)
 * beat 8 by 10-25%. */
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
/* NOTE: vector types aligned like their elements: rows start anywhere */
typedef CAT(T, 4) __attribute__((aligned(sizeof(T)))) VT4_U;
typedef CAT(T, 8) __attribute__((aligned(sizeof(T)))) VT8_U;
typedef CAT(T, 16) __attribute__((aligned(sizeof(T)))) VT16_U;
typedef CAT(IDX_T, 4) __attribute__((aligned(sizeof(IDX_T)))) IDX4_U;
typedef CAT(IDX_T, 8) __attribute__((aligned(sizeof(IDX_T)))) IDX8_U;
typedef CAT(IDX_T, 16) __attribute__((aligned(sizeof(IDX_T)))) IDX16_U;
/* A window's last load starts at its column LAST_LOAD (stride 2: loads at even taps) */
#if SW == 1
#define LAST_LOAD (KW - 1)
#else
#define LAST_LOAD ((KW - 1) & ~1)
#endif
#define VT(N) CAT(T, N)
#define CONVERT_IDX(N) CAT(convert_, CAT(IDX_T, N))
/* N elements of a row from column w as T lanes, and N outputs stored */
#ifdef DATA_16
#if defined(HALF_VECTORS) && defined(__clang__)
/* float16 through clang's __fp16 vectors: one conversion of the whole vector each way, where
 * PoCL compiles vload_halfN and vstore_halfN_rte to 8-wide ones, an extract and an insert */
typedef __fp16 H4 __attribute__((ext_vector_type(4)));
typedef __fp16 H8 __attribute__((ext_vector_type(8)));
typedef __fp16 H16 __attribute__((ext_vector_type(16)));
typedef ushort4 __attribute__((aligned(2))) US4_U;
typedef ushort8 __attribute__((aligned(2))) US8_U;
typedef ushort16 __attribute__((aligned(2))) US16_U;
#define HALF_BITS(N, b) __builtin_convertvector(__builtin_bit_cast(CAT(H, N), b), CAT(float, N))
#define ROW_LOAD(N, r, w) HALF_BITS(N, *(__global const CAT(CAT(US, N), _U)*)((r) + (w)))
#define ROW_STORE(N, r, w, v)                                                                \
  (*(__global CAT(CAT(US, N), _U)*)((r) + (w)) =                                             \
       __builtin_bit_cast(CAT(ushort, N), __builtin_convertvector(v, CAT(H, N))))
#else
#define HALF_BITS(N, b) CAT(vload_half, N)(0, (const __private half*)&(b))
#define ROW_LOAD(N, r, w) CAT(VLD, N)(DATA_T, r, w)
#define ROW_STORE(N, r, w, v) CAT(VST, N)(DATA_T, r, w, v)
#endif
/* 2N elements of a row from column w: the even ones to `even`, the odd ones to `odd`, split as
 * 16-bit patterns (the halves of N 32-bit words) before they are converted: the conversions of
 * 2N elements and shuffles of float vectors they replace cost more than the loads (float16
 * 2x2 stride 2 pooling: PoCL's 8-wide conversions took 8 shuffles a step) */
typedef uint4 __attribute__((aligned(2))) U4_U;
typedef uint8 __attribute__((aligned(2))) U8_U;
typedef uint16 __attribute__((aligned(2))) U16_U;
#define ROW_WORDS(N, r, w) (*(__global const CAT(CAT(U, N), _U)*)((r) + (w)))
#ifdef DATA_BF16
#define ROW_PAIRS(N, r, w, even, odd)                                 \
  {                                                                  \
    const CAT(uint, N) u_ = ROW_WORDS(N, r, w);                      \
    even = CAT(as_float, N)(u_ << 16);                               \
    odd = CAT(as_float, N)(u_ & 0xffff0000u);                        \
  }
#else
#define ROW_PAIRS(N, r, w, even, odd)                                 \
  {                                                                  \
    const CAT(uint, N) u_ = ROW_WORDS(N, r, w);                      \
    const CAT(ushort, N) e_ = CAT(convert_ushort, N)(u_);            \
    const CAT(ushort, N) o_ = CAT(convert_ushort, N)(u_ >> 16);      \
    even = HALF_BITS(N, e_);                                         \
    odd = HALF_BITS(N, o_);                                          \
  }
#endif
#else
#define ROW_LOAD(N, r, w) (*(__global const CAT(CAT(VT, N), _U)*)((r) + (w)))
#define ROW_STORE(N, r, w, v) (*(__global CAT(CAT(VT, N), _U)*)((r) + (w)) = (v))
/* 2N elements of a row from column w: two loads, their even lanes and their odd lanes */
#define ROW_PAIRS(N, r, w, even, odd)                                 \
  {                                                                  \
    const VT(N) lo_ = ROW_LOAD(N, r, w), hi_ = ROW_LOAD(N, r, (w) + N); \
    even = shuffle2(lo_, hi_, (UMASK(N))CAT(EVEN, N));               \
    odd = shuffle2(lo_, hi_, (UMASK(N))CAT(ODD, N));                 \
  }
#endif

/* max_row_vectors<N>: the outputs ow .. of the inside span [ow, end) of row oh, N at a time
 * while the widest load (SW * N elements from the last tap's column) stays inside the row;
 * returns the first output left. Tap b's N columns: one load (stride 1), or at even b two
 * loads whose even lanes are tap b's and odd lanes tap b + 1's. The first largest tap wins,
 * or the last NaN, as max_window. */
#define MAX_ROW_VECTORS(N)                                                                        \
  ALWAYS_INLINE int max_row_vectors##N(                                                          \
      const Pool p, __global const DATA_T* x, const OFF base, const int oh, int ow,               \
      const int end, const OFF vxh, __global DATA_T* yrow, __global IDX_T* irow,                 \
      const int flags) {                                                                          \
    const int h0 = oh * SH - PH;                                                                  \
    /* the first tap inside (its columns all are): the argmax if none wins */                     \
    const int first = has_tap(h0, DH, KH, p.H) ? first_tap(h0, DH) * KW : -1;                     \
    for (; ow + N <= end && ow * SW - PW + LAST_LOAD + SW * N <= p.W; ow += N) {                  \
      const int w0 = ow * SW - PW;                                                                \
      VT(N) best = (VT(N))(-INFINITY);                                                            \
      int##N pos = (int##N)first;                                                                 \
      UNROLL for (int a = 0; a < KH; ++a) {                                                       \
        const int h = h0 + a * DH;                                                                \
        const int h_in = h >= 0 && h < p.H;                                                       \
        /* loaded from a row clamped into the input: no branch per tap */                         \
        __global const DATA_T* r = x + base + clamp(h, 0, p.H - 1) * vxh;                         \
        VT(N) cols = 0, odd = 0;                                                                  \
        UNROLL for (int b = 0; b < KW; ++b) {                                                     \
          if (SW == 1) {                                                                          \
            cols = ROW_LOAD(N, r, w0 + b);                                                        \
          } else if ((b & 1) == 0) {                                                              \
            ROW_PAIRS(N, r, w0 + b, cols, odd);                                                   \
          } else {                                                                                \
            cols = odd;                                                                           \
          }                                                                                       \
          const VT(N) v = h_in ? cols : (VT(N))(-INFINITY);                                       \
          const __typeof__(v > v) take = (v > best) | (v != v); /* intN, longN for double */      \
          best = take ? v : best;                                                                 \
          pos = convert_int##N(take) ? (int##N)(a * KW + b) : pos;                                \
        }                                                                                         \
      }                                                                                           \
      if (flags & POOL_RELU) best = best < (VT(N))0 ? (VT(N))0 : best;                            \
      ROW_STORE(N, yrow, ow, best);                                                               \
      if (flags & POOL_IDX) *(__global IDX##N##_U*)(irow + ow) = CONVERT_IDX(N)(pos);             \
    }                                                                                             \
    return ow;                                                                                    \
  }
/* shuffle2's masks of the even and odd lanes of two N-vectors (unsigned, T's size). NOTE:
 * shuffle2, not (lo.even, hi.even): Oclgrind's uninitialized-value checks crash on the
 * latter's concatenation in unoptimized builds. */
#define U_float uint
#define U_double ulong
#define UMASK(N) CAT(CAT(U_, T), N)
#define EVEN4 (0, 2, 4, 6)
#define ODD4 (1, 3, 5, 7)
#define EVEN8 (0, 2, 4, 6, 8, 10, 12, 14)
#define ODD8 (1, 3, 5, 7, 9, 11, 13, 15)
#define EVEN16 (0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#define ODD16 (1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)
MAX_ROW_VECTORS(16)
MAX_ROW_VECTORS(8)
MAX_ROW_VECTORS(4)
#endif

#ifdef FORM_ROWS
/* Output row q of max_pool2d forward (rows form) */
ALWAYS_INLINE void max_row(const Pool p, const int flags, __global const DATA_T* x,
                           const View4 vx, __global DATA_T* y, const View4 vy, __global IDX_T* idx,
                           const View4 vi, const Pos q) {
  const OFF base = plane(vx, q), yr = at(vy, q), ir = at(vi, q);
  const int begin = inner_begin(p), end = inner_end(p, begin);
#if VECTOR_ROWS
  const int vector_views = vx.w == 1 && vy.w == 1 && (!(flags & POOL_IDX) || vi.w == 1);
#ifdef DATA_16
  /* a 16-bit row without edges that steps of 16 cover (2x2 stride 2 of 64 columns): no spans,
   * no narrower steps. Their setup took a third of 16-bit 2x2 pooling's time (PoCL, one
   * thread, 64 x 64 planes: float16 2.1 -> 1.7 ms). float32 rows gained nothing measurable on
   * PoCL and ran 20% slower on Intel's runtime (1.5 -> 1.8 ms) */
  if (begin == 0 && end == p.OW && p.OW % 16 == 0 && p.OW * SW - PW + LAST_LOAD <= p.W &&
      vector_views) {
    max_row_vectors16(p, x, base, q.y, 0, end, vx.h, y + yr, idx + ir, flags);
    return;
  }
#endif
#endif
  /* three spans of the row: left edge, inside (part 1, no column masks), right edge */
  UNROLL for (int part = 0; part < 3; ++part) {
    int from = part == 0 ? 0 : part == 1 ? begin : end;
    const int to = part == 0 ? begin : part == 1 ? end : p.OW;
#if VECTOR_ROWS
    if (part == 1 && vector_views)
    {  /* 16 outputs a step, then 8, then 4, then the last 4 again if that covers the rest */
      const int first = from;
      from = max_row_vectors16(p, x, base, q.y, from, to, vx.h, y + yr, idx + ir, flags);
      from = max_row_vectors8(p, x, base, q.y, from, to, vx.h, y + yr, idx + ir, flags);
      from = max_row_vectors4(p, x, base, q.y, from, to, vx.h, y + yr, idx + ir, flags);
      if (from < to && to - 4 >= first)  /* rewrites up to 3 outputs with the same values */
        from = max_row_vectors4(p, x, base, q.y, to - 4, to, vx.h, y + yr, idx + ir, flags);
    }
#endif
    for (int ow = from; ow < to; ++ow) {
      int arg;
      const T v = max_window(p, x, vx, base, q.y, ow, part != 1, &arg);
      ST(DATA_T, y, yr + ow * vy.w, (flags & POOL_RELU) && v < (T)0 ? (T)0 : v);
      if (flags & POOL_IDX) idx[ir + ow * vi.w] = (IDX_T)arg;
    }
  }
}

/* A work-item takes rows_per_item consecutive output rows (short rows: the per-row setup and
 * the divisions that find a row cost as much as a row of 32 outputs) */
__kernel void max_pool2d_fwd_rows(const Pool p, const int flags, const int rows_per_item,
                                  __global const DATA_T* x, const View4 vx, __global DATA_T* y,
                                  const View4 vy, __global IDX_T* idx, const View4 vi) {
  const long first = (long)get_global_id(0) * rows_per_item, rows = (long)p.N * p.C * p.OH;
  if (first >= rows) return;
  Pos q = {(int)(first / p.OH / p.C), (int)(first / p.OH % p.C), (int)(first % p.OH), 0};
  for (int r = 0; r < rows_per_item && first + r < rows; ++r) {
    max_row(p, flags, x, vx, y, vy, idx, vi, q);
    if (++q.y == p.OH) {  /* the next row: the next plane's first after the last */
      q.y = 0;
      if (++q.c == p.C) {
        q.c = 0;
        ++q.n;
      }
    }
  }
}
#endif

/* Output o's window (start o * s - pad, step d, k taps) spans position h when
 * 0 <= h + pad - o * s <= (k - 1) * d. At most CANDIDATES(k, s, d) outputs do, the last being
 * o = (h + pad) / s: the items form's backward walks that many with masks (a fixed trip count
 * once the geometry is baked) instead of computing the range with divisions. */
#define CANDIDATES(k, s, d) (((k) - 1) * (d) / (s) + 1)

#ifdef FORM_ITEMS
/* Input (h, w) gets g of every output whose argmax tap is (h, w), summed in (oh, ow) order. A
 * window with no tap inside (dilation; IDX_NONE) sends none (torch's CPU backward sends it to
 * its index, which may name an input of the next row), as in max_pool2d_bwd_planes. */
__kernel void max_pool2d_bwd(const Pool p, const int c_last,
                             __global const DATA_T* g, const View4 vg, __global const IDX_T* idx,
                             const View4 vi, __global DATA_T* gx, const View4 vgx) {
  Pos q;
  if (!element(p.N, p.C, p.H, p.W, c_last, &q)) return;
  const int h = q.y, w = q.x;
  const int oh0 = (h + PH) / SH - (CANDIDATES(KH, SH, DH) - 1);
  const int ow0 = (w + PW) / SW - (CANDIDATES(KW, SW, DW) - 1);
  const OFF gb = plane(vg, q), ib = plane(vi, q);
  /* NOTE: every candidate's argmax and gradient are loaded, from clamped positions, before any
   * is tested: the loads are then in flight together, where a load behind each test waited for
   * the one before (H200: GoogLeNet's pool1 backward 0.91 -> 0.75 ms) */
  T acc = 0;
  UNROLL for (int i = 0; i < CANDIDATES(KH, SH, DH); ++i) {
    const int oh = oh0 + i, ohc = clamp(oh, 0, p.OH - 1);
    UNROLL for (int j = 0; j < CANDIDATES(KW, SW, DW); ++j) {
      const int ow = ow0 + j, owc = clamp(ow, 0, p.OW - 1);
      const int arg = idx[ib + ohc * vi.h + owc * vi.w];
      const T v = LD(DATA_T, g, gb + ohc * vg.h + owc * vg.w);
      const int ok = oh == ohc && ow == owc && arg != IDX_NONE
                     && ohc * SH - PH + arg / KW * DH == h && owc * SW - PW + arg % KW * DW == w;
      acc += ok ? v : (T)0;
    }
  }
  ST(DATA_T, gx, at(vgx, q), acc);
}
#endif

#ifdef FORM_ROWS
/* gx is dense in its layout: the element h * W + w of a plane is at (h * W + w) * vgx.w. An
 * output whose window holds no input (IDX_NONE) is skipped. */
__kernel void max_pool2d_bwd_planes(const Pool p, __global const DATA_T* g, const View4 vg,
                                    __global const IDX_T* idx, const View4 vi, __global DATA_T* gx,
                                    const View4 vgx) {
  const int i = get_global_id(0);
  if (i >= p.N * p.C) return;
  const Pos q = {i / p.C, i % p.C, 0, 0};
  __global DATA_T* out = gx + plane(vgx, q);
  for (int e = 0; e < p.H * p.W; ++e) ST(DATA_T, out, e * vgx.w, 0);
  const OFF gb = plane(vg, q), ib = plane(vi, q);
  for (int oh = 0; oh < p.OH; ++oh) {
    for (int ow = 0; ow < p.OW; ++ow) {
      const int arg = idx[ib + oh * vi.h + ow * vi.w];
      if (arg == IDX_NONE) continue;
      const int h = oh * SH - PH + arg / KW * DH, w = ow * SW - PW + arg % KW * DW;
      const OFF e = (OFF)(h * p.W + w) * vgx.w;
      ST(DATA_T, out, e, LD(DATA_T, out, e) + LD(DATA_T, g, gb + oh * vg.h + ow * vg.w));
    }
  }
}

/* The ring forms (suffix _ring) of max and avg pooling backward, for 16-bit gradients of
 * overlapping windows, summed in float: the plane's outputs in (oh, ow) order add into a ring
 * of float rows (acc: RING_ROWS rows of W per plane, plane i's at acc + i * RING_ROWS * W),
 * and an input row is rounded into gx once no later window holds it. The same sums in the
 * same order as the items form, which gathers per input (on PoCL 4-15x slower than float32's
 * planes). */
#define RING_ROWS ((KH - 1) * DH + 1)

/* Plane i's ring, zeroed */
inline __global float* ring_of(const Pool p, __global float* acc, const int i) {
  __global float* ring = acc + (long)i * RING_ROWS * p.W;
  for (int e = 0; e < RING_ROWS * p.W; ++e) ring[e] = 0;
  return ring;
}

/* Input rows next .. upto - 1 rounded into the plane `out` of gx (dense, elements `step`
 * apart) and their ring rows zeroed; returns the next row left */
inline int flush_rows(const Pool p, __global float* ring, __global DATA_T* out, int next,
                      const int upto, const OFF step) {
  for (; next < upto; ++next) {
    __global float* row = ring + next % RING_ROWS * p.W;
    for (int w = 0; w < p.W; ++w) {
      ST(DATA_T, out, (OFF)(next * p.W + w) * step, row[w]);
      row[w] = 0;
    }
  }
  return next;
}

__kernel void max_pool2d_bwd_ring(const Pool p, __global const DATA_T* g, const View4 vg,
                                  __global const IDX_T* idx, const View4 vi, __global DATA_T* gx,
                                  const View4 vgx, __global float* acc) {
  const int i = get_global_id(0);
  if (i >= p.N * p.C) return;
  const Pos q = {i / p.C, i % p.C, 0, 0};
  __global DATA_T* out = gx + plane(vgx, q);
  __global float* ring = ring_of(p, acc, i);
  const OFF gb = plane(vg, q), ib = plane(vi, q);
  int next = 0;  /* the first input row not yet rounded into gx */
  for (int oh = 0; oh < p.OH; ++oh) {
    const int h0 = oh * SH - PH;
    next = flush_rows(p, ring, out, next, min(h0, p.H), vgx.w);
    for (int ow = 0; ow < p.OW; ++ow) {
      const int arg = idx[ib + oh * vi.h + ow * vi.w];
      if (arg == IDX_NONE) continue;
      const int h = h0 + arg / KW * DH, w = ow * SW - PW + arg % KW * DW;
      ring[h % RING_ROWS * p.W + w] += LD(DATA_T, g, gb + oh * vg.h + ow * vg.w);
    }
  }
  flush_rows(p, ring, out, next, p.H, vgx.w);
}
#endif

/* ---- average -------------------------------------------------------------------------------- */

/* The divisor of output (oh, ow)'s window, and in *inside the number of its taps inside the
 * input. */
inline int avg_divisor(const Pool p, const int oh, const int ow, int* inside) {
  const int h0 = oh * SH - PH, w0 = ow * SW - PW;
  const int h1 = min(h0 + KH, p.H + PH), w1 = min(w0 + KW, p.W + PW);
  *inside = max(min(h1, p.H) - max(h0, 0), 0) * max(min(w1, p.W) - max(w0, 0), 0);
  return p.divisor ? p.divisor : (p.include_pad ? (h1 - h0) * (w1 - w0) : *inside);
}

/* Output (oh, ow) of avg_pool over the plane of x at base (`edge` as in max_window). */
ALWAYS_INLINE T avg_window(const Pool p, __global const DATA_T* x, const View4 vx, const OFF base,
                           const int oh, const int ow, const int edge) {
  const int h0 = oh * SH - PH, w0 = ow * SW - PW;
  T acc = 0;
  UNROLL for (int a = 0; a < KH; ++a) {
    const int h = h0 + a;
    T row = 0;  /* summed by rows: a float32 sum of a large window drifts (pool_adaptive.cl likewise) */
    UNROLL for (int b = 0; b < KW; ++b) {
      const int w = w0 + b;
      row += tap(p, x, vx, base, h, w, edge, 0);
    }
    acc += row;
  }
  int inside;
  const int div = avg_divisor(p, oh, ow, &inside);
  /* a window wholly in the padding: 0, as torch */
  return inside > 0 ? acc / (T)div : (T)0;
}

#ifdef FORM_ITEMS
__kernel void avg_pool2d_fwd(const Pool p, const int c_last,
                             __global const DATA_T* x, const View4 vx, __global DATA_T* y,
                             const View4 vy) {
  Pos q;
  if (!element(p.N, p.C, p.OH, p.OW, c_last, &q)) return;
  ST(DATA_T, y, at(vy, q), avg_window(p, x, vx, plane(vx, q), q.y, q.x, 1));
}
#endif

#ifdef FORM_ROWS
__kernel void avg_pool2d_fwd_rows(const Pool p, __global const DATA_T* x, const View4 vx,
                                  __global DATA_T* y, const View4 vy) {
  Pos q;
  if (!row_of(p, &q)) return;
  const OFF base = plane(vx, q), yr = at(vy, q);
  const int begin = inner_begin(p), end = inner_end(p, begin);
  UNROLL for (int part = 0; part < 3; ++part) {  /* as max_pool2d_fwd_rows */
    const int from = part == 0 ? 0 : part == 1 ? begin : end;
    const int to = part == 0 ? begin : part == 1 ? end : p.OW;
    for (int ow = from; ow < to; ++ow)
      ST(DATA_T, y, yr + ow * vy.w, avg_window(p, x, vx, base, q.y, ow, part != 1));
  }
}
#endif

#ifdef FORM_ITEMS
/* Whether output o (of n_out) of an avg_pool window of k taps holds the position at
 * t = h + pad - o * s. */
inline int holds(const int o, const int n_out, const int t, const int k) {
  return o >= 0 && o < n_out && t < k;
}

/* Input (h, w) gets g / divisor of every output whose window holds it. */
__kernel void avg_pool2d_bwd(const Pool p, const int c_last,
                             __global const DATA_T* g, const View4 vg, __global DATA_T* gx,
                             const View4 vgx) {
  Pos q;
  if (!element(p.N, p.C, p.H, p.W, c_last, &q)) return;
  const int h = q.y, w = q.x;
  const int oh0 = (h + PH) / SH - (CANDIDATES(KH, SH, 1) - 1);
  const int ow0 = (w + PW) / SW - (CANDIDATES(KW, SW, 1) - 1);
  const OFF gb = plane(vg, q);
  T acc = 0;
  UNROLL for (int i = 0; i < CANDIDATES(KH, SH, 1); ++i) {
    const int oh = oh0 + i;
    const int row = holds(oh, p.OH, h + PH - oh * SH, KH);
    UNROLL for (int j = 0; j < CANDIDATES(KW, SW, 1); ++j) {
      const int ow = ow0 + j;
      if (!(row && holds(ow, p.OW, w + PW - ow * SW, KW))) continue;
      int inside;
      acc += LD(DATA_T, g, gb + oh * vg.h + ow * vg.w) / (T)avg_divisor(p, oh, ow, &inside);
    }
  }
  ST(DATA_T, gx, at(vgx, q), acc);
}
#endif

#ifdef FORM_ROWS
/* gx is dense in its layout (see max_pool2d_bwd_planes). */
/* Output (oh, ow)'s gradient share: g over its window's divisor */
inline T avg_grad(const Pool p, __global const DATA_T* g, const View4 vg, const OFF gb,
                  const int oh, const int ow) {
  int inside;
  return LD(DATA_T, g, gb + oh * vg.h + ow * vg.w) / (T)avg_divisor(p, oh, ow, &inside);
}

/* STMT for each input (h, w) of output (oh, ow)'s window that lies inside the input */
#define AVG_TAPS(oh, ow, STMT)                                            \
  UNROLL for (int a = 0; a < KH; ++a) {                                   \
    const int h = (oh) * SH - PH + a;                                     \
    UNROLL for (int b = 0; b < KW; ++b) {                                 \
      const int w = (ow) * SW - PW + b;                                   \
      if (h >= 0 && h < p.H && w >= 0 && w < p.W) STMT                    \
    }                                                                     \
  }

__kernel void avg_pool2d_bwd_planes(const Pool p, __global const DATA_T* g, const View4 vg,
                                    __global DATA_T* gx, const View4 vgx) {
  const int i = get_global_id(0);
  if (i >= p.N * p.C) return;
  const Pos q = {i / p.C, i % p.C, 0, 0};
  __global DATA_T* out = gx + plane(vgx, q);
  for (int e = 0; e < p.H * p.W; ++e) ST(DATA_T, out, e * vgx.w, 0);
  const OFF gb = plane(vg, q);
  for (int oh = 0; oh < p.OH; ++oh) {
    for (int ow = 0; ow < p.OW; ++ow) {
      const T v = avg_grad(p, g, vg, gb, oh, ow);
      AVG_TAPS(oh, ow, {
        const OFF e = (h * p.W + w) * vgx.w;
        ST(DATA_T, out, e, LD(DATA_T, out, e) + v);
      })
    }
  }
}

/* avg_pool2d_bwd_planes in the ring form (see max_pool2d_bwd_ring); avg pooling has DH 1 */
__kernel void avg_pool2d_bwd_ring(const Pool p, __global const DATA_T* g, const View4 vg,
                                  __global DATA_T* gx, const View4 vgx, __global float* acc) {
  const int i = get_global_id(0);
  if (i >= p.N * p.C) return;
  const Pos q = {i / p.C, i % p.C, 0, 0};
  __global DATA_T* out = gx + plane(vgx, q);
  __global float* ring = ring_of(p, acc, i);
  const OFF gb = plane(vg, q);
  int next = 0;
  for (int oh = 0; oh < p.OH; ++oh) {
    const int h0 = oh * SH - PH;
    next = flush_rows(p, ring, out, next, min(h0, p.H), vgx.w);
    for (int ow = 0; ow < p.OW; ++ow) {
      const T v = avg_grad(p, g, vg, gb, oh, ow);
      AVG_TAPS(oh, ow, ring[h % RING_ROWS * p.W + w] += v;)
    }
  }
  flush_rows(p, ring, out, next, p.H, vgx.w);
}
#endif

#if !BAKED
/* ---- max_pool2d's argmax: window taps and torch's indices --------------------------------- */

/* torch's index h * W + w of each output's argmax tap; a window with no tap inside gets
 * torch's there: its first row and column past the padding (which may lie outside the input) */
__kernel void max_pool2d_indices(const Pool p, const int c_last, __global const IDX_T* idx,
                                 const View4 vi, __global long* out, const View4 vo) {
  Pos q;
  if (!element(p.N, p.C, p.OH, p.OW, c_last, &q)) return;
  const int h0 = q.y * SH - PH, w0 = q.x * SW - PW;
  const int arg = idx[at(vi, q)];
  const int a = arg == IDX_NONE ? first_tap(h0, DH) : arg / KW;
  const int b = arg == IDX_NONE ? first_tap(w0, DW) : arg % KW;
  out[at(vo, q)] = (long)(h0 + a * DH) * p.W + w0 + b * DW;
}

/* The tap of each output's window that torch's index h * W + w names, or IDX_NONE when it
 * names none (max_pool2d_with_indices_backward given indices of its own) */
__kernel void max_pool2d_taps(const Pool p, const int c_last, __global const long* in,
                              const View4 vin, __global IDX_T* idx, const View4 vi) {
  Pos q;
  if (!element(p.N, p.C, p.OH, p.OW, c_last, &q)) return;
  const long e = in[at(vin, q)];
  const int inside = e >= 0 && e < (long)p.H * p.W;
  const long h = inside ? e / p.W : 0, w = inside ? e % p.W : 0;
  const long dh = h - (q.y * SH - PH), dw = w - (q.x * SW - PW);
  const int tap = inside && dh >= 0 && dh % DH == 0 && dh / DH < KH && dw >= 0 && dw % DW == 0
                  && dw / DW < KW;
  idx[at(vi, q)] = tap ? (IDX_T)(dh / DH * KW + dw / DW) : IDX_NONE;
}
#endif
