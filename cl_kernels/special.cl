/*
 * special.cl: torch.special's algorithms, a header prepended to elementwise.cl (ops/elementwise.py)
 * for its OP_* macros: erfinv; digamma, trigamma, polygamma and Hurwitz's zeta; i0, i1 and their
 * scaled forms i0e, i1e; erfcx, ndtr, log_ndtr and ndtri; entr and xlog1py; the spherical Bessel
 * j0, the Bessel functions J, Y and K of orders 0 and 1, Airy's Ai; the orthogonal polynomials of
 * degree n; the regularized incomplete gamma functions. OP_sinc reads PI_CT from here.
 *
 * Licence: digamma, trigamma, zeta, i0, i1, the Bessel and Airy functions and the incomplete
 * gamma functions derive from the Cephes Math Library (Copyright (c) 2018, Steven Moshier;
 * 3-clause BSD licence), as torch's do, and their constants are Cephes's; this note travels
 * with them.
 *
 * Build options (elementwise.cl's): CT, the compute type; CT_FLOAT, defined when CT is float or
 * double. Without CT_FLOAT (integer compute types) the file defines nothing.
 */
#ifdef CT_FLOAT
/* ---- special functions: torch's algorithms (ATen/native/Math.h), float CT ------------------
 * digamma, trigamma, zeta, i0, i1 and the incomplete gamma functions derive from the Cephes
 * Math Library (Copyright (c) 2018, Steven Moshier; 3-clause BSD licence), as torch's do; the
 * constants are Cephes's. Each is evaluated in CT: float results are float-accurate, not
 * computed in double as some of torch's CPU kernels are. */
#define PI_CT ((CT)3.141592653589793)
/* the unit roundoff of CT, where the series below stop */
#define EPS_CT (sizeof(CT) == 8 ? (CT)1.1102230246251565e-16 : (CT)5.9604644775390625e-8)
#define SERIES_MAX_TERMS 2000

/* erfinv: G. L. Pavlis's rational approximation (after Matlab 2.0's erfinv; about 1e-7
 * relative) refined by two Newton steps on erf(x) = y (on erfc(x) = 1 - |y| for |y| > 0.7),
 * which bring it to erf's (erfc's) own accuracy */
inline CT erfinv_ct(CT y) {
  const CT ya = fabs(y);
  if (ya > 1) return (CT)NAN;
  if (ya == 1) return copysign((CT)INFINITY, y);
  CT x;
  if (ya <= (CT)0.7) {
    const CT z = y * y;
    const CT num = (((CT)-0.140543331 * z + (CT)0.914624893) * z - (CT)1.645349621) * z +
                   (CT)0.886226899;
    const CT den = ((((CT)0.012229801 * z - (CT)0.329097515) * z + (CT)1.442710462) * z -
                    (CT)2.118377725) * z + 1;
    x = y * num / den;
    x -= (erf(x) - y) / ((CT)1.1283791670955126 * exp(-x * x)); /* 2 / sqrt(pi) */
    x -= (erf(x) - y) / ((CT)1.1283791670955126 * exp(-x * x));
    return x;
  }
  /* the tail: Newton's steps on erfc, whose relative precision holds as 1 - |y| (exact here)
   * shrinks; erf(x) - |y| in float32 was 4e-6 relative off at |y| = 0.999999 */
  const CT z = sqrt(-log((1 - ya) / 2));
  const CT num = (((CT)1.641345311 * z + (CT)3.429567803) * z - (CT)1.624906493) * z -
                 (CT)1.970840454;
  x = num / (((CT)1.6370678 * z + (CT)3.5438892) * z + 1);
  x -= ((1 - ya) - erfc(x)) / ((CT)1.1283791670955126 * exp(-x * x));
  x -= ((1 - ya) - erfc(x)) / ((CT)1.1283791670955126 * exp(-x * x));
  return copysign(x, y);
}

/* digamma for x > 0: the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the
 * asymptotic series log x - 1/(2x) - sum B_2k / (2k x^2k) (about 1e-15 relative in double) */
inline CT digamma_pos_ct(CT x) {
  const CT A[7] = {8.33333333333333333333E-2, -2.10927960927960927961E-2,
                   7.57575757575757575758E-3, -4.16666666666666666667E-3,
                   3.96825396825396825397E-3, -8.33333333333333333333E-3,
                   8.33333333333333333333E-2};
  CT result = 0;
  while (x < 10) {
    result -= 1 / x;
    x += 1;
  }
  if (x == 10) return result + (CT)2.25175258906672110764; /* psi(10) */
  CT y = 0;
  if (x < (CT)1e17) {
    const CT z = 1 / (x * x);
    for (int i = 0; i < 7; ++i) y = y * z + A[i];
    y *= z;
  }
  return result + log(x) - (CT)0.5 / x - y;
}

/* digamma: +-inf at +-0 (the sign flipped), NaN at negative integers, and the reflection
 * psi(x) = psi(1 - x) - pi / tan(pi r) for other x < 0, r = x - rint(x) in [-1/2, 1/2] (tan has
 * period pi). NOTE: not the fractional part: near a pole that is close to -1, and pi r's
 * rounding then costs float results 1e-4 relative (x = -1.99913) */
inline CT digamma_ct(CT x) {
  if (x == 0) return copysign((CT)INFINITY, -x);
  if (x < 0) {
    if (x == trunc(x)) return (CT)NAN;
    return digamma_pos_ct(1 - x) - PI_CT / tan(PI_CT * (x - rint(x)));
  }
  return digamma_pos_ct(x);
}

/* trigamma: the reflection below 1/2, the recurrence psi1(x) = psi1(x + 1) + 1/x^2 up to
 * x >= 10, then the asymptotic series 1/x + 1/(2x^2) + sum B_2k / x^(2k+1) through B_14 (about
 * 1e-16 relative). NOTE: torch's stops after six steps and at B_6: about 1e-9 off in double. */
