/*
 * optim.cl: one optimizer step for one parameter tensor, fused into a single pass. Each
 * work-item reads its element of the parameter, the gradient and the state buffers, and writes
 * the parameter and the state back; nothing is shared between work-items (no local memory).
 * The arithmetic follows torch.optim's single-tensor implementations operation by operation, as
 * ATen's vectorized CPU kernels round them: an add with alpha (a + alpha * b), lerp and
 * addcmul end in one fma; everything else (addcdiv, mul, div) rounds after each operation, so
 * automatic contraction into fma is off. SGD then matches torch (CPU) bit for bit; Adam to an
 * ulp or two, torch's CPU sqrt not being correctly rounded.
 *
 * Layout: the parameter and the gradient are strided N-d views over one logical Shape of `nd`
 * dims (nd <= MAX_DIMS, from common.cl): an element offset and one
 * stride per dim, in elements. State buffers (momentum, exp_avg, ...) are contiguous over the
 * same Shape, so element i of the logical row-major order is state[i].
 *
 * Kernels:
 *   sgd_step   SGD with weight decay, momentum (dampening, nesterov) and maximize.
 *   adam_step  Adam / AdamW (decoupled weight decay), amsgrad and maximize.
 *   rmsprop_step  RMSprop with weight decay, momentum, centering and maximize.
 *   adagrad_step, adadelta_step, adamax_step, nadam_step, radam_step, asgd_step, rprop_step:
 *              torch.optim's optimizers of those names; their flags are the X_* below. Their
 *              state buffers start as the host fills them (zeros, or Adagrad's initial value
 *              and Rprop's lr), so no first-step flag is needed.
 * Scalar hyperparameters are kernel arguments (a scheduler changes lr without a rebuild), given
 * in R after the host computed the derived values (1 - dampening, step size, ...) in double,
 * as torch does.
 *
 *   sgd_multi, adam_multi  sgd_step / adam_step over MT (8) contiguous parameters in one
 *              launch.
 *
 * Build options:
 *   T          float, double, half or bf16: the parameter, gradient and state storage type,
 *              read and written through LD/ST; R = REG(T) computes (float32 for the 16-bit
 *              types, each value stored rounded once: the state stays in the parameter's dtype,
 *              as torch keeps it)
 * Tunables: none; the launcher picks work sizes.
 */
#pragma OPENCL FP_CONTRACT OFF
#include "common.cl"

#define R REG(T)

#define MT 8 /* parameters per multi-tensor launch: EACH_SLOT lists as many */

/* flags of sgd_step */
#define SGD_MOMENTUM 1   /* keep a momentum buffer */
#define SGD_FIRST 2      /* first step: the buffer starts as the gradient */
#define SGD_NESTEROV 4
#define SGD_MAXIMIZE 8
#define SGD_DECAY 16     /* weight_decay != 0 */

/* flags of adam_step */
#define ADAM_AMSGRAD 1
#define ADAM_MAXIMIZE 2
#define ADAM_DECAY 4     /* L2 weight decay added to the gradient (Adam) */
#define ADAM_DECOUPLED 8 /* decoupled weight decay: param *= 1 - lr * weight_decay (AdamW) */
#define ADAM_FIRST 16    /* first step: the state buffers are uninitialized and read as 0 */

/* flags of rmsprop_step */
#define RMS_CENTERED 1   /* keep the mean gradient too and divide by the centred deviation */
#define RMS_MOMENTUM 2   /* keep a momentum buffer */
#define RMS_MAXIMIZE 4
#define RMS_DECAY 8      /* weight_decay != 0 */

/* flags of the kernels after rmsprop_step (each takes those that apply to it) */
#define X_MAXIMIZE 1
#define X_DECAY 2        /* L2 weight decay added to the gradient */
#define X_DECOUPLED 4    /* decoupled weight decay: param *= decay_factor first */
#define X_RECTIFY 8      /* RAdam: rho_t > 5, use the rectified adaptive step */
#define X_AX_COPY 8      /* ASGD: mu == 1, the average is the parameter itself */

