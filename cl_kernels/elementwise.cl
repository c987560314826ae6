/*
 * elementwise.cl: out = OP(x0, x1, x2, x3) element by element, over broadcast, strided N-d views.
 *
 * Layout: all operands share one logical Shape of `nd` dims (nd <= MAX_DIMS of
 * common.cl). A tensor operand is a View: an element offset into its buffer and
 * one stride per dim, in elements; stride 0 broadcasts. A scalar operand is passed by value in the
 * compute type CT (its View is ignored).
 *
 * Kernels (same arguments; ew_rows takes one more, `chunk`):
 *   ew_contig   out and every tensor operand are contiguous over Shape: flat indexing.
 *   ew_strided  general views, for GPUs: work-item (i, j) does element i of outer row j.
 *   ew_rows     general views, for CPUs: a work-item loops over `chunk` elements of one row, so
 *               the division-heavy offset arithmetic is paid once per row, not per element.
 *
 * special.cl is prepended (ops/elementwise.py): the special functions that OP_* macros call.
 *
 * Build options:
 *   OP(a,b,c,d)  the operation: one of the OP_* macros below, or OP_user, a function that
 *                cltensor.elementwise() prepends to this file from the user's expression
 *   NARGS        number of operands, 1..4
 *   T0..T3       storage type of each operand; SCALARk defined when operand k is a scalar argument
 *                (half and bf16 are read and written through common.cl's LD/ST, CT being float)
 *   CT           compute type: operands are converted to it before OP
 *   CT_FLOAT     defined when CT is float or double
 *   OUT_T        storage type of the result; OUT_BOOL when the result is bool (stored as uchar 0/1)
 *   ND           ew_strided and ew_rows: the number of dims (>= 2), baked in so the index loop
 *                unrolls (the host pads shorter shapes with leading ones where it shares
 *                one build among several: ops/elementwise.py, ROWS_MIN_ND)
 *   ITEMS        ew_contig only: the elements per work-item (default 1)
 *   WHOLE_GROUPS ew_contig: whole work-groups skip the bounds tests (see ew_contig)
 *   VEC16        the program also holds ew_vec16 (see there)
 * Tunables: none here; the launcher picks work sizes.
 */
#ifndef ND
#define ND 2
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#include "common.cl"

