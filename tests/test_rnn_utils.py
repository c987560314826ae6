"""cltensor.nn.utils.rnn (padding and packing of variable-length sequences) and the recurrent
layers on packed input: values, index tensors and every gradient against torch.nn.utils.rnn and
torch's modules (same state_dict) in float64; bad input."""
import numpy as np
import pytest
from test_rnn import RNN_CONFIGS, _check_vs_torch, _need_fp64, _state_arrays, _t, _torch_twin

import cltensor
from cltensor import nn
from cltensor.nn.modules import rnn as rnn_modules
from cltensor.nn.modules.rnn import GRU, LSTM, RNN
from cltensor.nn.utils import rnn as U
from cltensor.testing import assert_close

# every test uses these shapes (T = 4 steps, B = 3 sequences, 2 features), so kernels are reused
SORTED, UNSORTED, TIED = [4, 2, 1], [2, 4, 1], [2, 4, 2]


def _torch():
    """torch and torch.nn.utils.rnn (the test is skipped without torch)."""
    torch = pytest.importorskip("torch")
    import torch.nn.utils.rnn as tu
    return torch, tu


def _apply_module(base, utils, fn, child=None):
    """A module of class `base` whose forward is fn(utils, module, *args)."""
    class Apply(base):
        def forward(self, *args):
            return fn(utils, self, *args)
    m = Apply()
    if child is not None:
        m.rnn = child
    return m


def _check(fn, args, device, rnn=None, trnn=None):
    """fn(utils, module, *args) with cltensor's utils and with torch's: outputs and the
    gradients of args (and of the parameters of rnn, trnn) agree."""
    torch, TU = _torch()
    _check_vs_torch(_apply_module(nn.Module, U, fn, rnn),
                    _apply_module(torch.nn.Module, TU, fn, trnn), args, device=device)


def _assert_indices(packed, tpacked):
    assert packed.batch_sizes.tolist() == tpacked.batch_sizes.tolist()
    for name in ("sorted_indices", "unsorted_indices"):
        got, want = getattr(packed, name), getattr(tpacked, name)
        assert (got is None) == (want is None), name
        assert got is None or got.tolist() == want.tolist(), name


# ---- padding and packing -------------------------------------------------------------------------

@pytest.mark.parametrize("batch_first", [False, True])
def test_pad_sequence_vs_torch(device, rng, batch_first):
    _need_fp64(device)
    seqs = [rng.standard_normal((n, 2)) for n in UNSORTED]
    for side in ("right", "left"):
        _check(lambda u, m, s: u.pad_sequence(s, batch_first, 0.5, side), (seqs,), device)
    _check(lambda u, m, s: u.pad_sequence(s, batch_first), ([s[:, 0] for s in seqs],), device)


@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_padded_round_trip_vs_torch(device, rng, batch_first):
    """pack_padded_sequence then pad_packed_sequence (padding value, total_length): data, index
    tensors, lengths and the input's gradient, sorted and unsorted (ties kept in order)."""
    torch, TU = _torch()
    _need_fp64(device)
    x = rng.standard_normal((3, 4, 2) if batch_first else (4, 3, 2))

    def round_trip(u, m, x, lengths, enforce_sorted, total_length):
        packed = u.pack_padded_sequence(x, lengths, batch_first, enforce_sorted)
        return packed.data, u.pad_packed_sequence(packed, batch_first, -1.5, total_length)[0]

    for lengths, enforce_sorted in ((SORTED, True), (UNSORTED, False), (TIED, False)):
        for total_length in (None, 6):
            _check(lambda u, m, x: round_trip(u, m, x, lengths, enforce_sorted, total_length),
                   (x,), device)
        packed = U.pack_padded_sequence(_t(x, device), lengths, batch_first, enforce_sorted)
        tpacked = TU.pack_padded_sequence(torch.from_numpy(x), lengths, batch_first,
                                          enforce_sorted)
        _assert_indices(packed, tpacked)
        assert U.pad_packed_sequence(packed)[1].tolist() == lengths
    # no trailing dims, lengths as a tensor
    lengths = _t(np.array(UNSORTED), device)
    _check(lambda u, m, x: round_trip(u, m, x, UNSORTED, False, None)[1], (x[..., 0],), device)
    assert_close(U.pack_padded_sequence(_t(x[..., 0], device), lengths, batch_first, False).data,
                 TU.pack_padded_sequence(torch.from_numpy(x[..., 0]), UNSORTED, batch_first,
                                         False).data.numpy())


