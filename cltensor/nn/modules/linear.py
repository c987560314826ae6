"""Identity, Linear, Bilinear, Embedding, EmbeddingBag, Flatten, Dropout modules (AlphaDropout
too) and the distances CosineSimilarity and PairwiseDistance."""
import math

from ... import dtypes as dt
from ...autograd import no_grad
from ...creation import empty
from .. import functional as F
from .. import init
from ..functional.sparse import _table_options
from .module import Module, Parameter

__all__ = ["Identity", "Linear", "Embedding", "EmbeddingBag", "Flatten", "Unflatten", "Dropout",
           "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", "Bilinear",
           "CosineSimilarity", "PairwiseDistance"]


def check_size(value, name, owner):
    """value as an int >= 0, or a TypeError/ValueError naming the argument."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{owner}: {name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{owner}: {name} must be non-negative, got {value}")
    return value


def new_parameter(shape, device, dtype, owner):
    """An uninitialized floating Parameter (float32 unless dtype says otherwise)."""
    dtype = dt.as_dtype(dtype) or dt.float32
    if not dt.is_floating(dtype):
        raise TypeError(f"{owner}: parameters must have a floating dtype, got {dtype}")
    return Parameter(empty(shape, dtype=dtype, device=device))


def add_weight_and_bias(module, weight_shape, bias_size, device, dtype, owner):
    """module.weight of weight_shape and module.bias of (bias_size,) (None when bias_size is
    None), then module.reset_parameters()."""
    module.weight = new_parameter(weight_shape, device, dtype, owner)
    if bias_size is not None:
        module.bias = new_parameter((bias_size,), device, dtype, owner)
    else:
        module.register_parameter("bias", None)
    module.reset_parameters()


def reset_kaiming(module):
    """torch's default for linear and convolution layers: kaiming_uniform_(a=sqrt(5)) weights
    and a U(-1/sqrt(fan_in), 1/sqrt(fan_in)) bias."""
    init.kaiming_uniform_(module.weight, a=math.sqrt(5))
    if module.bias is not None:
        init_fan_in_bias(module.bias, module.weight)


def init_fan_in_bias(bias, weight):
    """Torch's default bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
    init.uniform_(bias, -bound, bound)


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

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Embedding(Module):
    """A lookup table: row i of `weight` for each index i of the input.

    Weights start as N(0, 1); the row of padding_idx starts at zero and gets no gradient.

    Shape:
        input (*) of int32/int64 indices -> output (*, embedding_dim)

    Example:
        emb = nn.Embedding(10, 3)
        emb(cltensor.tensor([[1, 2], [4, 9]])).shape   # (2, 2, 3)
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        _table_args(self, "Embedding", num_embeddings, embedding_dim, padding_idx, max_norm,
                    norm_type, scale_grad_by_freq, sparse)
        _table_weight(self, "Embedding", _weight, _freeze, device, dtype)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is (a view of) a given 2-d tensor."""
        if embeddings.ndim != 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-d, got shape "
                             f"{embeddings.shape}")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings.detach(), _freeze=freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s


class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embeddings (F.embedding_bag), as torch.nn.EmbeddingBag.

    Weights start as N(0, 1); the row of padding_idx starts at zero, belongs to no bag and gets
    no gradient.

    Shape:
        input (B, L), or 1-d with offsets (B, or B + 1 with include_last_offset) ->
        output (B, embedding_dim)

    Example:
        bag = nn.EmbeddingBag(10, 3, mode="sum")
        bag(cltensor.tensor([1, 2, 4, 9]), cltensor.tensor([0, 3])).shape   # (2, 3)
    """

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        _table_args(self, "EmbeddingBag", num_embeddings, embedding_dim, padding_idx, max_norm,
                    norm_type, scale_grad_by_freq, sparse)
        if mode not in F.EMBEDDING_BAG_MODES:
            raise ValueError(f"EmbeddingBag: mode must be one of {F.EMBEDDING_BAG_MODES}, got "
                             f"{mode!r}")
        self.mode, self.include_last_offset = mode, include_last_offset
        _table_weight(self, "EmbeddingBag", _weight, False, device, dtype)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode="mean", sparse=False,
                        include_last_offset=False, padding_idx=None):
        """An EmbeddingBag whose weight is (a view of) a given 2-d tensor."""
        if embeddings.ndim != 2:
            raise ValueError(f"EmbeddingBag.from_pretrained: embeddings must be 2-d, got shape "
                             f"{embeddings.shape}")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                  embeddings.detach(), include_last_offset, padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag

    reset_parameters = Embedding.reset_parameters

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode,
                               per_sample_weights=per_sample_weights,
                               include_last_offset=self.include_last_offset,
                               padding_idx=self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s


def _table_args(module, owner, num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
                scale_grad_by_freq, sparse):
    """Checks and stores the arguments Embedding and EmbeddingBag share."""
    module.num_embeddings = check_size(num_embeddings, "num_embeddings", owner)
    module.embedding_dim = check_size(embedding_dim, "embedding_dim", owner)
    module.padding_idx = _padding_index(padding_idx, num_embeddings)
    _table_options(max_norm, sparse, owner)
    module.max_norm, module.norm_type = max_norm, norm_type
    module.scale_grad_by_freq, module.sparse = scale_grad_by_freq, sparse


def _table_weight(module, owner, weight, freeze, device, dtype):
    """Embedding's and EmbeddingBag's weight: a new one, reset, or the given `weight`."""
    shape = (module.num_embeddings, module.embedding_dim)
    if weight is None:
        module.weight = new_parameter(shape, device, dtype, owner)
        module.reset_parameters()
        return
    if tuple(weight.shape) != shape:
        raise ValueError(f"{owner}: _weight has shape {tuple(weight.shape)}, expected {shape}")
    module.weight = Parameter(weight, requires_grad=not freeze)


def _padding_index(padding_idx, num_embeddings):
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"Embedding: padding_idx {padding_idx} must be within "
                         f"[-{num_embeddings}, {num_embeddings})")
    return padding_idx % num_embeddings


class Flatten(Module):
    """Flattens dims start_dim..end_dim into one (by default all but the batch dim).

    Example:
        nn.Flatten()(cltensor.zeros(32, 1, 5, 5)).shape   # (32, 25)
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim `dim` into `unflattened_size` (one entry may be -1).

    Example:
        nn.Unflatten(1, (2, 5))(cltensor.zeros(3, 10)).shape   # (3, 2, 5)
    """

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Dropout(Module):
    """In training, zeroes each element with probability p and scales the rest by 1/(1-p);
    the identity in eval mode.

    Example:
        drop = nn.Dropout(0.2); drop.eval(); drop(x)   # x unchanged
    """

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(Dropout):
    """Dropout of whole channels of (N, C, L) or (C, L) input."""

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    """Dropout of whole channels (feature maps) of (N, C, H, W) or (C, H, W) input.

    Example:
        drop = nn.Dropout2d(0.1); y = drop(cltensor.randn(8, 16, 5, 5))
    """

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(Dropout):
    """Dropout of whole channels of (N, C, D, H, W) or (C, D, H, W) input."""

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(Dropout):
    """Dropout that keeps a SELU network's zero mean and unit variance (training only)."""

    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(Dropout):
    """AlphaDropout of whole channels of (N, C, *) input."""

    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)


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


class CosineSimilarity(Module):
    """F.cosine_similarity(x1, x2, dim, eps)."""

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """F.pairwise_distance(x1, x2, p, eps, keepdim): ||x1 - x2 + eps||_p over the last dim."""

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
