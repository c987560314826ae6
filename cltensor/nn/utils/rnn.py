"""torch.nn.utils.rnn: batches of variable-length sequences, padded or packed.

A PackedSequence holds the sequences of a batch sorted by decreasing length and interleaved by
time step: data's first batch_sizes[0] rows are every sequence's step 0, the next batch_sizes[1]
rows the step 1 of those still running, and so on. The recurrent layers (nn.RNN, LSTM, GRU) take
one and run each step on its batch_sizes[t] rows only.

Packing and padding are one index_select or index_copy each, with row positions worked out on
the host (the lengths are host data, as in torch), so gradients flow through them.

NOTE: torch keeps batch_sizes (and the lengths pad_packed_sequence returns) as CPU tensors;
cltensor has no host tensors, so they are int64 tensors on the data's device, and a
PackedSequence keeps the batch sizes it was built from as Python ints so that the recurrent
layers need not read them back.
"""
from collections import namedtuple

import numpy as np

from ...autograd.namespace import arange, cat, empty_like, from_numpy, full
from ...dtypes import float32, float64, int32, int64
from ...tensor import ClTensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]


class PackedSequence(namedtuple("PackedSequence",
                                ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """The data and batch sizes of a packed batch of sequences; made by pack_padded_sequence or
    pack_sequence, taken and returned by the recurrent layers.

    Attributes:
        data: the packed rows, (sum(lengths), *).
        batch_sizes: int64 tensor (T,): how many sequences are running at each time step.
        sorted_indices: int64 tensor (B,): the batch order the sequences were packed in
            (sorted_indices[i] is the i-th longest), or None when they came sorted.
        unsorted_indices: its inverse permutation, or None.

    Example:
        >>> packed = pack_sequence([cltensor.tensor([1, 2, 3]), cltensor.tensor([4, 5])])
        >>> packed.data.tolist(), packed.batch_sizes.tolist()
        ([1, 4, 2, 5, 3], [2, 2, 1])
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:   # PackedSequence((data, batch_sizes), sorted_indices)
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise ValueError("PackedSequence: expected data and batch_sizes, or a pair of "
                                 "them as the first argument")
            data, batch_sizes = data
        sizes = None
        if not isinstance(batch_sizes, ClTensor):
            sizes = tuple(int(n) for n in np.asarray(batch_sizes, dtype=np.int64).reshape(-1))
            batch_sizes = _index_tensor(sizes, data.device)
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        self = super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)
        if sizes is not None:
            self.__dict__["_sizes"] = sizes
        return self

    def to(self, *args, **kwargs):
        """The sequence with data converted as ClTensor.to(*args, **kwargs) would, the index
        tensors following it to its device; self when data is unchanged."""
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else packed_like(self, data)

    def double(self):
        return self.to(dtype=float64)

    def float(self):
        return self.to(dtype=float32)

    def long(self):
        return self.to(dtype=int64)

    def int(self):
        return self.to(dtype=int32)

    @property
    def device(self):
        """The data's device."""
        return self.data.device

    @property
    def dtype(self):
        """The data's dtype."""
        return self.data.dtype


def batch_sizes_of(packed):
    """packed.batch_sizes as a tuple of ints: those it was built from, else read back once."""
    sizes = packed.__dict__.get("_sizes")
    if sizes is None:
        sizes = packed.__dict__["_sizes"] = tuple(int(n) for n in packed.batch_sizes.tolist())
    return sizes


def packed_like(packed, data):
    """A PackedSequence of data with packed's batch sizes and indices (moved to data's device
    if need be)."""
    def move(t):
        return None if t is None else t.to(device=data.device)
    out = type(packed)(data, move(packed.batch_sizes), move(packed.sorted_indices),
                       move(packed.unsorted_indices))
    out.__dict__["_sizes"] = batch_sizes_of(packed)
    return out


def invert_permutation(permutation):
    """The inverse of a 1-d int64 permutation tensor (None gives None).

    Example:
        >>> invert_permutation(cltensor.tensor([2, 0, 1])).tolist()
        [1, 2, 0]
    """
    if permutation is None:
        return None
    n = permutation.shape[0]
    positions = arange(n, dtype=int64, device=permutation.device)
    return empty_like(permutation).scatter_(0, permutation, positions)


# ---- host-side bookkeeping -----------------------------------------------------------------------

def _index_tensor(values, device):
    return from_numpy(np.asarray(values, dtype=np.int64), device=device)


def _host_lengths(lengths, op):
    """lengths (a tensor, array or sequence of ints) as a 1-d numpy int64 array."""
    values = lengths.numpy() if isinstance(lengths, ClTensor) else np.asarray(lengths)
    if values.size and values.dtype.kind not in "iu":
        raise TypeError(f"{op}: lengths must be integers, got {values.dtype}")
    if values.ndim != 1:
        raise ValueError(f"{op}: 'lengths' argument should be 1D, but got {values.ndim}D")
    return values.astype(np.int64)


def _conjugate(counts, n):
    """For i < n, how many of counts exceed i: the batch sizes of decreasing lengths (n the
    longest), or the lengths of batch sizes (n the batch)."""
    return (np.asarray(counts)[:, None] > np.arange(n)).sum(0)


def _rank_in_group(counts):
    """0..counts[0]-1, 0..counts[1]-1, ...: each element's place in its group."""
    counts = np.asarray(counts)
    return np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)


def _positions(batch_of_row, step_of_row, batch, steps, batch_first):
    """Flat row positions in a padded (steps, batch, *) tensor, (batch, steps, *) when
    batch_first, of rows at (batch index, time step)."""
    if batch_first:
        return batch_of_row * steps + step_of_row
    return step_of_row * batch + batch_of_row


def _packed_positions(sizes, order, steps, batch_first):
    """Where each packed row sits in the padded tensor; order[i]: the batch index of the i-th
    longest sequence (None: the identity)."""
    slot = _rank_in_group(sizes)
    step = np.repeat(np.arange(len(sizes)), sizes)
    return _positions(slot if order is None else order[slot], step, sizes[0], steps, batch_first)


def _padded(rows, positions, lead, padding_value):
    """A (*lead, *rows.shape[1:]) tensor of padding_value with rows copied in at the flat
    positions of its leading dims (differentiable in rows)."""
    trailing = tuple(rows.shape[1:])
    out = full((int(np.prod(lead)),) + trailing, padding_value, dtype=rows.dtype,
                        device=rows.device)
    out = out.index_copy(0, _index_tensor(positions, rows.device), rows)
    return out.reshape(tuple(lead) + trailing)


# ---- padding and packing -------------------------------------------------------------------------

def _check_lengths(lengths, batch, steps, enforce_sorted):
    op = "pack_padded_sequence"
    if len(lengths) != batch:
        raise ValueError(f"{op}: Expected `len(lengths)` to be equal to batch_size, but got "
                         f"{len(lengths)} (batch_size={batch})")
    if (lengths <= 0).any():
        raise ValueError(f"{op}: Length of all samples has to be greater than 0, but found an "
                         f"element in 'lengths' that is <= 0")
    if enforce_sorted and (np.diff(lengths) > 0).any():
        raise ValueError(f"{op}: `lengths` array must be sorted in decreasing order when "
                         f"`enforce_sorted` is True. You can pass `enforce_sorted=False` to "
                         f"pack_padded_sequence and/or pack_sequence to sidestep this "
                         f"requirement if you do not need ONNX exportability.")
    if lengths.max() > steps:
        raise ValueError(f"{op}: a length of {lengths.max()} exceeds the input's {steps} time "
                         f"steps")


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch of variable-length sequences.

    Args:
        input: (T, B, *), or (B, T, *) when batch_first; the padding is ignored.
        lengths: each sequence's length (ints: a list, array or int64 tensor), each in 1..T.
        batch_first: input is (B, T, *).
        enforce_sorted: require the lengths to decrease (else ValueError); with False the
            sequences are sorted here and sorted_indices records the order.

    Returns:
        A PackedSequence; pad_packed_sequence inverts it.

    Example:
        >>> x = cltensor.tensor([[1, 2, 0], [3, 0, 0], [4, 5, 6]])
        >>> p = pack_padded_sequence(x, [2, 1, 3], batch_first=True, enforce_sorted=False)
        >>> p.data.tolist(), p.batch_sizes.tolist(), p.sorted_indices.tolist()
        ([4, 1, 3, 5, 2, 6], [3, 2, 1], [2, 0, 1])
    """
    op = "pack_padded_sequence"
    if not isinstance(input, ClTensor):
        raise TypeError(f"{op}: input must be a tensor, got {type(input).__name__}")
    if input.ndim < 2:
        raise ValueError(f"{op}: input must have at least 2 dims (T, B, *), got {input.ndim}")
    if input.numel() == 0:
        raise ValueError(f"{op}: Cannot pack empty tensors.")
    lengths = _host_lengths(lengths, op)
    batch, steps = (input.shape[0], input.shape[1]) if batch_first else input.shape[1::-1]
    _check_lengths(lengths, batch, steps, enforce_sorted)
    order = None if enforce_sorted else np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths if order is None else lengths[order]
    sizes = _conjugate(sorted_lengths, sorted_lengths[0])
    positions = _packed_positions(sizes, order, steps, batch_first)
    rows = input.reshape((-1,) + tuple(input.shape[2:]))
    data = rows.index_select(0, _index_tensor(positions, input.device))
    sorted_indices = None if order is None else _index_tensor(order, input.device)
    return PackedSequence(data, sizes, sorted_indices)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Pad a packed batch back: the inverse of pack_padded_sequence.

    Args:
        sequence: a PackedSequence.
        batch_first: return (B, T, *) instead of (T, B, *).
        padding_value: the value of the padding.
        total_length: pad to this many time steps (at least the longest sequence).

    Returns:
        (padded, lengths): the sequences in their original batch order, and their lengths
        (int64 tensor on the data's device).

    Example:
        >>> padded, lengths = pad_packed_sequence(p, batch_first=True)   # p as above
        >>> padded.tolist(), lengths.tolist()
        ([[1, 2, 0], [3, 0, 0], [4, 5, 6]], [2, 1, 3])
    """
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"pad_packed_sequence: expected a PackedSequence, got "
                        f"{type(sequence).__name__}")
    sizes = batch_sizes_of(sequence)
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {steps}")
        steps = total_length
    lead = (sizes[0], steps) if batch_first else (steps, sizes[0])
    padded = _padded(sequence.data, _packed_positions(sizes, None, steps, batch_first), lead,
                     padding_value)
    lengths = _index_tensor(_conjugate(sizes, sizes[0]), sequence.data.device)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths.index_select(0, sequence.unsorted_indices)
    return padded, lengths


