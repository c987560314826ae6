"""Lookup-table layers: Embedding and EmbeddingBag."""
from ...autograd import no_grad
from .. import functional as F
from .. import init
from ..functional.sparse import _table_options
from .module import Module, Parameter
from .utils import check_size, new_parameter

__all__ = ["Embedding", "EmbeddingBag"]


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
