"""What the GEMM families and the plug-ins share (the kit of docs/plugins.md): the problem
(Problem, Operand), kernels built with gemm_common.cl, tile-grid launches cut to MAX_GROUPS,
the epilogue's arguments, scratch tensors, padded copies and the split-K reduction."""
import math
from typing import NamedTuple

import numpy as np
import pyopencl as cl

from ... import caches, program
from ...program import ctype_of, launch, round_up
from ...tensor import ClTensor
from .. import elementwise as ew


# NVIDIA's OpenCL inherits CUDA's limit of 65535 work-groups along dims 1 and 2 of a launch;
# larger problems are split into several launches over rows and batches.
MAX_GROUPS = 65535
MAX_DIM_SIZE = 2**31 - 1  # M, N and K are ints in the kernels


VECTOR_BYTES = 16  # widest global load of gemm_xgemm.cl
EPI_ROW_BIAS, EPI_COL_BIAS, EPI_RELU = 1, 2, 4
_ZERO = np.int64(0)  # an absent bias's offset and stride
_fits = caches.register("ops.gemm.fits", {})
# Device-specific GEMM kernels offered from above: callables device -> [objects whose
# gemm(p, alpha, beta, has_ci, row_bias, col_bias, relu) runs p and returns True, or declines];
# cltensor.plugins registers its lookup here, so that this engine never imports plug-ins.
PROVIDERS = []
generation = 0  # counts the changes to what PROVIDERS offer (keys of replayed launches)


class Operand(NamedTuple):
    """One operand seen by the kernels: its tensor (buffer, offset), strides over the collapsed
    batch dims, and its row and column strides."""
    t: object
    bstrides: list
    rs: int
    cs: int


class Problem(NamedTuple):
    """A product: dtype is the compute type (float32 for 16-bit tensors, whose storage types
    the Operands' tensors give); tr the biases' dtype (None: none, or C's); tf32: TF32
    products allowed whatever backends.allow_tf32 says (gemm_into's tf32)."""
    device: object
    dtype: np.dtype
    m: int
    n: int
    k: int
    bshape: tuple
    a: Operand
    b: Operand
    ci: Operand
    co: Operand
    tr: object = None
    tf32: bool = False

    @property
    def nbatch(self):
        return math.prod(self.bshape)


def get_kernel(device, filename, name, defines, rebuild=None):
    """A kernel of cl_kernels/<filename> (prepended with gemm_common.cl), built once (rebuild:
    see program.build_program)."""
    source = program.read_sources("gemm_common.cl", filename)
    return program.get_kernel(device, filename, name, defines, source, rebuild)


def storage_defines(p, a=None, b=None):
    """T, p's compute type, and the storage types of gemm_common.cl that differ from it: TA
    and TB of the tensors a kernel reads as A and B (None: read as T, packed or copied), TC of
    C and TR of the biases; C_ROUNDS when C is stored in another type than T."""
    defines = {"T": ctype_of(p.dtype)}
    for name, dtype in (("TA", a), ("TB", b), ("TC", p.co.t.dtype)):
        if dtype is not None and dtype != p.dtype:
            defines[name] = ctype_of(dtype)
    if "TC" in defines:
        defines["C_ROUNDS"] = 1
    if p.tr is not None and p.tr != p.co.t.dtype:
        defines["TR"] = ctype_of(p.tr)
    return defines


def pack_defines(p, op):
    """gemm_pack.cl's T and, for an operand stored in another type, TA (converted as packed)."""
    defines = {"T": ctype_of(p.dtype)}
    if op.t.dtype != p.dtype:
        defines["TA"] = ctype_of(op.t.dtype)
    return defines


def reads_as_computed(p):
    """Whether every tensor of p is stored in its compute type (no 16-bit storage): what the
    device plug-ins read."""
    return (all(op.t.dtype == p.dtype for op in (p.a, p.b, p.ci, p.co)) and
            p.tr in (None, p.dtype))


def kernel_fits(device, kernel, wgs):
    """Whether the built kernel accepts wgs work-items within the device's local memory.
    NOTE: memoized; the queries cost tens of microseconds on some drivers."""
    key = (kernel, device, wgs, device.local_mem)  # NOTE: the kernel itself, not a reusable id
    if key not in _fits:
        info = cl.kernel_work_group_info
        _fits[key] = (
            kernel.get_work_group_info(info.WORK_GROUP_SIZE, device.cl_device) >= wgs and
            kernel.get_work_group_info(info.LOCAL_MEM_SIZE, device.cl_device) <= device.local_mem)
    return _fits[key]


def group_fits(device, lx, ly, local_bytes):
    sizes = device.cl_device.max_work_item_sizes
    return (lx * ly <= device.max_work_group and lx <= sizes[0] and ly <= sizes[1] and
            local_bytes <= device.local_mem)


def operand_args(op):
    return [op.t.storage.buf, ew.view_arg(op.t.offset, op.bstrides), np.int64(op.rs),
            np.int64(op.cs)]


