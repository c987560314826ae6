"""Float32 error models of the portable convolution algorithms, behind
cltensor.backends.conv_precision = "accurate" (docs/conv_precision.md).

Every algorithm's norm-relative fp32 error, measured against float64 on the conv layers of five
networks (benchmarks/conv_precision.py, PoCL on a CPU), follows c * sqrt(L): L the length of
the sums its products run in one register, c a constant per algorithm family, pass and, for
Winograd, its tile and kernel sizes (its transforms amplify the products' rounding). The CPU
GEMM (gemm_cpu.cl) sums K in blocks of GEMM_BLOCK, then adds the blocks: a length-K sum counts
as blocked_length(K). implicit_gemm's kernels (conv_implicit.cl) keep one running sum. PyTorch
CPU's error follows the same law, but its forward and input gradient stop growing beyond about
REFERENCE_BLOCK terms. "accurate" admits an algorithm when its modelled error is at most BOUND
times PyTorch's modelled error.
"""
import math

import numpy as np

from .. import backends
from ..ops import gemm
from . import s2d

MODES = ("accurate", "fast")
BOUND = 2.0
GEMMS = ("im2col", "implicit_gemm", "gemm_1x1")
# gemm_cpu.cl's default KB: the block of K its sums run over when the database names none
GEMM_BLOCK = 64
# c of c * sqrt(L) per (family, pass): GEMMs through the CPU GEMM (im2col, gemm_1x1),
# implicit_gemm, then Winograd F(m x m, r x r) as (m, r); about the largest c measured per
# family and pass (ignoring layers of 3 channels)
COEF = {
    "gemm": {"forward": 2.0e-8, "backward_data": 2.5e-8, "backward_weight": 2.0e-8},
    "implicit_gemm": {"forward": 2.0e-8, "backward_data": 2.1e-8, "backward_weight": 2.0e-8},
    (2, 3): {"forward": 3.4e-8, "backward_data": 3.6e-8, "backward_weight": 3.9e-8},
    (2, 5): {"forward": 2.0e-7, "backward_data": 1.8e-7, "backward_weight": 2.0e-7},
    (4, 3): {"forward": 1.5e-7, "backward_data": 1.6e-7, "backward_weight": 2.9e-7},
    (4, 5): {"forward": 5.2e-7, "backward_data": 4.3e-7, "backward_weight": 8.4e-7},
}
# PyTorch CPU float32: c * sqrt(L), L the direct convolution's sum length, capped at
# REFERENCE_BLOCK in the forward and input gradient (1.5e-7 to 5e-7 from 80 to 11616 terms);
# the lower envelope of its measured errors. Its weight gradient keeps growing: 1.4e-6 over
# the 6272 positions of two 56 x 56 images
REFERENCE_COEF = {"forward": 1.55e-8, "backward_data": 1.55e-8, "backward_weight": 1.25e-8}
# CPU devices are judged against PyTorch CPU alone, whose input gradients' lower envelope is
# 1.75e-8 to 1.79e-8 over four seeds of the 95 layers; REFERENCE_COEF's 1.55e-8 is cuDNN's
# (1.54e-8 on the H200), which GPUs are judged against (docs/conv_precision.md)
CPU_REFERENCE_COEF = dict(REFERENCE_COEF, backward_data=1.75e-8)
REFERENCE_BLOCK = {"forward": 80, "backward_data": 80, "backward_weight": None}
TILE = {"winograd": 2, "winograd_4x4": 4, "s2d_winograd": 4}


def mode():
    """backends.conv_precision, checked."""
    value = backends.conv_precision
    if value not in MODES:
        raise ValueError(f"cltensor.backends.conv_precision must be one of "
                         f"{', '.join(map(repr, MODES))}; got {value!r}")
    return value


