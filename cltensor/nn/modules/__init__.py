"""The layers of cltensor.nn, grouped as in torch.nn.modules."""
from . import (activation, attention, container, conv, distance, dropout, flatten, linear, loss,
               module, normalization, padding, pixelshuffle, pooling, rnn, sparse, upsampling)
from .activation import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .distance import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .flatten import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .module import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .pixelshuffle import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
from .sparse import *  # noqa: F401,F403
from .upsampling import *  # noqa: F401,F403

__all__ = [name for mod in (module, container, linear, sparse, flatten, dropout, distance, conv,
                            pooling, activation, normalization, loss, upsampling, padding,
                            pixelshuffle, rnn, attention)
           for name in mod.__all__]
