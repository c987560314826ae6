"""Recurrent layers with torch.nn's names, parameters and semantics: RNNCell, LSTMCell, GRUCell
and the multi-layer, optionally bidirectional RNN, LSTM and GRU.

Each layer and direction projects the whole input sequence with one GEMM (x W_ih^T + b_ih over
all time steps), then loops over time with the recurrent GEMM (h W_hh^T + b_hh) and the
elementwise gates. Gradients come from autograd through these tensor ops.

The loop runs on packed rows (as a PackedSequence holds them): step t on the batch_sizes[t]
sequences still running, so a sequence of a PackedSequence input stops at its own last step
(forward) or starts there (reverse). A padded input is the case of equal batch sizes.
"""
import math
import numbers
import warnings

from ...autograd.namespace import cat, stack
from ...creation import zeros
from ...tensor import ClTensor
from .. import functional as F
from .. import init
from ..utils.rnn import PackedSequence, batch_sizes_of, packed_like
from .module import Module
from .utils import check_size, new_parameter

__all__ = ["RNNCellBase", "RNNCell", "LSTMCell", "GRUCell", "RNNBase", "RNN", "LSTM", "GRU"]


# ---- one time step -------------------------------------------------------------------------------
# gi is the input projection x W_ih^T + b_ih of the step; a state is (h,) for RNN and GRU and
# (h, c) for LSTM. Gate order as in torch: LSTM i, f, g, o; GRU r, z, n.

def _rnn_tanh_step(gi, state, w_hh, b_hh, w_hr=None):
    return (F.tanh(gi + F.linear(state[0], w_hh, b_hh)),)


def _rnn_relu_step(gi, state, w_hh, b_hh, w_hr=None):
    return (F.relu(gi + F.linear(state[0], w_hh, b_hh)),)