def test_pack_sequence_vs_torch(device, rng):
    """pack_sequence, unpack_sequence, unpad_sequence: values and gradients."""
    torch, TU = _torch()
    _need_fp64(device)
    seqs = [rng.standard_normal((n, 2)) for n in UNSORTED]

    def packed_and_back(u, m, seqs, enforce_sorted):
        packed = u.pack_sequence(seqs, enforce_sorted)
        return (packed.data,) + tuple(u.unpack_sequence(packed))

    _check(lambda u, m, s: packed_and_back(u, m, s, False), (seqs,), device)
    _check(lambda u, m, s: packed_and_back(u, m, s, True), (sorted(seqs, key=len)[::-1],),
           device)

    def unpadded(u, m, seqs, batch_first):   # torch's unpad_sequence takes lengths as a tensor
        lengths = torch.tensor(UNSORTED) if u is TU else UNSORTED
        return tuple(u.unpad_sequence(u.pad_sequence(seqs, batch_first), lengths, batch_first))

    for batch_first in (False, True):
        _check(lambda u, m, s: unpadded(u, m, s, batch_first), (seqs,), device)
    for order, enforce_sorted in ((seqs, False), (sorted(seqs, key=len)[::-1], True)):
        packed = U.pack_sequence([_t(s, device) for s in order], enforce_sorted)
        _assert_indices(packed, TU.pack_sequence([torch.from_numpy(s) for s in order],
                                                 enforce_sorted))


def test_packed_sequence_api(device, rng):
    _need_fp64(device)
    x = _t(rng.standard_normal((4, 3, 2)), device)
    packed = U.pack_padded_sequence(x, UNSORTED, enforce_sorted=False)
    assert packed._fields == ("data", "batch_sizes", "sorted_indices", "unsorted_indices")
    assert packed.device is device and packed.dtype == cltensor.float64
    assert packed.to(cltensor.float64) is packed and packed.double() is packed
    single = packed.float()
    assert single.dtype == cltensor.float32 and single.sorted_indices is packed.sorted_indices
    assert_close(single.data, packed.data.numpy().astype(np.float32))
    assert packed.long().data.dtype == cltensor.int64
    # rebuilt from its tensors (batch sizes read back), as code applying fn to .data does
    scaled = U.PackedSequence(packed.data * 2, packed.batch_sizes, packed.sorted_indices)
    assert scaled.unsorted_indices.tolist() == [1, 0, 2]
    assert_close(U.pad_packed_sequence(scaled)[0], 2 * U.pad_packed_sequence(packed)[0].numpy())
    pair = U.PackedSequence((packed.data, [3, 2, 1]))
    assert pair.batch_sizes.tolist() == [3, 2, 1] and pair.sorted_indices is None
    assert U.invert_permutation(_t(np.array([2, 0, 3, 1]), device)).tolist() == [1, 3, 0, 2]
    assert U.invert_permutation(None) is None
    assert cltensor.nn.utils.rnn is U and cltensor.nn.utils.clip_grad_norm_


# ---- recurrent layers on packed input ------------------------------------------------------------

def _packed_rnn_fn(batch_first, lengths, enforce_sorted):
    def fn(u, m, x, *hx):
        packed = u.pack_padded_sequence(x, lengths, batch_first, enforce_sorted)
        out, state = m.rnn(packed, *hx)
        assert out.batch_sizes.tolist() == packed.batch_sizes.tolist()
        return u.pad_packed_sequence(out, batch_first)[0], state
    return fn