/* The offsets of linear element i in the parameter's and the gradient's views. */
inline void locate(long i, const int nd, const Shape* shape, const View* vp, const View* vg,
                   long* op, long* og) {
  long p = vp->offset, g = vg->offset;
  for (int d = nd - 1; d >= 0; --d) {
    const long k = i % shape->size[d];
    i /= shape->size[d];
    p += k * vp->stride[d];
    g += k * vg->stride[d];
  }
  *op = p;
  *og = g;
}

/* torch's add with alpha: a + alpha * b, rounded once */
inline R add_alpha(const R a, const R b, const R alpha) { return fma(alpha, b, a); }

/* torch's lerp: a + w * (b - a) for |w| < 0.5, else b + (w - 1) * (b - a), each one fma */
inline R lerp_t(const R a, const R b, const R w) {
  return fabs(w) < (R)0.5 ? fma(w, b - a, a) : fma(w - (R)1, b - a, b);
}

/* Every step kernel's leading arguments (n elements of param and grad over an nd-dim Shape)
 * and its first lines: work-item i past n returns; op and og are i's offsets in param and grad. */
#define STEP_ARGS                                                                   \
  const long n, const int nd, const Shape shape, __global T* param, const View vp, \
      __global const T* grad, const View vg
#define STEP_LOCATE                    \
  const long i = get_global_id(0);     \
  if (i >= n) return;                  \
  long op, og;                         \
  locate(i, nd, &shape, &vp, &vg, &op, &og);

/* One SGD update of param[op] from grad[og]; buf[i] is its momentum (contiguous state). */
inline void sgd_update(__global T* param, const long op, __global const T* grad, const long og,
                       __global T* buf, const long i, const R lr, const R momentum,
                       const R one_minus_dampening, const R weight_decay, const int flags) {
  const R p = LD(T, param, op);
  R d = (flags & SGD_MAXIMIZE) ? -LD(T, grad, og) : LD(T, grad, og);
  if (flags & SGD_DECAY) d = add_alpha(d, p, weight_decay);
  if (flags & SGD_MOMENTUM) {
    const R b = (flags & SGD_FIRST) ? d
                                    : add_alpha(LD(T, buf, i) * momentum, d, one_minus_dampening);
    ST(T, buf, i, b);
    d = (flags & SGD_NESTEROV) ? add_alpha(d, b, momentum) : b;
  }
  ST(T, param, op, add_alpha(p, d, -lr));
}

#define SGD_SCALARS                                                                   \
  const R lr, const R momentum, const R one_minus_dampening, const R weight_decay, \
      const int flags

__kernel void sgd_step(STEP_ARGS, __global T* buf, SGD_SCALARS) {
  STEP_LOCATE
  sgd_update(param, op, grad, og, buf, i, lr, momentum, one_minus_dampening, weight_decay, flags);
}

/* One Adam update of param[op] from grad[og]; the moments at [i] (contiguous state). */
inline void adam_update(__global T* param, const long op, __global const T* grad, const long og,
                        __global T* exp_avg, __global T* exp_avg_sq, __global T* max_exp_avg_sq,
                        const long i, const R one_minus_beta1, const R beta2,
                        const R one_minus_beta2, const R eps, const R weight_decay,
                        const R decay_factor, const R neg_step_size,
                        const R bias_correction2_sqrt, const int flags) {
  R p = LD(T, param, op);
  R g = (flags & ADAM_MAXIMIZE) ? -LD(T, grad, og) : LD(T, grad, og);
  if (flags & ADAM_DECOUPLED) p = p * decay_factor;
  if (flags & ADAM_DECAY) g = add_alpha(g, p, weight_decay);
  const int first = flags & ADAM_FIRST;
  const R m = lerp_t(first ? (R)0 : LD(T, exp_avg, i), g, one_minus_beta1);
  const R v = fma(one_minus_beta2 * g, g, (first ? (R)0 : LD(T, exp_avg_sq, i)) * beta2);
  ST(T, exp_avg, i, m);
  ST(T, exp_avg_sq, i, v);
  R vhat = v;
  if (flags & ADAM_AMSGRAD) {
    const R vmax = first ? (R)0 : LD(T, max_exp_avg_sq, i);
    vhat = (isnan(vmax) || vmax > v) ? vmax : v;  /* torch.maximum propagates NaN */
    ST(T, max_exp_avg_sq, i, vhat);
  }
  const R denom = sqrt(vhat) / bias_correction2_sqrt + eps;
  ST(T, param, op, p + neg_step_size * m / denom);
}