def _lstm_step(gi, state, w_hh, b_hh, w_hr=None):
    h, c = state
    i, f, g, o = (gi + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
    h = F.sigmoid(o) * F.tanh(c)
    return (h if w_hr is None else F.linear(h, w_hr), c)


def _gru_step(gi, state, w_hh, b_hh, w_hr=None):
    h = state[0]
    ir, iz, i_n = gi.chunk(3, -1)
    hr, hz, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r, z = F.sigmoid(ir + hr), F.sigmoid(iz + hz)
    n = F.tanh(i_n + r * h_n)
    return (n + z * (h - n),)


# mode -> (gates per hidden unit, step, states per layer)
_MODES = {"RNN_TANH": (1, _rnn_tanh_step, 1), "RNN_RELU": (1, _rnn_relu_step, 1),
          "LSTM": (4, _lstm_step, 2), "GRU": (3, _gru_step, 1)}


def _rnn_mode(nonlinearity):
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
    return "RNN_" + nonlinearity.upper()


# ---- parameters ----------------------------------------------------------------------------------

def _positive(value, name, owner):
    if check_size(value, name, owner) == 0:
        raise ValueError(f"{owner}: {name} must be greater than zero")
    return value


def _add_weights(module, suffix, in_size, out_size, bias, proj_size, device, dtype):
    """weight_ih{suffix}, weight_hh{suffix}, bias_ih{suffix}, bias_hh{suffix} (when bias) and
    weight_hr{suffix} (when proj_size), in torch's order and shapes."""
    name = type(module).__name__
    gates = _MODES[module.mode][0] * module.hidden_size
    shapes = [("weight_ih", (gates, in_size)), ("weight_hh", (gates, proj_size or out_size))]
    if bias:
        shapes += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
    if proj_size:
        shapes.append(("weight_hr", (proj_size, out_size)))
    for pname, shape in shapes:
        setattr(module, pname + suffix, new_parameter(shape, device, dtype, name))


def _reset_uniform(module):
    """torch's init for recurrent layers: every parameter U(-1/sqrt(hidden), 1/sqrt(hidden))."""
    bound = 1.0 / math.sqrt(module.hidden_size)
    for p in module.parameters():
        init.uniform_(p, -bound, bound)


def _weights(module, suffix):
    """(weight_ih, bias_ih, weight_hh, bias_hh, weight_hr) of one layer and direction, None for
    those it does not have."""
    return tuple(getattr(module, n + suffix, None)
                 for n in ("weight_ih", "bias_ih", "weight_hh", "bias_hh", "weight_hr"))


def _check_input(input, ndims, input_size, name):
    if not isinstance(input, ClTensor):
        raise TypeError(f"{name}: input must be a tensor, got {type(input).__name__}")
    if input.ndim not in ndims:
        want = " or ".join(f"{n}D" for n in ndims)
        raise ValueError(f"{name}: Expected input to be {want}, got {input.ndim}D tensor instead")
    if input.shape[-1] != input_size:
        raise ValueError(f"{name}: input.size(-1) must be equal to input_size. Expected "
                         f"{input_size}, got {input.shape[-1]}")
    return input.ndim == max(ndims)


def _state(hx, shapes, batched, batch_dim, like, name):
    """The initial state as a tuple of tensors of `shapes` (zeros when hx is None); an
    unbatched hx gets its batch dim (batch_dim) added."""
    if hx is None:
        return tuple(zeros(*s, dtype=like.dtype, device=like.device) for s in shapes)
    hx = tuple(hx) if isinstance(hx, (tuple, list)) else (hx,)
    if len(hx) != len(shapes):
        raise ValueError(f"{name}: expected a hidden state of {len(shapes)} tensor(s), got "
                         f"{len(hx)}")
    out = []
    for h, shape in zip(hx, shapes):
        want = shape if batched else shape[:batch_dim] + shape[batch_dim + 1:]
        if not isinstance(h, ClTensor) or tuple(h.shape) != want:
            got = tuple(h.shape) if isinstance(h, ClTensor) else type(h).__name__
            raise ValueError(f"{name}: Expected hidden size {want}, got {got}")
        out.append(h if batched else h.unsqueeze(batch_dim))
    return tuple(out)


def _result(state, mode):
    return state if mode == "LSTM" else state[0]


# ---- one layer and direction over packed time steps ----------------------------------------------

class _Direction:
    """The weights of one layer and direction, and its input projection x W_ih^T + b_ih of
    every time step at once (one GEMM)."""

    def __init__(self, module, suffix, x):
        w_ih, b_ih, self.w_hh, self.b_hh, self.w_hr = _weights(module, suffix)
        self.step_fn = _MODES[module.mode][1]
        self.gi = F.linear(x, w_ih, b_ih)

    def step(self, start, size, state):
        gi = self.gi.narrow(0, start, size)
        return self.step_fn(gi, state, self.w_hh, self.b_hh, self.w_hr)


def _rows(state, start, size):
    if start == 0 and size == state[0].shape[0]:
        return state
    return tuple(s.narrow(0, start, size) for s in state)


def _cat(tensors):
    return tensors[0] if len(tensors) == 1 else cat(tensors)


def _cat_rows(states):
    return tuple(_cat(parts) for parts in zip(*states))


def _forward_in_time(direction, sizes, state):
    """Steps 0..T-1 of packed rows with batch sizes `sizes` (not increasing): each step runs on
    its sizes[t] rows; a sequence that ends keeps its last state as its final one. Returns the
    packed outputs and the final states (sizes[0] rows)."""
    outs, finished, start = [], [], 0
    for size in sizes:
        if size < state[0].shape[0]:   # sequences size.. ended at the previous step
            finished.append(_rows(state, size, state[0].shape[0] - size))
            state = _rows(state, 0, size)
        state = direction.step(start, size, state)
        outs.append(state[0])
        start += size
    return _cat(outs), _cat_rows([state] + finished[::-1])


def _backward_in_time(direction, sizes, init):
    """Steps T-1..0: each sequence starts from its initial state at its own last step."""
    outs, start = [None] * len(sizes), sum(sizes)
    state = _rows(init, 0, sizes[-1])
    for t in reversed(range(len(sizes))):
        running = state[0].shape[0]
        if sizes[t] > running:   # sequences running.. have their last step at t
            state = _cat_rows([state, _rows(init, running, sizes[t] - running)])
        start -= sizes[t]
        state = direction.step(start, sizes[t], state)
        outs[t] = state[0]
    return _cat(outs), state


# ---- cells ---------------------------------------------------------------------------------------

class RNNCellBase(Module):
    """Shared by RNNCell, LSTMCell and GRUCell: the weights of one step and its forward."""

    def __init__(self, input_size, hidden_size, bias, mode, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        self.input_size = check_size(input_size, "input_size", name)
        self.hidden_size = _positive(hidden_size, "hidden_size", name)
        self.bias, self.mode = bias, mode
        _add_weights(self, "", input_size, hidden_size, bias, 0, device, dtype)
        if not bias:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_uniform(self)

    def forward(self, input, hx=None):
        name = type(self).__name__
        batched = _check_input(input, (1, 2), self.input_size, name)
        x = input if batched else input.unsqueeze(0)
        shape = (x.shape[0], self.hidden_size)
        state = _state(hx, [shape] * _MODES[self.mode][2], batched, 0, x, name)
        w_ih, b_ih, w_hh, b_hh, _ = _weights(self, "")
        state = _MODES[self.mode][1](F.linear(x, w_ih, b_ih), state, w_hh, b_hh)
        return _result(state if batched else tuple(s.squeeze(0) for s in state), self.mode)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if self.mode == "RNN_RELU":
            s += ", nonlinearity=relu"
        return s


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh), act tanh or relu.

    Args:
        input_size: features of x.
        hidden_size: features of h.
        bias: learn bias_ih and bias_hh.
        nonlinearity: 'tanh' or 'relu'.

    Shape:
        input (N, input_size) or (input_size,), hx like the output (zeros when None)
        -> h' (N, hidden_size) or (hidden_size,)

    Example:
        cell = nn.RNNCell(10, 20); h = cell(cltensor.randn(3, 10))   # (3, 20)
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, _rnn_mode(nonlinearity), device, dtype)
        self.nonlinearity = nonlinearity