inline CT trigamma_ct(CT x) {
  const CT B[7] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6};
  CT sign = 1, result = 0;
  if (x < (CT)0.5) {
    const CT s = sin(PI_CT * (x - rint(x))); /* sin^2 has period 1: the small argument */
    sign = -1;
    result -= PI_CT * PI_CT / (s * s);
    x = 1 - x;
  }
  while (x < 10) {
    result += 1 / (x * x);
    x += 1;
  }
  const CT ixx = 1 / (x * x);
  CT tail = 0;
  for (int i = 6; i >= 0; --i) tail = tail * ixx + B[i];
  result += (1 + 1 / (2 * x) + ixx * tail) / x;
  return sign * result;
}

/* Hurwitz zeta(x, q) = sum over k >= 0 of (q + k)^-x for q > 0: the sum's first terms, then
 * the Euler-Maclaurin formula (Bernoulli numbers in A: A[i] = (2i + 2)! / B_(2i+2)) */
inline CT zeta_pos_ct(CT x, CT q) {
  const CT A[12] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                    7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
                    -4.5979787224074726105e15, 1.8152105401943546773e17,
                    -7.1661652561756670113e18};
  CT s = pow(q, -x), a = q, b = 0;
  int i = 0;
  while (i < 9 || a <= 9) {
    i += 1;
    a += 1;
    b = pow(a, -x);
    s += b;
    if (-EPS_CT * s < b && b < EPS_CT * s) return s;
  }
  const CT w = a;
  s += b * w / (x - 1) - b / 2;
  CT f = 1, k = 0;
  for (i = 0; i < 12; i++) {
    f *= x + k;
    b /= w;
    const CT t = f * b / A[i];
    s += t;
    if (fabs(t / s) < EPS_CT) return s;
    k += 1;
    f *= x + k;
    b /= w;
    k += 1;
  }
  return s;
}

/* zeta(x, q) for any q, and integer x when q < 0. There the m = ceil(-q) terms before q + k
 * turns positive are (-1)^x |q + k|^-x, |q + k| = f .. f + m - 1 with f = -q - (m - 1), and
 * the rest is zeta(x, g), g = q + m (f and g exact but for g when -q < 1/2):
 *   zeta(x, q) = (-1)^x (zeta(x, f) - zeta(x, f + m)) + zeta(x, g),
 * each zeta with a positive q. For odd x the large zeta(x, f) and zeta(x, g) are subtracted
 * first, exactly 0 at half-integers q. Summed term by term in float32 they cancelled
 * (polygamma(6, -12.5) was 1.6e2 relative off, polygamma(2, -7.5) 1.8e-5). */
inline CT zeta_ct(CT x, CT q) {
  if (x == 1) return (CT)INFINITY;
  if (x < 1) return (CT)NAN;
  if (q > 0) return zeta_pos_ct(x, q);
  if (q == floor(q)) return (CT)INFINITY;
  if (x != floor(x)) return (CT)NAN;
  const CT m = ceil(-q), g = q + m, f = -q - (m - 1);
  if (fmod(x, (CT)2) != 0)
    return (zeta_pos_ct(x, g) - zeta_pos_ct(x, f)) + zeta_pos_ct(x, f + m);
  return (zeta_pos_ct(x, f) - zeta_pos_ct(x, f + m)) + zeta_pos_ct(x, g);
}

/* polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 2; digamma and trigamma below */
inline CT polygamma_ct(CT x, CT n) {
  if (n == 0) return digamma_ct(x);
  if (n == 1) return trigamma_ct(x);
  return (fmod(n, (CT)2) != 0 ? (CT)1 : (CT)-1) * exp(lgamma(n + 1)) * zeta_ct(n + 1, x);
}

/* the Chebyshev series sum' c_i T_i(x / 2) by Clenshaw's recurrence (Cephes's chbevl) */
inline CT chbevl_ct(const CT x, const CT *c, const int len) {
  CT b0 = c[0], b1 = 0, b2 = 0;
  for (int i = 1; i < len; ++i) {
    b2 = b1;
    b1 = b0;
    b0 = x * b1 - b2 + c[i];
  }
  return (CT)0.5 * (b0 - b2);
}

/* I0 and I1, the modified Bessel functions of the first kind: exp(|x|) times Chebyshev series
 * of exp(-x) I(x) (I1's divided by x) over [0, 8] and of exp(-x) sqrt(x) I(x) over (8, inf)
 * (Cephes's i0, i1: about 1e-16 relative) */
inline CT bessel_ct(const CT z, const CT *A, const int na, const CT *B, const int nb) {
  if (z <= 8) return chbevl_ct(z / 2 - 2, A, na);
  return chbevl_ct(32 / z - 2, B, nb) / sqrt(z);
}

/* exp(-|x|) I0(x) (torch.special.i0e): the series alone; i0 multiplies by exp(|x|) */
inline CT i0e_ct(CT x) {
  const CT A[30] = {
      -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
      1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
      -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
      9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
      -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
      1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
      -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
      1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
      -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
      1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1};
  const CT B[25] = {
      -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
      3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
      1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
      -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
      7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
      -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
      3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
      2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
      8.04490411014108831608E-1};
  return bessel_ct(fabs(x), A, 30, B, 25);
}

inline CT i0_ct(CT x) { return exp(fabs(x)) * i0e_ct(x); }

/* exp(-|x|) I1(x) (torch.special.i1e); i1 multiplies by exp(|x|) */
inline CT i1e_ct(CT x) {
  const CT A[29] = {
      2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
      -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
      3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
      -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
      9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
      -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
      4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
      -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
      2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
      -1.76416518357834055153E-1, 2.52587186443633654823E-1};
  const CT B[25] = {
      7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17,
      -3.20952592199342395980E-17, 2.96262899764595013876E-16, 3.30820231092092828324E-16,
      -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
      4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13,
      -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11,
      3.25260358301548823856E-11, -1.89749581235054123450E-11, -5.58974346219658380687E-10,
      -3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
      -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
      7.78576235018280120474E-1};
  const CT z = fabs(x), r = bessel_ct(z, A, 29, B, 25) * (z <= 8 ? z : 1);
  return x < 0 ? -r : r;
}

inline CT i1_ct(CT x) { return exp(fabs(x)) * i1e_ct(x); }

