"""torch.special for cltensor: the special functions under torch's names.

Kernels of their own (their algorithms in cl_kernels/special.cl, prepended to elementwise.cl;
each checked against mpmath in tests/test_special.py): i0e and i1e (exp(-|x|) I0(x), I1(x)),
erfcx (exp(x^2) erfc(x)), ndtr and log_ndtr (the standard normal's CDF and its log, accurate
far into both tails), ndtri (its quantile), entr (-x log x), xlog1py (x log1p(y)) and zeta
(Hurwitz's). The rest are cltensor's own functions under torch.special's names (expit is
sigmoid, gammaln lgamma, psi digamma, ...). All differentiable where torch's are (zeta with
respect to q only).
Without gradients, as in torch (their results do not require grad): spherical_bessel_j0
(sin(x) / x); the Bessel functions bessel_j0, bessel_j1, bessel_y0, bessel_y1,
modified_bessel_k0, modified_bessel_k1 and scaled_modified_bessel_k0, _k1 (exp(x) K(x)), and
Airy's airy_ai, within 2e-14 of mpmath in double (relative, or near the zeros of J, Y and Ai
relative to their envelope; Ai's phase down to x = -1e12, float's to -1e5) and float within a
few ulp; and the orthogonal polynomials of degree n (Chebyshev's T, U, V, W and their shifted
forms, Hermite's H and He, Laguerre's L, Legendre's P). Y and K give NaN for x < 0, -inf and
+inf at 0, as torch's; at +-inf J, Y and Ai give their limit 0 where torch's give NaN. torch's
own J and Y are up to 2.4e-6 of their envelope off just above x = 5, its Ai near -2.3 (see
cl_kernels/special.cl).

Example:
    >>> x = cltensor.tensor([-10.0, 0.0, 2.0], dtype=cltensor.float64)
    >>> [round(v, 6) for v in cltensor.special.log_ndtr(x).tolist()]
    [-53.231285, -0.693147, -0.023013]
"""
from . import autograd
from .autograd import functions as F
from .autograd.namespace import (digamma, erf, erfc, erfinv, exp2, expm1, i0, igamma, igammac,
                                 lgamma, log1p, logit, logsumexp, round, sigmoid, sinc, xlogy)
from .composed.composed import mvlgamma, polygamma
from .nn.methods import log_softmax, softmax
from .ops import pointwise as _pw

# NOTE: names bound below from the Functions, so static checks cannot see them
__all__ = ["i0e",  # noqa: F822 "i1e", "erfcx", "ndtr", "log_ndtr", "ndtri", "entr", "xlog1py", "zeta", "i1",
           "modified_bessel_i1", "expit", "gammaln", "psi", "digamma", "multigammaln",
           "gammainc", "gammaincc", "modified_bessel_i0", "i0", "erf", "erfc", "erfinv", "exp2",
           "expm1", "log1p", "logit", "logsumexp", "round", "sinc", "xlogy", "polygamma",
           "softmax", "log_softmax", *_pw.SPECIAL_PLAIN_UNARY, *_pw.POLYNOMIALS]

for _name, _fn_cls in {**F.SPECIAL_UNARY, **F.SPECIAL_BINARY}.items():
    autograd.RAW[_name] = getattr(_pw, _name)  # the Functions' forwards call the raw op
    globals()[_name] = autograd.wrap_function(_name, autograd.RAW[_name], _fn_cls)
del _name, _fn_cls
i1 = modified_bessel_i1 = autograd.wrap_function("i1", _pw.i1, F.I1)
for _name in _pw.SPECIAL_PLAIN_UNARY + _pw.POLYNOMIALS:
    globals()[_name] = getattr(_pw, _name)
del _name

# torch.special's names for cltensor's functions
expit, gammaln, psi = sigmoid, lgamma, digamma
multigammaln, gammainc, gammaincc = mvlgamma, igamma, igammac
modified_bessel_i0 = i0
