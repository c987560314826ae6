"""Activation modules: ReLU, ReLU6, PReLU, LeakyReLU, ELU, SELU, CELU, GELU, SiLU, Mish, Softplus,
Hardswish, Hardsigmoid, Sigmoid, LogSigmoid, Tanh, Hardtanh, Softsign, Tanhshrink, Softshrink,
Hardshrink, Threshold, GLU, Softmax, LogSoftmax, Softmin, Softmax2d, RReLU; and
MultiheadAttention, where torch has it (its math is nn.functional.attention's)."""
import math

from ...autograd import no_grad
from ...autograd.namespace import cat, zeros
from ...tensor import ClTensor
from .. import functional as F
from .. import init
from ..functional.attention import _attend
from .linear import Linear
from .module import Module
from .utils import check_size, new_parameter

__all__ = ["ReLU", "ReLU6", "PReLU", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish",
           "Softplus", "Hardswish", "Hardsigmoid", "Sigmoid", "LogSigmoid", "Tanh", "Hardtanh",
           "Softsign", "Tanhshrink", "Softshrink", "Hardshrink", "Threshold", "GLU", "Softmax",
           "LogSoftmax", "Softmin", "Softmax2d", "RReLU", "MultiheadAttention"]


def _inplace_repr(inplace):
    return ", inplace=True" if inplace else ""


class ReLU(Module):
    """max(x, 0) elementwise; inplace overwrites the input.

    Example:
        nn.ReLU()(cltensor.tensor([-1.0, 2.0]))   # tensor([0., 2.])
    """

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class _InplaceActivation(Module):
    """An activation F.<name>(input, inplace) without parameters of its own."""
    fn = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self).fn(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class _Pointwise(Module):
    """A parameterless activation F.<name>(input)."""
    fn = None

    def forward(self, input):
        return type(self).fn(input)


class SiLU(_InplaceActivation):
    """x * sigmoid(x) elementwise (swish)."""
    fn = F.silu


class Mish(_InplaceActivation):
    """x * tanh(softplus(x)) elementwise."""
    fn = F.mish


class Hardswish(_InplaceActivation):
    """x * relu6(x + 3) / 6 elementwise."""
    fn = F.hardswish


class Hardsigmoid(_InplaceActivation):
    """relu6(x + 3) / 6 elementwise."""
    fn = F.hardsigmoid


class SELU(_InplaceActivation):
    """scale * elu(x, alpha) with torch's fixed alpha and scale (self-normalizing networks)."""
    fn = F.selu


class CELU(Module):
    """x for x > 0, alpha * (exp(x / alpha) - 1) otherwise."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}{_inplace_repr(self.inplace)}"


class LogSigmoid(_Pointwise):
    """log(sigmoid(x)) elementwise."""
    fn = F.logsigmoid


class Softsign(_Pointwise):
    """x / (1 + |x|) elementwise."""
    fn = F.softsign


class Tanhshrink(_Pointwise):
    """x - tanh(x) elementwise."""
    fn = F.tanhshrink


class Softshrink(Module):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.softshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(Softshrink):
    """x where |x| > lambd, else 0."""

    def forward(self, input):
        return F.hardshrink(input, self.lambd)


class Threshold(Module):
    """x where x > threshold, else value.

    Example:
        nn.Threshold(0.1, 20.0)(x)
    """

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}{_inplace_repr(self.inplace)}"


class GLU(Module):
    """a * sigmoid(b), a and b the halves of the input along dim."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class GELU(Module):
    """x * Phi(x) (approximate="tanh": its tanh approximation).

    Example:
        nn.GELU(approximate="tanh")(x)
    """

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta, x itself where beta * x > threshold."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class PReLU(Module):
    """x where x > 0, else a * x, with a learned (one a, or one per channel of dim 1).

    Example:
        act = nn.PReLU(16)   # a per channel, starting at 0.25
    """

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = check_size(num_parameters, "num_parameters", "PReLU")
        self.init = init
        self.weight = new_parameter((num_parameters,), device, dtype, "PReLU")
        self.reset_parameters()

    def reset_parameters(self):
        with no_grad():
            self.weight.fill_(self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class LeakyReLU(Module):
    """x for x >= 0, negative_slope * x otherwise."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}{_inplace_repr(self.inplace)}"


class ELU(Module):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}{_inplace_repr(self.inplace)}"


class Sigmoid(_Pointwise):
    """1 / (1 + exp(-x)) elementwise."""
    fn = F.sigmoid


class Tanh(_Pointwise):
    """tanh(x) elementwise."""
    fn = F.tanh


class Hardtanh(Module):
    """x clamped to [min_val, max_val]."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if not max_val > min_val:
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater than min_val "
                             f"({min_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace_repr(self.inplace)}"


class ReLU6(Hardtanh):
    """min(max(x, 0), 6) elementwise (as torch's, a Hardtanh between 0 and 6)."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Softmax(Module):
    """exp(x) / sum(exp(x)) along dim (None: torch's deprecated implicit choice, with a warning).

    Example:
        nn.Softmax(dim=1)(cltensor.randn(2, 3)).sum(1)   # tensor([1., 1.])
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """log(softmax(x)) along dim, computed stably."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(Softmax):
    """softmax(-x) along dim."""

    def forward(self, input):
        return F.softmin(input, self.dim)


class Softmax2d(Module):
    """softmax over the channels (dim -3) of (N, C, H, W) or (C, H, W) input."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected a 3-d or 4-d input, got shape {input.shape}")
        return F.softmax(input, -3)


class RReLU(Module):
    """Randomized leaky ReLU: slope ~ U(lower, upper) per element in training, their mean in
    eval.

    Example:
        nn.RReLU(0.1, 0.3)(cltensor.randn(4, 8))
    """

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}{_inplace_repr(self.inplace)}"


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
            k, v = (cat([t, self._heads(b.expand(1, n, self.embed_dim))], 2)
                    for t, b in ((k, self.bias_k), (v, self.bias_v)))
        if self.add_zero_attn:
            k, v = (cat([t, zeros(t.shape[:2] + (1, self.head_dim),
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
    return cat([mask, zeros(tuple(mask.shape[:-1]) + (extra,),
                                              dtype=mask.dtype, device=mask.device)], -1)