def _sequence_list(sequences, op):
    try:
        seqs = tuple(sequences)
    except TypeError:
        raise TypeError(f"{op}: Expected iterable for input sequences, but got arg of type: "
                        f"{type(sequences).__name__}") from None
    if not seqs:
        raise ValueError(f"{op}: received an empty list of sequences")
    for i, s in enumerate(seqs):
        if not isinstance(s, ClTensor) or s.ndim == 0:
            what = f"{s.ndim}-d tensor" if isinstance(s, ClTensor) else type(s).__name__
            raise ValueError(f"{op}: sequence {i} must be a tensor of at least 1 dim (L, *), "
                             f"got a {what}")
        if s.shape[1:] != seqs[0].shape[1:]:
            raise ValueError(f"{op}: sequence {i} has shape {tuple(s.shape)}, but sequence 0 "
                             f"has trailing dims {tuple(seqs[0].shape[1:])}")
    return seqs


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack variable-length sequences (L_i, *) into one padded tensor.

    Args:
        sequences: tensors (L_i, *) with the same trailing dims (and dtype: the first's is kept).
        batch_first: return (B, T, *) instead of (T, B, *), T the longest length.
        padding_value: the value of the padding.
        padding_side: 'right' (sequences start at step 0) or 'left' (they end at step T - 1).

    Example:
        >>> pad_sequence([cltensor.ones(3, 2), cltensor.ones(1, 2)]).shape
        (3, 2, 2)
    """
    op = "pad_sequence"
    seqs = _sequence_list(sequences, op)
    if padding_side not in ("left", "right"):
        raise ValueError(f"{op}: Expected padding_side to be one of left or right, but got "
                         f"{padding_side}.")
    lengths = np.array([s.shape[0] for s in seqs], dtype=np.int64)
    batch, steps = len(seqs), int(lengths.max())
    step = _rank_in_group(lengths)
    if padding_side == "left":
        step += np.repeat(steps - lengths, lengths)
    positions = _positions(np.repeat(np.arange(batch), lengths), step, batch, steps,
                           batch_first)
    rows = cat(seqs).to(dtype=seqs[0].dtype)
    return _padded(rows, positions, (batch, steps) if batch_first else (steps, batch),
                   padding_value)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """Split a padded batch (T, B, *), or (B, T, *) when batch_first, into its B sequences of
    the given lengths (the inverse of pad_sequence with padding_side='right').

    NOTE: unlike torch's, this does not transpose padded_sequences in place.

    Example:
        >>> [s.shape for s in unpad_sequence(cltensor.zeros(3, 2, 4), [3, 1])]
        [(3, 4), (1, 4)]
    """
    op = "unpad_sequence"
    lengths = _host_lengths(lengths, op)
    batch_dim, time_dim = (0, 1) if batch_first else (1, 0)
    batch, steps = padded_sequences.shape[batch_dim], padded_sequences.shape[time_dim]
    if len(lengths) != batch:
        raise ValueError(f"{op}: got {len(lengths)} lengths for a batch of {batch}")
    if len(lengths) and (lengths.min() < 0 or lengths.max() > steps):
        raise ValueError(f"{op}: lengths must be in 0..{steps} (the padded time steps), got "
                         f"{lengths.tolist()}")
    return [padded_sequences.select(batch_dim, b).narrow(0, 0, int(n)).clone()
            for b, n in enumerate(lengths)]


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of variable-length sequences (L_i, *): pad_sequence, then
    pack_padded_sequence.

    Args:
        sequences: tensors (L_i, *), longest first unless enforce_sorted is False.
        enforce_sorted: require decreasing lengths (else ValueError); False sorts them here.

    Example:
        >>> a, b, c = cltensor.tensor([1, 2, 3]), cltensor.tensor([4, 5]), cltensor.tensor([6])
        >>> pack_sequence([a, b, c]).data.tolist()
        [1, 4, 6, 2, 5, 3]
    """
    seqs = _sequence_list(sequences, "pack_sequence")
    lengths = [s.shape[0] for s in seqs]
    return pack_padded_sequence(pad_sequence(seqs), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences (L_i, *) of a PackedSequence, in their original order: the
    inverse of pack_sequence.

    Example:
        >>> [s.tolist() for s in unpack_sequence(pack_sequence([a, b, c]))]   # as above
        [[1, 2, 3], [4, 5], [6]]
    """
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
