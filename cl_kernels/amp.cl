/*
 * amp.cl: GradScaler's unscale_ over up to MT gradients per launch: every element g becomes
 * g * inv_scale in place, and *found_inf becomes 1 where some g was infinite or NaN before the
 * multiply (torch's _amp_foreach_non_finite_check_and_unscale_).
 *
 * Layout: gradient j is contiguous from element offset o_j of its buffer; work-item i handles
 * element i of the gradients laid end to end (ends.end[j] the running total after gradient j;
 * empty slots repeat the last end). Every writer of found_inf stores the same 1.
 *
 * Build options:
 *   T   the gradients' storage type (float, double, half or bf16: the last two through
 *       common.cl's LD/ST, computed in float)
 * Tunables: none; the launcher picks work sizes.
 */
#include "common.cl"

#define MT 8
typedef struct { long end[MT]; } Ends;
#define EACH_SLOT(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define SLOT_ARGS(j) __global T *g##j, const long o##j,
#define SLOT_PICK(j)                                      \
  if (i >= begin && i < ends.end[j]) {                    \
    g = g##j; k = o##j + i - begin;                       \
  }                                                       \
  begin = ends.end[j];

__kernel void unscale_multi(const Ends ends, EACH_SLOT(SLOT_ARGS) const float inv_scale,
                            __global float* found_inf) {
  const long i = get_global_id(0);
  if (i >= ends.end[MT - 1]) return;
  long begin = 0, k = 0;
  __global T* g = g0;
  EACH_SLOT(SLOT_PICK)
  const REG(T) v = LD(T, g, k);
  if (!isfinite(v)) *found_inf = 1.0f;
  ST(T, g, k, v * (REG(T))inv_scale);
}
