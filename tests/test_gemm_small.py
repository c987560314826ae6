"""GEMM at small batches: gemm_rowaxpy (a few rows times a B with contiguous columns, a linear
layer's input gradient g @ W) on every device, against the classical bound of
tests/test_gemm.py, and the database's choice of it on PoCL."""
import numpy as np
import pytest

import cltensor
from cltensor.ops import gemm as gm
from cltensor.ops.gemm import engine, kit
from cltensor.testing import random_array
from test_gemm import epilogue_args, poisoned, put, run_check


def _entry(device, dtype, wg=0, **rowaxpy):
    return dict(gm.entry_for(device, dtype), rowdot_max_m=0, rowaxpy_max_m=8, rowaxpy_wg=wg,
                rowaxpy=rowaxpy)


KERNELS = {0: "gemm_rowaxpy", 1: "gemm_rowaxpy_wg"}


@pytest.mark.parametrize("wg,params", [(0, {}), (1, {}), (1, {"LX": 4, "KS": 3, "KB": 4})])
@pytest.mark.parametrize("m", [1, 3, 8])
def test_rowaxpy_input_gradients(device, rng, fp_dtypes, m, wg, params):
    """gemm_rowaxpy and gemm_rowaxpy_wg (the GPUs' form, here on every device, with its default
    work-group and a small one of KS rows not a power of two, with several groups along N and
    several blocks of the sums): N below, at and past a whole work-item's columns (clamped last
    vectors), K past the sums' block and a few rows deep, offset (unaligned) and aligned views,
    a batch, the whole epilogue; poisoned outputs."""
    cases = [(16, 7, {}), (37, 150, {"alpha": -0.5, "relu": True}), (160, 65, {"beta": 2.0}),
             (1000, 33, {"row_bias": True, "col_bias": True}), (40, 2, {})]
    for dtype in fp_dtypes:
        entry = _entry(device, dtype, wg, **params)
        for n, k, epi in cases:
            g, w = random_array(rng, (m, k), dtype), random_array(rng, (k, n + 1), dtype)
            kw, ref_kw = epilogue_args(device, rng, dtype, m, n, epi)
            for off in (0, 1):
                out = poisoned(device, (m, n), dtype)
                with cltensor.profile() as prof:
                    gm.gemm_into(put(device, g), put(device, w)[:, off:off + n], out,
                                 entry=entry, **kw)
                assert {r["name"] for r in prof.records()} == {KERNELS[wg]}
                run_check(out, g, w[:, off:off + n], dtype, **ref_kw)
        g, w = random_array(rng, (2, m, 40), dtype), random_array(rng, (40, 48), dtype)
        out = poisoned(device, (2, m, 48), dtype)
        gm.gemm_into(put(device, g), put(device, w).expand(2, 40, 48), out, entry=entry)
        run_check(out, g, np.broadcast_to(w, (2, 40, 48)), dtype)


def _family(device, dtype, a, b):
    c = cltensor.ClTensor.empty_on((a.shape[0], b.shape[1]), dtype, device)
    ops = [kit.Operand(t, (), t.strides[0], t.strides[1]) for t in (a, b, c, c)]
    p = kit.Problem(device, np.dtype(dtype), a.shape[0], b.shape[1], a.shape[1], (), *ops)
    return engine._family(p, gm.entry_for(device, dtype))


def test_linear_input_gradient_family_on_pocl(device):
    """On PoCL a linear layer's input gradient at batch 1-4 takes gemm_rowaxpy (measured 2x
    faster than gemm_direct there, benchmarks/small_batch.py); batch 8 stays with packed, and
    the forward with rowdot."""
    if "portable computing" not in device.cl_device.platform.name.lower():
        pytest.skip("the database's rowaxpy_max_m is PoCL's")
    w = cltensor.zeros((512, 256), device=device)
    for m, want in ((1, "rowaxpy"), (4, "rowaxpy"), (8, "packed")):
        g = cltensor.zeros((m, 512), device=device)
        assert _family(device, np.float32, g, w) == want, m
        assert _family(device, np.float32, g[:, :256], w.mT) == "rowdot", m


def test_rowaxpy_wg_group_fits_the_device():
    """gemm_rowaxpy_wg's work-group: KS halved, then LX, until the group and its sums in local
    memory fit; the entry's sizes where they fit."""
    from types import SimpleNamespace
    from cltensor.ops.gemm.direct import rowaxpy_wg_group
    gpu = SimpleNamespace(max_work_group=1024, local_mem=48 * 1024)
    assert rowaxpy_wg_group(gpu, 8, 4, 4, 32, 8) == (32, 8)  # 32 KiB of sums
    assert rowaxpy_wg_group(gpu, 8, 2, 8, 32, 8) == (32, 8)
    assert rowaxpy_wg_group(gpu, 8, 4, 8, 32, 8) == (32, 4)  # float64 vectors: 64 KiB at 8
    small = SimpleNamespace(max_work_group=64, local_mem=8 * 1024)
    assert rowaxpy_wg_group(small, 4, 4, 4, 32, 8) == (32, 2)  # 64 work-items
    assert rowaxpy_wg_group(small, 16, 4, 4, 32, 8) == (32, 1)  # 8 KiB of sums a row
    assert rowaxpy_wg_group(SimpleNamespace(max_work_group=16, local_mem=8192), 1, 4, 4, 32,
                            8) == (16, 1)
    assert rowaxpy_wg_group(gpu, 64, 4, 8, 1024, 8) == (16, 1)