def _tiles(p, m):
    return p.n * -(-p.ho // m) * -(-p.wo // m)


def _gemm_length(name, p, pass_):
    if pass_ == "forward":
        return p.k
    if pass_ == "backward_data":
        # im2col and gemm_1x1 sum over the output channels, then col2im adds the kh * kw taps
        return p.cog * (p.kh * p.kw if name == "implicit_gemm" else 1)
    return p.n * p.ho * p.wo


def _winograd_length(name, p, pass_):
    channels = p.cg * p.sh * p.sw if name == "s2d_winograd" else p.cg
    if pass_ == "forward":
        return channels
    if pass_ == "backward_data":
        return p.cog
    return _tiles(p, TILE[name])


def gemm_block(device):
    """The block of K that the device's float32 GEMM sums over (the packed family's KB), or
    None where its products keep one running sum."""
    entry = gemm.entry_for(device, np.float32)
    if entry["family"] != "packed":
        return None
    return entry["packed"].get("KB", GEMM_BLOCK) or None


def blocked_length(length, block):
    """The length of one running sum with the error of a length-`length` sum run in blocks of
    `block` and the blocks' sums then added (block None: one running sum)."""
    return length if not block else min(length, block) + length // block


def error(name, p, pass_, block=GEMM_BLOCK):
    """The modelled fp32 relative error of a pass of algorithm `name` on problem p, its GEMMs
    summing in blocks of `block` (gemm_block), or None for an algorithm without a model (a
    plug-in's)."""
    if name == "implicit_gemm":
        return COEF[name][pass_] * math.sqrt(_gemm_length(name, p, pass_))
    if name in GEMMS:
        length = blocked_length(_gemm_length(name, p, pass_), block)
        return COEF["gemm"][pass_] * math.sqrt(length)
    if name not in TILE:
        return None
    r = s2d.kernel_side(p) if name == "s2d_winograd" else p.kh
    length = blocked_length(_winograd_length(name, p, pass_), block)
    return COEF[(TILE[name], r)][pass_] * math.sqrt(length)


def reference_coef(device):
    """The reference's coefficients a device's picks are judged against: PyTorch CPU's on CPU
    devices, else the envelope it shares with cuDNN."""
    return CPU_REFERENCE_COEF if device.is_cpu else REFERENCE_COEF


def reference_error(p, pass_, coef=REFERENCE_COEF):
    """The reference's (PyTorch's) modelled float32 relative error on a pass of p."""
    length = {"forward": p.k, "backward_data": p.cog * p.kh * p.kw,
              "backward_weight": p.n * p.ho * p.wo}[pass_]
    cap = REFERENCE_BLOCK[pass_]
    return coef[pass_] * math.sqrt(length if cap is None else min(length, cap))


def within_bound(name, p, pass_, block=GEMM_BLOCK, coef=REFERENCE_COEF):
    """Whether algorithm `name` keeps pass_ of p within BOUND times the reference's error."""
    err = error(name, p, pass_, block)
    return err is not None and err <= BOUND * reference_error(p, pass_, coef)


def accurate_choice(names, p, pass_, block=GEMM_BLOCK, coef=REFERENCE_COEF):
    """The first of `names` (fastest first) within the bound, else the one of least modelled
    error (the earlier on a tie); names without a model are skipped unless alone."""
    for name in names:
        if within_bound(name, p, pass_, block, coef):
            return name
    modelled = [n for n in names if error(n, p, pass_, block) is not None]
    return min(modelled, key=lambda n: error(n, p, pass_, block)) if modelled else names[0]


def admitted(names, p, pass_, block=GEMM_BLOCK, coef=REFERENCE_COEF):
    """The subset of `names` that "accurate" may run: those within the bound, else the single
    one of least modelled error; plug-ins' algorithms (no model) are kept."""
    within = [n for n in names if error(n, p, pass_, block) is None or
              within_bound(n, p, pass_, block, coef)]
    if any(error(n, p, pass_, block) is not None for n in within):
        return within
    return within + [accurate_choice(names, p, pass_, block, coef)]