/* erfcx(x) = exp(x^2) erfc(x): as written below ERFCX_CF_FROM, where the rounding of x^2 is
 * amplified at most 6x; above, Laplace's continued fraction erfc(x) = exp(-x^2) / sqrt(pi) /
 * (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...)))), from ERFCX_TERMS terms up (2e-16 relative
 * at x = 2 in double); negative x by erfcx(x) = 2 exp(x^2) - erfcx(-x) (inf below -26.6). */
#define ERFCX_CF_FROM 2.5
#define ERFCX_TERMS 60
#define SQRT1_2_CT ((CT)0.7071067811865476)
inline CT erfcx_pos_ct(CT x) {
  if (x < (CT)ERFCX_CF_FROM) return exp(x * x) * erfc(x);
  CT f = x;
  for (int k = ERFCX_TERMS; k >= 1; --k) f = x + (CT)(0.5 * k) / f;
  return (CT)0.5641895835477563 / f;
}
inline CT erfcx_ct(CT x) {
  return x >= 0 || isnan(x) ? erfcx_pos_ct(x) : 2 * exp(x * x) - erfcx_pos_ct(-x);
}

/* ndtr(x) = erfc(-x / sqrt 2) / 2, by the upper tail above 0. NOTE: NVIDIA's float64 erfc of
 * negative arguments was ~1e-13 off (the gradient check of ndtr failed there at 3.05) */
inline CT ndtr_ct(CT x) {
  return x < 0 ? erfc(-x * SQRT1_2_CT) / 2 : 1 - erfc(x * SQRT1_2_CT) / 2;
}

/* log(ndtr(x)): through erfcx below -1, where ndtr underflows (log(erfcx(-x / sqrt 2) / 2) -
 * x^2 / 2), else log1p of minus the upper tail */
inline CT log_ndtr_ct(CT x) {
  if (x < -1) return log(erfcx_ct(-x * SQRT1_2_CT) / 2) - x * x / 2;
  return log1p(-erfc(x * SQRT1_2_CT) / 2);
}

/* ndtri(p), the standard normal's quantile: Abramowitz & Stegun 26.2.23's rational guess
 * (4.5e-4 absolute) in the lower half (the upper by symmetry, 1 - p exact there), then
 * NDTRI_STEPS Newton steps (quadratic convergence from the guess). In the tails (p < 1/4) on
 * log ndtr(x) = log p, whose step ndtr / phi = sqrt(pi / 2) erfcx(-x / sqrt 2) never
 * underflows; in the middle on erf(x / sqrt 2) / 2 = p - 1/2 (exact there), which keeps the
 * relative accuracy of x near 0 that ndtr(x) - p would lose. */
#define NDTRI_STEPS 3
inline CT ndtri_ct(CT p) {
  if (!(p > 0 && p < 1)) return p == 0 ? -INFINITY : (p == 1 ? INFINITY : (CT)NAN);
  if (p == (CT)0.5) return 0; /* NOTE: exactly: NVIDIA's erf left 6e-30 after the steps */
  const int upper = p > (CT)0.5;
  const CT q = upper ? 1 - p : p, lq = log(q), t = sqrt(-2 * lq);
  CT x = -(t - ((CT)2.515517 + t * ((CT)0.802853 + t * (CT)0.010328)) /
                   (1 + t * ((CT)1.432788 + t * ((CT)0.189269 + t * (CT)0.001308))));
  for (int i = 0; i < NDTRI_STEPS; ++i) {
    if (q >= (CT)0.25)
      x -= (erf(x * SQRT1_2_CT) / 2 - (q - (CT)0.5)) * (CT)2.5066282746310002 * exp(x * x / 2);
    else
      x -= (log_ndtr_ct(x) - lq) * (CT)1.2533141373155003 * erfcx_ct(-x * SQRT1_2_CT);
  }
  return upper ? -x : x;
}

/* -x log x: 0 at 0, -inf below (torch.special.entr) */
inline CT entr_ct(CT x) {
  return x > 0 ? -x * log(x) : (x == 0 ? (CT)0 : (isnan(x) ? x : (CT)-INFINITY));
}

/* x log1p(y), 0 where x is 0 unless y is NaN (torch.special.xlog1py) */
inline CT xlog1py_ct(CT x, CT y) { return isnan(y) ? y : (x == 0 ? (CT)0 : x * log1p(y)); }

/* sin(x) / x: its Taylor series below |x| = 1/2 (terms to x^12), 0 at +-inf */
inline CT spherical_j0_ct(CT x) {
  if (isinf(x)) return (CT)0;
  if (fabs(x) >= (CT)0.5) return sin(x) / x;
  const CT y = x * x;
  return (CT)1 - y * ((CT)1 / 6 - y * ((CT)1 / 120 - y * ((CT)1 / 5040 - y * ((CT)1 / 362880 -
         y * ((CT)1 / 39916800 - y / (CT)6227020800)))));
}

/* ---- Bessel functions J, Y and K of orders 0 and 1, and Airy's Ai ------------------------
 * Cephes's approximations (j0.c, j1.c, k0.c, k1.c, airy.c; the licence above), the constants
 * Cephes's. NOTE: torch's loops drop the leading 1 of Cephes's p1evl denominators (RQ, QQ, YQ,
 * AFD, AGD): its J and Y are up to 2.4e-6 of their envelope off just above x = 5, its Ai
 * 2.5e-6 near -2.3; here they are kept. Two more departures, for large |x|: the phases
 * x - pi/4 and x - 3pi/4 are taken through sin x and cos x (x - pi/4 rounded costs up to
 * ulp(x) / 2 of phase: 7e-12 at x = 1e5, all of it at 1e300), and Airy's zeta = (2/3) |x|^(3/2)
 * is carried as a pair of CTs (airy_zeta_ct). */
#define FRAC_2_PI_CT ((CT)0.6366197723675814)  /* 2 / pi */
#define FRAC_1_SQRTPI_CT ((CT)0.5641895835477563)  /* 1 / sqrt(pi) */

/* c[0] x^(n-1) + ... + c[n-1] (Cephes's polevl) */
inline CT polevl_ct(const CT x, const CT *c, const int n) {
  CT r = c[0];
  for (int i = 1; i < n; ++i) r = r * x + c[i];
  return r;
}

