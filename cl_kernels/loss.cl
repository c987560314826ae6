/*
 * loss.cl: nll_loss, and the pointwise losses mse_loss and binary_cross_entropy_with_logits,
 * forward (unreduced: one value per element or row) and backward.
 *
 * nll layout: log-probabilities are rows of a strided (O, C, I) view (View3, as softmax.cl:
 * row r = (r / I, r % I) holds the C classes); targets and gradient scales are per row (View2,
 * strides may be 0). Per-row outputs are contiguous over r.
 *   nll_fwd   one work-item per row: loss = -w_t x[t], weight w_t; both 0 for ignore_index; an
 *             out-of-range t is written to bad[0] (the caller raises)
 *   nll_bwd   one work-item per element of the contiguous (O, C, I) gradient (a 3-d range):
 *             gx = (c == t != ignore_index) ? -w_t scale_r : 0
 *
 * Pointwise layout: operands are broadcast, strided N-d views over one Shape (as
 * elementwise.cl; View and Shape from common.cl); results are contiguous.
 *   pw_loss_fwd  loss[i] = w * L(x, t)
 *   pw_loss_bwd  gx[i] = s * w * dL/dx, and with F_GRAD_TARGET gt[i] = s * w * dL/dt, s the
 *                incoming gradient (a view, so a reduction's scalar broadcasts) times `mult`
 *   MSE:   L = (x - t)^2
 *   BCE:   L = (1 - t) x + lw softplus(-x), lw = (pw - 1) t + 1, softplus(-x) = log1p(exp(-|x|))
 *          + max(-x, 0) (torch's stable form); dL/dx = (1 - t) - lw sigmoid(-x),
 *          dL/dt = -x + (pw - 1) softplus(-x)
 * Build options:
 *   T            storage type (float, double, half or bf16), read and written through LD/ST;
 *                R = REG(T) computes (float32 for the 16-bit types: one rounding per result)
 * Kernel flags (arguments, not build options, to keep builds few):
 *   nll `weighted`: class weights are given (else all 1, w unread)
 *   pointwise `flags`: F_BCE (else MSE), F_WEIGHT (an elementwise weight w; else 1), F_POS
 *   (BCE's pos_weight pw; else 1), F_GRAD_TARGET (pw_loss_bwd writes gt). Absent operands are
 *   unread; their View is ignored.
 * Tunables: none; the launcher picks work sizes.
 */
#include "common.cl"

#define R REG(T)

typedef struct { long off, o, d, i; } View3;
typedef struct { long off, o, i; } View2;

inline long row_at(const View2 v, const long r, const long I) {
  return v.off + (r / I) * v.o + (r % I) * v.i;
}

/* ---- nll ------------------------------------------------------------------------------------- */

#define CLASS_WEIGHT(c) (weighted ? LD(T, w, c) : (R)1)

__kernel void nll_fwd(const long rows, const long C, const long I, __global const T* x,
                      const View3 vx, __global const long* target, const View2 vt,
                      const int weighted, __global const T* w, const long ignore_index,
                      __global T* loss, __global T* wt, __global long* bad) {
  const long r = get_global_id(0);
  if (r >= rows) return;
  const long t = target[row_at(vt, r, I)];
  if (t == ignore_index || t < 0 || t >= C) {
    if (t != ignore_index) *bad = t;
    ST(T, loss, r, 0);
    ST(T, wt, r, 0);
    return;
  }
  const R w_t = CLASS_WEIGHT(t);
  ST(T, loss, r, -w_t * LD(T, x, vx.off + (r / I) * vx.o + t * vx.d + (r % I) * vx.i));
  ST(T, wt, r, w_t);
}

/* A 3-d launch over (I, C, O): neighbouring work-items write neighbouring memory. */
__kernel void nll_bwd(const long O, const long C, const long I, __global const long* target,
                      const View2 vt, const int weighted, __global const T* w,
                      const long ignore_index, __global const T* scale, const View2 vs,
                      __global T* gx) {
  const long i = get_global_id(0), c = get_global_id(1), o = get_global_id(2);
  if (i >= I || c >= C || o >= O) return;
  const long e = (o * C + c) * I + i, r = o * I + i;
  const long t = target[row_at(vt, r, I)];
  ST(T, gx, e, (c == t && t != ignore_index) ? -CLASS_WEIGHT(t) * LD(T, scale, row_at(vs, r, I))
                                              : (R)0);
}

/* ---- pointwise losses ------------------------------------------------------------------------ */

#define F_BCE 1
#define F_WEIGHT 2
#define F_POS 4
#define F_GRAD_TARGET 8

inline R softplus_neg(const R x) { return log1p(exp(-fabs(x))) + fmax(-x, (R)0); }

#define OPERANDS __global const T* x, const View vx, __global const T* t, const View vt, \
                 __global const T* w, const View vw, __global const T* pw, const View vp
#define LOAD_OPERANDS                                                             \
  const R xv = LD(T, x, view_offset(i, nd, shape, vx));                           \
  const R tv = LD(T, t, view_offset(i, nd, shape, vt));                           \
  const R wv = (flags & F_WEIGHT) ? LD(T, w, view_offset(i, nd, shape, vw)) : (R)1; \
  const R pv = (flags & F_POS) ? LD(T, pw, view_offset(i, nd, shape, vp)) : (R)1;

__kernel void pw_loss_fwd(const long n, const int nd, const Shape shape, const int flags,
                          __global T* loss, OPERANDS) {
  const long i = get_global_id(0);
  if (i >= n) return;
  LOAD_OPERANDS
  R l;
  if (flags & F_BCE) {
    const R lw = (pv - (R)1) * tv + (R)1;
    l = ((R)1 - tv) * xv + lw * softplus_neg(xv);
  } else {
    l = (xv - tv) * (xv - tv);
  }
  ST(T, loss, i, wv * l);
}

__kernel void pw_loss_bwd(const long n, const int nd, const Shape shape, const int flags,
                          const R mult, __global const T* g, const View vg, __global T* gx,
                          __global T* gt, OPERANDS) {
  const long i = get_global_id(0);
  if (i >= n) return;
  LOAD_OPERANDS
  const R s = mult * LD(T, g, view_offset(i, nd, shape, vg)) * wv;
  R dx, dt;
  if (flags & F_BCE) {
    const R lw = (pv - (R)1) * tv + (R)1;
    dx = ((R)1 - tv) - lw / ((R)1 + exp(xv));
    dt = -xv + (pv - (R)1) * softplus_neg(xv);
  } else {
    dx = (R)2 * (xv - tv);
    dt = -dx;
  }
  ST(T, gx, i, s * dx);
  if (flags & F_GRAD_TARGET) ST(T, gt, i, s * dt);
}
