/*
 * common.cl: the strided-view definitions that the kernel families share.
 *
 * A kernel file takes them with the line `#include "common.cl"`, which cltensor's build replaces
 * by this file's text (cltensor/program.py, read_source), so a program's source is one string and
 * the build caches see every change. The build defines MAX_DIMS first, from the Python constant
 * program.MAX_DIMS that the launchers check shapes against; a `#line` after the text keeps the
 * including file's line numbers in compiler logs (NVIDIA's compiler ignores it: its logs count
 * the spliced lines too).
 *
 * Layout: a tensor operand is a View: an element offset into its buffer and one stride per dim,
 * in elements (stride 0 broadcasts); a Shape gives the sizes of the `nd` dims (nd <= MAX_DIMS)
 * that a launch walks in row-major order.
 */
#ifndef CLTENSOR_COMMON_CL
#define CLTENSOR_COMMON_CL

#ifndef MAX_DIMS
#error "MAX_DIMS is defined by cltensor's build (program.MAX_DIMS)"
#endif

typedef struct { long size[MAX_DIMS]; } Shape;
typedef struct { long offset; long stride[MAX_DIMS]; } View;

/* Element offset of row-major index i over the nd dims of `shape` in view v (v.offset included). */
inline long view_offset(long i, const int nd, const Shape shape, const View v) {
  long o = v.offset;
  for (int d = nd - 1; d >= 0; --d) {
    o += (i % shape.size[d]) * v.stride[d];
    i /= shape.size[d];
  }
  return o;
}

/* The same without v.offset, and one dim without a division: reductions and scans add their
 * views' offsets once per row themselves. */
inline long strided_offset(long i, const int nd, const Shape shape, const View v) {
  if (nd == 1) return i * v.stride[0];
  long o = 0;
  for (int d = nd - 1; d >= 0; --d) {
    const long n = shape.size[d];
    o += (i % n) * v.stride[d];
    i /= n;
  }
  return o;
}

#endif