/* x^n + c[0] x^(n-1) + ... + c[n-1]: the leading 1 not stored (Cephes's p1evl) */
inline CT p1evl_ct(const CT x, const CT *c, const int n) {
  CT r = 1;
  for (int i = 0; i < n; ++i) r = r * x + c[i];
  return r;
}

/* J_n (y = 0) or Y_n (y = 1) of order n = 0 or 1 for x > BESSEL_FAR_FROM (n and y constants:
 * the branches fold): with chi = x - (2n + 1) pi / 4,
 *   J_n = sqrt(2 / (pi x)) (P cos chi - Q sin chi), Y_n = sqrt(2 / (pi x)) (P sin chi + Q cos chi),
 * P and 5 Q / x rational functions of 25 / x^2; cos chi and sin chi are (cos x + sin x) / sqrt 2
 * and (sin x - cos x) / sqrt 2 for n = 0, (sin x - cos x) / sqrt 2 and -(sin x + cos x) / sqrt 2
 * for n = 1. 0 at +inf. Cephes's forms start at 5; float takes them from 3, where they are
 * within 2e-9 of the envelope, sparing Y's polynomials their cancellation (8.6 ulp near 5). */
#define BESSEL_FAR_FROM (sizeof(CT) == 8 ? (CT)5 : (CT)3)
inline CT bessel_far_ct(CT x, int n, int y) {
  const CT PP0[7] = {7.96936729297347051624E-4, 8.28352392107440799803E-2,
                     1.23953371646414299388E0, 5.44725003058768775090E0, 8.74716500199817011941E0,
                     5.30324038235394892183E0, 9.99999999999999997821E-1};
  const CT PQ0[7] = {9.24408810558863637013E-4, 8.56288474354474431428E-2,
                     1.25352743901058953537E0, 5.47097740330417105182E0, 8.76190883237069594232E0,
                     5.30605288235394617618E0, 1.00000000000000000218E0};
  const CT QP0[8] = {-1.13663838898469149931E-2, -1.28252718670509318512E0,
                     -1.95539544257735972385E1, -9.32060152123768231369E1,
                     -1.77681167980488050595E2, -1.47077505154951170175E2,
                     -5.14105326766599330220E1, -6.05014350600728481186E0};
  const CT QQ0[7] = {6.43178256118178023184E1, 8.56430025976980587198E2,
                     3.88240183605401609683E3, 7.24046774195652478189E3, 5.93072701187316984827E3,
                     2.06209331660327847417E3, 2.42005740240291393179E2};
  const CT PP1[7] = {7.62125616208173112003E-4, 7.31397056940917570436E-2,
                     1.12719608129684925192E0, 5.11207951146807644818E0, 8.42404590141772420927E0,
                     5.21451598682361504063E0, 1.00000000000000000254E0};
  const CT PQ1[7] = {5.71323128072548699714E-4, 6.88455908754495404082E-2,
                     1.10514232634061696926E0, 5.07386386128601488557E0, 8.39985554327604159757E0,
                     5.20982848682361821619E0, 9.99999999999999997461E-1};
  const CT QP1[8] = {5.10862594750176621635E-2, 4.98213872951233449420E0,
                     7.58238284132545283818E1, 3.66779609360150777800E2, 7.10856304998926107277E2,
                     5.97489612400613639965E2, 2.11688757100572135698E2, 2.52070205858023719784E1};
  const CT QQ1[7] = {7.42373277035675149943E1, 1.05644886038262816351E3,
                     4.98641058337653607651E3, 9.56231892404756170795E3, 7.99704160447350683650E3,
                     2.82619278517639096600E3, 3.36093607810698293419E2};
  if (isinf(x)) return (CT)0;
  const CT w = 5 / x, z = w * w;
  const CT p = n == 0 ? polevl_ct(z, PP0, 7) / polevl_ct(z, PQ0, 7)
                      : polevl_ct(z, PP1, 7) / polevl_ct(z, PQ1, 7);
  const CT q = w * (n == 0 ? polevl_ct(z, QP0, 8) / p1evl_ct(z, QQ0, 7)
                           : polevl_ct(z, QP1, 8) / p1evl_ct(z, QQ1, 7));
  CT c;
  const CT s = sincos(x, &c);
  const CT cos_chi = n == 0 ? c + s : s - c, sin_chi = n == 0 ? s - c : -(s + c);
  /* sqrt(2 / (pi x)) / sqrt 2 */
  return (y ? p * sin_chi + q * cos_chi : p * cos_chi - q * sin_chi) * FRAC_1_SQRTPI_CT / sqrt(x);
}

/* J0: even; up to BESSEL_FAR_FROM, (z - j1^2) (z - j2^2) R(z), z = x^2, the first two zeros'
 * squares factored out; 1 - z / 4 below 1e-5 */
inline CT bessel_j0_ct(CT x) {
  const CT RP[4] = {-4.79443220978201773821E9, 1.95617491946556577543E12,
                    -2.49248344360967716204E14, 9.70862251047306323952E15};
  const CT RQ[8] = {4.99563147152651017219E2, 1.73785401676374683123E5, 4.84409658339962045305E7,
                    1.11855537045356834862E10, 2.11277520115489217587E12,
                    3.10518229857422583814E14, 3.18121955943204943306E16,
                    1.71086294081043136091E18};
  x = fabs(x);
  if (x > BESSEL_FAR_FROM) return bessel_far_ct(x, 0, 0);
  const CT z = x * x;
  if (x < (CT)1e-5) return 1 - z / 4;
  return (z - (CT)5.78318596294678452118E0) * (z - (CT)3.04712623436620863991E1) *
         polevl_ct(z, RP, 4) / p1evl_ct(z, RQ, 8);
}

/* J1: odd; up to BESSEL_FAR_FROM, x (z - j1^2) (z - j2^2) R(z), z = x^2 */
inline CT bessel_j1_ct(CT x) {
  const CT RP[4] = {-8.99971225705559398224E8, 4.52228297998194034323E11,
                    -7.27494245221818276015E13, 3.68295732863852883286E15};
  const CT RQ[8] = {6.20836478118054335476E2, 2.56987256757748830383E5, 8.35146791431949253037E7,
                    2.21511595479792499675E10, 4.74914122079991414898E12,
                    7.84369607876235854894E14, 8.95222336184627338078E16,
                    5.32278620332680085395E18};
  if (fabs(x) > BESSEL_FAR_FROM) return x < 0 ? -bessel_far_ct(-x, 1, 0) : bessel_far_ct(x, 1, 0);
  const CT z = x * x;
  return x * (z - (CT)1.46819706421238932572E1) * (z - (CT)4.92184563216946036703E1) *
         polevl_ct(z, RP, 4) / p1evl_ct(z, RQ, 8);
}

