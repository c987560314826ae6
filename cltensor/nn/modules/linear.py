"""The affine layers: Identity, Linear and Bilinear."""
import math

from .. import functional as F
from .. import init
from .module import Module
from .utils import add_weight_and_bias, check_size, reset_kaiming

__all__ = ["Identity", "Linear", "Bilinear"]


class Identity(Module):
    """Returns its input (arguments are accepted and ignored, as in torch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x W^T + b over the last dim of x.

    Weights start as kaiming_uniform_(a=sqrt(5)) and the bias as U(+-1/sqrt(in_features)),
    as in torch.

    Args:
        in_features: size of each input's last dim.
        out_features: size of each output's last dim.
        bias: learn an additive bias.

    Shape:
        input (*, in_features) -> output (*, out_features)

    Example:
        fc = nn.Linear(20, 30)
        fc(cltensor.randn(128, 20)).shape   # (128, 30)
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = check_size(in_features, "in_features", "Linear")
        self.out_features = check_size(out_features, "out_features", "Linear")
        add_weight_and_bias(self, (out_features, in_features), out_features if bias else None,
                            device, dtype, "Linear")

    def reset_parameters(self):
        reset_kaiming(self)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def linear_relu(self, input):
        """relu(forward(input)) in one GEMM (nn.Sequential calls it for a Linear followed by a
        ReLU: see F.linear's relu)."""
        return F.linear(input, self.weight, self.bias, relu=True)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    """y = x1^T A x2 + b, with A (out_features, in1_features, in2_features) and b
    (out_features,) starting as U(-1/sqrt(in1_features), 1/sqrt(in1_features)), as torch.

    Example:
        nn.Bilinear(20, 30, 40)(cltensor.randn(128, 20), cltensor.randn(128, 30)).shape
        # (128, 40)
    """

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features = check_size(in1_features, "in1_features", "Bilinear")
        self.in2_features = check_size(in2_features, "in2_features", "Bilinear")
        self.out_features = check_size(out_features, "out_features", "Bilinear")
        add_weight_and_bias(self, (out_features, in1_features, in2_features),
                            out_features if bias else None, device, dtype, "Bilinear")

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
