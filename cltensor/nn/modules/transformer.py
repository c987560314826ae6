"""The Transformer with torch's names and semantics: its encoder and decoder layers and stacks,
and Transformer, built on MultiheadAttention (activation.py, as torch's).

Everything is composed of differentiable tensor ops (matmul, softmax, masked_fill, dropout,
linear, layer_norm), so autograd needs nothing more.
"""
import copy

from ... import dtypes as dt
from ...autograd.namespace import full as _full, triu
from ...tensor import ClTensor
from .. import functional as F
from .. import init
from .activation import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm
from .utils import check_size

__all__ = ["TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
           "TransformerDecoder", "Transformer"]


# ---- transformer encoder -------------------------------------------------------------------------

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _activation(activation):
    if callable(activation):
        return activation
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation should be relu/gelu, not {activation}")
    return _ACTIVATIONS[activation]


def _attention_and_feed_forward(layer, d_model, nhead, dim_feedforward, dropout, activation,
                                bias, batch_first, kw, cross):
    """A Transformer layer's self-attention (and, with cross, its attention over the memory)
    and feed-forward block, registered in torch's order so that torch's state_dicts load."""
    def attention():
        return MultiheadAttention(d_model, nhead, dropout, bias, batch_first=batch_first, **kw)
    layer.self_attn = attention()
    if cross:
        layer.multihead_attn = attention()
    layer.linear1 = Linear(d_model, dim_feedforward, bias, **kw)
    layer.dropout = Dropout(dropout)
    layer.linear2 = Linear(dim_feedforward, d_model, bias, **kw)
    layer.activation = _activation(activation)


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with a residual connection and LayerNorm
    (after it, or before it with norm_first), as torch.nn.TransformerEncoderLayer.

    Args:
        d_model: features of the input.
        nhead: attention heads.
        dim_feedforward: hidden size of the feed-forward block.
        dropout: dropout on attention weights and after each block (training only).
        activation: 'relu', 'gelu' or a callable.
        layer_norm_eps: LayerNorm's eps.
        batch_first: input (N, L, d_model) instead of (L, N, d_model).
        norm_first: LayerNorm before each block instead of after.
        bias: learn the biases of the Linear and LayerNorm layers.

    Example:
        layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
        y = layer(cltensor.randn(2, 5, 16))   # (2, 5, 16)
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        _attention_and_feed_forward(self, d_model, nhead, dim_feedforward, dropout, activation,
                                    bias, batch_first, kw, cross=False)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """num_layers deep copies of encoder_layer applied in turn, then an optional norm.

    Example:
        enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32), num_layers=2)
        y = enc(cltensor.randn(5, 2, 16))
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)


# ---- transformer decoder and the whole transformer -----------------------------------------------

class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's output (memory) and a feed-forward block,
    each with a residual connection and LayerNorm (after it, or before it with norm_first), as
    torch.nn.TransformerDecoderLayer. Arguments as TransformerEncoderLayer's.

    Example:
        layer = nn.TransformerDecoderLayer(16, 4, 32, batch_first=True)
        y = layer(cltensor.randn(2, 5, 16), cltensor.randn(2, 7, 16))   # (2, 5, 16)
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        _attention_and_feed_forward(self, d_model, nhead, dim_feedforward, dropout, activation,
                                    bias, batch_first, kw, cross=True)
        self.norm_first = norm_first
        self.norm1, self.norm2, self.norm3 = (LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
                                              for _ in range(3))
        self.dropout1, self.dropout2, self.dropout3 = (Dropout(dropout) for _ in range(3))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        self_args = (tgt_mask, tgt_key_padding_mask, tgt_is_causal)
        memory_args = (memory, memory_mask, memory_key_padding_mask, memory_is_causal)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), *self_args)
            x = x + self._mha_block(self.norm2(x), *memory_args)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, *self_args))
        x = self.norm2(x + self._mha_block(x, *memory_args))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=bool(is_causal))[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, need_weights=False,
                                is_causal=bool(is_causal))[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoder(Module):
    """num_layers deep copies of decoder_layer applied in turn to tgt, each attending to the
    same memory, then an optional norm.

    Example:
        dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 4, 32), num_layers=2)
        y = dec(cltensor.randn(5, 2, 16), cltensor.randn(7, 2, 16))   # (5, 2, 16)
    """

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder Transformer, as torch.nn.Transformer: an encoder of
    num_encoder_layers TransformerEncoderLayers and a decoder of num_decoder_layers
    TransformerDecoderLayers, each stack ending in a LayerNorm (or custom_encoder and
    custom_decoder); weights of two or more dims start Xavier-uniform.

    Shape:
        src (S, N, d_model), tgt (T, N, d_model) ((N, S, d_model), (N, T, d_model) with
        batch_first; unbatched without N); masks as MultiheadAttention's -> output like tgt

    Example:
        model = nn.Transformer(16, 4, 2, 2, 32, batch_first=True)
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(5)
        y = model(cltensor.randn(2, 7, 16), cltensor.randn(2, 5, 16), tgt_mask=tgt_mask)
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        layer = dict(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward,
                     dropout=dropout, activation=activation, layer_norm_eps=layer_norm_eps,
                     batch_first=batch_first, norm_first=norm_first, bias=bias, **kw)
        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(**layer), num_encoder_layers,
            LayerNorm(d_model, layer_norm_eps, bias=bias, **kw))
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(**layer), num_decoder_layers,
            LayerNorm(d_model, layer_norm_eps, bias=bias, **kw))
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        name = "Transformer"
        for arg, t in (("src", src), ("tgt", tgt)):
            if (not isinstance(t, ClTensor) or t.ndim not in (2, 3) or
                    t.shape[-1] != self.d_model):
                raise ValueError(f"{name}: {arg} must be a 2-d or 3-d tensor of {self.d_model} "
                                 f"features (d_model), got "
                                 f"{tuple(t.shape) if isinstance(t, ClTensor) else type(t)}")
        if src.ndim != tgt.ndim:
            raise ValueError(f"{name}: src and tgt must both be batched (3-d) or both unbatched "
                             f"(2-d), got shapes {tuple(src.shape)} and {tuple(tgt.shape)}")
        dim = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[dim] != tgt.shape[dim]:
            raise ValueError(f"{name}: the batch sizes of src and tgt must be equal, got "
                             f"{src.shape[dim]} and {tgt.shape[dim]}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The (sz, sz) causal mask: 0 on and below the diagonal, -inf above it."""
        sz = check_size(sz, "sz", "Transformer.generate_square_subsequent_mask")
        full = _full((sz, sz), float("-inf"), device=device,
                             dtype=dt.float32 if dtype is None else dtype)
        return triu(full, diagonal=1)