/* ---- the operation table ------------------------------------------------------------------ */
#define OP_copy(a, b, c, d) (a)
#define OP_neg(a, b, c, d) (-(a))
#define OP_add(a, b, c, d) ((a) + (b))
#define OP_sum3(a, b, c, d) (((a) + (b)) + (c))
#define OP_sum4(a, b, c, d) ((((a) + (b)) + (c)) + (d))
#define OP_sub(a, b, c, d) ((a) - (b))
#define OP_rsub(a, b, c, d) ((b) - (a))
#define OP_mul(a, b, c, d) ((a) * (b))
#define OP_div(a, b, c, d) ((a) / (b))
#define OP_rdiv(a, b, c, d) ((b) / (a))
#define OP_add_scaled(a, b, c, d) ((a) + (c) * (b))
/* torch's addcmul, addcdiv (value * tensor1 first) and lerp (from the nearer end) */
#define OP_addcmul(a, b, c, d) ((a) + (d) * (b) * (c))
#define OP_addcdiv(a, b, c, d) ((a) + (d) * (b) / (c))
#define OP_lerp(a, b, c, d) (fabs(c) < 0.5f ? (a) + (c) * ((b) - (a)) : (b) - ((b) - (a)) * (1 - (c)))
#define OP_floor_divide(a, b, c, d) floor_div_ct(a, b)
#define OP_rfloor_divide(a, b, c, d) floor_div_ct(b, a)
#define OP_remainder(a, b, c, d) remainder_ct(a, b)
#define OP_rremainder(a, b, c, d) remainder_ct(b, a)
#define OP_pow(a, b, c, d) pow_ct(a, b)
#define OP_rpow(a, b, c, d) pow_ct(b, a)
#define OP_maximum(a, b, c, d) maximum_ct(a, b)
#define OP_minimum(a, b, c, d) minimum_ct(a, b)
#define OP_clamp(a, b, c, d) clamp_ct(a, b, c)
/* a NaN operand or bound gives NaN, as torch */
#define OP_clamp_min(a, b, c, d) (is_nan_ct(a) || is_nan_ct(b) ? (a) + (b) : (a) < (b) ? (b) : (a))
#define OP_clamp_max(a, b, c, d) (is_nan_ct(a) || is_nan_ct(b) ? (a) + (b) : (a) > (b) ? (b) : (a))
#define OP_where(a, b, c, d) ((a) != 0 ? (b) : (c))
#define OP_eq(a, b, c, d) ((a) == (b))
#define OP_ne(a, b, c, d) ((a) != (b))
#define OP_lt(a, b, c, d) ((a) < (b))
#define OP_le(a, b, c, d) ((a) <= (b))
#define OP_gt(a, b, c, d) ((a) > (b))
#define OP_ge(a, b, c, d) ((a) >= (b))
#define OP_logical_and(a, b, c, d) (((a) != 0) && ((b) != 0))
#define OP_logical_or(a, b, c, d) (((a) != 0) || ((b) != 0))
#define OP_logical_xor(a, b, c, d) (((a) != 0) != ((b) != 0))
#define OP_logical_not(a, b, c, d) ((a) == 0)
#define OP_abs(a, b, c, d) abs_ct(a)
#define OP_sign(a, b, c, d) (CT)(((a) > 0) - ((a) < 0))
#define OP_relu(a, b, c, d) ((a) < 0 ? (CT)0 : (a))
#define OP_exp(a, b, c, d) exp(a)
#define OP_log(a, b, c, d) log(a)
#define OP_log1p(a, b, c, d) log1p(a)
#define OP_expm1(a, b, c, d) expm1(a)
#define OP_sqrt(a, b, c, d) sqrt(a)
#define OP_rsqrt(a, b, c, d) rsqrt(a)
#define OP_sin(a, b, c, d) sin(a)
#define OP_cos(a, b, c, d) cos(a)
#define OP_tan(a, b, c, d) tan(a)
#define OP_sinh(a, b, c, d) sinh(a)
#define OP_cosh(a, b, c, d) cosh(a)
#define OP_asin(a, b, c, d) asin(a)
#define OP_acos(a, b, c, d) acos(a)
#define OP_atan(a, b, c, d) atan(a)
#define OP_erf(a, b, c, d) erf(a)
#define OP_erfc(a, b, c, d) erfc(a)
#define OP_log2(a, b, c, d) log2(a)
#define OP_log10(a, b, c, d) log10(a)
#define OP_exp2(a, b, c, d) exp2(a)
#define OP_tanh(a, b, c, d) tanh(a)
#define OP_sigmoid(a, b, c, d) sigmoid_ct(a)
#define OP_floor(a, b, c, d) floor(a)
#define OP_ceil(a, b, c, d) ceil(a)
#define OP_round(a, b, c, d) rint(a)
#define OP_trunc(a, b, c, d) trunc(a)
#define OP_reciprocal(a, b, c, d) ((CT)1 / (a))
#define OP_square(a, b, c, d) ((a) * (a))
#define OP_cube(a, b, c, d) ((a) * (a) * (a))
#define OP_rsquare(a, b, c, d) ((CT)1 / ((a) * (a)))
#define OP_isnan(a, b, c, d) is_nan_ct(a)
#define OP_isinf(a, b, c, d) is_inf_ct(a)
#define OP_isfinite(a, b, c, d) (!is_nan_ct(a) && !is_inf_ct(a))
#define OP_isposinf(a, b, c, d) (is_inf_ct(a) && (a) > 0)
#define OP_isneginf(a, b, c, d) (is_inf_ct(a) && (a) < 0)
#define OP_signbit(a, b, c, d) signbit_ct(a)
/* torch's math extras (cltensor/ops/pointwise.py); the float-only ones are launched with a
 * floating CT, the bitwise ones with an integer (or bool: uchar) CT */
#define OP_atan2(a, b, c, d) atan2(a, b)
#define OP_hypot(a, b, c, d) hypot(a, b)
#define OP_fmod(a, b, c, d) fmod_ct(a, b)
#define OP_logaddexp(a, b, c, d) logaddexp_ct(a, b)
#define OP_logaddexp2(a, b, c, d) logaddexp2_ct(a, b)
#define OP_copysign(a, b, c, d) copysign(a, b)
#define OP_xlogy(a, b, c, d) xlogy_ct(a, b)
#define OP_heaviside(a, b, c, d) ((a) == 0 ? (b) : (CT)((a) > 0))
#define OP_frac(a, b, c, d) ((a) - trunc(a))
#define OP_deg2rad(a, b, c, d) ((a) * (CT)0.017453292519943295)
#define OP_rad2deg(a, b, c, d) ((a) * (CT)57.29577951308232)
#define OP_logit(x, eps, c, d) logit_ct(x, eps)
#define OP_nan_to_num(a, nan, posinf, neginf) \
  (is_nan_ct(a) ? (nan) : is_inf_ct(a) ? ((a) > 0 ? (posinf) : (neginf)) : (a))
