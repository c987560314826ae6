"""Random numbers with torch's names from a counter-based Philox4x32-10 stream (kernels:
cl_kernels/random.cl).

A Generator holds a 64-bit seed (the Philox key) and an offset (the next unused counter). Every
call takes a fresh range of counters and advances the offset, so consecutive calls differ and
`manual_seed` restarts the stream. The numbers are a pure function of (seed, counter): the same
seed gives the same tensors on every device and for every work-group size.
"""
import math
import numbers
import os
import threading

import numpy as np

from . import dtypes as dt
from . import graphs
from .creation import PRESERVE_FORMAT, _like, factory
from .device import capturing, get_device
from .graphs import GraphCaptureError
from .ops import elementwise as ew
from .program import ctype_of, get_kernel, launch, sizes_1d
from .tensor import ClTensor, _size_args

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "rand", "randn", "randint", "rand_like",
           "randn_like", "randint_like", "randperm", "normal", "bernoulli", "poisson",
           "binomial", "_standard_gamma", "_sample_dirichlet"]

KERNEL_FILE = "random.cl"
DEFAULT_SEED = 67280421310721  # torch's default seed
LOCAL_SIZE = None  # work-group size; None: sizes_1d's default (tests set others)
_U32, _U64 = 2**32, 2**64
RANDOM_IN_CAPTURE = ("a draw on the host (Generator.take: a sampler's order, say) cannot be "
                     "captured in a graph: every replay would repeat it; draw outside the capture "
                     "(cltensor's random ops on the device draw afresh at each replay)")


class Generator:
    """The state of a Philox4x32-10 stream: a seed and the offset of the next unused counter.

    The stream does not depend on the device, so one generator serves them all (`device` is
    accepted for torch compatibility and only checked).

    Example:
        g = cltensor.Generator().manual_seed(0)
        x = cltensor.rand(3, generator=g)
    """

    def __init__(self, device=None):
        if device is not None:
            get_device(device)
        # NOTE: threads share a generator: each call's counters are taken, and the state is
        # read and set, under this lock, so no two calls get the same counters
        self._lock = threading.Lock()
        self.manual_seed(DEFAULT_SEED)

    def manual_seed(self, seed):
        seed = _seed_value(seed)
        with self._lock:
            self._seed, self._offset = seed, 0
        return self

    def initial_seed(self):
        return self._seed

    def seed(self):
        """Reseed from the operating system's entropy; returns the new seed."""
        seed = int.from_bytes(os.urandom(8), "little")
        self.manual_seed(seed)
        return seed

    def get_state(self):
        """The state as a numpy uint64 array [seed, offset] (a copy)."""
        with self._lock:
            return np.array([self._seed, self._offset], dtype=np.uint64)

    def set_state(self, state):
        state = np.asarray(state)
        if state.shape != (2,) or state.dtype != np.uint64:
            raise ValueError(f"set_state: expected a uint64 array [seed, offset] as get_state "
                             f"gives, got dtype {state.dtype} and shape {state.shape}")
        with self._lock:
            self._seed, self._offset = int(state[0]), int(state[1])

    def __getstate__(self):
        """Copies and pickles carry the state, each copy with a lock of its own."""
        return {"_seed": self._seed, "_offset": self._offset}

    def __setstate__(self, state):
        self.__dict__.update(state, _lock=threading.Lock())

    def peek(self):
        """(seed, next unused counter), advancing nothing."""
        with self._lock:
            return self._seed, self._offset

    def take(self, count):
        """(seed, first counter) of `count` fresh counters, advancing the offset past them."""
        if capturing.graph is not None:
            raise GraphCaptureError(RANDOM_IN_CAPTURE)
        with self._lock:
            first = self._offset
            self._offset = (first + count) % _U64
            return self._seed, first


def _seed_value(seed):
    """torch's rule: an int in [-2^63, 2^64); negative seeds wrap to 2^64 + seed."""
    if not isinstance(seed, numbers.Integral):
        raise TypeError(f"manual_seed: the seed must be an int, got {type(seed).__name__}")
    seed = int(seed)
    if not -2**63 <= seed < _U64:
        raise ValueError(f"manual_seed: seed {seed} is outside [-2**63, 2**64)")
    return seed % _U64


