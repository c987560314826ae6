"""torch.nn.functional for cltensor: layer ops and losses with torch's names, signatures and
semantics, each a differentiable Function over forward and backward kernels (cltensor/ops:
activation, pool, softmax, norm, loss).

Every op supports double backward. A backward pass runs its kernels when grad mode is off (the
usual first-order backward); under create_graph=True it computes the same gradients as tensor
ops and Function.apply calls instead (torch's derivative formulas: softmax's y * (g - sum(g y)),
max pooling's scatter of g at the argmaxes, batch norm's with the statistics recomputed from x),
so that they record a graph of their own; a linear op's backward (average pooling, resampling)
is recorded as _Adjoint, whose gradient is the op itself. Ops composed of tensor ops (linear,
embedding, cat, flatten, probability-target cross_entropy) need nothing more.

The ops live in one module per area (activation, attention, conv, ctc, distance, dropout,
linear, loss, margin_loss, normalization, pooling, sparse, vision, volume; helpers in utils);
this package re-exports them.

Example:
    import cltensor.nn.functional as F
    logits = F.linear(F.relu(F.max_pool2d(x, 2)).flatten(1), w, b)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
"""
from .activation import *  # noqa: F401,F403
from .activation import (GELU_C, GELU_K, GRADS, INV_SQRT_2PI, SELU_ALPHA,  # noqa: F401
                         SELU_SCALE, SQRT_HALF)
from .attention import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .ctc import *  # noqa: F401,F403
from .distance import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .dropout import SELU_NEG  # noqa: F401
from .linear import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .margin_loss import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .sparse import *  # noqa: F401,F403
from .sparse import EMBEDDING_BAG_MODES  # noqa: F401
from .utils import *  # noqa: F401,F403
from .utils import REDUCTIONS, _Adjoint  # noqa: F401
from .vision import *  # noqa: F401,F403
from .volume import *  # noqa: F401,F403
from .vision import INTERPOLATE_MODES  # noqa: F401

# NOTE: a submodule whose name is also a function (dropout, linear) is shadowed by it here
__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d",
    "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d",
    "adaptive_max_pool3d_with_indices",
    "alpha_dropout",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "batch_norm",
    "bilinear",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cat",
    "celu",
    "celu_",
    "channel_shuffle",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "cosine_embedding_loss",
    "cosine_similarity",
    "cross_entropy",
    "ctc_loss",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "elu",
    "elu_",
    "embedding",
    "embedding_bag",
    "feature_alpha_dropout",
    "flatten",
    "fold",
    "gaussian_nll_loss",
    "gelu",
    "glu",
    "group_norm",
    "gumbel_softmax",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "hardtanh_",
    "hinge_embedding_loss",
    "huber_loss",
    "instance_norm",
    "interpolate",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "leaky_relu_",
    "linear",
    "local_response_norm",
    "log_softmax",
    "logsigmoid",
    "lp_pool1d",
    "lp_pool2d",
    "margin_ranking_loss",
    "max_pool1d",
    "max_pool1d_with_indices",
    "max_pool2d",
    "max_pool2d_with_indices",
    "max_pool3d",
    "max_pool3d_with_indices",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "mish",
    "mse_loss",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "multilabel_soft_margin_loss",
    "nll_loss",
    "normalize",
    "pad",
    "pairwise_distance",
    "pdist",
    "pixel_shuffle",
    "pixel_unshuffle",
    "poisson_nll_loss",
    "prelu",
    "relu",
    "relu6",
    "relu_",
    "rms_norm",
    "rrelu",
    "rrelu_",
    "scaled_dot_product_attention",
    "selu",
    "selu_",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "soft_margin_loss",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "tanh",
    "tanhshrink",
    "threshold",
    "threshold_",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
    "unfold",
    "upsample",
    "upsample_bilinear",
    "upsample_nearest",
]