#define ADAM_SCALARS                                                                       \
  const R one_minus_beta1, const R beta2, const R one_minus_beta2, const R eps,         \
      const R weight_decay, const R decay_factor, const R neg_step_size,                \
      const R bias_correction2_sqrt, const int flags
#define ADAM_SCALAR_NAMES                                                             \
  one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, decay_factor, neg_step_size, \
      bias_correction2_sqrt, flags

__kernel void adam_step(STEP_ARGS, __global T* exp_avg, __global T* exp_avg_sq,
                        __global T* max_exp_avg_sq, ADAM_SCALARS) {
  STEP_LOCATE
  adam_update(param, op, grad, og, exp_avg, exp_avg_sq, max_exp_avg_sq, i, ADAM_SCALAR_NAMES);
}

/* Multi-tensor steps: MT contiguous parameters (with their gradients and state) in one launch,
 * the same hyperparameters for all. Work-item i updates element i of the parameters laid end
 * to end: parameter j holds [ends.end[j - 1], ends.end[j]). Slots past the last parameter
 * repeat it with an empty range. */
typedef struct { long end[MT]; } Ends;
#define EACH_SLOT(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define MULTI_LOCATE                                       \
  const long i = get_global_id(0);                         \
  if (i >= ends.end[MT - 1]) return;                       \
  long begin = 0, k = 0;
#define SGD_SLOT_ARGS(j) __global T *p##j, __global const T *g##j, __global T *b##j,
#define SGD_SLOT_PICK(j)                                       \
  if (i >= begin && i < ends.end[j]) {                       \
    param = p##j; grad = g##j; buf = b##j; k = i - begin;    \
  }                                                          \
  begin = ends.end[j];

__kernel void sgd_multi(const Ends ends, EACH_SLOT(SGD_SLOT_ARGS) SGD_SCALARS) {
  MULTI_LOCATE
  __global T* param = p0;
  __global const T* grad = g0;
  __global T* buf = b0;
  EACH_SLOT(SGD_SLOT_PICK)
  sgd_update(param, k, grad, k, buf, k, lr, momentum, one_minus_dampening, weight_decay, flags);
}

#define ADAM_SLOT_ARGS(j) \
  __global T *p##j, __global const T *g##j, __global T *m##j, __global T *v##j, __global T *x##j,
#define ADAM_SLOT_PICK(j)                                                       \
  if (i >= begin && i < ends.end[j]) {                                        \
    param = p##j; grad = g##j; m = m##j; v = v##j; vmax = x##j; k = i - begin; \
  }                                                                           \
  begin = ends.end[j];

__kernel void adam_multi(const Ends ends, EACH_SLOT(ADAM_SLOT_ARGS) ADAM_SCALARS) {
  MULTI_LOCATE
  __global T* param = p0;
  __global const T* grad = g0;
  __global T *m = m0, *v = v0, *vmax = x0;
  EACH_SLOT(ADAM_SLOT_PICK)
  adam_update(param, k, grad, k, m, v, vmax, k, ADAM_SCALAR_NAMES);
}

/* square_avg, grad_avg (RMS_CENTERED) and buf (RMS_MOMENTUM) start as zeros (the host fills
 * them on the first step) */
