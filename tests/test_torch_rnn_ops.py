"""torch.nn's recurrent layers on "opencl" against CPU torch (forward and backward, packed
sequences, the cells), the fused cells called through torch.ops.aten against a float64
reference, channel_shuffle and rrelu, with torch's errors; every op on the device."""
import copy
import warnings

import numpy as np
import pytest

# torch (skipping when it is missing or too old) and the fixtures making `device` opencl:0
from test_torch_device import ct, device_only, ocl, torch  # noqa: F401

pytestmark = pytest.mark.usefixtures("ocl", "device_only")
OCL = "opencl"
TOL = {torch.float64: 1e-12, torch.float32: 2e-5, torch.float16: 1e-2, torch.bfloat16: 5e-2}
_aten = torch.ops.aten


def _close(got, want, dtype, label=""):
    assert got.device.type == OCL and got.dtype == dtype and got.shape == want.shape, label
    np.testing.assert_allclose(got.detach().cpu().double().numpy(),
                               want.detach().double().numpy(),
                               rtol=TOL[dtype], atol=TOL[dtype], err_msg=label)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


# (class, dtype, layers, bidirectional, batch_first, bias, initial state given)
LAYERS = [
    (torch.nn.LSTM, torch.float64, 2, True, True, True, True),
    (torch.nn.LSTM, torch.float32, 1, False, False, False, False),
    (torch.nn.LSTM, torch.bfloat16, 1, True, True, True, True),
    (torch.nn.GRU, torch.float64, 2, True, False, True, True),
    (torch.nn.GRU, torch.float32, 1, False, True, False, False),
    (torch.nn.GRU, torch.float16, 1, False, False, True, True),
]


@pytest.mark.parametrize("case", LAYERS, ids=lambda c: f"{c[0].__name__}-{c[1]}-{c[2:]}")
def test_rnn_layer_forward_backward(case):
    cls, dtype, layers, bidir, batch_first, bias, given = case
    torch.manual_seed(1)
    # the CPU reference runs in float64 on the same (rounded) weights and inputs
    ref = cls(5, 3, num_layers=layers, bidirectional=bidir, batch_first=batch_first,
              bias=bias).to(dtype).double()
    mod = copy.deepcopy(ref).to(dtype).to(OCL)
    x = torch.randn(2, 4, 5, generator=_gen(2)).to(dtype).double().requires_grad_()
    xo = x.detach().to(dtype).to(OCL).requires_grad_()
    state = [torch.randn(layers * (1 + bidir), 2 if batch_first else 4, 3,
                         generator=_gen(3 + k)).to(dtype).double().requires_grad_()
             for k in range(2 if cls is torch.nn.LSTM else 1)]
    state_o = [s.detach().to(dtype).to(OCL).requires_grad_() for s in state]
    arg = (tuple(state) if cls is torch.nn.LSTM else state[0]) if given else None
    arg_o = (tuple(state_o) if cls is torch.nn.LSTM else state_o[0]) if given else None
    y, h = ref(x, arg)
    yo, ho = mod(xo, arg_o)
    hs, hos = (h, ho) if cls is torch.nn.LSTM else ((h,), (ho,))
    _close(yo, y, dtype, "output")
    for a, b in zip(hos, hs):
        _close(a, b, dtype, "final state")
    gy = torch.randn(y.shape, generator=_gen(9), dtype=torch.float64).to(dtype).double()
    loss = (y * gy).sum() + sum((t * t).sum() for t in hs)
    loss_o = (yo * gy.to(dtype).to(OCL)).sum() + sum((t * t).sum() for t in hos)
    loss.backward()
    loss_o.backward()
    _close(xo.grad, x.grad, dtype, "input grad")
    if given:
        for a, b in zip(state_o, state):
            _close(a.grad, b.grad, dtype, "state grad")
    for (name, p), q in zip(ref.named_parameters(), mod.parameters()):
        _close(q.grad, p.grad, dtype, name)


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU])
def test_rnn_packed_sequence(cls):
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    torch.manual_seed(4)
    ref = cls(3, 2, batch_first=True, bidirectional=True).double()
    mod = copy.deepcopy(ref).to(OCL)
    x = torch.randn(3, 4, 3, generator=_gen(5), dtype=torch.float64, requires_grad=True)
    xo = x.detach().to(OCL).requires_grad_()
    lengths = [4, 3, 1]
    y, _ = pad_packed_sequence(ref(pack_padded_sequence(x, lengths, batch_first=True))[0],
                               batch_first=True)
    yo, _ = pad_packed_sequence(mod(pack_padded_sequence(xo, lengths, batch_first=True))[0],
                                batch_first=True)
    _close(yo, y, torch.float64, "padded output")
    (y * y).sum().backward()
    (yo * yo).sum().backward()
    _close(xo.grad, x.grad, torch.float64, "input grad")
    for (name, p), q in zip(ref.named_parameters(), mod.parameters()):
        _close(q.grad, p.grad, torch.float64, name)