/* Y0: -inf at 0, NaN below; up to BESSEL_FAR_FROM, R(x^2) + (2 / pi) log(x) J0(x) */
inline CT bessel_y0_ct(CT x) {
  const CT YP[8] = {1.55924367855235737965E4, -1.46639295903971606143E7,
                    5.43526477051876500413E9, -9.82136065717911466409E11,
                    8.75906394395366999549E13, -3.46628303384729719441E15,
                    4.42733268572569800351E16, -1.84950800436986690637E16};
  const CT YQ[7] = {1.04128353664259848412E3, 6.26107330137134956842E5, 2.68919633393814121987E8,
                    8.64002487103935000337E10, 2.02979612750105546709E13,
                    3.17157752842975028269E15, 2.50596256172653059228E17};
  if (x <= 0) return x == 0 ? (CT)-INFINITY : (CT)NAN;
  if (x > BESSEL_FAR_FROM) return bessel_far_ct(x, 0, 1);
  const CT z = x * x;
  return polevl_ct(z, YP, 8) / p1evl_ct(z, YQ, 7) + FRAC_2_PI_CT * log(x) * bessel_j0_ct(x);
}

/* Y1: -inf at 0, NaN below; up to BESSEL_FAR_FROM, x R(x^2) + (2 / pi) (J1(x) log(x) - 1 / x) */
inline CT bessel_y1_ct(CT x) {
  const CT YP[6] = {1.26320474790178026440E9, -6.47355876379160291031E11,
                    1.14509511541823727583E14, -8.12770255501325109621E15,
                    2.02439475713594898196E17, -7.78877196265950026825E17};
  const CT YQ[8] = {5.94301592346128195359E2, 2.35564092943068577943E5, 7.34811944459721705660E7,
                    1.87601316108706159478E10, 3.88231277496238566008E12,
                    6.20557727146953693363E14, 6.87141087355300489866E16,
                    3.97270608116560655612E18};
  if (x <= 0) return x == 0 ? (CT)-INFINITY : (CT)NAN;
  if (x > BESSEL_FAR_FROM) return bessel_far_ct(x, 1, 1);
  const CT z = x * x;
  return x * (polevl_ct(z, YP, 6) / p1evl_ct(z, YQ, 8)) +
         FRAC_2_PI_CT * (bessel_j1_ct(x) * log(x) - 1 / x);
}

/* K0 (n = 0) or K1 (n = 1), times exp(x) where scaled (n and scaled constants): +inf at 0, NaN
 * below, 0 at +inf. For x <= 2 Chebyshev series in x^2 - 2 plus log(x / 2) I_n(x) terms,
 * K0 = A0 - log(x / 2) I0(x) and K1 = log(x / 2) I1(x) + A1 / x; above, exp(-x) / sqrt(x)
 * times a Chebyshev series in 8 / x - 2. */
inline CT bessel_k_ct(CT x, int n, int scaled) {
  const CT A0[10] = {1.37446543561352307156E-16, 4.25981614279661018399E-14,
                     1.03496952576338420167E-11, 1.90451637722020886025E-9,
                     2.53479107902614945675E-7, 2.28621210311945178607E-5,
                     1.26461541144692592338E-3, 3.59799365153615016266E-2,
                     3.44289899924628486886E-1, -5.35327393233902768720E-1};
  const CT A1[11] = {-7.02386347938628759343E-18, -2.42744985051936593393E-15,
                     -6.66690169419932900609E-13, -1.41148839263352776110E-10,
                     -2.21338763073472585583E-8, -2.43340614156596823496E-6,
                     -1.73028895751305206302E-4, -6.97572385963986435018E-3,
                     -1.22611180822657148235E-1, -3.53155960776544875667E-1,
                     1.52530022733894777053E0};
  const CT B0[25] = {
      5.30043377268626276149E-18, -1.64758043015242134646E-17, 5.21039150503902756861E-17,
      -1.67823109680541210385E-16, 5.51205597852431940784E-16, -1.84859337734377901440E-15,
      6.34007647740507060557E-15, -2.22751332699166985548E-14, 8.03289077536357521100E-14,
      -2.98009692317273043925E-13, 1.14034058820847496303E-12, -4.51459788337394416547E-12,
      1.85594911495471785253E-11, -7.95748924447710747776E-11, 3.57739728140030116597E-10,
      -1.69753450938905987466E-9, 8.57403401741422608519E-9, -4.66048989768794782956E-8,
      2.76681363944501510342E-7, -1.83175552271911948767E-6, 1.39498137188764993662E-5,
      -1.28495495816278026384E-4, 1.56988388573005337491E-3, -3.14481013119645005427E-2,
      2.44030308206595545468E0};
  const CT B1[25] = {
      -5.75674448366501715755E-18, 1.79405087314755922667E-17, -5.68946255844285935196E-17,
      1.83809354436663880070E-16, -6.05704724837331885336E-16, 2.03870316562433424052E-15,
      -7.01983709041831346144E-15, 2.47715442448130437068E-14, -8.97670518232499435011E-14,
      3.34841966607842919884E-13, -1.28917396095102890680E-12, 5.13963967348173025100E-12,
      -2.12996783842756842877E-11, 9.21831518760500529508E-11, -4.19035475934189648750E-10,
      2.01504975519703286596E-9, -1.03457624656780970260E-8, 5.74108412545004946722E-8,
      -3.50196060308781257119E-7, 2.40648494783721712015E-6, -1.93619797416608296024E-5,
      1.95215518471351631108E-4, -2.85781685962277938680E-3, 1.03923736576817238437E-1,
      2.72062619048444266945E0};
  if (!(x > 0)) return x == 0 ? (CT)INFINITY : (CT)NAN;
  if (x <= 2) {
    /* log(x / 2), but x / 2 is 0 at the smallest subnormal x: below 1 log x - log 2 (no
     * cancellation there) */
    const CT z = x * x - 2, l = x < 1 ? log(x) - (CT)0.6931471805599453 : log(x / 2);
    const CT k = n == 0 ? chbevl_ct(z, A0, 10) - l * i0_ct(x)
                        : l * i1_ct(x) + chbevl_ct(z, A1, 11) / x;
    return scaled ? k * exp(x) : k;
  }
  const CT ke = chbevl_ct(8 / x - 2, n == 0 ? B0 : B1, 25) / sqrt(x);
  return scaled ? ke : ke * exp(-x);
}