__kernel void rmsprop_step(STEP_ARGS,
                           __global T* square_avg, __global T* grad_avg, __global T* buf,
                           const R alpha, const R one_minus_alpha, const R eps,
                           const R weight_decay, const R momentum, const R lr,
                           const int flags) {
  STEP_LOCATE
  const R p = LD(T, param, op);
  R g = (flags & RMS_MAXIMIZE) ? -LD(T, grad, og) : LD(T, grad, og);
  if (flags & RMS_DECAY) g = add_alpha(g, p, weight_decay);
  const R v = fma(one_minus_alpha * g, g, LD(T, square_avg, i) * alpha);
  ST(T, square_avg, i, v);
  R avg;
  if (flags & RMS_CENTERED) {
    const R m = lerp_t(LD(T, grad_avg, i), g, one_minus_alpha);
    ST(T, grad_avg, i, m);
    avg = sqrt(fma(-m, m, v));
  } else {
    avg = sqrt(v);
  }
  avg = avg + eps;
  if (flags & RMS_MOMENTUM) {
    const R b = LD(T, buf, i) * momentum + g / avg;
    ST(T, buf, i, b);
    ST(T, param, op, add_alpha(p, b, -lr));
  } else {
    ST(T, param, op, p + -lr * (g / avg));
  }
}

/* The gradient as the update uses it: negated for maximize, plus weight_decay * p for X_DECAY */
inline R grad_of(const R gv, const R p, const R weight_decay, const int flags) {
  const R g = (flags & X_MAXIMIZE) ? -gv : gv;
  return (flags & X_DECAY) ? add_alpha(g, p, weight_decay) : g;
}

/* torch.maximum: NaN wins */
inline R max_nan(const R a, const R b) { return (isnan(a) || a > b) ? a : b; }

/* sum += g^2; p -= clr * g / (sqrt(sum) + eps) */
__kernel void adagrad_step(STEP_ARGS,
                           __global T* sum,
                           const R neg_clr, const R eps, const R weight_decay, const int flags) {
  STEP_LOCATE
  const R p = LD(T, param, op);
  const R g = grad_of(LD(T, grad, og), p, weight_decay, flags);
  const R s = fma(g, g, LD(T, sum, i));
  ST(T, sum, i, s);
  ST(T, param, op, p + neg_clr * (g / (sqrt(s) + eps)));
}

/* v = rho v + (1 - rho) g^2; d = sqrt(u + eps) / sqrt(v + eps) * g;
 * u = rho u + (1 - rho) d^2; p -= lr * d */
__kernel void adadelta_step(STEP_ARGS,
                            __global T* square_avg, __global T* acc_delta,
                            const R rho, const R one_minus_rho, const R eps, const R weight_decay,
                            const R lr, const int flags) {
  STEP_LOCATE
  const R p = LD(T, param, op);
  const R g = grad_of(LD(T, grad, og), p, weight_decay, flags);
  const R v = fma(one_minus_rho * g, g, LD(T, square_avg, i) * rho);
  ST(T, square_avg, i, v);
  const R d = sqrt(LD(T, acc_delta, i) + eps) / sqrt(v + eps) * g;
  ST(T, acc_delta, i, fma(one_minus_rho * d, d, LD(T, acc_delta, i) * rho));
  ST(T, param, op, add_alpha(p, d, -lr));
}

/* m = lerp(m, g, 1 - beta1); u = max(beta2 u, |g| + eps); p -= clr * m / u */
__kernel void adamax_step(STEP_ARGS,
                          __global T* exp_avg, __global T* exp_inf,
                          const R one_minus_beta1, const R beta2, const R eps,
                          const R weight_decay, const R neg_clr, const int flags) {
  STEP_LOCATE
  const R p = LD(T, param, op);
  const R g = grad_of(LD(T, grad, og), p, weight_decay, flags);
  const R m = lerp_t(LD(T, exp_avg, i), g, one_minus_beta1);
  const R u = max_nan(LD(T, exp_inf, i) * beta2, fabs(g) + eps);
  ST(T, exp_avg, i, m);
  ST(T, exp_inf, i, u);
  ST(T, param, op, p + neg_clr * (m / u));
}

/* NAdam's and RAdam's common start: p decayed (X_DECOUPLED), the gradient g and Adam's moments
 * m, v of element i, the moments stored */
inline void adam_moments(const long i, const R gv, R* p, R* g, R* m, R* v,
                         __global T* exp_avg, __global T* exp_avg_sq, const R one_minus_beta1,
                         const R beta2, const R one_minus_beta2, const R weight_decay,
                         const R decay_factor, const int flags) {
  if (flags & X_DECOUPLED) *p = *p * decay_factor;
  *g = grad_of(gv, *p, weight_decay, flags);
  *m = lerp_t(LD(T, exp_avg, i), *g, one_minus_beta1);
  *v = fma(one_minus_beta2 * *g, *g, LD(T, exp_avg_sq, i) * beta2);
  ST(T, exp_avg, i, *m);
  ST(T, exp_avg_sq, i, *v);
}

