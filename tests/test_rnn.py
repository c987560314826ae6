"""Recurrent layers (cltensor/nn/modules/rnn.py) and attention (attention.py): numpy references
and finite-difference gradients without torch; outputs, final states and every parameter's
gradient against torch's modules (same state_dict) in float64 and float32; bad input."""
import math

import numpy as np
import pytest

import cltensor
from cltensor.nn.modules.attention import (MultiheadAttention, Transformer,
                                           TransformerDecoder, TransformerDecoderLayer,
                                           TransformerEncoder, TransformerEncoderLayer,
                                           scaled_dot_product_attention)
from cltensor.nn.modules.normalization import LayerNorm
from cltensor.nn.modules.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell
from cltensor.testing import assert_close, gradcheck

TOL = {"float64": 1e-10, "float32": 2e-4}


def _t(arr, device, dtype=None, grad=False):
    t = cltensor.from_numpy(np.asarray(arr), device=device, dtype=dtype)
    return t.requires_grad_() if grad else t


def _need_fp64(device):
    if not device.has_fp64:
        pytest.skip("the device has no float64")


def _tree(x, fn):
    """fn applied to every numpy array of a nested tuple/list (anything else kept)."""
    if isinstance(x, (tuple, list)):
        return type(x)(_tree(e, fn) for e in x)
    return fn(x) if isinstance(x, np.ndarray) else x


def _leaves(x):
    if isinstance(x, (tuple, list)):
        return [y for e in x for y in _leaves(e)]
    return [] if x is None else [x]


def _check_vs_torch(module, tmodule, args, kwargs=None, dtype="float64", device=None):
    """Run module and tmodule (loaded with module's state_dict) on the same args (numpy arrays,
    possibly nested; gradients taken w.r.t. them) and kwargs (numpy masks); compare outputs,
    input gradients and every parameter's gradient."""
    import torch
    module.zero_grad(), tmodule.zero_grad()
    tmodule.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in
                             module.state_dict().items()})
    kwargs = kwargs or {}
    cargs = _tree(args, lambda a: _t(a.astype(dtype), device, grad=True))
    targs = _tree(args, lambda a: torch.from_numpy(a.astype(dtype)).requires_grad_())
    ckw = {k: _tree(v, lambda a: _t(a, device)) for k, v in kwargs.items()}
    tkw = {k: _tree(v, torch.from_numpy) for k, v in kwargs.items()}
    outs, touts = _leaves(module(*cargs, **ckw)), _leaves(tmodule(*targs, **tkw))
    assert len(outs) == len(touts)
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(o.shape).astype(dtype) for o in touts]
    sum((o * _t(w, device)).sum() for o, w in zip(outs, weights)).backward()
    sum((o * torch.from_numpy(w)).sum() for o, w in zip(touts, weights)).backward()
    tol = TOL[dtype]
    for o, to in zip(outs, touts):
        assert_close(o, to.detach().numpy(), rtol=tol, atol=tol)
    for a, ta in zip(_leaves(cargs), _leaves(targs)):
        assert_close(a.grad, ta.grad.numpy(), rtol=tol, atol=tol)
    tparams = dict(tmodule.named_parameters())
    assert [n for n, _ in module.named_parameters()] == list(tparams)
    for name, p in module.named_parameters():
        assert p.grad is not None, name
        assert_close(p.grad, tparams[name].grad.numpy(), rtol=tol, atol=tol)


# ---- without torch: numpy references and finite differences -------------------------------------