class LSTMCell(RNNCellBase):
    """One LSTM step: gates i, f, g, o from x W_ih^T + b_ih + h W_hh^T + b_hh;
    c' = f c + i g, h' = o tanh(c').

    Shape:
        input (N, input_size) or (input_size,), hx = (h, c) each (N, hidden_size) or
        (hidden_size,) (zeros when None) -> (h', c') of the same shapes

    Example:
        cell = nn.LSTMCell(10, 20); h, c = cell(cltensor.randn(3, 10))
    """

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, "LSTM", device, dtype)


class GRUCell(RNNCellBase):
    """One GRU step: r, z = sigmoid(...), n = tanh(x W_in + b_in + r (h W_hn + b_hn)),
    h' = (1 - z) n + z h.

    Shape:
        input (N, input_size) or (input_size,), hx (N, hidden_size) or (hidden_size,) (zeros
        when None) -> h' of hx's shape

    Example:
        cell = nn.GRUCell(10, 20); h = cell(cltensor.randn(3, 10))
    """

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, "GRU", device, dtype)


# ---- multi-layer recurrent layers ----------------------------------------------------------------

def _check_dropout(dropout, num_layers):
    if isinstance(dropout, bool) or not isinstance(dropout, numbers.Number) or \
            not 0 <= dropout <= 1:
        raise ValueError("dropout should be a number in range [0, 1] representing the "
                         "probability of an element being zeroed")
    if dropout > 0 and num_layers == 1:
        warnings.warn(f"dropout option adds dropout after all but last recurrent layer, so "
                      f"non-zero dropout expects num_layers greater than 1, but got "
                      f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
    return float(dropout)


def _check_proj_size(proj_size, hidden_size, mode, name):
    check_size(proj_size, "proj_size", name)
    if proj_size and mode != "LSTM":
        raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
    if proj_size >= hidden_size:
        raise ValueError(f"{name}: proj_size has to be smaller than hidden_size, got "
                         f"proj_size={proj_size} and hidden_size={hidden_size}")
    return proj_size


class RNNBase(Module):
    """Shared by RNN, LSTM and GRU: num_layers stacked layers, each one or two directions.

    Parameters are named as in torch (weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k},
    bias_hh_l{k}, weight_hr_l{k}, each with a _reverse twin when bidirectional), so a torch
    state_dict loads as it is.

    The input may be a PackedSequence (nn.utils.rnn; batch_first does not apply to it): the
    output is then one too, and h_n holds each sequence's state after its own last element;
    hx and h_n are in the batch's original order (permuted by sorted_indices, as in torch).
    """

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        self.mode = mode
        self.input_size = check_size(input_size, "input_size", name)
        self.hidden_size = _positive(hidden_size, "hidden_size", name)
        self.num_layers = _positive(num_layers, "num_layers", name)
        self.bias, self.batch_first = bias, batch_first
        self.dropout = _check_dropout(dropout, num_layers)
        self.bidirectional = bidirectional
        self.proj_size = _check_proj_size(proj_size, hidden_size, mode, name)
        for layer in range(num_layers):
            in_size = input_size if layer == 0 else self._out_size * self._directions
            for suffix in self._suffixes(layer):
                _add_weights(self, suffix, in_size, hidden_size, bias, proj_size, device, dtype)
        self.reset_parameters()

    @property
    def _directions(self):
        return 2 if self.bidirectional else 1

    @property
    def _out_size(self):
        return self.proj_size or self.hidden_size

    def _suffixes(self, layer):
        return [f"_l{layer}", f"_l{layer}_reverse"][:self._directions]

    def reset_parameters(self):
        _reset_uniform(self)

    def flatten_parameters(self):
        """Nothing to do, as torch's on the CPU: the layers read their weights where they are
        (torch packs them into one cuDNN buffer)."""

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        name = type(self).__name__
        batched = _check_input(input, (2, 3), self.input_size, name)
        x = (input.transpose(0, 1) if self.batch_first else input) if batched else \
            input.unsqueeze(1)
        steps, batch = x.shape[:2]
        if steps == 0:
            raise ValueError(f"{name}: Expected sequence length to be larger than 0")
        state = _state(hx, self._state_shapes(batch), batched, 1, x, name)
        out, state = self._layers(x.reshape(steps * batch, x.shape[2]), (batch,) * steps, state)
        out = out.reshape(steps, batch, out.shape[-1])  # explicit sizes: batch may be 0
        if not batched:
            out, state = out.squeeze(1), tuple(s.squeeze(1) for s in state)
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, _result(state, self.mode)

    def _forward_packed(self, input, hx):
        """A PackedSequence in and out (batch_first does not apply); hx and the final states
        in the caller's batch order, permuted as torch does by sorted_indices."""
        name = type(self).__name__
        _check_input(input.data, (2,), self.input_size, name)
        sizes = batch_sizes_of(input)
        if sum(sizes) != input.data.shape[0] or any(a < b for a, b in zip(sizes, sizes[1:])):
            raise ValueError(f"{name}: batch_sizes {list(sizes)} must not increase and must "
                             f"sum to the {input.data.shape[0]} rows of the packed data")
        state = _state(hx, self._state_shapes(sizes[0]), True, 1, input.data, name)
        if hx is not None and input.sorted_indices is not None:
            state = tuple(s.index_select(1, input.sorted_indices) for s in state)
        out, state = self._layers(input.data, sizes, state)
        if input.unsorted_indices is not None:
            state = tuple(s.index_select(1, input.unsorted_indices) for s in state)
        return packed_like(input, out), _result(state, self.mode)

    def _state_shapes(self, batch):
        n = self.num_layers * self._directions
        return [(n, batch, self._out_size), (n, batch, self.hidden_size)][:_MODES[self.mode][2]]

    def _layers(self, x, sizes, state):
        """x: packed rows (sum(sizes), in), time step t's being the sizes[t] first sequences
        (a padded batch has every size equal). The last layer's packed outputs
        (sum(sizes), D * out), and the final states stacked as (num_layers * D, sizes[0], *)."""
        finals = []
        for layer in range(self.num_layers):
            if layer and self.dropout and self.training:
                x = F.dropout(x, self.dropout, True)
            outs = []
            for d, suffix in enumerate(self._suffixes(layer)):
                k = layer * self._directions + d
                run = _backward_in_time if d == 1 else _forward_in_time
                out, last = run(_Direction(self, suffix, x), sizes, tuple(s[k] for s in state))
                outs.append(out)
                finals.append(last)
            x = outs[0] if len(outs) == 1 else cat(outs, -1)
        return x, tuple(stack(s) for s in zip(*finals))

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        for key, default in (("bias", True), ("batch_first", False), ("dropout", 0.0),
                             ("bidirectional", False)):
            if getattr(self, key) != default:
                s += f", {key}={getattr(self, key)}"
        return s


class RNN(RNNBase):
    """A multi-layer Elman RNN: h_t = act(x_t W_ih^T + b_ih + h_(t-1) W_hh^T + b_hh).

    Args:
        input_size: features of x.
        hidden_size: features of h.
        num_layers: stacked layers, each taking the previous one's output.
        nonlinearity: 'tanh' or 'relu'.
        bias: learn the biases.
        batch_first: input and output are (N, L, *) instead of (L, N, *).
        dropout: dropout on the outputs of every layer but the last (training only).
        bidirectional: run each layer forward and backward in time, outputs concatenated.

    Shape:
        input (L, N, input_size), (N, L, input_size) with batch_first, or unbatched
        (L, input_size), or a PackedSequence; h0 (D * num_layers, N, hidden_size) or
        (D * num_layers, hidden_size) -> output (L, N, D * hidden_size) (a PackedSequence for
        one) and h_n like h0 (D = 2 when bidirectional)

    Example:
        rnn = nn.RNN(10, 20, num_layers=2)
        out, h_n = rnn(cltensor.randn(5, 3, 10))   # (5, 3, 20), (2, 3, 20)
        packed = nn.utils.rnn.pack_padded_sequence(cltensor.randn(5, 3, 10), [5, 2, 1])
        out, h_n = rnn(packed)   # out.data (8, 20); h_n[:, 1] after step 1 of sequence 1
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(_rnn_mode(nonlinearity), input_size, hidden_size, num_layers, bias,
                         batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """A multi-layer LSTM (gates i, f, g, o as in torch), optionally with projections:
    h_t = (o_t tanh(c_t)) W_hr^T when proj_size > 0.

    Args:
        input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional: as RNN.
        proj_size: size of the projected h (0: no projection); must be below hidden_size.

    Shape:
        input as RNN; (h0, c0) with h0 (D * num_layers, N, H_out), c0 (D * num_layers, N,
        hidden_size) -> output (L, N, D * H_out) and (h_n, c_n) like (h0, c0), where
        H_out = proj_size or hidden_size

    Example:
        lstm = nn.LSTM(10, 20, batch_first=True)
        out, (h_n, c_n) = lstm(cltensor.randn(3, 5, 10))   # out (3, 5, 20)
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """A multi-layer GRU (gates r, z, n as in torch): n_t = tanh(x W_in + b_in + r_t (h W_hn +
    b_hn)), h_t = (1 - z_t) n_t + z_t h_(t-1).

    Args and Shape: as RNN (without nonlinearity).

    Example:
        gru = nn.GRU(10, 20, bidirectional=True)
        out, h_n = gru(cltensor.randn(5, 3, 10))   # (5, 3, 40), (2, 3, 20)
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)
