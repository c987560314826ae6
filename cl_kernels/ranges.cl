/*
 * ranges.cl: tensors computed from the element index: arange, linspace, logspace, eye, and the
 * triangle masks of tril/triu.
 *
 * Layout: arange/linspace/logspace/eye write a contiguous `out` from element `off`; element i is
 * work-item i. tri_fill reads and writes N-d views (a Shape of `nd` dims, nd <= MAX_DIMS of
 * common.cl, and one View per operand), so tril_/triu_ can run in
 * place with out == x.
 *
 * linspace follows torch: step = (end - start) / (steps - 1); the first half counts up from
 * start and the second half down from end, so both endpoints are exact.
 *
 * Build options:
 *   OUT_T  storage type of the output (uchar for bool; half and bf16 through common.cl's ST)
 *   AT     arithmetic type of the index formulas: long for integer arange, else float or double
 *   PT     type of pow() in logspace (double where the device has it)
 * Tunables: none; the launcher picks work sizes.
 */
#ifndef OUT_T
#define OUT_T float
#endif
#ifndef AT
#define AT float
#endif
#ifndef PT
#define PT float
#endif

#include "common.cl"

/* out[i] = start + i * step */
__kernel void arange_fill(const long n, __global OUT_T* out, const long off, const AT start,
                          const AT step) {
  const long i = get_global_id(0);
  if (i >= n) return;
  ST(OUT_T, out, off + i, start + (AT)i * step);
}

inline AT linspace_value(long i, long n, AT start, AT end, AT step, long halfway) {
  return i < halfway ? start + step * (AT)i : end - step * (AT)(n - i - 1);
}

__kernel void linspace_fill(const long n, __global OUT_T* out, const long off, const AT start,
                            const AT end, const AT step, const long halfway) {
  const long i = get_global_id(0);
  if (i >= n) return;
  ST(OUT_T, out, off + i, linspace_value(i, n, start, end, step, halfway));
}

/* out[i] = base ^ linspace(start, end)[i] */
__kernel void logspace_fill(const long n, __global OUT_T* out, const long off, const AT start,
                            const AT end, const AT step, const long halfway, const PT base) {
  const long i = get_global_id(0);
  if (i >= n) return;
  ST(OUT_T, out, off + i, pow(base, (PT)linspace_value(i, n, start, end, step, halfway)));
}

/* out is n / cols rows of cols: 1 on the main diagonal, 0 elsewhere. */
__kernel void eye_fill(const long n, __global OUT_T* out, const long cols) {
  const long i = get_global_id(0);
  if (i >= n) return;
  ST(OUT_T, out, i, (REG(OUT_T))(i / cols == i % cols));
}

/* Element i (row-major over matrices of rows x cols) keeps x's value inside the triangle and
 * becomes 0 outside: lower keeps col - row <= diagonal, upper keeps col - row >= diagonal. */
__kernel void tri_fill(const long n, const int nd, const Shape shape, __global OUT_T* out,
                       const View vo, __global const OUT_T* x, const View vx, const long rows,
                       const long cols, const long diagonal, const int lower) {
  const long i = get_global_id(0);
  if (i >= n) return;
  const long d = i % cols - (i / cols) % rows;
  const int keep = lower ? d <= diagonal : d >= diagonal;
  const long ox = view_offset(i, nd, shape, vx);
  ST(OUT_T, out, view_offset(i, nd, shape, vo), keep ? LD(OUT_T, x, ox) : (REG(OUT_T))0);
}