/* zeta = (2/3) a^(3/2) for a >= 0, as hi (returned) + *lo (about ulp(hi) / 2 at most), from
 * fma's exact residuals of sqrt, the product and the division by 3. Ai's exponent and phase:
 * zeta rounded to one CT would cost Ai zeta ulps (1e-13 at |x| = 100, 2e-12 at -1000); the
 * pair holds the phase to about zeta eps^2: 2e-15 of Ai's envelope at x = -1e12, 8e-11 at
 * -1e15 in double; in float 2 ulp down to -1e5, 37 ulp by -1e6. */
inline CT airy_zeta_ct(CT a, CT *lo) {
  const CT s = sqrt(a), s_lo = fma(-s, s, a) / (s + s);
  const CT p = a * s, p_lo = fma(a, s, -p) + a * s_lo;
  const CT hi = (p + p) / 3;
  *lo = (fma((CT)-3, hi, p + p) + (p_lo + p_lo)) / 3;
  return hi;
}

/* Ai: the Maclaurin series Ai(0) f(x) + Ai'(0) g(x) from -2.09 to AIRY_SERIES_MAX, AIRY_TERMS
 * terms each (f's and g's last below 1e-17 relative at |x| = 2.09); above, the asymptotic
 * exp(-zeta) / (2 sqrt(pi) x^(1/4)) R(1 / zeta) (0 beyond 110, where it underflows); below,
 * Ai = (sin(zeta + pi/4) U - cos(zeta + pi/4) V) / (sqrt(pi) |x|^(1/4)), U and V rational
 * functions of 1 / zeta (and 0 where zeta overflows, |x| > 1e205 in double, 3e25 in float:
 * within Ai's envelope |x|^(-1/4) / sqrt(pi) of the truth). 0 at +-inf, NaN at NaN. */
/* Cephes's 2.09; float from 1.2, where R is within 1e-9, sparing it the series' cancellation
 * (at 2.09 Ai is 1/35 of Ai(0) f: 26 ulp) */
#define AIRY_SERIES_MAX (sizeof(CT) == 8 ? (CT)2.09 : (CT)1.2)
#define AIRY_TERMS 12
inline CT airy_ai_ct(CT x) {
  const CT AN[8] = {3.46538101525629032477E-1, 1.20075952739645805542E1,
                    7.62796053615234516538E1, 1.68089224934630576269E2, 1.59756391350164413639E2,
                    7.05360906840444183113E1, 1.40264691163389668864E1, 9.99999999999999995305E-1};
  const CT AD[8] = {5.67594532638770212846E-1, 1.47562562584847203173E1,
                    8.45138970141474626562E1, 1.77318088145400459522E2, 1.64234692871529701831E2,
                    7.14778400825575695274E1, 1.40959135607834029598E1, 1.00000000000000000470E0};
  const CT AFN[9] = {-1.31696323418331795333E-1, -6.26456544431912369773E-1,
                     -6.93158036036933542233E-1, -2.79779981545119124951E-1,
                     -4.91900132609500318020E-2, -4.06265923594885404393E-3,
                     -1.59276496239262096340E-4, -2.77649108155232920844E-6,
                     -1.67787698489114633780E-8};
  const CT AFD[9] = {1.33560420706553243746E1, 3.26825032795224613948E1,
                     2.67367040941499554804E1, 9.18707402907259625840E0, 1.47529146771666414581E0,
                     1.15687173795188044134E-1, 4.40291641615211203805E-3,
                     7.54720348287414296618E-5, 4.51850092970580378464E-7};
  const CT AGN[11] = {1.97339932091685679179E-2, 3.91103029615688277255E-1,
                      1.06579897599595591108E0, 9.39169229816650230044E-1,
                      3.51465656105547619242E-1, 6.33888919628925490927E-2,
                      5.85804113048388458567E-3, 2.82851600836737019778E-4,
                      6.98793669997260967291E-6, 8.11789239554389293311E-8,
                      3.41551784765923618484E-10};
  const CT AGD[10] = {9.30892908077441974853E0, 1.98352928718312140417E1,
                      1.55646628932864612953E1, 5.47686069422975497931E0,
                      9.54293611618961883998E-1, 8.64580826352392193095E-2,
                      4.12656523824222607191E-3, 1.01259085116509135510E-4,
                      1.17166733214413521882E-6, 4.91834570062930015649E-9};
  if (x >= -(CT)2.09 && x <= AIRY_SERIES_MAX) {
    const CT x3 = x * x * x;
    CT f = 1, g = x, tf = 1, tg = x;
    for (int k = 0; k < 3 * AIRY_TERMS; k += 3) {
      tf *= x3 / (CT)((k + 2) * (k + 3));
      tg *= x3 / (CT)((k + 3) * (k + 4));
      f += tf;
      g += tg;
    }
    return (CT)0.355028053887817239260 * f - (CT)0.258819403792806798405 * g;
  }
  if (x > 110) return (CT)0;
  CT lo;
  const CT zeta = airy_zeta_ct(fabs(x), &lo), z = 1 / zeta;
  if (x > 0) {
    const CT r = polevl_ct(z, AN, 8) / polevl_ct(z, AD, 8);
    return FRAC_1_SQRTPI_CT / 2 * r * (exp(-zeta) * (1 - lo)) / sqrt(sqrt(x));
  }
  if (isinf(zeta)) return (CT)0;
  const CT zz = z * z;
  const CT u = 1 + zz * polevl_ct(zz, AFN, 9) / p1evl_ct(zz, AFD, 9);
  const CT v = z * polevl_ct(zz, AGN, 11) / p1evl_ct(zz, AGD, 10);
  CT c0, c1;
  const CT s0 = sincos(zeta, &c0), s1 = sincos(lo, &c1); /* lo: up to ulp(zeta) / 2 */
  const CT s = s0 * c1 + c0 * s1, c = c0 * c1 - s0 * s1;  /* of zeta + lo */
  /* sin(zeta + pi/4) = (s + c) / sqrt 2, cos(zeta + pi/4) = (c - s) / sqrt 2 */
  return ((s + c) * u - (c - s) * v) * (SQRT1_2_CT * FRAC_1_SQRTPI_CT) / sqrt(sqrt(-x));
}

