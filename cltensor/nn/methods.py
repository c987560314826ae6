"""ClTensor's methods that are nn ops: x.softmax(dim), x.log_softmax(dim), x.hardshrink(),
x.prelu(weight). nn installs them itself, since the tensor sits below nn; torch.softmax and
torch.log_softmax (softmax(input, dim, dtype=None)) are the same functions."""
from ..methods import NN, attach
from ..tensor import ClTensor
from .functional import hardshrink, prelu
from .functional import log_softmax as _log_softmax
from .functional import softmax as _softmax


def softmax(input, dim, dtype=None):
    return _softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, dtype=None):
    return _log_softmax(input, dim, dtype=dtype)


TENSOR_METHODS = {"softmax": softmax, "log_softmax": log_softmax, "hardshrink": hardshrink,
                  "prelu": prelu}
attach(ClTensor, NN, {"nn.methods": TENSOR_METHODS})