def launch_tiles(p, kernel, tile, groups_n, local, k_arg, tail, rows_in_dim0=False,
                  splits=1, summed=False, per_item=1):
    """Launch over (groups_n, ceil(M / tile) groups, batches * splits), split so that dims 1
    and 2 stay within MAX_GROUPS; rows_in_dim0 puts the row groups in dim 0 (gemm_packed
    walking down M); summed: the first batch dim is summed in the kernel, not launched;
    per_item: groups of dim 0 a work-item takes (gemm_packed's TPI)."""
    nz = p.nbatch // p.bshape[0] if summed else p.nbatch * splits
    for gsize, head in _tile_launches(p.m, p.n, k_arg, p.bshape, tile, groups_n, tuple(local),
                                      rows_in_dim0, nz, per_item):
        launch(p.device, kernel, gsize, local, *head, *tail)


@caches.lru_cache(maxsize=4096)
def _tile_launches(m, n, k_arg, bshape, tile, groups_n, local, rows_in_dim0, nz, per_item=1):
    """[(global size, leading arguments)] of launch_tiles' launches (memoized); nz: the
    batches of the grid."""
    groups_m = -(-m // tile)
    head = (np.int32(m), np.int32(n), np.int32(k_arg))
    batch = (np.int32(len(bshape)), ew.shape_arg(bshape))
    launches = []
    for b0 in range(0, nz, MAX_GROUPS):
        nb = min(MAX_GROUPS, nz - b0)
        step = groups_m if rows_in_dim0 else MAX_GROUPS
        for g0 in range(0, groups_m, step):
            cnt = min(step, groups_m - g0)
            dims = (cnt, groups_n) if rows_in_dim0 else (groups_n, cnt)
            dims = (-(-dims[0] // per_item), dims[1])
            gsize = (dims[0] * local[0], dims[1] * local[1], nb)
            launches.append((gsize, (*head, np.int32(g0 * tile), np.int64(b0), *batch)))
    return tuple(launches)


def epilogue_args(p, alpha, beta, has_ci, row_bias, col_bias, relu):
    """The EPI_ARGS of gemm_common.cl: alpha, beta, C's input and output, the epilogue's flags
    and both biases (an absent one as C's buffer with offset and stride 0)."""
    dt = p.dtype.type
    flags = ((EPI_ROW_BIAS if row_bias is not None else 0) |
             (EPI_COL_BIAS if col_bias is not None else 0) | (EPI_RELU if relu else 0))
    args = [dt(alpha), dt(beta if has_ci else 0), *operand_args(p.ci), *operand_args(p.co),
            np.int32(flags)]
    for bias in (row_bias, col_bias):
        if bias is None:
            args += [p.co.t.storage.buf, _ZERO, _ZERO]
        else:
            args += [bias.storage.buf, np.int64(bias.offset), np.int64(bias.strides[0])]
    return args


def scratch(p, numel):
    """A fresh tensor of numel elements of the problem's dtype, on its device."""
    return ClTensor.empty_on((numel,), p.dtype, p.device)


def pad_copy(p, op, sizes, padded, strides, dst, defines=None):
    """dst = a dense zero-padded copy (batches, *padded) of op, one copy when the batches
    share it; defines: gemm_pack.cl's (default: converted to p's compute type; {"T": "ushort"}
    copies 16-bit values bit for bit)."""
    shared = not any(op.bstrides)
    nb = 1 if shared else p.nbatch
    kernel = get_kernel(p.device, "gemm_pack.cl", "pad_copy", defines or pack_defines(p, op))
    lx = min(256, p.device.max_work_group)
    bshape = () if shared else p.bshape
    size = padded[0] * padded[1]
    for b0 in range(0, nb, MAX_GROUPS):
        launch(p.device, kernel, (round_up(size, lx), min(MAX_GROUPS, nb - b0)), (lx, 1),
               np.int32(sizes[0]), np.int32(sizes[1]), np.int32(padded[0]),
               np.int32(padded[1]), np.int64(b0), np.int32(len(bshape)), ew.shape_arg(bshape),
               op.t.storage.buf, ew.view_arg(op.t.offset, op.bstrides), np.int64(strides[0]),
               np.int64(strides[1]), dst.storage.buf)


def dense_strides(shape, inner):
    """Row-major strides of `shape` whose innermost element spans `inner` elements."""
    strides, acc = [], inner
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return strides[::-1]


def reduce_splits(p, kernel, splits, part, epi):
    """Sum the `splits` partial products in `part` into C through the epilogue (xgemm_reduce)."""
    lx = min(256, p.device.max_work_group)
    size = p.m * p.n
    for b0 in range(0, p.nbatch, MAX_GROUPS):
        launch(p.device, kernel, (round_up(size, lx), min(MAX_GROUPS, p.nbatch - b0)), (lx, 1),
               np.int32(p.m), np.int32(p.n), np.int32(splits), np.int64(b0),
               np.int32(len(p.bshape)), ew.shape_arg(p.bshape), part.storage.buf, *epi)