/* ---- torch.special's orthogonal polynomials of degree n ----------------------------------
 * n is truncated to an integer; a negative one gives 0 and NaN gives NaN. The three-term
 * recurrences (recurrence_ct) run from degree 0 up, stopping early once the value is NaN (it
 * stays NaN); the Chebyshev polynomials take their closed forms for degrees above
 * CHEB_INSIDE_MAX inside (-1, 1) and CHEB_OUTSIDE_MAX outside, where the recurrence loses
 * accuracy or takes n steps:
 * with x = cos(th), T = cos(n th), U = sin((n + 1) th) / sin(th), V = cos((n + 1/2) th) /
 * cos(th / 2), W = sin((n + 1/2) th) / sin(th / 2), and cosh, sinh of t = acosh(|x|) for
 * |x| > 1 (V and W trade places for x < -1). At x = +-inf each gives its limit (+-inf; 1 for
 * degree 0), where the recurrences, as torch's, would give inf - inf = NaN. */
#define CHEB_INSIDE_MAX 8
#define CHEB_OUTSIDE_MAX 64

/* A polynomial of degree n with a positive leading coefficient at x = +-inf (NOTE: the
 * recurrences would give inf - inf = NaN there; torch's do) */
inline CT poly_at_inf_ct(CT x, CT n) {
  if (trunc(n) == 0) return (CT)1;
  return x < 0 && fmod(trunc(n), (CT)2) != 0 ? (CT)-INFINITY : (CT)INFINITY;
}

#define REC_CHEBYSHEV 0 /* p_{k+1} = 2x p_k - p_{k-1} */
#define REC_HERMITE 1   /* p_{k+1} = s (x p_k - k p_{k-1}) */
#define REC_LAGUERRE 2  /* (k + 1) p_{k+1} = (2k + 1 - x) p_k - k p_{k-1} */
#define REC_LEGENDRE 3  /* (k + 1) p_{k+1} = (2k + 1) x p_k - k p_{k-1} */

/* The recurrence `kind` (a constant: the branches fold) from p_0 = 1, p_1 = first, up to
 * degree n; s: Hermite's 2 (H) or 1 (He). */
inline CT recurrence_ct(CT x, long n, CT first, int kind, CT s) {
  if (n == 0) return (CT)1;
  CT p = (CT)1, q = first;
  for (long k = 1; k < n && !isnan(q); ++k) {
    const CT r = kind == REC_CHEBYSHEV ? (x + x) * q - p
                 : kind == REC_HERMITE ? s * (x * q - (CT)k * p)
                 : kind == REC_LAGUERRE ? (((CT)(2 * k + 1) - x) * q - (CT)k * p) / (CT)(k + 1)
                 : ((CT)(2 * k + 1) * x * q - (CT)k * p) / (CT)(k + 1);
    p = q;
    q = r;
  }
  return q;
}

inline CT cheb_t_ct(CT x, CT n) {
  if (!(n >= 0)) return isnan(n) ? n : (CT)0;
  if (isinf(x)) return poly_at_inf_ct(x, n);
  const CT ax = fabs(x), sign = fmod(trunc(n), (CT)2) != 0 && x < 0 ? (CT)-1 : (CT)1;
  if (ax == 1) return sign;
  if (n > CHEB_INSIDE_MAX && ax < 1) return cos(trunc(n) * acos(x));
  if (n > CHEB_OUTSIDE_MAX && ax > 1) return sign * cosh(trunc(n) * acosh(ax));
  return recurrence_ct(x, (long)n, x, REC_CHEBYSHEV, 0);
}

inline CT cheb_u_ct(CT x, CT n) {
  if (!(n >= 0)) return isnan(n) ? n : (CT)0;
  if (isinf(x)) return poly_at_inf_ct(x, n);
  const CT m = trunc(n) + 1, ax = fabs(x), sign = fmod(m - 1, (CT)2) != 0 && x < 0 ? -1 : 1;
  if (ax == 1) return sign * m;
  if (n > CHEB_INSIDE_MAX && ax < 1) {
    const CT th = acos(x);
    return sin(m * th) / sin(th);
  }
  if (n > CHEB_OUTSIDE_MAX && ax > 1) {
    const CT t = acosh(ax);
    return sign * sinh(m * t) / sinh(t);
  }
  return recurrence_ct(x, (long)n, x + x, REC_CHEBYSHEV, 0);
}

/* V (third kind) for w = 0, W (fourth kind) for w = 1: V_n(-x) = (-1)^n W_n(x) */
inline CT cheb_vw_ct(CT x, CT n, int w) {
  if (!(n >= 0)) return isnan(n) ? n : (CT)0;
  if (isinf(x)) return poly_at_inf_ct(x, n);
  const CT h = trunc(n) + (CT)0.5, odd = fmod(trunc(n), (CT)2) != 0 ? -1 : 1;
  if (x == 1) return w ? h + h : (CT)1;
  if (x == -1) return w ? odd : odd * (h + h);
  if (n > CHEB_INSIDE_MAX && fabs(x) < 1) {
    const CT th = acos(x);
    return w ? sin(h * th) / sin(th / 2) : cos(h * th) / cos(th / 2);
  }
  if (n > CHEB_OUTSIDE_MAX && fabs(x) > 1) {
    const CT t = acosh(fabs(x));
    const int sinh_form = (x > 0) == (w != 0); /* W for x > 1, V for x < -1 */
    const CT r = sinh_form ? sinh(h * t) / sinh(t / 2) : cosh(h * t) / cosh(t / 2);
    return x < 0 ? odd * r : r;
  }
  return recurrence_ct(x, (long)n, x + x + (w ? (CT)1 : (CT)-1), REC_CHEBYSHEV, 0);
}
inline CT cheb_v_ct(CT x, CT n) { return cheb_vw_ct(x, n, 0); }
inline CT cheb_w_ct(CT x, CT n) { return cheb_vw_ct(x, n, 1); }