@pytest.mark.parametrize("cls,kw", RNN_CONFIGS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_recurrent_packed_vs_torch(device, rng, cls, kw):
    """Outputs, h_n (c_n) taken at each sequence's last step, and the gradients of the input,
    hx and every parameter, with sorted lengths and no hx, unsorted lengths and hx."""
    _torch()
    _need_fp64(device)
    batch_first = kw.get("batch_first", False)
    m = cls(4, 6, device=device, dtype=cltensor.float64, **kw)
    x = rng.standard_normal((3, 4, 4) if batch_first else (4, 3, 4))
    for lengths, enforce_sorted, hx in ((SORTED, True, ()),
                                        (UNSORTED, False, _state_arrays(m, rng, 3))):
        fn = _packed_rnn_fn(batch_first, lengths, enforce_sorted)
        _check(fn, (x,) + hx, device, m, _torch_twin(cls, kw, "float64"))


def test_recurrent_packed_runs_active_rows(device, rng, monkeypatch):
    """Each step runs the cell on the batch_sizes[t] running sequences only, in time order
    forward and reversed backward; the padding never reaches the outputs."""
    _need_fp64(device)
    rows = []
    gates, step, states = rnn_modules._MODES["GRU"]

    def spy(gi, *args):
        rows.append(gi.shape[0])
        return step(gi, *args)
    monkeypatch.setitem(rnn_modules._MODES, "GRU", (gates, spy, states))
    gru = GRU(4, 6, bidirectional=True, device=device, dtype=cltensor.float64)
    x = rng.standard_normal((4, 3, 4))
    out, _ = gru(U.pack_padded_sequence(_t(x, device), UNSORTED, enforce_sorted=False))
    assert rows == [3, 2, 1, 1] + [1, 1, 2, 3]
    x[2:, 0] = x[1:, 2] = np.nan   # the padding
    again, _ = gru(U.pack_padded_sequence(_t(x, device), UNSORTED, enforce_sorted=False))
    assert_close(again.data, out.data.numpy())


# ---- bad input -----------------------------------------------------------------------------------

def test_packing_errors(device):
    x = cltensor.zeros(3, 2, 4, device=device)
    pack = U.pack_padded_sequence
    with pytest.raises(ValueError, match="must be sorted in decreasing order when "
                                         "`enforce_sorted` is True"):
        pack(x, [2, 3])
    for lengths in ([3, 0], [-1, 3]):
        with pytest.raises(ValueError, match="has to be greater than 0"):
            pack(x, lengths, enforce_sorted=False)
    with pytest.raises(ValueError, match="a length of 4 exceeds the input's 3 time steps"):
        pack(x, [4, 2])
    with pytest.raises(ValueError, match=r"len\(lengths\)` to be equal to batch_size, but got "
                                         r"3 \(batch_size=2\)"):
        pack(x, [3, 2, 1])
    for lengths in ([3.0, 2.0], cltensor.tensor([3.0, 2.0], device=device)):
        with pytest.raises(TypeError, match="lengths must be integers, got float"):
            pack(x, lengths)
    with pytest.raises(ValueError, match="'lengths' argument should be 1D, but got 2D"):
        pack(x, [[3, 2]])
    with pytest.raises(ValueError, match="at least 2 dims"):
        pack(cltensor.zeros(3, device=device), [3])
    with pytest.raises(ValueError, match="Cannot pack empty tensors"):
        pack(cltensor.zeros(0, 2, 4, device=device), [1, 1])
    with pytest.raises(TypeError, match="input must be a tensor"):
        pack(np.zeros((3, 2)), [3, 2])
    packed = pack(x, [3, 2])
    with pytest.raises(ValueError, match="total_length=2 and max sequence length being 3"):
        U.pad_packed_sequence(packed, total_length=2)
    with pytest.raises(TypeError, match="expected a PackedSequence, got ClTensor"):
        U.pad_packed_sequence(x)


def test_padding_errors(device):
    a, b = cltensor.zeros(3, 2, device=device), cltensor.zeros(2, 4, device=device)
    with pytest.raises(ValueError, match="received an empty list of sequences"):
        U.pad_sequence([])
    with pytest.raises(ValueError, match=r"sequence 1 has shape \(2, 4\), but sequence 0 has "
                                         r"trailing dims \(2,\)"):
        U.pad_sequence([a, b])
    with pytest.raises(ValueError, match="sequence 1 must be a tensor of at least 1 dim"):
        U.pack_sequence([a, cltensor.tensor(1.0, device=device)])
    with pytest.raises(ValueError, match="padding_side to be one of left or right, but got "
                                         "middle"):
        U.pad_sequence([a], padding_side="middle")
    with pytest.raises(TypeError, match="Expected iterable for input sequences"):
        U.pad_sequence(5)
    with pytest.raises(ValueError, match="must be sorted in decreasing order"):
        U.pack_sequence([a, cltensor.zeros(4, 2, device=device)])
    with pytest.raises(ValueError, match="got 3 lengths for a batch of 2"):
        U.unpad_sequence(cltensor.zeros(3, 2, 4, device=device), [3, 2, 1])
    with pytest.raises(ValueError, match=r"lengths must be in 0..3"):
        U.unpad_sequence(cltensor.zeros(3, 2, 4, device=device), [4, 2])


def test_recurrent_packed_errors(device):
    lstm = LSTM(4, 6, device=device)
    packed = U.pack_padded_sequence(cltensor.zeros(3, 2, 4, device=device), [3, 1])
    with pytest.raises(ValueError, match=r"Expected hidden size \(1, 2, 6\), got \(1, 3, 6\)"):
        lstm(packed, (cltensor.zeros(1, 3, 6, device=device),) * 2)
    with pytest.raises(ValueError, match="input_size. Expected 5, got 4"):
        RNN(5, 6, device=device)(packed)
    with pytest.raises(ValueError, match="Expected input to be 2D, got 3D"):
        lstm(U.PackedSequence(cltensor.zeros(4, 1, 4, device=device), [2, 2]))
    with pytest.raises(ValueError, match=r"batch_sizes \[1, 2\] must not increase"):
        lstm(U.PackedSequence(packed.data, [1, 2]))
    with pytest.raises(ValueError, match=r"sum to the 4 rows"):
        lstm(U.PackedSequence(packed.data, [2, 1]))