default_generator = Generator()


def manual_seed(seed):
    """Seed the global generator and restart its stream; returns the generator.

    Example:
        cltensor.manual_seed(0); a = cltensor.rand(3)
        cltensor.manual_seed(0); b = cltensor.rand(3)   # equal to a
    """
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    """The global generator's state on the host: a uint64 numpy array [seed, offset]."""
    return default_generator.get_state()


def set_rng_state(new_state):
    default_generator.set_state(new_state)


# ---- kernels and launches -----------------------------------------------------------------------

def _kernel(device, name, defines):
    return get_kernel(device, KERNEL_FILE, name, defines)


def _defines(out_dtype, ft=dt.float32, p_dtype=None):
    ft = dt.compute_dtype(ft)
    d = {"OUT_T": ctype_of(out_dtype), "FT": ctype_of(ft)}
    if out_dtype in dt.HALF_TYPES:
        d["OUT_DIGITS"] = 11 if out_dtype is dt.float16 else 8
    if ft == dt.float64:
        d["FT_DOUBLE"] = None
    if p_dtype is not None:
        d["P_T"] = ctype_of(p_dtype)
    return d


def _per_block(ft):
    """Uniforms one Philox block gives: four 24-bit (float) or two 53-bit (double)."""
    return 2 if ft == dt.float64 else 4


def _work_sizes(device, items):
    return sizes_1d(device, items, LOCAL_SIZE)


