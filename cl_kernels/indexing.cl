/*
 * indexing.cl: gathers and scatters through integer index tensors (advanced indexing,
 * index_select, gather, scatter, scatter_add, scatter_reduce), the index range check, and the
 * chunked passes behind nonzero and masked_scatter.
 *
 * Layout: every kernel walks one logical Shape of `nd` dims (nd <= MAX_DIMS of
 * common.cl) in row-major order; each operand is a View: an element offset and
 * one stride per dim, in elements (0 broadcasts, any sign), as in elementwise.cl. Index tensors
 * reach the data kernels as one contiguous long buffer holding K index tensors of nb elements
 * each, already wrapped into [0, size) and checked by normalize_index.
 *
 * Kernels, by family (each family is compiled only when its type option is defined):
 *   IDX_T   normalize_index  dst[i] = index value as long, + size when negative and `wrap`;
 *                            out-of-range values set *err (the launcher reads err back and
 *                            raises before any data kernel runs, so nothing is half-written)
 *           chunk_minmax     per chunk of `chunk` elements: min and max (one_hot's class count)
 *   T       index_gather     out[i] = data[base(i) + sum_k idx[k][j(i)] * adv_stride[k]]
 *           index_scatter    data[base(i) + sum_k idx[k][j(i)] * adv_stride[k]] = val[i]
 *                            with duplicate indices one of the values wins, unspecified which
 *                            (as torch's index_put_ and scatter_)
 *           masked_scatter_chunks  see nonzero below
 *   ACC_T   scatter_add_per_output, scatter_add_per_lane: see below
 *   NZ_T    count_nonzero_chunks, write_nonzero: see below
 *
 * scatter_add is deterministic, without atomics: out[.., idx[.., t, ..], ..] += src[.., t, ..].
 * The same kernels run scatter_reduce: `red` (a run-time argument, so one build per type serves
 * every reduction) picks +, *, max or min (max and min propagate NaN, as torch).
 * A "lane" is one position of the index with the scatter dim left out; lanes write disjoint
 * parts of out. Both kernels add a lane's values in increasing t, starting from out's old value,
 * so both give the same bits as a sequential loop (torch's CPU order):
 *   per_lane    one work-item per lane walks its L = index.size(dim) entries (L steps, no waste);
 *   per_output  one work-item per output element of the lanes scans its lane's L entries and
 *               sums those that point at it (size(dim) times the work, size(dim) times the
 *               parallelism: the launcher uses it only when size(dim) is small and lanes few).
 * When lanes are few and long (a 1-d scatter_add of a million entries), the launcher cuts each
 * lane into segments: the same kernels add the segments into zeroed partial sums (the segment
 * number is one more lane dim), and per_lane adds the partial sums into out in order. Still
 * deterministic (fixed segments, fixed order), though not the bits of one sequential loop
 * (the partials start from the reduction's identity).
 * index_put_ with accumulate runs per_lane too, with K index tensors: a lane is then a point of
 * the non-indexed dims, and t runs over the broadcast index positions.
 *
 * nonzero runs in two passes over chunks of `chunk` consecutive (row-major) elements, one
 * work-item per chunk and no barriers: count_nonzero_chunks counts each chunk; the host turns the
 * counts into exclusive prefix sums (it reads the total back anyway to size the result);
 * write_nonzero writes each nonzero's coordinates at out[row * row_stride + d * col_stride], so
 * one kernel serves the (nnz, nd) and the as_tuple (nd, nnz) layouts. masked_scatter counts a
 * bool mask's chunks the same way; masked_scatter_chunks then copies src[starts[g]], src[starts[g]
 * + 1], ... (contiguous) to the data elements of chunk g where the mask is set.
 *
 * Build options:
 *   IDX_T   int or long: the index tensor's type (normalize_index, chunk_minmax)
 *   T       uchar, ushort, uint or ulong by element size: gathers and scatters copy bits, so
 *           float32 and int32 (and float64 and int64) share one build
 *   ACC_T   the data's OpenCL type for scatter_add and scatter_reduce; ACC_BOOL when it is bool
 *           (stored as uchar 0/1: sum and max are logical or, prod and min logical and, as torch);
 *           ACC_FLOAT when it is floating. half and bf16 go through LD/ST and reduce in float:
 *           per_output rounds its result once, per_lane each step (it stores out every step;
 *           scatter_add and scatter_reduce's sums and products give it a float out instead)
 *   SRC_T   the source values' type (default ACC_T): 16-bit values scattered into float
 *   NZ_T    the type whose elements nonzero tests (bool as uchar; half and bf16 through LD)
 * Tunables: none; the launcher picks work sizes and the nonzero chunk length.
 */
#include "common.cl"

/* Element offsets of the row-major linear index i in one or three views of one shape. (Views go
 * by pointer: PoCL ran the gather twice as fast as with structs passed and returned by value.) */