/* torch's special functions (cltensor/ops/pointwise.py): float CT, helpers below */
#define OP_acosh(a, b, c, d) acosh(a)
#define OP_asinh(a, b, c, d) asinh(a)
#define OP_atanh(a, b, c, d) atanh(a)
#define OP_lgamma(a, b, c, d) lgamma(a)
#define OP_erfinv(a, b, c, d) erfinv_ct(a)
#define OP_digamma(a, b, c, d) digamma_ct(a)
#define OP_polygamma(x, n, c, d) polygamma_ct(x, n)
#define OP_i0(a, b, c, d) i0_ct(a)
#define OP_i1(a, b, c, d) i1_ct(a)
#define OP_i0e(a, b, c, d) i0e_ct(a)
#define OP_i1e(a, b, c, d) i1e_ct(a)
#define OP_erfcx(a, b, c, d) erfcx_ct(a)
#define OP_ndtr(a, b, c, d) ndtr_ct(a)
#define OP_log_ndtr(a, b, c, d) log_ndtr_ct(a)
#define OP_ndtri(a, b, c, d) ndtri_ct(a)
#define OP_entr(a, b, c, d) entr_ct(a)
#define OP_xlog1py(a, b, c, d) xlog1py_ct(a, b)
#define OP_zeta(a, b, c, d) zeta_ct(a, b)
#define OP_spherical_bessel_j0(a, b, c, d) spherical_j0_ct(a)
#define OP_bessel_j0(a, b, c, d) bessel_j0_ct(a)
#define OP_bessel_j1(a, b, c, d) bessel_j1_ct(a)
#define OP_bessel_y0(a, b, c, d) bessel_y0_ct(a)
#define OP_bessel_y1(a, b, c, d) bessel_y1_ct(a)
#define OP_modified_bessel_k0(a, b, c, d) bessel_k_ct(a, 0, 0)
#define OP_modified_bessel_k1(a, b, c, d) bessel_k_ct(a, 1, 0)
#define OP_scaled_modified_bessel_k0(a, b, c, d) bessel_k_ct(a, 0, 1)
#define OP_scaled_modified_bessel_k1(a, b, c, d) bessel_k_ct(a, 1, 1)
#define OP_airy_ai(a, b, c, d) airy_ai_ct(a)
#define OP_chebyshev_polynomial_t(x, n, c, d) cheb_t_ct(x, n)
#define OP_chebyshev_polynomial_u(x, n, c, d) cheb_u_ct(x, n)
#define OP_chebyshev_polynomial_v(x, n, c, d) cheb_v_ct(x, n)
#define OP_chebyshev_polynomial_w(x, n, c, d) cheb_w_ct(x, n)
#define OP_shifted_chebyshev_polynomial_t(x, n, c, d) cheb_t_ct((x) + (x) - (CT)1, n)
#define OP_shifted_chebyshev_polynomial_u(x, n, c, d) cheb_u_ct((x) + (x) - (CT)1, n)
#define OP_shifted_chebyshev_polynomial_v(x, n, c, d) cheb_v_ct((x) + (x) - (CT)1, n)
#define OP_shifted_chebyshev_polynomial_w(x, n, c, d) cheb_w_ct((x) + (x) - (CT)1, n)
#define OP_hermite_polynomial_h(x, n, c, d) hermite_h_ct(x, n, (CT)2)
#define OP_hermite_polynomial_he(x, n, c, d) hermite_h_ct(x, n, (CT)1)
#define OP_laguerre_polynomial_l(x, n, c, d) laguerre_l_ct(x, n)
#define OP_legendre_polynomial_p(x, n, c, d) legendre_p_ct(x, n)
#define OP_sinc(a, b, c, d) ((a) == 0 ? (CT)1 : sin(PI_CT * (a)) / (PI_CT * (a)))
#define OP_nextafter(a, b, c, d) nextafter(a, b)
#define OP_igamma(a, x, c, d) igamma_ct(a, x)
#define OP_igammac(a, x, c, d) igammac_ct(a, x)
#define OP_frexp_mantissa(a, b, c, d) frexp_mantissa_ct(a)
#define OP_frexp_exponent(a, b, c, d) frexp_exponent_ct(a)
/* fmax/fmin ignore NaN (any CT); gcd/lcm take integer CTs */
#define OP_fmax(a, b, c, d) (is_nan_ct(a) ? (b) : is_nan_ct(b) ? (a) : ((a) > (b) ? (a) : (b)))
#define OP_fmin(a, b, c, d) (is_nan_ct(a) ? (b) : is_nan_ct(b) ? (a) : ((a) < (b) ? (a) : (b)))
#define OP_gcd(a, b, c, d) gcd_ct(a, b)
#define OP_lcm(a, b, c, d) lcm_ct(a, b)
#define OP_bitwise_and(a, b, c, d) ((a) & (b))
#define OP_bitwise_or(a, b, c, d) ((a) | (b))
#define OP_bitwise_xor(a, b, c, d) ((a) ^ (b))
#define OP_bitwise_not(a, b, c, d) (~(a))
#define OP_bitwise_left_shift(a, b, c, d) shift_left_ct(a, b)
#define OP_bitwise_right_shift(a, b, c, d) shift_right_ct(a, b)
/* activations of cltensor.nn.functional (cltensor/ops/activation.py) and their gradients:
 * x the input, y the output, g the output's gradient; the others are scalar parameters */