def _launch(name, out, items, key_ctr, defines, *extra):
    """Launch stream kernel `name` over `items` work-items, writing contiguous `out`."""
    seed, ctr = key_ctr
    gsize, lsize = _work_sizes(out.device, items)
    launch(out.device, _kernel(out.device, name, defines), gsize, lsize, np.uint64(out.numel()),
           np.uint32(seed % _U32), np.uint32(seed // _U32), np.uint64(ctr), out.storage.buf,
           np.int64(out.offset), *extra)
    return out


def _stream(name, out, per, generator, defines, *extra):
    """Fill contiguous `out` with kernel `name`, one block of `per` outputs per counter."""
    blocks = -(-out.numel() // per)
    return _launch_drawn(name, out, blocks, generator, blocks, defines, *extra)


def _launch_drawn(name, out, items, generator, count, defines, *extra):
    """_launch (when items) with `count` fresh counters of generator (None: the global one).

    Inside a graph capture nothing is drawn: every replay takes the fresh counters and sets
    them into its launch, so replays draw the numbers that eager calls in their place would.
    """
    gen = generator or default_generator
    if capturing.graph is None:
        key_ctr = gen.take(count)
        return _launch(name, out, items, key_ctr, defines, *extra) if items else out
    if not items:
        graphs.on_replay(lambda: gen.take(count))
        return out
    _launch(name, out, items, gen.peek(), defines, *extra)
    kernel, args = graphs.last_launch()

    def redraw():
        seed, ctr = gen.take(count)
        kernel.set_args(args[0], np.uint32(seed % _U32), np.uint32(seed // _U32),
                        np.uint64(ctr), *args[4:])
    graphs.on_replay(redraw)
    return out


def philox_words(count, seed, counter=0, device=None):
    """The raw stream: `count` 32-bit words of Philox4x32-10 under key `seed`, starting at block
    `counter`, as an int64 tensor (word j is lane j % 4 of block counter + j // 4).

    Example:
        cltensor.random.philox_words(4, seed=0)   # the 4 words of counter 0, key (0, 0)
    """
    out = ClTensor.empty_on((int(count),), dt.int64, get_device(device))
    if count:
        _launch("philox_words", out, -(-count // 4), (_seed_value(seed), counter),
                _defines(dt.int64))
    return out


# ---- samplers into contiguous tensors ---------------------------------------------------------

def _uniform(out, lo, hi, generator):
    ft = dt.compute_dtype(out.dtype)
    return _stream("uniform_fill", out, _per_block(ft), generator, _defines(out.dtype, ft),
                   ft.type(lo), ft.type(hi))


def _normal(out, mean, std, generator):
    ft = dt.compute_dtype(out.dtype)
    return _stream("normal_fill", out, _per_block(ft), generator, _defines(out.dtype, ft),
                   ft.type(mean), ft.type(std))


def _exponential(out, lambd, generator):
    ft = dt.compute_dtype(out.dtype)
    return _stream("exponential_fill", out, _per_block(ft), generator, _defines(out.dtype, ft),
                   ft.type(lambd))


def _randint(out, low, high, generator):
    # NOTE: the full int64 range has 2^64 values: it travels as range 0, which the kernel reads so.
    return _stream("randint_fill", out, 2, generator, _defines(out.dtype),
                   np.int64(low), np.uint64((high - low) % _U64))


def _bernoulli_scalar(out, p, generator):
    ft = dt.float64 if out.dtype == dt.float64 else dt.float32
    return _stream("bernoulli_scalar", out, _per_block(ft), generator, _defines(out.dtype, ft),
                   ft.type(p))


def _bernoulli_tensor(out, p, generator):
    """out = u < p with p broadcast to out; raises when some p is outside [0, 1]."""
    ft = dt.float64 if p.dtype == dt.float64 else dt.float32
    nd, shape, view = _strided_operand(p, out.shape)
    bad = _flag(out.device)
    _stream("bernoulli_tensor", out, _per_block(ft), generator, _defines(out.dtype, ft, p.dtype),
            p.storage.buf, view, np.int32(nd), shape, bad.storage.buf)
    if bad.item():
        raise ValueError("bernoulli: Expected p_in >= 0 && p_in <= 1 for every probability")
    return out


def _strided_operand(t, shape):
    """(nd, Shape, View) that read t broadcast over `shape` in row-major order."""
    nd, dims, (view,) = _strided_operands([t], shape)
    return nd, dims, view


def _strided_operands(ts, shape):
    """(nd, Shape, [View]) that read the tensors ts broadcast over `shape` in row-major order,
    one walk of the dims for all of them."""
    row_major = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    dims, (_, *strides) = ew.collapse(shape, [row_major] +
                                      [ew.broadcast_strides(t, shape) for t in ts])
    if len(dims) > ew.MAX_DIMS:
        return _strided_operands([t.expand(shape).contiguous() for t in ts], shape)
    return len(dims), ew.shape_arg(dims), [ew.view_arg(t.offset, st)
                                           for t, st in zip(ts, strides)]


def _flag(device):
    return ClTensor.empty_on((1,), dt.int32, device).fill_(0)


def _all_in_range(t, lo, hi):
    """True when every element of t is in [lo, hi] (NaN is not), checked on the device."""
    if t.numel() == 0:
        return True
    nd, shape, view = _strided_operand(t, t.shape)
    bad = _flag(t.device)
    kernel = _kernel(t.device, "check_range", _defines(dt.float32, p_dtype=t.dtype))
    gsize, lsize = _work_sizes(t.device, t.numel())
    launch(t.device, kernel, gsize, lsize, np.uint64(t.numel()), t.storage.buf, view,
           np.int32(nd), shape, *map(dt.compute_dtype(t.dtype).type, (lo, hi)), bad.storage.buf)
    return not bad.item()


def _fill_inplace(x, op, sample):
    """x[...] = sample(contiguous tensor of x's shape): directly when x is contiguous."""
    ew.check_writable(x, op)
    if x.is_contiguous():
        sample(x)
        return x
    return x.copy_(sample(ClTensor.empty_on(x.shape, x.dtype, x.device)))


# ---- argument checks --------------------------------------------------------------------------

def _float_dtype(dtype, op):
    d = dt.as_dtype(dtype) or dt.get_default_dtype()
    if not dt.is_floating(d):
        raise TypeError(f"{op}: expected a floating point dtype, got {d}")
    return d


def _new(args, size, dtype, device, op):
    shape = _size_args(args if size is None else (size,), op)
    return ClTensor.empty_on(shape, dtype, get_device(device))


def _real(x, name, op):
    if not isinstance(x, numbers.Real) or isinstance(x, bool):
        raise TypeError(f"{op}: {name} must be a real number, got {type(x).__name__}")
    return float(x)


def _check_std(std, op):
    if not _real(std, "std", op) >= 0:
        raise ValueError(f"{op}: expects std >= 0.0, but found std {std}")


def _integer(x, name, op):
    if not isinstance(x, numbers.Integral) or isinstance(x, bool):
        raise TypeError(f"{op}: {name} must be an int, got {type(x).__name__}")
    return int(x)


def _int_bounds(dtype):
    """[lo, hi]: the integers a dtype holds exactly."""
    if dtype == dt.bool_:
        return 0, 1
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    digits = 8 if dtype is dt.bfloat16 else np.finfo(dtype).nmant + 1
    return -2**digits, 2**digits


def _check_int_range(low, high, dtype, op):
    if not low < high:
        raise ValueError(f"{op}: expects 'from' to be less than 'to', but got "
                         f"from={low} >= to={high}")
    lo, hi = _int_bounds(dtype)
    if low < lo or high - 1 > hi:
        raise ValueError(f"{op}: the range [{low}, {high}) does not fit dtype {dtype} "
                         f"(which holds [{lo}, {hi}])")


def _need_float(x, op):
    if not dt.is_floating(x.dtype):
        raise TypeError(f"{op}: expected a floating point tensor, got {x.dtype}")


# ---- public creation functions ----------------------------------------------------------------

@factory
def rand(*size, dtype=None, device=None, generator=None, **kwargs):
    """Uniform numbers in [0, 1) (24 random bits for float32, 53 for float64).

    Example:
        x = cltensor.rand(2, 3)                          # float32
        y = cltensor.rand((4,), dtype=cltensor.float64)
    """
    out = _new(size, kwargs.pop("size", None), _float_dtype(dtype, "rand"), device, "rand")
    _no_extra(kwargs, "rand")
    return _uniform(out, 0.0, 1.0, generator)


@factory
def randn(*size, dtype=None, device=None, generator=None, **kwargs):
    """Standard normal numbers (Box-Muller; float64 from 53-bit uniforms).

    Example:
        z = cltensor.randn(1000)
    """
    out = _new(size, kwargs.pop("size", None), _float_dtype(dtype, "randn"), device, "randn")
    _no_extra(kwargs, "randn")
    return _normal(out, 0.0, 1.0, generator)


def _no_extra(kwargs, op):
    if kwargs:
        raise TypeError(f"{op}: unexpected keyword argument(s) {', '.join(kwargs)}")


def _randint_args(args, size, low, high):
    """(low, high, size) from randint(high, size), randint(low, high, size) or keywords."""
    args = list(args)
    if size is None:
        if not args:
            raise TypeError("randint: missing the size argument (a tuple of ints)")
        size = args.pop()
    if len(args) > 2:
        raise TypeError(f"randint: too many positional arguments ({len(args) + 1})")
    if len(args) == 2:
        low, high = args
    elif len(args) == 1:
        low, high = (args[0], high) if high is not None else (low, args[0])
    if high is None:
        raise TypeError("randint: missing the high argument")
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"randint: size must be a tuple of ints, got {type(size).__name__}")
    return (0 if low is None else low), high, size


@factory
def randint(*args, size=None, low=None, high=None, dtype=None, device=None, generator=None):
    """Integers uniform in [low, high): randint(high, size) or randint(low, high, size).

    Example:
        cltensor.randint(10, (3,))          # int64 in [0, 10)
        cltensor.randint(-5, 5, (2, 2), dtype=cltensor.int32)
    """
    low, high, size = _randint_args(args, size, low, high)
    low, high = _integer(low, "low", "randint"), _integer(high, "high", "randint")
    dtype = dt.as_dtype(dtype) or dt.int64
    _check_int_range(low, high, dtype, "randint")
    out = _new((), size, dtype, device, "randint")
    return _randint(out, low, high, generator)


@factory
def rand_like(input, dtype=None, device=None, generator=None, memory_format=PRESERVE_FORMAT):
    out = _like(input, _float_dtype(dtype or input.dtype, "rand_like"), device, memory_format)
    return _uniform(out, 0.0, 1.0, generator)


@factory
def randn_like(input, dtype=None, device=None, generator=None, memory_format=PRESERVE_FORMAT):
    out = _like(input, _float_dtype(dtype or input.dtype, "randn_like"), device, memory_format)
    return _normal(out, 0.0, 1.0, generator)


@factory
def randint_like(input, low=0, high=None, dtype=None, device=None, generator=None,
                 memory_format=PRESERVE_FORMAT):
    """randint_like(input, high) or randint_like(input, low, high), with input's shape and dtype."""
    low, high = (0, low) if high is None else (low, high)
    low, high = _integer(low, "low", "randint_like"), _integer(high, "high", "randint_like")
    dtype = dt.as_dtype(dtype) or input.dtype
    _check_int_range(low, high, dtype, "randint_like")
    return _randint(_like(input, dtype, device, memory_format), low, high, generator)


@factory
def randperm(n, dtype=None, device=None, generator=None):
    """A random permutation of 0..n-1 (a keyed Feistel permutation, one counter per call).

    Example:
        p = cltensor.randperm(10)   # int64
    """
    n = _integer(n, "n", "randperm")
    if n < 0:
        raise ValueError(f"randperm: n must be non-negative, got {n}")
    dtype = dt.as_dtype(dtype) or dt.int64
    if dtype == dt.bool_ or n - 1 > _int_bounds(dtype)[1]:
        raise ValueError(f"randperm: n={n} is too large for (or unsupported by) dtype {dtype}")
    out = ClTensor.empty_on((n,), dtype, get_device(device))
    half = max(1, ((n - 1).bit_length() + 1) // 2)
    return _launch_drawn("randperm_fill", out, n, generator, 1, _defines(dtype), np.int32(half))


@factory
def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None):
    """Normal numbers: normal(mean, std, size) for numbers, or tensors mean and/or std
    (broadcast together; the result takes their shape).

    Example:
        cltensor.normal(2.0, 0.5, (3,))
        cltensor.normal(cltensor.zeros(4), cltensor.ones(4))
    """
    if ew.is_tensor(mean) or ew.is_tensor(std):
        if size is not None:
            raise TypeError("normal: size is only allowed when mean and std are both numbers")
        return _normal_tensors(mean, std, generator)
    _real(mean, "mean", "normal")
    _check_std(std, "normal")
    if size is None:
        raise TypeError("normal: with a number mean and std, give a size")
    out = _new((), size, _float_dtype(dtype, "normal"), device, "normal")
    return _normal(out, mean, std, generator)


def _normal_tensors(mean, std, generator):
    tensors = [x for x in (mean, std) if ew.is_tensor(x)]
    device = ew.common_device(tensors, "normal")
    for t in tensors:
        _need_float(t, "normal")
    if ew.is_tensor(std):
        if not _all_in_range(std, 0, math.inf):
            raise ValueError("normal: expects all elements of std >= 0.0")
    else:
        _check_std(std, "normal")
    if not ew.is_tensor(mean):
        _real(mean, "mean", "normal")
    rt = dt.result_type(mean, std)
    shape = ew.broadcast_shapes(*[t.shape for t in tensors])
    z = _normal(ClTensor.empty_on(shape, rt, device), 0.0, 1.0, generator)
    return ew.ternary("add_scaled", [mean, z, std], rt)


def bernoulli(input, p=None, *, generator=None):
    """0/1 draws: with probabilities `input` (floating), or with one probability `p` in input's
    shape and dtype. Also the tensor method x.bernoulli(p=None).

    Example:
        probs = cltensor.rand(5)
        draws = cltensor.bernoulli(probs)   # same dtype as probs, values 0 or 1
    """
    if not ew.is_tensor(input):
        raise TypeError(f"bernoulli: expected a tensor, got {type(input).__name__}")
    out = ClTensor.empty_on(input.shape, input.dtype, input.device)
    if p is None:
        _need_float(input, "bernoulli")
        return _bernoulli_tensor(out, input, generator)
    _check_probability(p, "bernoulli")
    return _bernoulli_scalar(out, p, generator)


def _per_element(name, out, params, generator, extra=(), errors=()):
    """Launch sampler `name` (random.cl: one draw per element from its own counters) into the
    new tensor out, reading the tensor parameters `params` broadcast to out's shape; computed
    in float64 where the device has it (the inversions sum CDFs). errors[k - 1]: the message of
    the kernel's flag k."""
    n = out.numel()
    if n == 0:
        return out
    ft = dt.float64 if out.device.has_fp64 else dt.float32
    defines = _defines(out.dtype, ft, params[0].dtype)
    if len(params) > 1:
        defines["Q_T"] = ctype_of(params[1].dtype)
    nd, dims, views = _strided_operands(params, out.shape)
    bad = _flag(out.device)
    args = [a for t, view in zip(params, views) for a in (t.storage.buf, view)]
    _launch_drawn(name, out, n, generator, n, defines, *args, np.int32(nd), dims,
                  *[ft.type(v) for v in extra], bad.storage.buf)
    flag = bad.item()
    if flag:
        raise RuntimeError(errors[flag - 1])
    return out


def _parameter(x, op, name="input"):
    if not ew.is_tensor(x):
        raise TypeError(f"{op}: expected {name} to be a tensor, got {type(x).__name__}")
    _need_float(x, op)
    return x


def poisson(input, generator=None):
    """Draws of Poisson distributions with rates `input` (floating, non-negative, finite), in
    input's shape and dtype; one kernel, each draw from its own counters of the generator.

    Example:
        rates = cltensor.tensor([0.5, 4.0, 250.0])
        counts = cltensor.poisson(rates)   # float32 counts, e.g. [0., 3., 262.]
    """
    _parameter(input, "poisson")
    out = ClTensor.empty_on(input.shape, input.dtype, input.device)
    return _per_element("poisson_fill", out, [input], generator, errors=(
        "poisson: invalid Poisson rate, expected rate to be non-negative",
        "poisson: invalid Poisson rate, expected a finite rate"))


def _standard_gamma(input, generator=None):
    """Draws of Gamma(alpha, 1) for shapes alpha = `input` (floating, positive), at least the
    dtype's smallest normal number as torch keeps them (torch._standard_gamma).

    Example:
        cltensor._standard_gamma(cltensor.tensor([0.5, 2.0, 9.0]))  # e.g. [0.07, 1.6, 8.3]
    """
    _parameter(input, "_standard_gamma")
    out = ClTensor.empty_on(input.shape, input.dtype, input.device)
    return _per_element("gamma_fill", out, [input], generator,
                        extra=(dt.finfo(input.dtype).tiny,),
                        errors=("_standard_gamma: expected every shape (alpha) to be positive",))


def _sample_dirichlet(input, generator=None):
    """Draws of Dirichlet distributions with concentrations `input` (*, K) (floating,
    positive): Gamma(alpha_k, 1) draws over their sum along the last dim
    (torch._sample_dirichlet), each at least the dtype's smallest normal number."""
    _parameter(input, "_sample_dirichlet")
    if input.ndim == 0:
        raise ValueError("_sample_dirichlet: expected a tensor of at least one dim")
    ft = dt.float64 if input.device.has_fp64 else dt.float32
    g = _standard_gamma(input.to(ft), generator)
    tiny = dt.finfo(input.dtype).tiny
    return (g / g.sum(-1, keepdim=True)).clamp(min=tiny).to(input.dtype)


def binomial(count, prob, generator=None):
    """Draws of binomial distributions: successes in floor(count) trials of probability `prob`
    (floating tensors, broadcast; count non-negative and finite, prob in [0, 1]), in count's
    dtype (torch.binomial).

    Example:
        cltensor.binomial(cltensor.tensor([10.0, 100.0]), cltensor.tensor([0.5, 0.1]))
    """
    _parameter(count, "binomial", "count")
    _parameter(prob, "binomial", "prob")
    ew.common_device([count, prob], "binomial")
    shape = ew.broadcast_shapes(count.shape, prob.shape)
    out = ClTensor.empty_on(shape, count.dtype, count.device)
    return _per_element("binomial_fill", out, [count, prob], generator, errors=(
        "binomial: expected every count to be non-negative",
        "binomial: expected every count to be finite",
        "binomial: expected every probability to be in [0, 1]"))


def _check_probability(p, op):
    if not 0 <= _real(p, "p", op) <= 1:
        raise ValueError(f"{op}: Expected p_in >= 0 && p_in <= 1 (got p={p})")


# ---- in-place tensor methods ------------------------------------------------------------------

def uniform_(self, from_=0.0, to=1.0, *, generator=None):
    """Fill with numbers uniform in [from_, to) (floating tensors)."""
    _need_float(self, "uniform_")
    lo, hi = _real(from_, "from", "uniform_"), _real(to, "to", "uniform_")
    if not lo <= hi:
        raise ValueError(f"uniform_: expects to return a [from, to) range, but found "
                         f"from={from_} > to={to}")
    if not math.isfinite(hi - lo) or hi - lo > dt.finfo(self.dtype).max:
        raise ValueError(f"uniform_: to - from must be finite in {self.dtype}, "
                         f"got from={from_}, to={to}")
    return _fill_inplace(self, "uniform_", lambda out: _uniform(out, lo, hi, generator))


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with normal numbers of the given mean and std (floating tensors)."""
    _need_float(self, "normal_")
    _real(mean, "mean", "normal_")
    _check_std(std, "normal_")
    return _fill_inplace(self, "normal_", lambda out: _normal(out, mean, std, generator))


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with exponential numbers of rate lambd (floating tensors)."""
    _need_float(self, "exponential_")
    if not _real(lambd, "lambd", "exponential_") > 0:
        raise ValueError(f"exponential_: expects lambda > 0.0, but found lambda={lambd}")
    return _fill_inplace(self, "exponential_", lambda out: _exponential(out, lambd, generator))


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 0/1 draws of probability p (a number, or a floating tensor broadcast to self)."""
    if not ew.is_tensor(p):
        _check_probability(p, "bernoulli_")
        return _fill_inplace(self, "bernoulli_", lambda out: _bernoulli_scalar(out, p, generator))
    _need_float(p, "bernoulli_")
    ew.common_device([self, p], "bernoulli_")
    if not ew.broadcasts_to(p.shape, self.shape):
        raise ValueError(f"bernoulli_: p of shape {p.shape} does not broadcast to {self.shape}")
    ew.check_writable(self, "bernoulli_")
    # NOTE: always through a temporary: self stays untouched when some p is out of range.
    tmp = ClTensor.empty_on(self.shape, self.dtype, self.device)
    return self.copy_(_bernoulli_tensor(tmp, p, generator))


def random_(self, *args, generator=None):
    """random_() in [0, largest exact integer of the dtype], random_(to) in [0, to),
    random_(from, to) in [from, to) (to=None: up to the largest)."""
    if len(args) > 2:
        raise TypeError(f"random_: expected at most 2 arguments (from, to), got {len(args)}")
    low, high = (0, None) if not args else (0, args[0]) if len(args) == 1 else args
    low = _integer(low, "from", "random_")
    hi = _int_bounds(self.dtype)[1]
    high = hi + 1 if high is None else _integer(high, "to", "random_")
    _check_int_range(low, high, self.dtype, "random_")
    return _fill_inplace(self, "random_", lambda out: _randint(out, low, high, generator))


TENSOR_METHODS = {"uniform_": uniform_, "normal_": normal_, "exponential_": exponential_,
                  "bernoulli_": bernoulli_, "bernoulli": bernoulli, "random_": random_}
