/*
 * shape.cl: joining tensors.
 *
 * cat_contig: out = cat((x0, ..., x7), dim) in one launch, for up to 8 contiguous inputs of one
 * type and a contiguous out (cltensor/ops/shape.py falls back to a copy per input otherwise).
 *
 * Layout: every tensor is seen as `outer` rows (the dims before `dim`); row o of out holds
 * `slab` elements, the rows o of x0, x1, ... one after the other, row o of xk being its `lenk`
 * elements (its size along dim times the dims after it) from element offk + o * lenk of its
 * buffer. Inputs past the last one are passed with length 0.
 *
 * Two forms, picked per device kind by the launcher:
 *   cat_contig  (GPUs) work-item (j, o) writes elements j + e * G (e < ITEMS, G the global size
 *               along rows) of out's row o (at out_off + o * slab + j): neighbouring work-items
 *               copy neighbouring elements, and finding the input needs compares, not divisions.
 *   cat_rows    (CPUs) work-item (c, i) copies chunk c (`chunk` elements) of row i / n of input
 *               i % n (n inputs): a loop over contiguous memory, which PoCL runs as vector code
 *               (cat_contig's per-element search ran 4x slower than a copy per input there).
 *
 * Build options: T, the element type. Tunables: ITEMS (cat_contig's elements per work-item);
 * the launcher picks work sizes and cat_rows' chunk.
 */

#ifndef ITEMS
#define ITEMS 4
#endif

#define SRC(k) , __global const T *x##k, const long off##k, const int len##k
/* the element of input k when s (j less the lengths of the inputs before k) falls in it */
#define TAKE(k)                                        \
  if (!found && s < len##k) {                          \
    v = x##k[off##k + (long)o * len##k + s];           \
    found = 1;                                         \
  }                                                    \
  s -= len##k;

/* Work-item (j, o) writes elements j + e * G (e < ITEMS, G the global size along rows) of row
 * o, loading them all before storing any, so that their loads are in flight together. */
__kernel void cat_contig(const int slab, const int outer, __global T* out, const long out_off
                         SRC(0) SRC(1) SRC(2) SRC(3) SRC(4) SRC(5) SRC(6) SRC(7)) {
  const int o = get_global_id(1), step = get_global_size(0);
  if (o >= outer) return;
  T r[ITEMS];
#pragma unroll
  for (int e = 0; e < ITEMS; ++e) {
    int s = get_global_id(0) + e * step, found = 0;
    T v = 0;
    TAKE(0) TAKE(1) TAKE(2) TAKE(3) TAKE(4) TAKE(5) TAKE(6) TAKE(7)
    r[e] = v;
  }
#pragma unroll
  for (int e = 0; e < ITEMS; ++e) {
    const int j = get_global_id(0) + e * step;
    if (j < slab) out[out_off + (long)o * slab + j] = r[e];
  }
}

/* the row o of input k (src, len), and where it starts in out's row (start) */
#define PICK(k)                                      \
  if (i % n == k) {                                  \
    src = x##k + off##k + (long)o * len##k;          \
    len = len##k;                                    \
  } else if (i % n > k) {                            \
    start += len##k;                                 \
  }

__kernel void cat_rows(const int slab, const int outer, const int n, const int chunk,
                       __global T* out, const long out_off
                       SRC(0) SRC(1) SRC(2) SRC(3) SRC(4) SRC(5) SRC(6) SRC(7)) {
  const int c = get_global_id(0), i = get_global_id(1), o = i / n;
  if (o >= outer) return;
  __global const T* src = x0;
  int len = 0, start = 0;
  PICK(0) PICK(1) PICK(2) PICK(3) PICK(4) PICK(5) PICK(6) PICK(7)
  __global T* dst = out + out_off + (long)o * slab + start;
  const int end = min(len, (c + 1) * chunk);
  for (int e = c * chunk; e < end; ++e) dst[e] = src[e];
}