#define OP_leaky_relu(x, slope, c, d) ((x) > 0 ? (x) : (x) * (slope))
#define OP_leaky_relu_backward(g, x, slope, d) ((x) > 0 ? (g) : (g) * (slope))
#define OP_elu(x, alpha, c, d) ((x) > 0 ? (x) : (alpha) * expm1(x))
#define OP_elu_backward(g, x, alpha, d) ((x) <= 0 ? (g) * (alpha) * exp(x) : (g)) /* NaN: g */
#define OP_hardtanh_backward(g, x, lo, hi) (((x) <= (lo) || (x) >= (hi)) ? (CT)0 : (g))
#define OP_relu_backward(g, y, c, d) ((y) <= 0 ? (CT)0 : (g)) /* torch: NaN passes g */
#define OP_sigmoid_backward(g, y, c, d) ((g) * (y) * ((CT)1 - (y)))
#define OP_tanh_backward(g, y, c, d) ((g) * ((CT)1 - (y) * (y)))
#define OP_dropout(x, mask, scale, d) ((mask) != 0 ? (x) * (scale) : (CT)0)
#define OP_gelu(x, tanh_form, c, d) gelu_ct(x, tanh_form)
#define OP_gelu_backward(g, x, tanh_form, d) ((g) * gelu_grad_ct(x, tanh_form))
#define OP_silu(x, b, c, d) ((x) * sigmoid_ct(x))
#define OP_silu_backward(g, x, c, d) ((g) * sigmoid_ct(x) * ((CT)1 + (x) * ((CT)1 - sigmoid_ct(x))))
#define OP_mish(x, b, c, d) ((x) * tanh(softplus_ct(x, (CT)1, (CT)20)))
#define OP_mish_backward(g, x, c, d) ((g) * mish_grad_ct(x))
#define OP_softplus(x, beta, threshold, d) softplus_ct(x, beta, threshold)
#define OP_softplus_backward(g, x, beta, threshold) \
  ((x) * (beta) > (threshold) ? (g) : (g) * sigmoid_ct((x) * (beta)))
/* hardswish and hardsigmoid: torch's gradients at the kinks (hardswish's: 0 at -3, g at 3 and
 * at NaN) and NaN kept */
#define OP_hardswish(x, b, c, d) ((x) * clamp((x) + (CT)3, (CT)0, (CT)6) / (CT)6)
#define OP_hardswish_backward(g, x, c, d) \
  ((x) <= (CT)-3 ? (CT)0 : (x) < (CT)3 ? (g) * ((x) / (CT)3 + (CT)0.5) : (g))
#define OP_hardsigmoid(x, b, c, d) (is_nan_ct(x) ? (x) : clamp((x) + (CT)3, (CT)0, (CT)6) / (CT)6)
#define OP_hardsigmoid_backward(g, x, c, d) \
  ((x) > (CT)-3 && (x) < (CT)3 ? (g) / (CT)6 : (CT)0)
/* SELU: scale * elu(x, alpha), torch's fixed alpha and scale */
#define SELU_ALPHA ((CT)1.6732632423543772)
#define SELU_SCALE ((CT)1.0507009873554805)
#define OP_selu(x, b, c, d) (SELU_SCALE * ((x) > 0 ? (x) : SELU_ALPHA * expm1(x)))
#define OP_selu_backward(g, x, c, d) \
  ((x) <= 0 ? (g) * (SELU_SCALE * SELU_ALPHA) * exp(x) : (g) * SELU_SCALE)
