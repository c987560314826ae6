"""cltensor.optim: optimizers with torch.optim's names, arguments and update formulas.

Each parameter's update is one fused kernel launch (cl_kernels/optim.cl), except LBFGS's,
which works on one flat vector with tensor ops; schedulers are in cltensor.optim.lr_scheduler.

torch's implementation switches foreach, fused and capturable are accepted and change nothing
(the update is always one fused kernel, with no host sync); differentiable=True is refused
with NotImplementedError, as is SparseAdam (cltensor has no sparse gradients).

Example:
    opt = cltensor.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = cltensor.optim.lr_scheduler.StepLR(opt, step_size=10)
"""
from . import lr_scheduler  # noqa: F401
from .adagrad import Adadelta, Adagrad
from .adam import Adam, AdamW
from .adam_variants import Adamax, NAdam, RAdam, SparseAdam
from .asgd import ASGD, Rprop
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adadelta", "Adagrad", "Adamax",
           "NAdam", "RAdam", "ASGD", "Rprop", "LBFGS", "SparseAdam", "lr_scheduler"]