@pytest.mark.parametrize("cls,given", [(torch.nn.LSTMCell, True), (torch.nn.GRUCell, False)])
def test_rnn_cell_modules(cls, given):
    torch.manual_seed(6)
    ref = cls(4, 3).double()
    mod = copy.deepcopy(ref).to(OCL)
    x = torch.randn(2, 4, generator=_gen(7), dtype=torch.float64, requires_grad=True)
    xo = x.detach().to(OCL).requires_grad_()
    h = torch.randn(2, 3, generator=_gen(8), dtype=torch.float64)
    state = ((h, h * 0.5) if cls is torch.nn.LSTMCell else h) if given else None
    state_o = (tuple(s.to(OCL) for s in state) if isinstance(state, tuple)
               else None if state is None else state.to(OCL))
    out, out_o = ref(x, state), mod(xo, state_o)
    outs, outs_o = (out, out_o) if isinstance(out, tuple) else ((out,), (out_o,))
    for a, b in zip(outs_o, outs):
        _close(a, b, torch.float64)
    sum((t * t).sum() for t in outs).backward()
    sum((t * t).sum() for t in outs_o).backward()
    _close(xo.grad, x.grad, torch.float64, "input grad")
    for (name, p), q in zip(ref.named_parameters(), mod.parameters()):
        _close(q.grad, p.grad, torch.float64, name)


@pytest.mark.parametrize("cls", [torch.nn.LSTMCell, torch.nn.GRUCell])
def test_rnn_cell_double_backward(cls):
    """create_graph=True: torch differentiates the cells through its composite backward."""
    def run(mod, x):
        y = mod(x)
        y = y[0] if isinstance(y, tuple) else y
        g, = torch.autograd.grad((y * y).sum(), x, create_graph=True)
        (g * g).sum().backward()
        return g
    torch.manual_seed(11)
    ref = cls(4, 3).double()
    mod = copy.deepcopy(ref).to(OCL)
    x = torch.randn(2, 4, generator=_gen(12), dtype=torch.float64, requires_grad=True)
    xo = x.detach().to(OCL).requires_grad_()
    _close(run(mod, xo), run(ref, x), torch.float64, "input grad")
    _close(xo.grad, x.grad, torch.float64, "grad of the input grad")
    _close(mod.weight_hh.grad, ref.weight_hh.grad, torch.float64, "weight_hh")


# ---- the fused cells through torch.ops.aten ---------------------------------------------------
def _lstm_reference(ig, hg, cx, ib, hb):
    gates = ig + hg + (0 if ib is None else ib + hb)
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    return o * cy.tanh(), cy, torch.cat([i, f, g, o], 1)


def _gru_reference(ig, hg, hx, ib, hb):
    ig, hg = (ig, hg) if ib is None else (ig + ib, hg + hb)
    (ir, iz, in_), (hr, hz, hn) = ig.chunk(3, 1), hg.chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    return n + z * (hx - n), torch.cat([r, z, n, hx, hn], 1)