#define OP_celu(x, alpha, c, d) ((x) > 0 ? (x) : (alpha) * expm1((x) / (alpha)))
#define OP_celu_backward(g, x, alpha, d) ((x) <= 0 ? (g) * exp((x) / (alpha)) : (g))
/* log(sigmoid(x)) without overflow: min(x, 0) - log1p(exp(-|x|)) */
#define OP_logsigmoid(x, b, c, d) (fmin((x), (CT)0) - log1p(exp(-fabs(x))))
#define OP_logsigmoid_backward(g, x, c, d) ((g) * sigmoid_ct(-(x)))
#define OP_softsign(x, b, c, d) ((x) / ((CT)1 + fabs(x)))
#define OP_softsign_backward(g, x, c, d) ((g) / (((CT)1 + fabs(x)) * ((CT)1 + fabs(x))))
#define OP_tanhshrink(x, b, c, d) ((x) - tanh(x))
#define OP_tanhshrink_backward(g, x, c, d) ((g) * tanh(x) * tanh(x))
/* the shrinks and threshold keep NaN (torch's order of compares); zero gradient at the kinks */
#define OP_softshrink(x, l, c, d) ((x) > (l) ? (x) - (l) : (x) < -(l) ? (x) + (l) : (x) * (CT)0)
#define OP_hardshrink(x, l, c, d) ((x) >= -(l) && (x) <= (l) ? (CT)0 : (x))
#define OP_shrink_backward(g, x, l, d) ((x) >= -(l) && (x) <= (l) ? (CT)0 : (g))
#define OP_threshold(x, th, value, d) ((x) <= (th) ? (value) : (x))
#define OP_threshold_backward(g, x, th, d) ((x) <= (th) ? (CT)0 : (g))

