"""Attention layers with torch's names and semantics: MultiheadAttention, the Transformer's
encoder and decoder layers and stacks, and Transformer (the math is nn.functional.attention's).

Everything is composed of differentiable tensor ops (matmul, softmax, masked_fill, dropout,
linear, layer_norm), so autograd needs nothing more.
"""
import copy
import math

import cltensor

from ... import dtypes as dt
from ...tensor import ClTensor
from .. import functional as F
from .. import init
from ..functional.attention import _attend
from ..functional.attention import scaled_dot_product_attention  # noqa: F401  (torch's path)
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm
from .utils import check_size, new_parameter

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer"]


# ---- multi-head attention ------------------------------------------------------------------------

class MultiheadAttention(Module):
    """Multi-head attention as torch.nn.MultiheadAttention:
    out_proj(concat_h softmax(q_h k_h^T / sqrt(head_dim) + masks) v_h).

    Args:
        embed_dim: features of query and of the output.
        num_heads: heads; embed_dim must be divisible by it.
        dropout: dropout on the attention weights (training only).
        bias: learn in_proj_bias and out_proj.bias.
        add_bias_kv: learn bias_k and bias_v (1, 1, embed_dim), appended to the projected keys
            and values as one more key position (the masks get a column that allows it).
        add_zero_attn: append a key and value of zeros to every head's after the projection
            (and after bias_k's position), likewise allowed by the masks.
        kdim, vdim: features of key and value (default embed_dim); when they differ from
            embed_dim, q_proj_weight, k_proj_weight and v_proj_weight replace in_proj_weight.
        batch_first: inputs and output are (N, L, E) instead of (L, N, E).

    Shape:
        query (L, N, E), key (S, N, kdim), value (S, N, vdim) (or unbatched without N);
        key_padding_mask (N, S) (True or -inf: ignore that key); attn_mask (L, S) or
        (N * num_heads, L, S) (True: not allowed to attend; float: added)
        -> output (L, N, E), weights (N, L, S') averaged over heads or (N, num_heads, L, S')
        (None when need_weights is False); S' is S plus one for add_bias_kv and one for
        add_zero_attn

    Example:
        mha = nn.MultiheadAttention(16, 4, batch_first=True)
        x = cltensor.randn(2, 5, 16); out, w = mha(x, x, x)   # (2, 5, 16), (2, 5, 5)
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        name = "MultiheadAttention"
        self.embed_dim = check_size(embed_dim, "embed_dim", name)
        self.num_heads = check_size(num_heads, "num_heads", name)
        if num_heads == 0 or embed_dim % num_heads:
            raise ValueError(f"{name}: embed_dim must be divisible by num_heads, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads}")
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        self.dropout, self.batch_first = dropout, batch_first
        self.add_zero_attn = bool(add_zero_attn)
        self._init_projections(bias, add_bias_kv, device, dtype)
        self._reset_parameters()

    def _init_projections(self, bias, add_bias_kv, device, dtype):
        """Parameters in torch's order and names, so that a torch state_dict loads."""
        e, name = self.embed_dim, "MultiheadAttention"
        if self._qkv_same_embed_dim:
            self.in_proj_weight = new_parameter((3 * e, e), device, dtype, name)
        else:
            for p, cols in (("q", e), ("k", self.kdim), ("v", self.vdim)):
                setattr(self, f"{p}_proj_weight", new_parameter((e, cols), device, dtype, name))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = new_parameter((3 * e,), device, dtype, name)
        else:
            self.register_parameter("in_proj_bias", None)
        if add_bias_kv:
            self.bias_k = new_parameter((1, 1, e), device, dtype, name)
            self.bias_v = new_parameter((1, 1, e), device, dtype, name)
        else:
            self.bias_k = self.bias_v = None
        self.out_proj = Linear(e, e, bias, device=device, dtype=dtype)

    def _reset_parameters(self):
        weights = [self.in_proj_weight] if self._qkv_same_embed_dim else self._in_weights()
        for w in weights:
            init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _in_weights(self):
        if self._qkv_same_embed_dim:
            return self.in_proj_weight.chunk(3)
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def _project(self, query, key, value):
        """q, k, v: one GEMM with in_proj_weight for self-attention, else one each."""
        biases = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
        if self._qkv_same_embed_dim and query is key and key is value:
            return F.linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, -1)
        return tuple(F.linear(x, w, b) for x, w, b in
                     zip((query, key, value), self._in_weights(), biases))

    def _check_inputs(self, query, key, value):
        name = "MultiheadAttention"
        for arg, t, size in (("query", query, self.embed_dim), ("key", key, self.kdim),
                             ("value", value, self.vdim)):
            if not isinstance(t, ClTensor) or t.ndim != query.ndim or t.ndim not in (2, 3):
                raise ValueError(f"{name}: query, key and value must all be 2-d (unbatched) or "
                                 f"all 3-d (batched) tensors; {arg} is not")
            if t.shape[-1] != size:
                raise ValueError(f"{name}: {arg} was expected to have embedding dimension "
                                 f"{size}, but got shape {t.shape}")
        if key.shape[:-1] != value.shape[:-1]:
            raise ValueError(f"{name}: key shape {key.shape} does not match value shape "
                             f"{value.shape}")
        return query.ndim == 3

    def _heads(self, x):
        """(L, N, E) -> (N, num_heads, L, head_dim)."""
        return x.reshape(x.shape[0], x.shape[1], self.num_heads, self.head_dim).permute(1, 2, 0, 3)

    def _masks(self, key_padding_mask, attn_mask, n, l, s):
        """The masks as (mask, keep_where_true) broadcastable to (N, num_heads, L, S + extra),
        for S keys given and `extra` appended (bias_k, the zero key) that every query may see."""
        name, masks = "MultiheadAttention", []
        extra = (self.bias_k is not None) + self.add_zero_attn
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (n, s):
                raise ValueError(f"{name}: expected key_padding_mask of shape {(n, s)}, got "
                                 f"{tuple(key_padding_mask.shape)}")
            masks.append((_allow(key_padding_mask, extra).reshape(n, 1, 1, s + extra), False))
        if attn_mask is not None:
            shapes = {2: (l, s), 3: (n * self.num_heads, l, s)}
            if tuple(attn_mask.shape) != shapes.get(attn_mask.ndim):
                raise ValueError(f"{name}: attn_mask of shape {tuple(attn_mask.shape)} should be "
                                 f"{shapes[2]} or {shapes[3]}")
            attn_mask = _allow(attn_mask, extra)
            masks.append((attn_mask.reshape(-1, self.num_heads, l, s + extra)
                          if attn_mask.ndim == 3 else attn_mask, False))
        return masks

    def _extra_keys(self, k, v):
        """k, v (N, num_heads, S, head_dim) with bias_k's and bias_v's position and the zero
        key's appended (add_bias_kv, add_zero_attn)."""
        n = k.shape[0]
        if self.bias_k is not None:
            k, v = (cltensor.cat([t, self._heads(b.expand(1, n, self.embed_dim))], 2)
                    for t, b in ((k, self.bias_k), (v, self.bias_v)))
        if self.add_zero_attn:
            k, v = (cltensor.cat([t, cltensor.zeros(t.shape[:2] + (1, self.head_dim),
                                                    dtype=t.dtype, device=t.device)], 2)
                    for t in (k, v))
        return k, v

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        if is_causal and attn_mask is None:
            raise RuntimeError("MultiheadAttention: Need attn_mask if specifying the is_causal "
                               "hint")
        batched = self._check_inputs(query, key, value)
        if not batched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
            key_padding_mask = None if key_padding_mask is None else key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        (l, n, e), s = query.shape, key.shape[0]
        q, k, v = (self._heads(t) for t in self._project(query, key, value))
        k, v = self._extra_keys(k, v)
        p = self.dropout if self.training else 0.0
        out, weights = _attend(q, k, v, 1.0 / math.sqrt(self.head_dim), p,
                               self._masks(key_padding_mask, attn_mask, n, l, s), safe=False)
        out = self.out_proj(out.permute(2, 0, 1, 3).reshape(l, n, e))
        out = out.squeeze(1) if not batched else out.transpose(0, 1) if self.batch_first else out
        return out, self._weights_out(weights, need_weights, average_attn_weights, batched)

    @staticmethod
    def _weights_out(weights, need_weights, average, batched):
        if not need_weights:
            return None
        weights = weights.mean(1) if average else weights
        return weights if batched else weights.squeeze(0)

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


def _allow(mask, extra):
    """mask (..., S) with `extra` columns appended that mask nothing (False, or 0.0 added)."""
    if not extra:
        return mask
    return cltensor.cat([mask, cltensor.zeros(tuple(mask.shape[:-1]) + (extra,),
                                              dtype=mask.dtype, device=mask.device)], -1)


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
        full = cltensor.full((sz, sz), float("-inf"), device=device,
                             dtype=dt.float32 if dtype is None else dtype)
        return cltensor.triu(full, diagonal=1)