def _operands(gates, bias, dtype, seed=10):
    shapes = [(3, gates), (3, gates), (3, gates // (4 if gates % 4 == 0 else 3))]
    ts = [torch.randn(s, generator=_gen(seed + k), dtype=torch.float64).to(dtype).double()
          for k, s in enumerate(shapes)]
    ts += [torch.randn(gates, generator=_gen(seed + 5 + k), dtype=torch.float64).to(dtype).double()
           if bias else None for k in range(2)]
    return ts, [None if t is None else t.to(dtype).to(OCL) for t in ts]


@pytest.mark.parametrize("dtype,bias", [(torch.float64, True), (torch.float32, False),
                                        (torch.float16, True)])
def test_fused_lstm_cell_and_backward(dtype, bias):
    ref_in, dev_in = _operands(8, bias, dtype)
    got = _aten._thnn_fused_lstm_cell(*dev_in)
    want = _lstm_reference(*ref_in)
    outs = [torch.full_like(t, float("nan")) for t in got]  # the out= form, poisoned first
    _aten._thnn_fused_lstm_cell.out(*dev_in, out0=outs[0], out1=outs[1], out2=outs[2])
    for g, o, w, label in zip(got, outs, want, ("hy", "cy", "workspace")):
        _close(g, w, dtype, label)
        _close(o, w, dtype, label + " out=")
    # the backward against autograd through the reference, each output's gradient alone too
    ghy, gcy = (torch.randn(3, 2, generator=_gen(20 + k), dtype=torch.float64).to(dtype).double()
                for k in range(2))
    cx, cy, ws = ref_in[2], want[1].detach(), got[2]
    for use_h, use_c in ((True, True), (True, False), (False, True)):
        leaves = [t.detach().requires_grad_() for t in ref_in[:3]]
        hy_r, cy_r, _ = _lstm_reference(*leaves, *ref_in[3:])
        loss = (hy_r * ghy).sum() * use_h + (cy_r * gcy).sum() * use_c
        g_gates, _, g_cx = torch.autograd.grad(loss, leaves)
        res = _aten._thnn_fused_lstm_cell_backward_impl(
            ghy.to(dtype).to(OCL) if use_h else None, gcy.to(dtype).to(OCL) if use_c else None,
            cx.to(dtype).to(OCL), cy.to(dtype).to(OCL), ws, bias)
        _close(res[0], g_gates, dtype, "grad gates")
        _close(res[1], g_cx, dtype, "grad cx")
        if bias:
            _close(res[2], g_gates.sum(0), dtype, "grad bias")
        else:
            assert res[2] is None
    assert _aten._thnn_fused_lstm_cell_backward_impl(None, None, got[0], got[1], ws, bias) == \
        (None, None, None)


@pytest.mark.parametrize("dtype,bias", [(torch.float64, True), (torch.float32, False),
                                        (torch.bfloat16, True)])
def test_fused_gru_cell_and_backward(dtype, bias):
    ref_in, dev_in = _operands(6, bias, dtype)
    hy, ws = _aten._thnn_fused_gru_cell(*dev_in)
    want_hy, want_ws = _gru_reference(*ref_in)
    _close(hy, want_hy, dtype, "hy")
    _close(ws, want_ws, dtype, "workspace")
    outs = [torch.full_like(t, float("nan")) for t in (hy, ws)]
    _aten._thnn_fused_gru_cell.out(*dev_in, out0=outs[0], out1=outs[1])
    _close(outs[0], want_hy, dtype, "hy out=")
    _close(outs[1], want_ws, dtype, "workspace out=")
    leaves = [t.detach().requires_grad_() for t in ref_in[:3]]
    ghy = torch.randn(3, 2, generator=_gen(30), dtype=torch.float64).to(dtype).double()
    bias_args = [b.detach().requires_grad_() for b in ref_in[3:]] if bias else [None, None]
    (_gru_reference(*leaves, *bias_args)[0] * ghy).sum().backward()
    res = _aten._thnn_fused_gru_cell_backward(ghy.to(dtype).to(OCL), ws, bias)
    for got, want, label in zip(res, [t.grad for t in leaves], ("gi", "gh", "ghx")):
        _close(got, want, dtype, label)
    if bias:
        _close(res[3], bias_args[0].grad, dtype, "grad input bias")
        _close(res[4], bias_args[1].grad, dtype, "grad hidden bias")
    else:
        assert res[3] is None and res[4] is None


def test_fused_cells_bad_input():
    g8, g6 = torch.zeros(3, 8, device=OCL), torch.zeros(3, 6, device=OCL)
    h2 = torch.zeros(3, 2, device=OCL)
    with pytest.raises(RuntimeError, match="2-dimensional.*'input_gates'"):
        _aten._thnn_fused_lstm_cell(g8[None], g8[None], h2)
    with pytest.raises(RuntimeError, match="'prev_hidden' to have 6 elements"):
        _aten._thnn_fused_lstm_cell(g8, g8, torch.zeros(3, 3, device=OCL))
    with pytest.raises(RuntimeError, match="biases must both have 8 elements"):
        _aten._thnn_fused_lstm_cell(g8, g8, h2, g8[0, :4], g8[0, :4])
    with pytest.raises(RuntimeError, match="2-dimensional.*'input_gates'"):
        _aten._thnn_fused_gru_cell(g6[None], g6[None], h2)
    with pytest.raises(RuntimeError, match="same size"):
        _aten._thnn_fused_gru_cell(g6, g6[:2], h2)
    with pytest.raises(RuntimeError, match="'prev_hidden' to have 6 elements"):
        _aten._thnn_fused_gru_cell(g6, g6, torch.zeros(3, 3, device=OCL))
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        _aten._thnn_fused_gru_cell(g6, g6.double(), h2)
    with pytest.raises(RuntimeError, match="'workspace' to have size \\[3, 10\\]"):
        _aten._thnn_fused_gru_cell_backward(h2, g6, True)
    with pytest.raises(RuntimeError, match="same device"):
        _aten._thnn_fused_gru_cell(g6, g6.cpu(), h2)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        _aten._thnn_fused_gru_cell(g6.long(), g6.long(), h2.long())


# ---- channel_shuffle and rrelu ------------------------------------------------------------------
@pytest.mark.parametrize("shape,groups,dtype", [((2, 6, 3, 2), 3, torch.float32),
                                                ((1, 4, 5), 2, torch.int64)])
def test_channel_shuffle(shape, groups, dtype):
    x = torch.arange(np.prod(shape)).reshape(shape).to(dtype)
    want = torch.nn.functional.channel_shuffle(x, groups)
    got = torch.nn.ChannelShuffle(groups)(x.to(OCL))
    assert torch.equal(got.cpu(), want)
    strided = x.transpose(0, -1).contiguous().transpose(0, -1)  # a non-contiguous view
    assert torch.equal(torch.channel_shuffle(strided.to(OCL), groups).cpu(), want)
    assert torch.equal(torch.native_channel_shuffle(x.to(OCL), groups).cpu(), want)
    out = torch.full(shape, -1, dtype=dtype, device=OCL)
    torch.ops.aten.channel_shuffle.out(x.to(OCL), groups, out=out)
    assert torch.equal(out.cpu(), want)


def test_channel_shuffle_bad_input():
    x = torch.zeros(2, 6, 2, device=OCL)
    with pytest.raises(RuntimeError, match="Got 6 channels and 4 groups"):
        torch.channel_shuffle(x, 4)
    with pytest.raises(RuntimeError, match="must be positive"):
        torch.channel_shuffle(x, 0)
    with pytest.raises(RuntimeError, match="> 2 dims"):
        torch.channel_shuffle(x[:, :, 0], 3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rrelu_eval_exact(dtype):
    x = torch.randn(4, 5, generator=_gen(40)).to(dtype)
    x[0, :3] = torch.tensor([0.0, -0.0, float("nan")])
    noise = torch.full((4, 5), float("nan"), dtype=dtype, device=OCL)
    got = _aten.rrelu_with_noise(x.to(OCL), noise, 0.1, 0.3, False)
    want = torch.nn.functional.rrelu(x, 0.1, 0.3, training=False)
    np.testing.assert_array_equal(got.cpu().float().numpy(), want.float().numpy())
    assert torch.isnan(noise.cpu()).all()  # eval leaves noise untouched
    out = torch.full_like(noise, float("nan"))
    _aten.rrelu_with_noise.out(x.to(OCL), noise, 0.1, 0.3, False, out=out)
    np.testing.assert_array_equal(out.cpu().float().numpy(), want.float().numpy())
    xo = x.to(OCL).requires_grad_()
    torch.nn.functional.rrelu(xo, 0.1, 0.3).sum().backward()
    xr = x.clone().requires_grad_()
    torch.nn.functional.rrelu(xr, 0.1, 0.3).sum().backward()
    np.testing.assert_array_equal(xo.grad.cpu().float().numpy(), xr.grad.float().numpy())


@pytest.mark.parametrize("inplace,dtype", [(False, torch.float64), (True, torch.float32)])
def test_rrelu_training(inplace, dtype):
    lower, upper = 0.1, 0.3
    x = torch.randn(50, 7, generator=_gen(41), dtype=dtype)
    x[0, 0] = 0.0
    xo = x.to(OCL).requires_grad_()
    y = torch.nn.functional.rrelu(xo * 1.0 if inplace else xo, lower, upper, True, inplace)
    ratio = (y / torch.where(xo == 0, 1.0, xo)).detach().cpu()
    neg, below = x <= 0, x < 0
    assert torch.equal(ratio[~neg], torch.ones_like(ratio[~neg]))
    assert ((ratio[below] >= lower) & (ratio[below] <= upper)).all()
    assert ratio[below].std() > 0.02  # drawn per element, not one slope
    y.sum().backward()
    grad = xo.grad.cpu()
    np.testing.assert_allclose(grad[below].numpy(), ratio[below].numpy(), rtol=TOL[dtype])
    assert torch.equal(grad[~neg], torch.ones_like(grad[~neg]))
    noise = torch.full(x.shape, float("nan"), dtype=dtype, device=OCL)
    out = _aten.rrelu_with_noise(xo.detach(), noise, lower, upper, True)
    noise = noise.cpu()
    assert torch.equal(noise[~neg], torch.ones_like(noise[~neg]))
    assert ((noise[neg] >= lower) & (noise[neg] <= upper)).all()
    np.testing.assert_array_equal(out.cpu().numpy(), (x * noise).numpy())


def test_rrelu_training_with_generator(monkeypatch):
    """A torch.Generator is a CPU generator: the draws, hence the results, are the CPU's."""
    monkeypatch.delenv("CLTENSOR_TORCH_FALLBACK")
    x = torch.randn(4, 5, generator=_gen(42))
    noise, noise_o = torch.empty(4, 5), torch.empty(4, 5, device=OCL)
    with warnings.catch_warnings():  # the fallback's warning, once a process
        warnings.simplefilter("ignore", ct.CPUFallbackWarning)
        got = _aten.rrelu_with_noise(x.to(OCL), noise_o, 0.1, 0.3, True, _gen(3))
    want = _aten.rrelu_with_noise(x, noise, 0.1, 0.3, True, _gen(3))
    assert got.device.type == OCL and torch.equal(got.cpu(), want)
    assert torch.equal(noise_o.cpu(), noise)


def test_rrelu_bad_input():
    x = torch.randn(2, 3, device=OCL)
    with pytest.raises(RuntimeError, match="noise tensor shape must match"):
        _aten.rrelu_with_noise(x, torch.empty(5, device=OCL), 0.1, 0.3, True)
    with pytest.raises(RuntimeError, match="Lower bound should be less than or equal"):
        torch.nn.functional.rrelu(x, 0.5, 0.3, True)
    with pytest.raises(RuntimeError, match="Expected from <= to"):
        _aten.rrelu_with_noise(x, torch.empty(2, 3, device=OCL), 0.5, 0.3, True)
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        _aten.rrelu_with_noise(x, torch.empty(2, 3, device=OCL, dtype=torch.float64), 0.1, 0.3)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        _aten.rrelu_with_noise(x.long(), x.long(), 0.1, 0.3)