/* ---- helpers that differ between floating and integer compute types -------------------------- */
#ifdef CT_FLOAT
inline int is_nan_ct(CT a) { return isnan(a); }
inline int is_inf_ct(CT a) { return isinf(a); }
inline CT abs_ct(CT a) { return fabs(a); }
inline CT sigmoid_ct(CT a) { return (CT)1 / ((CT)1 + exp(-a)); }
inline CT floor_div_ct(CT a, CT b) { return floor(a / b); }
/* Python's modulo: the result takes the divisor's sign. */
inline CT remainder_ct(CT a, CT b) {
  CT m = fmod(a, b);
  return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
#ifdef POW_VIA_DOUBLE
/* float pow on CPUs as exp2(b * log2|a|) in double, C99's special cases kept: CPU runtimes'
 * float pow is a slow call (PoCL, 3.3M elements: 479 ms against 51); the double form is
 * correctly rounded but for rare double roundings, and at least as close as theirs */
inline CT pow_ct(CT a, CT b) {
  if (b == 0 || a == 1) return 1;
  if (isnan(a) || isnan(b)) return a + b;
  const CT m = fabs(a);
  if (m == 1 && isinf(b)) return 1;
  const int integral = floor(b) == b;
  if (a < 0 && !integral && isfinite(a)) return NAN;  /* a finite negative base */
  const int odd = integral && floor(b * 0.5f) != b * 0.5f;
  const CT r = (CT)exp2((double)b * log2((double)m));
  return (signbit(a) && odd) ? -r : r;
}
#else
inline CT pow_ct(CT a, CT b) { return pow(a, b); }
#endif
inline int signbit_ct(CT a) { return signbit(a) != 0; }
/* C's fmod: the result takes the dividend's sign */
inline CT fmod_ct(CT a, CT b) { return fmod(a, b); }
/* log(exp(a) + exp(b)) = max + log1p(exp(-|a - b|)); equal infinities give themselves (their
 * difference would be NaN) and a NaN operand gives NaN */
inline CT logaddexp_ct(CT a, CT b) {
  if (isinf(a) && a == b) return a;
  const CT m = a > b ? a : b;
  return m + log1p(exp(-fabs(a - b)));
}
inline CT logaddexp2_ct(CT a, CT b) {
  if (isinf(a) && a == b) return a;
  const CT m = a > b ? a : b;
  return m + log1p(exp2(-fabs(a - b))) * (CT)1.4426950408889634; /* 1 / ln 2 */
}
/* x * log(y), 0 where x == 0 unless y is NaN (torch's xlogy) */
inline CT xlogy_ct(CT x, CT y) { return isnan(y) ? y : (x == 0 ? (CT)0 : x * log(y)); }
/* log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps >= 0 (NaN stays NaN) */
inline CT logit_ct(CT x, CT eps) {
  if (eps >= 0) x = x < eps ? eps : (x > (CT)1 - eps ? (CT)1 - eps : x);
  return log(x / ((CT)1 - x));
}
/* log(1 + exp(beta * x)) / beta, or x where beta * x exceeds threshold (torch's softplus) */
inline CT softplus_ct(CT x, CT beta, CT threshold) {
  return x * beta > threshold ? x : log1p(exp(beta * x)) / beta;
}
/* GELU: x * Phi(x), or with tanh_form its tanh approximation, and the derivatives */
#define GELU_K ((CT)0.7978845608028654) /* sqrt(2 / pi) */
#define GELU_C ((CT)0.044715)
inline CT gelu_ct(CT x, CT tanh_form) {
  if (tanh_form != 0) return (CT)0.5 * x * ((CT)1 + tanh(GELU_K * (x + GELU_C * x * x * x)));
  return (CT)0.5 * x * ((CT)1 + erf(x * (CT)0.7071067811865476));
}
inline CT gelu_grad_ct(CT x, CT tanh_form) {
  if (tanh_form != 0) {
    const CT t = tanh(GELU_K * (x + GELU_C * x * x * x));
    return (CT)0.5 * ((CT)1 + t) +
           (CT)0.5 * x * ((CT)1 - t * t) * GELU_K * ((CT)1 + (CT)3 * GELU_C * x * x);
  }
  return (CT)0.5 * ((CT)1 + erf(x * (CT)0.7071067811865476)) +
         x * exp((CT)-0.5 * x * x) * (CT)0.3989422804014327; /* 1 / sqrt(2 pi) */
}
/* d/dx of x * tanh(softplus(x)) */
inline CT mish_grad_ct(CT x) {
  const CT t = tanh(softplus_ct(x, (CT)1, (CT)20));
  return t + x * sigmoid_ct(x) * ((CT)1 - t * t);
}

/* frexp: x = mantissa * 2^exponent, |mantissa| in [0.5, 1); 0, inf and NaN give themselves and
 * exponent 0, as torch */
inline CT frexp_mantissa_ct(CT a) {
  int e;
  return isfinite(a) ? frexp(a, &e) : a;
}
inline CT frexp_exponent_ct(CT a) {
  int e = 0;
  frexp(a, &e);
  return isfinite(a) ? (CT)e : (CT)0;
}
#else
inline int is_nan_ct(CT a) { return 0; }
inline int is_inf_ct(CT a) { return 0; }
inline CT abs_ct(CT a) { return a < 0 ? -a : a; }
inline CT sigmoid_ct(CT a) { return a; }
/* -1 of a signed CT (never equal for unsigned ones, uchar holding bools: no comparisons that
 * the compiler warns are always false) */
#define IS_MINUS_ONE(v) ((CT)-1 < (CT)0 && (v) == (CT)-1)
/* Integer division guarded against a zero divisor and MIN / -1, which trap on x86 (the Python
 * layer raises ZeroDivisionError before launching when a divisor is zero). */
inline CT floor_div_ct(CT a, CT b) {
  if (b == 0) return 0;
  if (IS_MINUS_ONE(b)) return -a;
  CT q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline CT remainder_ct(CT a, CT b) {
  if (b == 0 || IS_MINUS_ONE(b)) return 0;
  CT m = a % b;
  return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
inline CT pow_ct(CT a, CT e) {
  if (e < 0) return a == 1 ? 1 : (IS_MINUS_ONE(a) ? ((e & 1) ? -1 : 1) : 0);
  CT r = 1;
  while (e) { if (e & 1) r *= a; a *= a; e >>= 1; }
  return r;
}
inline int signbit_ct(CT a) { return a < 0; }
/* C's %: the result takes the dividend's sign; b == 0 is refused before launch, b == -1 traps
 * on MIN */
inline CT fmod_ct(CT a, CT b) { return (b == 0 || IS_MINUS_ONE(b)) ? 0 : a % b; }
/* torch's shifts: a shift by a negative count or by the width or more gives 0 (left) or the
 * sign fill (right); the left shift goes through ulong so a negative a is well defined */
#define CT_BITS ((CT)(sizeof(CT) * 8))
inline CT shift_left_ct(CT a, CT b) { return (b < 0 || b >= CT_BITS) ? 0 : (CT)((ulong)a << b); }
inline CT shift_right_ct(CT a, CT b) {
  return (b < 0 || b >= CT_BITS) ? (a < 0 ? (CT)-1 : 0) : a >> b;
}
/* torch's gcd (non-negative; gcd(0, 0) = 0) and lcm (0 when either is 0) */
inline CT gcd_ct(CT a, CT b) {
  a = a < 0 ? -a : a;
  b = b < 0 ? -b : b;
  while (a != 0) {
    const CT c = a;
    a = b % a;
    b = c;
  }
  return b;
}
inline CT lcm_ct(CT a, CT b) {
  const CT g = gcd_ct(a, b);
  const CT l = g == 0 ? 0 : a / g * b;
  return l < 0 ? -l : l;
}
#endif
inline CT maximum_ct(CT a, CT b) { return is_nan_ct(a) ? a : (is_nan_ct(b) ? b : (a > b ? a : b)); }
inline CT minimum_ct(CT a, CT b) { return is_nan_ct(a) ? a : (is_nan_ct(b) ? b : (a < b ? a : b)); }
inline CT clamp_ct(CT a, CT lo, CT hi) {
  if (is_nan_ct(a) || is_nan_ct(lo) || is_nan_ct(hi)) return a + lo + hi; /* NaN, as torch */
  CT t = a < lo ? lo : a;
  return t > hi ? hi : t;
}

/* ---- operands ------------------------------------------------------------------------------ */
#ifdef OUT_BOOL
#define STORE(r) ((uchar)((r) != 0))
#else
#define STORE(r) ((REG(OUT_T))(r))
#endif

#ifdef SCALAR0
#define ARG0 , const CT s0, const View v0
#define LD0(o) s0
#else
#define ARG0 , __global const T0* x0, const View v0
#define LD0(o) ((CT)LD(T0, x0, o))
#endif

#if NARGS >= 2
#ifdef SCALAR1
#define ARG1 , const CT s1, const View v1
#define LD1(o) s1
#else
#define ARG1 , __global const T1* x1, const View v1
#define LD1(o) ((CT)LD(T1, x1, o))
#endif
#define OFF1(k, d) o1 += k * v1.stride[d];
#define DECL1 long o1 = v1.offset;
#else
#define DECL1
#define ARG1
#define LD1(o) ((CT)0)
#define OFF1(k, d)
#endif

#if NARGS >= 3
#ifdef SCALAR2
#define ARG2 , const CT s2, const View v2
#define LD2(o) s2
#else
#define ARG2 , __global const T2* x2, const View v2
#define LD2(o) ((CT)LD(T2, x2, o))
#endif
#define OFF2(k, d) o2 += k * v2.stride[d];
#define DECL2 long o2 = v2.offset;
#else
#define DECL2
#define ARG2
#define LD2(o) ((CT)0)
#define OFF2(k, d)
#endif

#if NARGS >= 4
#ifdef SCALAR3
#define ARG3 , const CT s3, const View v3
#define LD3(o) s3
#else
#define ARG3 , __global const T3* x3, const View v3
#define LD3(o) ((CT)LD(T3, x3, o))
#endif
#define OFF3(k, d) o3 += k * v3.stride[d];
#define DECL3 long o3 = v3.offset;
#else
#define DECL3
#define ARG3
#define LD3(o) ((CT)0)
#define OFF3(k, d)
#endif

#define ARGS ARG0 ARG1 ARG2 ARG3

/* Declares o, o0..o3: the offsets, for out and each operand, of the first element of outer row
 * r (every dim but the innermost); consumes r. */
#define ROW_OFFSETS(r)                \
  long o = vo.offset, o0 = v0.offset; \
  DECL1 DECL2 DECL3                   \
  for (int d = ND - 2; d >= 0; --d) { \
    const long size = shape.size[d];  \
    const long k = r % size;          \
    r /= size;                        \
    o += k * vo.stride[d];            \
    o0 += k * v0.stride[d];           \
    OFF1(k, d) OFF2(k, d) OFF3(k, d)  \
  }

/* Work-item g does elements g + k * G, k < ITEMS (G the global size): coalesced, and the
 * ITEMS results are all computed before any is stored, so their loads are in flight together
 * (an in-place op's store could otherwise alias the next load). With WHOLE_GROUPS (the host
 * sets it for PoCL), a work-group that lies within n takes a copy of the body without the
 * `i < n` tests: PoCL turns them into masked loads and stores, which ran float32 relu 5x slower
 * on AVX-512 (and 16-bit stores more still). Intel's CPU runtime ran the copy 2x slower. */
#define EW_CONTIG_BODY(IN_RANGE)                                                        \
  REG(OUT_T) r[ITEMS];                                                                  \
  _Pragma("unroll") for (int k = 0; k < ITEMS; ++k) {                                   \
    const long i = first + k * step;                                                    \
    if (IN_RANGE)                                                                       \
      r[k] = STORE(OP(LD0(v0.offset + i), LD1(v1.offset + i), LD2(v2.offset + i),       \
                      LD3(v3.offset + i)));                                             \
  }                                                                                     \
  _Pragma("unroll") for (int k = 0; k < ITEMS; ++k) {                                   \
    const long i = first + k * step;                                                    \
    if (IN_RANGE) ST(OUT_T, out, vo.offset + i, r[k]);                                  \
  }

__kernel void ew_contig(const long n, const int nd, const Shape shape,
                        __global OUT_T* out, const View vo ARGS) {
  const long first = get_global_id(0), step = get_global_size(0);
#ifdef WHOLE_GROUPS
  if ((ITEMS - 1) * step + (long)(get_group_id(0) + 1) * get_local_size(0) <= n) {
    EW_CONTIG_BODY(1)
    return;
  }
#endif
  EW_CONTIG_BODY(i < n)
}

/* ew_vec16: work-item g does elements 16g .. 16g+15 as one float16 (common.cl's VLD16/VST16),
 * the last one the tail element by element. For CPUs, when out and every tensor operand are
 * contiguous float, half or bf16 and OP is written with operators alone (the host's VEC_OPS):
 * PoCL's per-element 16-bit conversions cost more than the memory traffic they save. */
#ifdef VEC16
#ifdef SCALAR0
#define VLD0(o) s0
#else
#define VLD0(o) VLD16(T0, x0, o)
#endif
#if NARGS >= 2 && !defined(SCALAR1)
#define VLD1(o) VLD16(T1, x1, o)
#else
#define VLD1(o) LD1(o)
#endif
#if NARGS >= 3 && !defined(SCALAR2)
#define VLD2(o) VLD16(T2, x2, o)
#else
#define VLD2(o) LD2(o)
#endif
#if NARGS >= 4 && !defined(SCALAR3)
#define VLD3(o) VLD16(T3, x3, o)
#else
#define VLD3(o) LD3(o)
#endif
__kernel void ew_vec16(const long n, const int nd, const Shape shape,
                       __global OUT_T* out, const View vo ARGS) {
  const long i = get_global_id(0) * 16;
  if (i + 16 <= n) {
    VST16(OUT_T, out, vo.offset + i, (float16)(OP(VLD0(v0.offset + i), VLD1(v1.offset + i),
                                                  VLD2(v2.offset + i), VLD3(v3.offset + i))));
  } else {
    for (long j = i; j < n; ++j)
      ST(OUT_T, out, vo.offset + j, STORE(OP(LD0(v0.offset + j), LD1(v1.offset + j),
                                             LD2(v2.offset + j), LD3(v3.offset + j))));
  }
}
#endif

/* Work-item (i, j) handles element i of the innermost dim of outer row j: the row's offsets are
 * computed once per work-item from j alone (loop-invariant across a CPU work-group's i loop),
 * and neighbouring work-items touch neighbouring inner elements (coalesced on GPUs). */
__kernel void ew_strided(const long n, const int nd, const Shape shape,
                         __global OUT_T* out, const View vo ARGS) {
  const long i = get_global_id(0);
  const long inner = shape.size[ND - 1];
  long r = get_global_id(1);
  if (i >= inner || r * inner >= n) return;
  ROW_OFFSETS(r)
  const long d = ND - 1;
  o += i * vo.stride[d];
  o0 += i * v0.stride[d];
  OFF1(i, d) OFF2(i, d) OFF3(i, d)
  ST(OUT_T, out, o, STORE(OP(LD0(o0), LD1(o1), LD2(o2), LD3(o3))));
}

__kernel void ew_rows(const long n, const int nd, const Shape shape,
                      __global OUT_T* out, const View vo ARGS, const long chunk) {
  const long inner = shape.size[ND - 1];
  const long per_row = (inner + chunk - 1) / chunk;
  long r = get_global_id(0) / per_row;
  if (r * inner >= n) return;
  const long start = (get_global_id(0) % per_row) * chunk;
  const long end = min(start + chunk, inner);
  ROW_OFFSETS(r)
  const int d = ND - 1;
  for (long i = start; i < end; ++i) {
    ST(OUT_T, out, o + i * vo.stride[d],
       STORE(OP(LD0(o0 + i * v0.stride[d]), LD1(o1 + i * v1.stride[d]),
                LD2(o2 + i * v2.stride[d]), LD3(o3 + i * v3.stride[d]))));
  }
}
