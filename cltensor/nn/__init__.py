"""cltensor.nn: Module, Parameter and layers with torch.nn's names and signatures.

Layer math lives in cltensor.nn.functional (F); the modules hold parameters and call it.

Example:
    from cltensor import nn
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
"""
from . import functional, init, utils  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import __all__  # noqa: F401
from . import parallel  # noqa: F401
from .parallel import DataParallel  # noqa: F401  (torch.nn.DataParallel)
from . import methods  # noqa: F401  (x.softmax(dim), ...: nn installs its tensor methods)
