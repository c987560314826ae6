"""The GEMM engine under every matrix product and layer:

    out[b] = act(alpha * a[b] @ b[b] + beta * c[b] + row_bias[:, None] + col_bias[None, :])

over strided, batched views (a transposed operand is a view, never a copy), with the kernel
family and its parameters chosen per device and problem from the tuning database
(cltensor/tunedb.py, cltensor/tuning/gemm.json). The families (cl_kernels/gemm_*.cl, each
prepended with gemm_common.cl):

    direct  gemm_direct.cl:gemm_direct  bounds-checked register tiles straight from any strides,
            no local memory: CPUs' small and odd sizes, integer dtypes
    tiled   gemm_direct.cl:gemm_tiled   bounds-checked local-memory tiles: GPUs' small sizes
    packed  gemm_cpu.cl:gemm_packed over gemm_pack.cl:pack_panels: CPUs
    xgemm   gemm_xgemm.cl:xgemm, operands read in place when aligned and whole tiles, else
            copied by gemm_pack.cl:pad_copy: GPUs

The package, by what things are:

    kit         what families and plug-ins share (docs/plugins.md): Problem, kernels, launches
    choice      the tuning entry of a device and the family of a product
    direct      the direct, tiled and rowdot families
    packed      the packed family (CPUs)
    planning    the xgemm parameter sets that fit, and the estimate that ranks them
    xgemm       the xgemm family (GPUs): operands, plans, launches
    bench       benchmark mode's timed xgemm choices
    engine      gemm_into and gemm_sum_into: a product's problem, plug-ins, family and run
    api         gemm(), the checked entry point
"""
# ruff: noqa: F401 (the package's names, re-exported)
import sys
import types

from . import bench, choice, direct, engine, kit, packed, planning, xgemm
from .api import gemm
from .bench import BENCH_MIN_SECONDS, BENCH_REPEAT, BENCH_SLACK, benchmark_times
from .choice import FAMILIES, TILED_FALLBACKS, family_of, small_family, tiled_candidates
from .direct import (B_ALIGNED, B_STRIDED, B_UNIT, DIRECT_GPU_LOCAL, ROWDOT_ACCUMULATORS,
                     ROWDOT_LOCAL, direct_rows)
from .engine import RUNNERS, clear_cache, gemm_into, gemm_sum_into, multiplies_16bit, sums_batches
from .kit import (EPI_COL_BIAS, EPI_RELU, EPI_ROW_BIAS, MAX_DIM_SIZE, PROVIDERS, VECTOR_BYTES,
                  Operand, Problem, dense_strides, epilogue_args, get_kernel, group_fits,
                  kernel_fits, launch_tiles, pad_copy, reads_as_computed, reduce_splits,
                  scratch, storage_defines)
from .packed import (ALIASED_MIN_K, PACK_LOCAL, packed_nr,
                     packed_reads_a_in_place, packed_reads_b_in_place, packed_walks_n)
from .planning import (LAYOUTS, MAX_SPLITS, PLAN_SETTINGS, SPLIT_MIN_SLICES, XGEMM_FALLBACKS,
                       groups_per_cu, layout_of, xgemm_candidates, xgemm_local_bytes,
                       xgemm_max_splits, xgemm_plan, xgemm_seconds, xgemm_valid)
from .xgemm import XOperand, XPlan

__all__ = ["gemm"]

# Settings the engine reads at every product, each kept in the module that reads it; reading
# or assigning one here (gemm.FORCE_FAMILY = "packed": tests, benchmarks, the plug-in layer)
# reads or assigns it there.
def _setting(owner, name):
    return property(lambda _: getattr(owner, name), lambda _, value: setattr(owner, name, value))


class _Package(types.ModuleType):
    FORCE_FAMILY = _setting(choice, "FORCE_FAMILY")
    entry_for = _setting(choice, "entry_for")
    MAX_GROUPS = _setting(kit, "MAX_GROUPS")
    generation = _setting(kit, "generation")


sys.modules[__name__].__class__ = _Package
