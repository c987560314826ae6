"""Activation modules: ReLU, ReLU6, PReLU, LeakyReLU, ELU, SELU, CELU, GELU, SiLU, Mish, Softplus,
Hardswish, Hardsigmoid, Sigmoid, LogSigmoid, Tanh, Hardtanh, Softsign, Tanhshrink, Softshrink,
Hardshrink, Threshold, GLU, Softmax, LogSoftmax, Softmin, Softmax2d, RReLU."""
from ...autograd import no_grad
from .. import functional as F
from .module import Module
from .utils import check_size, new_parameter

__all__ = ["ReLU", "ReLU6", "PReLU", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish",
           "Softplus", "Hardswish", "Hardsigmoid", "Sigmoid", "LogSigmoid", "Tanh", "Hardtanh",
           "Softsign", "Tanhshrink", "Softshrink", "Hardshrink", "Threshold", "GLU", "Softmax",
           "LogSoftmax", "Softmin", "Softmax2d", "RReLU"]


def _inplace_repr(inplace):
    return ", inplace=True" if inplace else ""


class ReLU(Module):
    """max(x, 0) elementwise; inplace overwrites the input.

    Example:
        nn.ReLU()(cltensor.tensor([-1.0, 2.0]))   # tensor([0., 2.])
    """

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class _InplaceActivation(Module):
    """An activation F.<name>(input, inplace) without parameters of its own."""
    fn = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self).fn(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class _Pointwise(Module):
    """A parameterless activation F.<name>(input)."""
    fn = None

    def forward(self, input):
        return type(self).fn(input)


class SiLU(_InplaceActivation):
    """x * sigmoid(x) elementwise (swish)."""
    fn = F.silu


class Mish(_InplaceActivation):
    """x * tanh(softplus(x)) elementwise."""
    fn = F.mish


class Hardswish(_InplaceActivation):
    """x * relu6(x + 3) / 6 elementwise."""
    fn = F.hardswish


class Hardsigmoid(_InplaceActivation):
    """relu6(x + 3) / 6 elementwise."""
    fn = F.hardsigmoid


class SELU(_InplaceActivation):
    """scale * elu(x, alpha) with torch's fixed alpha and scale (self-normalizing networks)."""
    fn = F.selu


class CELU(Module):
    """x for x > 0, alpha * (exp(x / alpha) - 1) otherwise."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}{_inplace_repr(self.inplace)}"


class LogSigmoid(_Pointwise):
    """log(sigmoid(x)) elementwise."""
    fn = F.logsigmoid


class Softsign(_Pointwise):
    """x / (1 + |x|) elementwise."""
    fn = F.softsign


class Tanhshrink(_Pointwise):
    """x - tanh(x) elementwise."""
    fn = F.tanhshrink


class Softshrink(Module):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.softshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(Softshrink):
    """x where |x| > lambd, else 0."""

    def forward(self, input):
        return F.hardshrink(input, self.lambd)


class Threshold(Module):
    """x where x > threshold, else value.

    Example:
        nn.Threshold(0.1, 20.0)(x)
    """

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}{_inplace_repr(self.inplace)}"


class GLU(Module):
    """a * sigmoid(b), a and b the halves of the input along dim."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class GELU(Module):
    """x * Phi(x) (approximate="tanh": its tanh approximation).

    Example:
        nn.GELU(approximate="tanh")(x)
    """

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta, x itself where beta * x > threshold."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class PReLU(Module):
    """x where x > 0, else a * x, with a learned (one a, or one per channel of dim 1).

    Example:
        act = nn.PReLU(16)   # a per channel, starting at 0.25
    """

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = check_size(num_parameters, "num_parameters", "PReLU")
        self.init = init
        self.weight = new_parameter((num_parameters,), device, dtype, "PReLU")
        self.reset_parameters()

    def reset_parameters(self):
        with no_grad():
            self.weight.fill_(self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class LeakyReLU(Module):
    """x for x >= 0, negative_slope * x otherwise."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}{_inplace_repr(self.inplace)}"


class ELU(Module):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}{_inplace_repr(self.inplace)}"


class Sigmoid(_Pointwise):
    """1 / (1 + exp(-x)) elementwise."""
    fn = F.sigmoid


class Tanh(_Pointwise):
    """tanh(x) elementwise."""
    fn = F.tanh


class Hardtanh(Module):
    """x clamped to [min_val, max_val]."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if not max_val > min_val:
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater than min_val "
                             f"({min_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace_repr(self.inplace)}"


class ReLU6(Hardtanh):
    """min(max(x, 0), 6) elementwise (as torch's, a Hardtanh between 0 and 6)."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Softmax(Module):
    """exp(x) / sum(exp(x)) along dim (None: torch's deprecated implicit choice, with a warning).

    Example:
        nn.Softmax(dim=1)(cltensor.randn(2, 3)).sum(1)   # tensor([1., 1.])
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """log(softmax(x)) along dim, computed stably."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(Softmax):
    """softmax(-x) along dim."""

    def forward(self, input):
        return F.softmin(input, self.dim)


class Softmax2d(Module):
    """softmax over the channels (dim -3) of (N, C, H, W) or (C, H, W) input."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected a 3-d or 4-d input, got shape {input.shape}")
        return F.softmax(input, -3)


class RReLU(Module):
    """Randomized leaky ReLU: slope ~ U(lower, upper) per element in training, their mean in
    eval.

    Example:
        nn.RReLU(0.1, 0.3)(cltensor.randn(4, 8))
    """

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}{_inplace_repr(self.inplace)}"