/* Adam's moments, then p += coef_grad * g / denom + coef_avg * m / denom with
 * denom = sqrt(v / bias_correction2) + eps (the host folds mu, mu_next and lr into the coefs) */
__kernel void nadam_step(STEP_ARGS,
                         __global T* exp_avg, __global T* exp_avg_sq,
                         const R one_minus_beta1, const R beta2, const R one_minus_beta2,
                         const R eps, const R weight_decay, const R decay_factor,
                         const R bias_correction2, const R coef_grad, const R coef_avg,
                         const int flags) {
  STEP_LOCATE
  R p = LD(T, param, op), g, m, v;
  adam_moments(i, LD(T, grad, og), &p, &g, &m, &v, exp_avg, exp_avg_sq, one_minus_beta1, beta2,
               one_minus_beta2, weight_decay, decay_factor, flags);
  const R denom = sqrt(v / bias_correction2) + eps;
  p = p + coef_grad * (g / denom);
  ST(T, param, op, p + coef_avg * (m / denom));
}

/* Adam's moments, then p -= m / bias_correction1 * lr, times the adaptive term
 * bias_correction2_sqrt / (sqrt(v) + eps) and `rect` when X_RECTIFY */
__kernel void radam_step(STEP_ARGS,
                         __global T* exp_avg, __global T* exp_avg_sq,
                         const R one_minus_beta1, const R beta2, const R one_minus_beta2,
                         const R eps, const R weight_decay, const R decay_factor,
                         const R bias_correction1, const R lr, const R bias_correction2_sqrt,
                         const R rect, const int flags) {
  STEP_LOCATE
  R p = LD(T, param, op), g, m, v;
  adam_moments(i, LD(T, grad, og), &p, &g, &m, &v, exp_avg, exp_avg_sq, one_minus_beta1, beta2,
               one_minus_beta2, weight_decay, decay_factor, flags);
  R u = m / bias_correction1 * lr;
  if (flags & X_RECTIFY) u = u * (bias_correction2_sqrt / (sqrt(v) + eps)) * rect;
  ST(T, param, op, p - u);
}

/* p = p * (1 - lambd * eta) - eta * g; ax += (p - ax) * mu (ax = p when mu == 1) */
__kernel void asgd_step(STEP_ARGS,
                        __global T* ax,
                        const R decay, const R neg_eta, const R mu, const R weight_decay,
                        const int flags) {
  STEP_LOCATE
  R p = LD(T, param, op);
  const R g = grad_of(LD(T, grad, og), p, weight_decay, flags);
  p = add_alpha(p * decay, g, neg_eta);
  ST(T, param, op, p);
  ST(T, ax, i, (flags & X_AX_COPY) ? p : LD(T, ax, i) + (p - LD(T, ax, i)) * mu);
}

/* The step size grows by etaplus where the gradient kept its sign, shrinks by etaminus where it
 * flipped (and that step is skipped: the stored gradient becomes 0), clamped to
 * [step_min, step_max]; p -= sign(g) * step */
__kernel void rprop_step(STEP_ARGS,
                         __global T* prev, __global T* step_size,
                         const R etaminus, const R etaplus, const R step_min, const R step_max,
                         const int flags) {
  STEP_LOCATE
  R g = (flags & X_MAXIMIZE) ? -LD(T, grad, og) : LD(T, grad, og);
  const R s = sign(g * LD(T, prev, i));
  const R factor = s > 0 ? etaplus : (s < 0 ? etaminus : (s == 0 ? (R)1 : s));
  const R st = LD(T, step_size, i) * factor;
  const R clamped = st < step_min ? step_min : (st > step_max ? step_max : st);
  ST(T, step_size, i, clamped);
  if (factor == etaminus) g = (R)0;
  ST(T, prev, i, g);
  ST(T, param, op, fma(-sign(g), clamped, LD(T, param, op)));
}