def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_rnn_cell_numpy_reference(device, rng):
    _need_fp64(device)
    for nonlinearity, act in (("tanh", np.tanh), ("relu", lambda v: np.maximum(v, 0))):
        cell = RNNCell(4, 5, nonlinearity=nonlinearity, device=device, dtype=cltensor.float64)
        w_ih, w_hh, b_ih, b_hh = (getattr(cell, n).numpy() for n in
                                  ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
        x, h = rng.standard_normal((2, 4)), rng.standard_normal((2, 5))
        want = act(x @ w_ih.T + b_ih + h @ w_hh.T + b_hh)
        assert_close(cell(_t(x, device), _t(h, device)), want, rtol=1e-12, atol=1e-12)
        assert_close(cell(_t(x[0], device), _t(h[0], device)), want[0], rtol=1e-12, atol=1e-12)
        assert_close(cell(_t(x, device)), act(x @ w_ih.T + b_ih + b_hh), rtol=1e-12, atol=1e-12)


def test_lstm_numpy_reference(device, rng):
    """A reversed single-layer LSTM against a numpy loop (gate order i, f, g, o)."""
    _need_fp64(device)
    lstm = LSTM(3, 4, bidirectional=True, device=device, dtype=cltensor.float64)
    w_ih, w_hh, b_ih, b_hh = (getattr(lstm, n + "_l0_reverse").numpy() for n in
                              ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    x = rng.standard_normal((4, 2, 3))
    h, c, outs = np.zeros((2, 4)), np.zeros((2, 4)), [None] * 4
    for t in reversed(range(4)):
        i, f, g, o = np.split(x[t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh, 4, axis=1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = outs[t] = _sigmoid(o) * np.tanh(c)
    out, (h_n, c_n) = lstm(_t(x, device))
    assert out.shape == (4, 2, 8)
    assert_close(out.numpy()[..., 4:], np.stack(outs), rtol=1e-12, atol=1e-12)
    assert_close(h_n[1], h, rtol=1e-12, atol=1e-12)
    assert_close(c_n[1], c, rtol=1e-12, atol=1e-12)


def test_lstm_gradcheck(device, rng):
    _need_fp64(device)
    f64 = cltensor.float64
    cell = LSTMCell(3, 4, device=device, dtype=f64)
    x, h, c = (_t(rng.standard_normal(s), device, grad=True) for s in ((2, 3), (2, 4), (2, 4)))
    assert gradcheck(lambda *a: cell(a[0], (a[1], a[2])), [x, h, c])
    lstm = LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2, device=device, dtype=f64)
    seq = _t(rng.standard_normal((2, 1, 3)), device, grad=True)
    h0, c0 = (_t(rng.standard_normal((4, 1, n)), device, grad=True) for n in (2, 4))
    assert gradcheck(lambda *a: lstm(a[0], (a[1], a[2]))[0], [seq, h0, c0])


def test_parameters_and_init(device):
    lstm = LSTM(3, 16, num_layers=2, bidirectional=True, proj_size=2, device=device)
    names = [f"{w}_l{k}{s}" for k in (0, 1) for s in ("", "_reverse")
             for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")]
    assert [n for n, _ in lstm.named_parameters()] == names
    assert lstm.weight_ih_l1.shape == (64, 4) and lstm.weight_hh_l0.shape == (64, 2)
    assert lstm.weight_hr_l1_reverse.shape == (2, 16)
    for p in lstm.parameters():
        v = p.numpy()
        assert np.abs(v).max() <= 0.25 and v.std() > 0.05   # U(-1/4, 1/4)
    gru = GRU(3, 5, bias=False, device=device)
    assert [n for n, _ in gru.named_parameters()] == ["weight_ih_l0", "weight_hh_l0"]
    cell = GRUCell(3, 5, bias=False, device=device)
    assert cell.bias_ih is None and cell.weight_hh.shape == (15, 5)
    assert repr(LSTM(3, 4, 2, batch_first=True)) == "LSTM(3, 4, num_layers=2, batch_first=True)"


# ---- against torch -------------------------------------------------------------------------------

RNN_CONFIGS = [
    (LSTM, dict(num_layers=2, bidirectional=True)),
    (LSTM, dict(proj_size=3, batch_first=True)),
    (LSTM, dict(num_layers=2, bias=False, proj_size=2, bidirectional=True)),
    (GRU, dict(num_layers=2, bidirectional=True, batch_first=True)),
    (GRU, dict(bias=False)),
    (RNN, dict(nonlinearity="relu", bidirectional=True)),
    (RNN, dict(num_layers=2, batch_first=True)),
]


def _torch_twin(cls, kw, dtype):
    import torch
    return getattr(torch.nn, cls.__name__)(4, 6, dtype=getattr(torch, dtype), **kw)


def _state_arrays(module, rng, batch):
    """Random (h0,) or ((h0, c0),) for module; batch None: unbatched."""
    n = module.num_layers * (2 if module.bidirectional else 1)
    lead = (n,) if batch is None else (n, batch)
    h0 = rng.standard_normal(lead + (module.proj_size or module.hidden_size,))
    if isinstance(module, LSTM):
        return ((h0, rng.standard_normal(lead + (module.hidden_size,))),)
    return (h0,)


@pytest.mark.parametrize("cls,kw", RNN_CONFIGS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_recurrent_vs_torch(device, rng, cls, kw):
    pytest.importorskip("torch")
    _need_fp64(device)
    m = cls(4, 6, device=device, dtype=cltensor.float64, **kw)
    x = rng.standard_normal((2, 3, 4) if kw.get("batch_first") else (3, 2, 4))
    _check_vs_torch(m, _torch_twin(cls, kw, "float64"), (x,), device=device)
    hx = _state_arrays(m, rng, 2)
    _check_vs_torch(m, _torch_twin(cls, kw, "float64"), (x,) + hx, device=device)
    unbatched = (rng.standard_normal((3, 4)),) + _state_arrays(m, rng, None)
    _check_vs_torch(m, _torch_twin(cls, kw, "float64"), unbatched, device=device)


@pytest.mark.parametrize("cls", [LSTM, GRU, RNN])
def test_recurrent_vs_torch_float32(device, rng, cls):
    pytest.importorskip("torch")
    kw = dict(num_layers=2, bidirectional=True)
    m = cls(4, 6, device=device, **kw)
    x = rng.standard_normal((5, 2, 4))
    _check_vs_torch(m, _torch_twin(cls, kw, "float32"), (x,), dtype="float32", device=device)


def test_cells_vs_torch(device, rng):
    torch = pytest.importorskip("torch")
    _need_fp64(device)
    for cls, kw in ((RNNCell, {}), (RNNCell, dict(nonlinearity="relu", bias=False)),
                    (LSTMCell, {}), (GRUCell, {}), (GRUCell, dict(bias=False))):
        m = cls(4, 5, device=device, dtype=cltensor.float64, **kw)
        tm = getattr(torch.nn, cls.__name__)(4, 5, dtype=torch.float64, **kw)
        for batch in ((2,), ()):
            h = rng.standard_normal(batch + (5,))
            hx = (h, rng.standard_normal(batch + (5,))) if cls is LSTMCell else h
            x = rng.standard_normal(batch + (4,))
            _check_vs_torch(m, tm, (x, hx), device=device)
            _check_vs_torch(m, tm, (x,), device=device)


def test_dropout_between_layers(device, rng):
    torch = pytest.importorskip("torch")
    _need_fp64(device)
    x = rng.standard_normal((3, 2, 4))
    # p = 1 drops every output of layer 0 (deterministic), in training only
    for training in (True, False):
        m = GRU(4, 6, num_layers=2, dropout=1.0, device=device, dtype=cltensor.float64)
        tm = torch.nn.GRU(4, 6, num_layers=2, dropout=1.0, dtype=torch.float64)
        m.train(training), tm.train(training)
        _check_vs_torch(m, tm, (x,), device=device)
    m = LSTM(4, 6, num_layers=2, dropout=0.5, device=device, dtype=cltensor.float64)
    train_out, (train_h, _) = m(_t(x, device))
    m.eval()
    eval_out, (eval_h, _) = m(_t(x, device))
    assert_close(train_h[0], eval_h[0].numpy())   # layer 0 sees no dropout
    assert not np.allclose(train_out.numpy(), eval_out.numpy())


# ---- bad input -----------------------------------------------------------------------------------

def test_recurrent_errors(device):
    lstm = LSTM(4, 6, num_layers=2, device=device)
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D, got 4D"):
        lstm(cltensor.zeros(1, 2, 3, 4, device=device))
    with pytest.raises(ValueError, match="input_size. Expected 4, got 5"):
        lstm(cltensor.zeros(3, 2, 5, device=device))
    with pytest.raises(ValueError, match=r"Expected hidden size \(2, 2, 6\), got \(1, 2, 6\)"):
        lstm(cltensor.zeros(3, 2, 4, device=device),
             (cltensor.zeros(1, 2, 6, device=device), cltensor.zeros(2, 2, 6, device=device)))
    with pytest.raises(ValueError, match=r"Expected hidden size \(2, 6\), got \(2, 1, 6\)"):
        GRU(4, 6, 2, device=device)(cltensor.zeros(3, 4, device=device),
                                     cltensor.zeros(2, 1, 6, device=device))
    with pytest.raises(ValueError, match="expected a hidden state of 2 tensor"):
        lstm(cltensor.zeros(3, 2, 4, device=device), cltensor.zeros(2, 2, 6, device=device))
    with pytest.raises(ValueError, match="sequence length to be larger than 0"):
        lstm(cltensor.zeros(0, 2, 4, device=device))
    with pytest.raises(ValueError, match="RNNCell: Expected input to be 1D or 2D, got 3D"):
        RNNCell(4, 6, device=device)(cltensor.zeros(1, 2, 4, device=device))
    with pytest.raises(ValueError, match=r"LSTMCell: Expected hidden size \(2, 6\)"):
        LSTMCell(4, 6, device=device)(cltensor.zeros(2, 4, device=device),
                                      (cltensor.zeros(2, 5, device=device),) * 2)


def test_constructor_errors():
    with pytest.raises(ValueError, match="only supported for LSTM"):
        RNNBase("GRU", 4, 6, proj_size=2)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        LSTM(4, 6, proj_size=6)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        LSTM(4, 6, 2, dropout=1.5)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        GRU(4, 6, dropout=0.2)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'sigmoid'"):
        RNN(4, 6, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        LSTMCell(4, 0)
    with pytest.raises(ValueError, match="num_layers must be greater than zero"):
        GRU(4, 6, num_layers=0)
    with pytest.raises(TypeError, match="hidden_size must be an int"):
        RNN(4, 2.5)


# ---- attention -----------------------------------------------------------------------------------

def _softmax(s):
    with np.errstate(invalid="ignore"):   # rows of -inf give NaN
        return _softmax_rows(s)


def _softmax_rows(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_sdpa_numpy_reference(device, rng):
    _need_fp64(device)
    q, k, v = (rng.standard_normal(s) for s in ((2, 4, 3), (2, 5, 3), (2, 5, 2)))
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(3)
    causal = np.tril(np.ones((4, 5), bool))
    args = [_t(a, device) for a in (q, k, v)]
    want = _softmax(np.where(causal, scores, -np.inf)) @ v
    assert_close(scaled_dot_product_attention(*args, is_causal=True), want, rtol=1e-12,
                 atol=1e-12)
    mask = rng.random((4, 5)) < 0.5
    mask[2] = False   # a row that sees no key gives zeros, as in torch
    want = np.nan_to_num(_softmax(np.where(mask, 0.7 * scores * math.sqrt(3), -np.inf))) @ v
    got = scaled_dot_product_attention(*args, attn_mask=_t(mask, device), scale=0.7)
    assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert not scaled_dot_product_attention(*args, dropout_p=1.0).numpy().any()


SDPA_CASES = [dict(), dict(is_causal=True), dict(scale=0.3), dict(attn_mask="bool"),
              dict(attn_mask="float"), dict(enable_gqa=True)]


def test_sdpa_vs_torch(device, rng):
    torch = pytest.importorskip("torch")
    _need_fp64(device)

    class Sdpa(torch.nn.Module):   # both as modules, for _check_vs_torch
        def __init__(self, fn, **kw):
            super().__init__()
            self.fn, self.kw = fn, kw

        def forward(self, *a, **kw):
            return self.fn(*a, **self.kw, **kw)

    for case in SDPA_CASES:
        kv_heads = 1 if case.get("enable_gqa") else 2
        q, k, v = (rng.standard_normal(s) for s in ((2, 2, 4, 3), (2, kv_heads, 5, 3),
                                                     (2, kv_heads, 5, 2)))
        kind = case.pop("attn_mask", None)
        mask = {"bool": rng.random((4, 5)) < 0.7, "float": rng.standard_normal((2, 1, 4, 5)),
                None: None}[kind]
        kwargs = {} if mask is None else {"attn_mask": mask}
        _check_vs_torch(Sdpa(scaled_dot_product_attention, **case),
                        Sdpa(torch.nn.functional.scaled_dot_product_attention, **case),
                        (q, k, v), kwargs, device=device)


MHA_CONFIGS = [dict(), dict(batch_first=True, bias=False), dict(kdim=3, vdim=2),
               dict(add_bias_kv=True), dict(add_zero_attn=True, batch_first=True),
               dict(add_bias_kv=True, add_zero_attn=True, kdim=3, vdim=2, bias=False)]


def _mha_inputs(rng, m, batch):
    """(query, key, value) arrays for m: L=4, S=5; batch None: unbatched."""
    lead = (lambda n: (n, batch) if not m.batch_first else (batch, n)) if batch else (
        lambda n: (n,))
    q = rng.standard_normal(lead(4) + (m.embed_dim,))
    return q, rng.standard_normal(lead(5) + (m.kdim,)), rng.standard_normal(lead(5) + (m.vdim,))


def test_multihead_attention_vs_torch(device, rng):
    torch = pytest.importorskip("torch")
    _need_fp64(device)
    kpm = np.array([[False] * 4 + [True], [False] * 5])
    for kw in MHA_CONFIGS:
        m = MultiheadAttention(6, 2, device=device, dtype=cltensor.float64, **kw)
        tm = torch.nn.MultiheadAttention(6, 2, dtype=torch.float64, **kw)
        q, k, v = _mha_inputs(rng, m, 2)
        masks = dict(key_padding_mask=np.where(kpm, -np.inf, 0.0),
                     attn_mask=rng.standard_normal((4, 5)))
        for average in (True, False):
            _check_vs_torch(m, tm, (q, k, v), dict(masks, average_attn_weights=average),
                            device=device)
        bool_mask = dict(attn_mask=rng.random((4, 5)) < 0.3, key_padding_mask=kpm,
                         need_weights=False)
        _check_vs_torch(m, tm, (q, k, v), bool_mask, device=device)
        _check_vs_torch(m, tm, _mha_inputs(rng, m, None), device=device)
        heads_mask = dict(attn_mask=rng.standard_normal((4, 4, 5)))
        _check_vs_torch(m, tm, (q, k, v), heads_mask, device=device)


def test_self_attention_one_projection(device, rng):
    """query is key is value: the in-projection is one GEMM, results as torch's."""
    torch = pytest.importorskip("torch")
    _need_fp64(device)
    m = MultiheadAttention(6, 3, device=device, dtype=cltensor.float64)
    x = _t(rng.standard_normal((4, 2, 6)), device)
    tx = torch.from_numpy(x.numpy())
    tm = torch.nn.MultiheadAttention(6, 3, dtype=torch.float64)
    tm.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in m.state_dict().items()})
    out, w = m(x, x, x)
    tout, tw = tm(tx, tx, tx)
    assert_close(out, tout.detach().numpy(), rtol=1e-10, atol=1e-10)
    assert_close(w, tw.detach().numpy(), rtol=1e-10, atol=1e-10)


def test_transformer_encoder_vs_torch(device, rng):
    torch = pytest.importorskip("torch")
    _need_fp64(device)
    causal = np.triu(np.full((4, 4), -np.inf), 1)
    for kw in (dict(), dict(norm_first=True, activation="gelu", batch_first=True)):
        layer = TransformerEncoderLayer(6, 2, 8, dropout=0.0, device=device,
                                        dtype=cltensor.float64, **kw)
        m = TransformerEncoder(layer, 2)
        tm = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(
            6, 2, 8, dropout=0.0, dtype=torch.float64, **kw), 2, enable_nested_tensor=False)
        x = rng.standard_normal((2, 4, 6) if kw else (4, 2, 6))
        kpm = np.array([[0.0] * 3 + [-np.inf], [0.0] * 4])
        _check_vs_torch(m, tm, (x,), dict(mask=causal, src_key_padding_mask=kpm),
                        device=device)


def test_transformer_decoder_vs_torch(device, rng):
    torch = pytest.importorskip("torch")
    _need_fp64(device)
    causal = np.triu(np.full((4, 4), -np.inf), 1)
    for kw in (dict(), dict(norm_first=True, activation="gelu", batch_first=True)):
        layer = TransformerDecoderLayer(6, 2, 8, dropout=0.0, device=device,
                                        dtype=cltensor.float64, **kw)
        m = TransformerDecoder(layer, 2, norm=LayerNorm(6, device=device, dtype=cltensor.float64))
        tm = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(
            6, 2, 8, dropout=0.0, dtype=torch.float64, **kw), 2,
            norm=torch.nn.LayerNorm(6, dtype=torch.float64))
        tgt = rng.standard_normal((2, 4, 6) if kw else (4, 2, 6))
        memory = rng.standard_normal((2, 5, 6) if kw else (5, 2, 6))
        masks = dict(tgt_mask=causal, memory_mask=rng.standard_normal((4, 5)),
                     tgt_key_padding_mask=np.array([[False] * 3 + [True], [False] * 4]),
                     memory_key_padding_mask=np.array([[0.0] * 4 + [-np.inf], [0.0] * 5]))
        _check_vs_torch(m, tm, (tgt, memory), masks, device=device)


def test_transformer_vs_torch(device, rng):
    torch = pytest.importorskip("torch")
    _need_fp64(device)
    for kw in (dict(), dict(batch_first=True, norm_first=True, bias=False)):
        m = Transformer(6, 2, 2, 1, 8, dropout=0.0, device=device, dtype=cltensor.float64, **kw)
        tm = torch.nn.Transformer(6, 2, 2, 1, 8, dropout=0.0, dtype=torch.float64, **kw)
        src = rng.standard_normal((2, 5, 6) if kw else (5, 2, 6))
        tgt = rng.standard_normal((2, 3, 6) if kw else (3, 2, 6))
        mask = Transformer.generate_square_subsequent_mask(3, dtype=cltensor.float64).numpy()
        np.testing.assert_array_equal(
            mask, torch.nn.Transformer.generate_square_subsequent_mask(3).numpy())
        _check_vs_torch(m, tm, (src, tgt), dict(tgt_mask=mask), device=device)
        _check_vs_torch(m, tm, (src[0], tgt[0]), device=device)  # unbatched
    w = [p.numpy() for p in m.parameters() if p.ndim > 1]
    bound = math.sqrt(6 / (6 + 8))  # linear1's Xavier-uniform bound
    assert all(np.abs(x).max() <= math.sqrt(6 / sum(x.shape)) + 1e-12 for x in w)
    assert np.abs(m.encoder.layers[0].linear1.weight.numpy()).max() <= bound + 1e-12
    m = Transformer(6, 2, 1, 1, 8, device=device, dtype=cltensor.float64)
    z = cltensor.zeros(5, 2, 6, device=device, dtype=cltensor.float64)
    with pytest.raises(ValueError, match="batch sizes of src and tgt must be equal, got 2 and 3"):
        m(z, cltensor.zeros(5, 3, 6, device=device, dtype=cltensor.float64))
    with pytest.raises(ValueError, match="tgt must be a 2-d or 3-d tensor of 6 features"):
        m(z, cltensor.zeros(5, 2, 4, device=device, dtype=cltensor.float64))
    with pytest.raises(ValueError, match="must both be batched .3-d. or both unbatched"):
        m(z, z[0])
    with pytest.raises(ValueError, match="sz must be"):
        Transformer.generate_square_subsequent_mask(-1)


def test_attention_errors(device):
    z = cltensor.zeros(2, 4, 6, device=device)
    extra = MultiheadAttention(6, 2, add_bias_kv=True, add_zero_attn=True, device=device)
    assert extra.bias_k.shape == (1, 1, 6) and extra(z, z, z)[1].shape == (4, 2, 4)
    with pytest.raises(ValueError, match=r"key_padding_mask of shape \(4, 2\)"):
        extra(z, z, z, key_padding_mask=cltensor.zeros(4, 4, device=device))
    with pytest.raises(ValueError, match="embed_dim must be divisible by num_heads"):
        MultiheadAttention(6, 4)
    m = MultiheadAttention(6, 2, device=device)
    with pytest.raises(ValueError, match="query was expected to have embedding dimension 6"):
        m(cltensor.zeros(2, 4, 5, device=device), z, z)
    with pytest.raises(ValueError, match="all 3-d"):
        m(z, cltensor.zeros(4, 6, device=device), z)
    with pytest.raises(ValueError, match=r"key_padding_mask of shape \(4, 2\)"):
        m(z, z, z, key_padding_mask=cltensor.zeros(2, 4, device=device))
    with pytest.raises(ValueError, match=r"attn_mask of shape \(4, 4\) should be \(2, 2\)"):
        m(z, z, z, attn_mask=cltensor.zeros(4, 4, device=device))
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        m(z, z, z, is_causal=True)
    with pytest.raises(ValueError, match="should not be set when is_causal=True"):
        scaled_dot_product_attention(z, z, z, attn_mask=cltensor.zeros(4, 4, device=device),
                                     is_causal=True)
    with pytest.raises(ValueError, match="query's last dim 6 must equal key's 5"):
        scaled_dot_product_attention(z, cltensor.zeros(2, 4, 5, device=device), z)
    with pytest.raises(ValueError, match="activation should be relu/gelu, not tanh"):
        TransformerEncoderLayer(6, 2, activation="tanh")