/* Hermite's H (s = 2: H_{k+1} = 2x H_k - 2k H_{k-1}) and He (s = 1: He_{k+1} = x He_k -
 * k He_{k-1}) */
inline CT hermite_h_ct(CT x, CT n, CT s) {
  if (!(n >= 0)) return isnan(n) ? n : (CT)0;
  if (isinf(x)) return poly_at_inf_ct(x, n);
  return recurrence_ct(x, (long)n, s * x, REC_HERMITE, s);
}

/* Laguerre's L: (k + 1) L_{k+1} = (2k + 1 - x) L_k - k L_{k-1}; 1 at x = 0 */
inline CT laguerre_l_ct(CT x, CT n) {
  if (!(n >= 0)) return isnan(n) ? n : (CT)0;
  if (isinf(x)) return poly_at_inf_ct(-x, n);
  return x == 0 ? (CT)1 : recurrence_ct(x, (long)n, (CT)1 - x, REC_LAGUERRE, 0);
}

/* Legendre's P: (k + 1) P_{k+1} = (2k + 1) x P_k - k P_{k-1}; +-1 at x = +-1 */
inline CT legendre_p_ct(CT x, CT n) {
  if (!(n >= 0)) return isnan(n) ? n : (CT)0;
  if (isinf(x)) return poly_at_inf_ct(x, n);
  if (fabs(x) == 1) return x > 0 || (long)n % 2 == 0 ? (CT)1 : (CT)-1;
  return recurrence_ct(x, (long)n, x, REC_LEGENDRE, 0);
}

/* The regularized incomplete gamma functions P(a, x) (igamma) and Q(a, x) = 1 - P (igammac),
 * by torch's choice among the power series of P (DLMF 8.11.4), that of Q (DLMF 8.7.3) and the
 * continued fraction of Q (DLMF 8.9.2), with SciPy's boundary values. NOTE: for large a near x
 * (a > 20, |x - a| < 0.3 a) torch switches to the uniform asymptotic expansion (DLMF 8.12);
 * here the series or fraction goes on: within 1e-13 of mpmath at a = 150 in double, where
 * torch's expansion was 5e-10 off (2026-12-03). x^a e^-x / Gamma(a) is exp of a sum, so the
 * relative error grows like a * eps, and a above ~1e4 needs more than SERIES_MAX_TERMS terms. */
inline CT igam_fac_ct(CT a, CT x) { return exp(a * log(x) - x - lgamma(a)); }

inline CT igam_series_ct(CT a, CT x) {
  const CT ax = igam_fac_ct(a, x);
  if (ax == 0) return 0;
  CT r = a, c = 1, ans = 1;
  for (int i = 0; i < SERIES_MAX_TERMS && c > EPS_CT * ans; i++) {
    r += 1;
    c *= x / r;
    ans += c;
  }
  return ans * ax / a;
}

inline CT igamc_series_ct(CT a, CT x) {
  CT fac = 1, sum = 0;
  for (int n = 1; n < SERIES_MAX_TERMS; n++) {
    fac *= -x / n;
    const CT term = fac / (a + n);
    sum += term;
    if (fabs(term) <= EPS_CT * fabs(sum)) break;
  }
  const CT logx = log(x);
  return -expm1(a * logx - lgamma(1 + a)) - exp(a * logx - lgamma(a)) * sum;
}

inline CT igamc_fraction_ct(CT a, CT x) {
  const CT big = sizeof(CT) == 8 ? (CT)4503599627370496.0 : (CT)16777216.0; /* 2^52, 2^24 */
  const CT ax = igam_fac_ct(a, x);
  if (ax == 0) return 0;
  CT y = 1 - a, z = x + y + 1, c = 0;
  CT pkm2 = 1, qkm2 = x, pkm1 = x + 1, qkm1 = z * x;
  CT ans = pkm1 / qkm1, t = 1;
  for (int i = 0; i < SERIES_MAX_TERMS && t > EPS_CT; i++) {
    c += 1;
    y += 1;
    z += 2;
    const CT pk = pkm1 * z - pkm2 * y * c, qk = qkm1 * z - qkm2 * y * c;
    t = 1;
    if (qk != 0) {
      const CT r = pk / qk;
      t = fabs((ans - r) / r);
      ans = r;
    }
    pkm2 = pkm1;
    pkm1 = pk;
    qkm2 = qkm1;
    qkm1 = qk;
    if (fabs(pk) > big) {
      pkm2 /= big;
      pkm1 /= big;
      qkm2 /= big;
      qkm1 /= big;
    }
  }
  return ans * ax;
}

inline CT igammac_ct(CT a, CT x) {
  if (x < 0 || a < 0) return (CT)NAN;
  if (a == 0) return x > 0 ? (CT)0 : (CT)NAN;
  if (x == 0) return 1;
  if (isinf(a)) return isinf(x) ? (CT)NAN : (CT)1;
  if (isinf(x)) return 0;
  if (x > (CT)1.1) return x < a ? 1 - igam_series_ct(a, x) : igamc_fraction_ct(a, x);
  const int lower = x <= (CT)0.5 ? (CT)-0.4 / log(x) < a : x * (CT)1.1 < a;
  return lower ? 1 - igam_series_ct(a, x) : igamc_series_ct(a, x);
}

inline CT igamma_ct(CT a, CT x) {
  if (x < 0 || a < 0) return (CT)NAN;
  if (a == 0) return x > 0 ? (CT)1 : (CT)NAN;
  if (x == 0) return 0;
  if (isinf(a)) return isinf(x) ? (CT)NAN : (CT)0;
  if (isinf(x)) return 1;
  return x > 1 && x > a ? 1 - igammac_ct(a, x) : igam_series_ct(a, x);
}
#endif
