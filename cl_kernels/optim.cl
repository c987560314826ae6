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
 * Scalar hyperparameters are kernel arguments (a scheduler changes lr without a rebuild), given
 * in T after the host computed the derived values (1 - dampening, step size, ...) in double,
 * as torch does.
 *
 * Build options:
 *   T          float or double: the parameter, gradient and state type
 * Tunables: none; the launcher picks work sizes.
 */
#pragma OPENCL FP_CONTRACT OFF
#include "common.cl"

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
inline T add_alpha(const T a, const T b, const T alpha) { return fma(alpha, b, a); }

/* torch's lerp: a + w * (b - a) for |w| < 0.5, else b + (w - 1) * (b - a), each one fma */
inline T lerp_t(const T a, const T b, const T w) {
  return fabs(w) < (T)0.5 ? fma(w, b - a, a) : fma(w - (T)1, b - a, b);
}

__kernel void sgd_step(const long n, const int nd, const Shape shape,
                       __global T* param, const View vp,
                       __global const T* grad, const View vg,
                       __global T* buf,
                       const T lr, const T momentum, const T one_minus_dampening,
                       const T weight_decay, const int flags) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long op, og;
  locate(i, nd, &shape, &vp, &vg, &op, &og);
  const T p = param[op];
  T d = (flags & SGD_MAXIMIZE) ? -grad[og] : grad[og];
  if (flags & SGD_DECAY) d = add_alpha(d, p, weight_decay);
  if (flags & SGD_MOMENTUM) {
    const T b = (flags & SGD_FIRST) ? d : add_alpha(buf[i] * momentum, d, one_minus_dampening);
    buf[i] = b;
    d = (flags & SGD_NESTEROV) ? add_alpha(d, b, momentum) : b;
  }
  param[op] = add_alpha(p, d, -lr);
}

__kernel void adam_step(const long n, const int nd, const Shape shape,
                        __global T* param, const View vp,
                        __global const T* grad, const View vg,
                        __global T* exp_avg, __global T* exp_avg_sq, __global T* max_exp_avg_sq,
                        const T one_minus_beta1, const T beta2, const T one_minus_beta2,
                        const T eps, const T weight_decay, const T decay_factor,
                        const T neg_step_size, const T bias_correction2_sqrt, const int flags) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long op, og;
  locate(i, nd, &shape, &vp, &vg, &op, &og);
  T p = param[op];
  T g = (flags & ADAM_MAXIMIZE) ? -grad[og] : grad[og];
  if (flags & ADAM_DECOUPLED) p = p * decay_factor;
  if (flags & ADAM_DECAY) g = add_alpha(g, p, weight_decay);
  const int first = flags & ADAM_FIRST;
  const T m = lerp_t(first ? (T)0 : exp_avg[i], g, one_minus_beta1);
  const T v = fma(one_minus_beta2 * g, g, (first ? (T)0 : exp_avg_sq[i]) * beta2);
  exp_avg[i] = m;
  exp_avg_sq[i] = v;
  T vhat = v;
  if (flags & ADAM_AMSGRAD) {
    const T vmax = first ? (T)0 : max_exp_avg_sq[i];
    vhat = (isnan(vmax) || vmax > v) ? vmax : v;  /* torch.maximum propagates NaN */
    max_exp_avg_sq[i] = vhat;
  }
  const T denom = sqrt(vhat) / bias_correction2_sqrt + eps;
  param[op] = p + neg_step_size * m / denom;
}

/* square_avg, grad_avg (RMS_CENTERED) and buf (RMS_MOMENTUM) start as zeros (the host fills
 * them on the first step) */
__kernel void rmsprop_step(const long n, const int nd, const Shape shape,
                           __global T* param, const View vp,
                           __global const T* grad, const View vg,
                           __global T* square_avg, __global T* grad_avg, __global T* buf,
                           const T alpha, const T one_minus_alpha, const T eps,
                           const T weight_decay, const T momentum, const T lr,
                           const int flags) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long op, og;
  locate(i, nd, &shape, &vp, &vg, &op, &og);
  const T p = param[op];
  T g = (flags & RMS_MAXIMIZE) ? -grad[og] : grad[og];
  if (flags & RMS_DECAY) g = add_alpha(g, p, weight_decay);
  const T v = fma(one_minus_alpha * g, g, square_avg[i] * alpha);
  square_avg[i] = v;
  T avg;
  if (flags & RMS_CENTERED) {
    const T m = lerp_t(grad_avg[i], g, one_minus_alpha);
    grad_avg[i] = m;
    avg = sqrt(fma(-m, m, v));
  } else {
    avg = sqrt(v);
  }
  avg = avg + eps;
  if (flags & RMS_MOMENTUM) {
    const T b = buf[i] * momentum + g / avg;
    buf[i] = b;
    param[op] = add_alpha(p, b, -lr);
  } else {
    param[op] = p + -lr * (g / avg);
  }
}