inline long offset_of(long i, const int nd, const Shape* s, const View* v) {
  long o = v->offset;
  for (int k = nd - 1; k >= 0; --k) {
    o += (i % s->size[k]) * v->stride[k];
    i /= s->size[k];
  }
  return o;
}

inline void offsets3(long i, const int nd, const Shape* s, const View* va, const View* vb,
                     const View* vc, long* oa, long* ob, long* oc) {
  long a = va->offset, b = vb->offset, c = vc->offset;
  for (int k = nd - 1; k >= 0; --k) {
    const long x = i % s->size[k];
    i /= s->size[k];
    a += x * va->stride[k];
    b += x * vb->stride[k];
    c += x * vc->stride[k];
  }
  *oa = a;
  *ob = b;
  *oc = c;
}

/* A walk through consecutive row-major elements of a view: coordinates and element offset,
 * stepped without divisions (for the kernels that give each work-item a chunk). */
typedef struct { long c[MAX_DIMS]; long o; } Cursor;

inline void cursor_start(Cursor* p, long i, const int nd, const Shape* s, const View* v) {
  p->o = v->offset;
  for (int k = nd - 1; k >= 0; --k) {
    p->c[k] = i % s->size[k];
    i /= s->size[k];
    p->o += p->c[k] * v->stride[k];
  }
}

inline void cursor_next(Cursor* p, const int nd, const Shape* s, const View* v) {
  for (int k = nd - 1; k >= 0; --k) {
    p->o += v->stride[k];
    if (++p->c[k] < s->size[k]) return;
    p->o -= s->size[k] * v->stride[k];
    p->c[k] = 0;
  }
}

/* ---- index checks -------------------------------------------------------------------------- */
#ifdef IDX_T
__kernel void normalize_index(const long n, const int nd, const Shape shape,
                              __global const IDX_T* src, const View vs,
                              __global long* dst, const long dst_offset,
                              const long size, const int wrap, __global int* err) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long v = (long)src[offset_of(i, nd, &shape, &vs)];
  if (wrap && v < 0) v += size;
  if (v < 0 || v >= size) {
    *err = 1;  /* every failing work-item stores the same value: no atomics needed */
    v = 0;
  }
  dst[dst_offset + i] = v;
}

__kernel void chunk_minmax(const long n, const int nd, const Shape shape,
                           __global const IDX_T* src, const View vs, const long chunk,
                           __global long* out) {
  const long g = get_global_id(0);
  const long lo = g * chunk;
  if (lo >= n) return;
  const long hi = min(n, lo + chunk);
  long mn = LONG_MAX, mx = LONG_MIN;
  Cursor p;
  cursor_start(&p, lo, nd, &shape, &vs);
  for (long i = lo; i < hi; ++i, cursor_next(&p, nd, &shape, &vs)) {
    const long v = (long)src[p.o];
    mn = min(mn, v);
    mx = max(mx, v);
  }
  out[2 * g] = mn;
  out[2 * g + 1] = mx;
}
#endif

/* ---- gathers and scatters through index tensors -------------------------------------------- */
#ifdef T
__kernel void index_gather(const long n, const int nd, const Shape shape,
                           __global const T* data, const View vd,
                           __global T* out, const View vo,
                           __global const long* idx, const View vi,
                           const int k, const long nb, const Shape adv_stride) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long od, oo, oi;
  offsets3(i, nd, &shape, &vd, &vo, &vi, &od, &oo, &oi);
  for (int j = 0; j < k; ++j) od += idx[oi + j * nb] * adv_stride.size[j];
  out[oo] = data[od];
}

__kernel void index_scatter(const long n, const int nd, const Shape shape,
                            __global T* data, const View vd,
                            __global const T* val, const View vv,
                            __global const long* idx, const View vi,
                            const int k, const long nb, const Shape adv_stride) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long od, ov, oi;
  offsets3(i, nd, &shape, &vd, &vv, &vi, &od, &ov, &oi);
  for (int j = 0; j < k; ++j) od += idx[oi + j * nb] * adv_stride.size[j];
  data[od] = val[ov];
}

/* Shape: the data's (the mask broadcast to it, vm). */
__kernel void masked_scatter_chunks(const long n, const int nd, const Shape shape,
                                    __global const uchar* mask, const View vm,
                                    __global T* data, const View vd,
                                    __global const T* src, const long src_offset,
                                    const long chunk, __global const long* starts) {
  const long g = get_global_id(0);
  const long lo = g * chunk;
  if (lo >= n) return;
  const long hi = min(n, lo + chunk);
  long k = src_offset + starts[g];
  Cursor pm, pd;
  cursor_start(&pm, lo, nd, &shape, &vm);
  cursor_start(&pd, lo, nd, &shape, &vd);
  for (long i = lo; i < hi; ++i) {
    if (mask[pm.o]) data[pd.o] = src[k++];
    cursor_next(&pm, nd, &shape, &vm);
    cursor_next(&pd, nd, &shape, &vd);
  }
}
#endif

/* ---- deterministic scatter_add and scatter_reduce ------------------------------------------ */
#ifdef ACC_T
#ifndef SRC_T
#define SRC_T ACC_T
#endif
/* `red`: must match SCATTER_REDUCTIONS in cltensor/ops/indexing.py */
#define RED_SUM 0
#define RED_PROD 1
#define RED_MAX 2
#define RED_MIN 3

#ifdef ACC_FLOAT
#define ACC_NAN(v) isnan(v)
#else
#define ACC_NAN(v) 0
#endif

#define ACC_R REG(ACC_T)

/* max and min: a NaN accumulator stays, a NaN value takes over */
inline ACC_R reduce2(const int red, const ACC_R a, const ACC_R b) {
#ifdef ACC_BOOL
  return red == RED_SUM || red == RED_MAX ? a | b : a & b;
#else
  switch (red) {
    case RED_SUM: return a + b;
    case RED_PROD: return a * b;
    case RED_MAX: return ACC_NAN(a) || a >= b ? a : b;
    default: return ACC_NAN(a) || a <= b ? a : b;
  }
#endif
}

/* Shape: the index's shape with the scatter dim's size replaced by out's. vj gives the element's
 * position along the scatter dim (stride 1 there, 0 elsewhere); vi and vs have stride 0 there. */
__kernel void scatter_add_per_output(const long n, const int nd, const Shape shape,
                                     __global ACC_T* out, const View vo,
                                     __global const long* idx, const View vi,
                                     __global const SRC_T* src, const View vs, const View vj,
                                     const long len, const long idx_step, const long src_step,
                                     const int red) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long oo, oi, os;
  offsets3(i, nd, &shape, &vo, &vi, &vs, &oo, &oi, &os);
  const long j = offset_of(i, nd, &shape, &vj);
  ACC_R acc = LD(ACC_T, out, oo);
  for (long t = 0; t < len; ++t) {
    if (idx[oi + t * idx_step] == j) acc = reduce2(red, acc, LD(SRC_T, src, os + t * src_step));
  }
  ST(ACC_T, out, oo, acc);
}

/* Shape: the lanes (the index's shape with the scatter dim's size set to 1). With k index
 * tensors of nb elements (index_put_ with accumulate), entry t of a lane points at
 * o.a + sum_j idx[o.b + j * nb + t * idx_step] * adv_stride[j]. */
__kernel void scatter_add_per_lane(const long n, const int nd, const Shape shape,
                                   __global ACC_T* out, const View vo,
                                   __global const long* idx, const View vi,
                                   __global const SRC_T* src, const View vs,
                                   const long len, const long idx_step, const long src_step,
                                   const int k, const long nb, const Shape adv_stride,
                                   const int red) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long oo, oi, os;
  offsets3(i, nd, &shape, &vo, &vi, &vs, &oo, &oi, &os);
  for (long t = 0; t < len; ++t) {
    long p = oo;
    for (int j = 0; j < k; ++j) p += idx[oi + j * nb + t * idx_step] * adv_stride.size[j];
    ST(ACC_T, out, p, reduce2(red, LD(ACC_T, out, p), LD(SRC_T, src, os + t * src_step)));
  }
}
#endif

/* ---- nonzero ------------------------------------------------------------------------------- */
#ifdef NZ_T
__kernel void count_nonzero_chunks(const long n, const int nd, const Shape shape,
                                   __global const NZ_T* x, const View vx, const long chunk,
                                   __global long* counts) {
  const long g = get_global_id(0);
  const long lo = g * chunk;
  if (lo >= n) return;
  const long hi = min(n, lo + chunk);
  long count = 0;
  Cursor p;
  cursor_start(&p, lo, nd, &shape, &vx);
  for (long i = lo; i < hi; ++i, cursor_next(&p, nd, &shape, &vx))
    count += LD(NZ_T, x, p.o) != 0;
  counts[g] = count;
}

__kernel void write_nonzero(const long n, const int nd, const Shape shape,
                            __global const NZ_T* x, const View vx, const long chunk,
                            __global const long* starts, __global long* out,
                            const long row_stride, const long col_stride) {
  const long g = get_global_id(0);
  const long lo = g * chunk;
  if (lo >= n) return;
  const long hi = min(n, lo + chunk);
  long row = starts[g];
  Cursor p;
  cursor_start(&p, lo, nd, &shape, &vx);
  for (long i = lo; i < hi; ++i, cursor_next(&p, nd, &shape, &vx)) {
    if (LD(NZ_T, x, p.o) == 0) continue;
    for (int k = 0; k < nd; ++k) out[row * row_stride + k * col_stride] = p.c[k];
    ++row;
  }
}
#endif
