"""Linear algebra, cdist, cross, take and adaptive max pooling on the opencl device
(cltensor/torch/linalg_ops.py), against CPU torch: the factorizations' outputs as torch's
backward formulas read them (LU, int32 pivots, info), decompositions by their invariants (their
factors are unique only up to signs), singular and not positive-definite inputs, torch's
errors, out= forms, backwards, and two small models trained with torch.optim. No op here may
fall back to the CPU."""
import re

import pytest

from test_torch_device import device_only, ocl, torch  # noqa: F401

pytestmark = pytest.mark.usefixtures("ocl", "device_only")
OCL = "opencl"
FLOATS = (torch.float32, torch.float64)
TOL = {torch.float32: dict(rtol=2e-4, atol=2e-5), torch.float64: dict(rtol=1e-9, atol=1e-10)}
aten = torch.ops.aten


@pytest.fixture(params=FLOATS, ids=str)
def dtype(request, device):
    if request.param == torch.float64 and not device.has_fp64:
        pytest.skip(f"{device.name} has no float64")
    return request.param


def _rand(*shape, dtype=torch.float64, seed=0, pd=False):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    if pd:  # symmetric positive-definite
        x = x @ x.mT + shape[-1] * torch.eye(shape[-1], dtype=torch.float64)
    return x.to(dtype)


def _close(got, want, scale=1.0, strides=False):
    """Each result on the device, with torch's dtype and shape (and strides), close to want."""
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    for g, w in zip(got, want, strict=True):
        assert g.device.type == OCL, g.device
        assert (g.dtype, g.shape) == (w.dtype, w.shape), (g.dtype, w.dtype, g.shape, w.shape)
        if strides:  # (those of dims of size 1 do not matter)
            step = lambda t: [s for s, n in zip(t.stride(), t.shape) if n > 1]
            assert step(g) == step(w), (g.stride(), w.stride())
        if w.is_floating_point():
            tol = {k: v * scale for k, v in TOL.get(w.dtype, TOL[torch.float32]).items()}
            torch.testing.assert_close(g.cpu(), w, **tol, equal_nan=True)
        else:
            assert torch.equal(g.cpu(), w), (g.cpu(), w)


def _on_device(a):
    """An opencl copy of CPU tensor a with a's strides (a transposed view stays one)."""
    if not isinstance(a, torch.Tensor) or 0 in a.stride():
        return a.to(OCL) if isinstance(a, torch.Tensor) else a
    return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=OCL).copy_(a)


def _both(fn, *args, **kw):
    """fn on the CPU args and on opencl copies: (device results, CPU results)."""
    return fn(*[_on_device(a) for a in args], **kw), fn(*args, **kw)


# ---- LU family: the outputs torch's backward formulas read --------------------------------------
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_lu_outputs_as_torch(dtype, layout):
    """det, slogdet, solve_ex, inv_ex, lu_factor_ex, lu and lu_unpack give torch's LU (of A^T for
    a contiguous A where torch factors A^T), int32 pivots and info, in torch's strides."""
    A, B = _rand(2, 4, 4, dtype=dtype), _rand(2, 4, 3, dtype=dtype, seed=1)
    if layout == "transposed":
        A = A.mT
    for fn in (aten._linalg_det, aten._linalg_slogdet, aten.linalg_inv_ex,
               aten.linalg_lu_factor_ex, aten.linalg_lu):
        _close(*_both(fn, A), scale=10, strides=True)
    _close(*_both(aten._linalg_solve_ex, A, B), scale=10, strides=True)
    _close(*_both(aten._linalg_solve_ex, A, B[..., 0]), scale=10)  # vector right-hand side
    _close(*_both(aten._linalg_solve_ex, A, B.mT, left=False), scale=10)
    LU, piv = torch.linalg.lu_factor(A)
    _close(*_both(torch.lu_unpack, LU, piv), scale=10)
    _close(*_both(torch.lu_unpack, LU[..., :3], piv[..., :3]), scale=10)  # wide: m < n
    for left in (True, False):
        for adjoint in (True, False):
            _close(*_both(lambda L, p, b: torch.linalg.lu_solve(L, p, b, left=left,
                                                                adjoint=adjoint),
                          LU, piv, B if left else B.mT), scale=10)


def test_singular_and_not_positive_definite(dtype):
    """info as torch's and no error from the _ex forms; LinAlgError, in torch's words, from the
    others and with check_errors; det 0 and slogdet (0, -inf) of a singular matrix."""
    A = _rand(3, 4, 4, dtype=dtype)
    A[1, :, 2] = 0  # a zero column: an exact zero pivot at step 3
    A[2] = 0
    for fn in (torch.linalg.inv_ex, lambda a: torch.linalg.lu_factor_ex(a)[2],
               lambda a: torch.linalg.solve_ex(a, torch.ones_like(a))[1], torch.linalg.det,
               torch.linalg.slogdet):
        got, want = _both(fn, A)
        _close(got[-1] if isinstance(got, tuple) else got,
               want[-1] if isinstance(want, tuple) else want, scale=10)
    S = _rand(3, 4, 4, dtype=dtype, pd=True)
    S[1, 3, 3] = -50.0  # the leading minor of order 4 is not positive-definite
    S[2] = -S[2]
    for upper in (False, True):
        got, want = _both(torch.linalg.cholesky_ex, S, upper=upper)
        _close(got.info, want.info)
        _close(got.L[0], want.L[0])
    for fn in (torch.linalg.inv, lambda a: torch.linalg.inv_ex(a, check_errors=True),
               lambda a: torch.linalg.solve(a, a), torch.linalg.lu_factor,
               lambda a: torch.linalg.solve_ex(a, a, check_errors=True),
               lambda a: torch.linalg.lu_factor_ex(a, check_errors=True)):
        _same_error(fn, A)
        _same_error(fn, A[2])
    for fn in (torch.linalg.cholesky, lambda a: torch.linalg.cholesky_ex(a, check_errors=True),
               torch.cholesky):
        _same_error(fn, S)
    _same_error(torch.cholesky_inverse, S[2].triu() * 0)


def _same_error(fn, *args):
    """fn on the device raises CPU torch's exception type with its message."""
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(cpu.type, match=re.escape(str(cpu.value).split("\n")[0])):
        fn(*[_on_device(a) for a in args])


def test_bad_input_errors():
    """torch's errors: non-square, integer and half inputs, batches that do not broadcast,
    mismatched dtypes, a bad QR mode, take's out-of-range and float indices."""
    sq, wide, ints = _rand(3, 3), _rand(2, 3), torch.ones(3, 3, dtype=torch.int64)
    for fn in (torch.linalg.det, torch.linalg.inv, torch.linalg.cholesky, torch.linalg.eigh,
               torch.linalg.slogdet, lambda a: torch.linalg.solve(a, a)):
        _same_error(fn, wide)
        _same_error(fn, ints)
        _same_error(fn, sq.half())
    for fn in (torch.linalg.qr, torch.linalg.svd, torch.linalg.lu_factor):
        _same_error(fn, ints)
    _same_error(lambda a: torch.linalg.qr(a, mode="full"), sq)
    _same_error(torch.linalg.solve, _rand(2, 3, 3), _rand(3, 3, 2))
    _same_error(torch.linalg.solve, sq, _rand(4, 2))
    _same_error(torch.linalg.solve, sq, sq.float())
    _same_error(lambda a, b: torch.linalg.lstsq(a, b), _rand(3, 2), _rand(4, 1))
    _same_error(lambda a, b: torch.linalg.lstsq(a, b), ints, ints)
    _same_error(torch.take, sq, torch.tensor([[0, 9]]))
    _same_error(torch.take, sq, torch.tensor([-10]))
    _same_error(torch.take, sq, torch.tensor([1.0]))
    _same_error(lambda a: a.put_(torch.tensor([9], device=a.device), a[0, :1].clone()), sq)
    _same_error(torch.linalg.cross, wide.mT, wide.mT)
    _same_error(torch.cdist, ints, ints)
    _same_error(lambda a: torch.cdist(a, a, p=-1.0), sq)
    _same_error(lambda a: torch.nn.functional.adaptive_max_pool2d(a, 2), ints.reshape(1, 1, 3, 3))
    _same_error(lambda a: torch.nn.functional.adaptive_max_pool2d(a, 2), sq)
    _same_error(torch.cdist, sq, sq.float())
    _same_error(torch.cdist, sq.half(), sq.half())
    _same_error(torch.linalg.cross, sq, sq.float())
    _same_error(lambda a, b: torch.linalg.lstsq(a, b, driver="qr"), sq, sq)
    _same_error(lambda a, b: torch.linalg.lstsq(a, b), _rand(2, 5, 3), _rand(5, 2))
    _same_error(lambda a, b: torch.linalg.lstsq(a, b), sq, sq.float())
    _same_error(lambda a, b: torch.linalg.lstsq(a, b), sq, _rand(2, 2, 3, 3))
    _same_error(lambda a: torch.linalg.lu_solve(a, torch.ones(3, dtype=torch.int64,
                                                              device=a.device), a), sq)
    _same_error(lambda a: a.put_(torch.tensor([0, 1], device=a.device), a[0].clone()), sq)
    _same_error(lambda a: a.put_(torch.tensor([0], device=a.device), a[0, :1].float()), sq)
    _same_error(torch.linalg.svd, torch.full((3, 3), float("nan")))


# ---- decompositions, by their invariants ---------------------------------------------------------
def _eye_like(x):
    return torch.eye(x.shape[-1], dtype=x.dtype)


def test_decompositions(dtype):
    """cholesky (unique) as torch's; qr, svd and eigh reconstruct A with orthonormal factors, R,
    S and the eigenvalues as torch's up to signs, in each mode."""
    A, S = _rand(2, 5, 3, dtype=dtype), _rand(2, 4, 4, dtype=dtype, pd=True)
    for upper in (False, True):
        _close(*_both(torch.linalg.cholesky, S.mT, upper=upper), scale=10)
    for mode in ("reduced", "complete", "r"):
        for M in (A, A.mT):
            (Q, R), (q, r) = _both(torch.linalg.qr, M, mode=mode)
            _close(R.abs(), r.abs(), scale=10)
            if mode == "r":
                _close(Q, q)
            else:
                _close(Q @ R, q @ r, scale=10)
                _close(Q.mT @ Q, _eye_like(q).expand(q.mT.shape[:-1] + q.shape[-1:]), scale=10)
    for full in (False, True):
        for M in (A, A.mT):
            (U, s, Vh), (u, w, vh) = _both(torch.linalg.svd, M, full_matrices=full)
            assert (U.shape, Vh.shape) == (u.shape, vh.shape)
            k = w.shape[-1]
            _close(s, w, scale=10)
            _close(U[..., :k] * s.unsqueeze(-2) @ Vh[..., :k, :], M, scale=10)
            _close(U.mT @ U, _eye_like(u).expand(u.shape[:-2] + u.shape[-1:] * 2), scale=10)
    _close(*_both(torch.linalg.svdvals, A), scale=10)
    for uplo in ("L", "U"):
        (w, V), (w0, _) = _both(torch.linalg.eigh, S.triu() if uplo == "U" else S.tril(),
                                UPLO=uplo)
        _close(w, w0, scale=10)
        _close(V * w.unsqueeze(-2) @ V.mT, S, scale=10)
        _close(*_both(torch.linalg.eigvalsh, S, UPLO=uplo), scale=10)


def test_solves_and_derived(dtype):
    """solve_triangular (each side and triangle), cholesky_solve, cholesky_inverse, lstsq (its
    default driver's fields and gelsd's), pinv, matrix_rank, matrix_power and cond."""
    T, B = _rand(2, 4, 4, dtype=dtype) + 4 * torch.eye(4, dtype=dtype), _rand(2, 4, 3, dtype=dtype)
    for upper in (True, False):
        for left in (True, False):
            for unit in (False, True):
                _close(*_both(lambda t, b: torch.linalg.solve_triangular(
                    t, b if left else b.mT, upper=upper, left=left, unitriangular=unit), T, B),
                    scale=10)
    for upper in (True, False):  # torch.triangular_solve, its deprecated form
        for transpose in (False, True):
            _close(*_both(torch.triangular_solve, B, T, upper, transpose), scale=10)
    _close(*_both(torch.triangular_solve, B, T[0], unitriangular=True), scale=10)
    L = torch.linalg.cholesky(_rand(4, 4, dtype=dtype, pd=True))
    _close(*_both(torch.cholesky, L @ L.mT, upper=True), scale=10)
    for upper in (False, True):
        F = L.mT if upper else L
        _close(*_both(torch.cholesky_solve, B, F, upper=upper), scale=10)
        _close(*_both(torch.cholesky_inverse, F, upper=upper), scale=10)
    X, Y = _rand(2, 6, 3, dtype=dtype), _rand(2, 6, 2, dtype=dtype)
    for driver in (None, "gelsd"):
        _close(*_both(torch.linalg.lstsq, X, Y, driver=driver), scale=100)
    _close(*_both(torch.linalg.lstsq, X, Y[..., 0]), scale=100)
    _close(*_both(torch.linalg.pinv, X), scale=100)
    _close(*_both(torch.linalg.matrix_rank, X @ X.mT))
    _close(*_both(torch.linalg.matrix_power, T, -2), scale=100)
    _close(*_both(torch.linalg.cond, T), scale=100)


def test_out_forms(dtype):
    """The out= forms torch's functions reach, into empty tensors of the right dtypes."""
    A, S, B = _rand(2, 3, 3, dtype=dtype), _rand(3, 3, dtype=dtype, pd=True), _rand(2, 3, 2, dtype=dtype)

    def outs(*dtypes, device):
        return tuple(torch.empty(0, dtype=d, device=device) for d in dtypes)
    i32, f = torch.int32, dtype
    calls = [
        (lambda a, s, b, o: torch.linalg.det(a, out=o[0]), (f,)),
        (lambda a, s, b, o: torch.linalg.slogdet(a, out=o), (f, f)),
        (lambda a, s, b, o: torch.linalg.solve(a, b, out=o[0]), (f,)),
        (lambda a, s, b, o: torch.linalg.inv_ex(a, out=o), (f, i32)),
        (lambda a, s, b, o: torch.linalg.cholesky_ex(s, out=o), (f, i32)),
        (lambda a, s, b, o: torch.linalg.lu_factor_ex(a, out=o), (f, i32, i32)),
        (lambda a, s, b, o: torch.linalg.lu(a, out=o), (f, f, f)),
        (lambda a, s, b, o: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, out=o[0]), (f,)),
        (lambda a, s, b, o: torch.linalg.solve_triangular(s, b, upper=True, out=o[0]), (f,)),
        (lambda a, s, b, o: torch.triangular_solve(b, s, out=o), (f, f)),
        (lambda a, s, b, o: torch.cholesky(s, out=o[0]), (f,)),
        (lambda a, s, b, o: torch.linalg.qr(s, out=o)[1].abs(), (f, f)),
        (lambda a, s, b, o: torch.linalg.svdvals(a, out=o[0]), (f,)),
        (lambda a, s, b, o: torch.linalg.eigvalsh(s, out=o[0]), (f,)),
        (lambda a, s, b, o: torch.linalg.cross(b[..., :3, :1].mT, a[:, :1], out=o[0]), (f,)),
        (lambda a, s, b, o: torch.take(a, torch.tensor([1, -2], device=a.device), out=o[0]),
         (f,)),
        (lambda a, s, b, o: torch.linalg.lstsq(a, b, out=o)[0], (f, f, torch.int64, f)),
        (lambda a, s, b, o: aten._cdist_forward.out(a, b.mT, 1.5, None, out=o[0]), (f,)),
        (lambda a, s, b, o: aten.adaptive_max_pool2d.out(a[None], [2, 2], out=o[0],
                                                         indices=o[1]), (f, torch.int64)),
    ]
    for fn, dtypes in calls:
        got = fn(*(x.to(OCL) for x in (A, S, B)), outs(*dtypes, device=OCL))
        _close(got, fn(A, S, B, outs(*dtypes, device="cpu")), scale=10)


# ---- cdist, cross, take, adaptive max pooling --------------------------------------------------
@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist(p):
    """Every norm, batches that broadcast, each compute mode and their gradients."""
    x1, x2 = _rand(2, 3, 4), _rand(1, 5, 4, seed=1)
    x2[0, 1] = x1[0, 1]  # a zero distance, where the gradient is 0
    x2[0, 2, 0] = x1[0, 2, 0]  # a zero coordinate difference
    for mode in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                 "donot_use_mm_for_euclid_dist"):
        _close(*_both(torch.cdist, x1, x2, p=p, compute_mode=mode))
    _check_grads(lambda a, b: torch.cdist(a, b, p=p), x1, x2)
    if p == 0:  # a zero gradient, an infinite difference included
        x1[0, 0, 0] = float("inf")
        _check_grads(lambda a, b: torch.cdist(a, b, p=p), x1, x2)


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, float("inf")])
def test_pdist(p):
    """F.pdist's distances of row pairs and their gradient, a repeated row (distance 0)
    included, and the out= form."""
    x = _rand(6, 4)
    x[3] = x[1]
    _close(*_both(torch.nn.functional.pdist, x, p))
    _check_grads(lambda a: torch.nn.functional.pdist(a, p), x)
    out = torch.empty(15, dtype=x.dtype, device=OCL)
    aten._pdist_forward.out(x.to(OCL), p, out=out)
    _close(out, torch.nn.functional.pdist(x, p))


def test_cdist_many_rows():
    """More than 25 rows: aten's _cdist_forward takes torch's matmul form of the Euclidean
    distance, as torch.cdist does."""
    x1, x2 = _rand(30, 3), _rand(27, 3, seed=1)
    for mode in (None, 0, 1, 2):
        _close(*_both(aten._cdist_forward, x1, x2, 2.0, mode))
    _close(*_both(torch.cdist, x1, x2))  # torch's own composite of the matmul form
    _check_grads(torch.cdist, x1, x2)
    _same_error(lambda a, b: aten._cdist_forward(a, b, 2.0, 3), x1, x2)


def test_cross_and_take(dtype):
    a, b = _rand(2, 3, 4, dtype=dtype), _rand(1, 3, 4, dtype=dtype, seed=1)
    _close(*_both(torch.linalg.cross, a, b, dim=1))
    _close(*_both(torch.cross, a, b.expand(2, 3, 4), dim=-2))
    _close(*_both(torch.linalg.cross, a.mT, b.mT))
    ints = torch.arange(12).reshape(4, 3)
    _close(*_both(torch.linalg.cross, ints, ints.flip(0)))
    idx = torch.tensor([[0, -1], [5, 23]])
    _close(*_both(lambda x, i: torch.take(x.mT, i), a, idx))
    _close(*_both(torch.take, ints, idx[:, :1]))
    _close(*_both(lambda x, i, s: x.clone().put_(i, s, accumulate=True), a, idx,
                  _rand(2, 2, dtype=dtype)))


@pytest.mark.parametrize("shape", [(2, 3, 7, 6), (3, 5, 7)])
def test_adaptive_max_pool2d(dtype, shape):
    """Batched and unbatched, channels-last; int64 indices as torch's; the backward."""
    x = _rand(*shape, dtype=dtype)
    forms = [x] + ([x.to(memory_format=torch.channels_last)] if len(shape) == 4 else [])
    for v in forms:
        for size in ((3, 4), (2, 7), 1):
            _close(*_both(torch.nn.functional.adaptive_max_pool2d, v, size, return_indices=True),
                   strides=True)
    _check_grads(lambda t: torch.nn.functional.adaptive_max_pool2d(t, (3, 4)), x)


# ---- backwards and models ----------------------------------------------------------------------
def _check_grads(fn, *inputs):
    """Gradients through torch.autograd of fn's outputs (weighted by fixed random tensors) as
    CPU torch's, every op on the device."""
    grads = []
    for dev in ("cpu", OCL):
        leaves = [x.detach().clone().to(dev).requires_grad_() for x in inputs]
        out = fn(*leaves)
        outs = [o for o in (out if isinstance(out, tuple) else (out,)) if o.requires_grad]
        gen = torch.Generator().manual_seed(1)
        weights = [torch.randn(o.shape, generator=gen, dtype=o.dtype).to(dev) for o in outs]
        grads.append(torch.autograd.grad(outs, leaves, weights))
    _close(grads[1], grads[0], scale=100)


def test_backwards():
    """The gradients of each decomposition and solve (of sign-invariant functions of the
    factors where the factors are unique only up to signs)."""
    A, S, B = _rand(2, 4, 4), _rand(2, 4, 4, pd=True, seed=1), _rand(2, 4, 2, seed=2)
    W = _rand(5, 3, seed=3)
    _check_grads(torch.linalg.det, A)
    _check_grads(lambda a: torch.linalg.slogdet(a).logabsdet, A)
    _check_grads(torch.linalg.solve, A, B)
    _check_grads(lambda a, b: torch.linalg.solve(a.mT, b[..., 0]), A, B)
    _check_grads(torch.linalg.inv, A)
    _check_grads(torch.linalg.cholesky, S)
    _check_grads(lambda a, b: torch.cholesky_solve(b, torch.linalg.cholesky(a)), S, B)
    _check_grads(lambda a: torch.linalg.lu_factor(a).LU, A)
    _check_grads(lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b), A, B)
    _check_grads(lambda a, b: torch.linalg.solve_triangular(a, b, upper=False), S, B)
    _check_grads(lambda w: [q @ q.mT for q in torch.linalg.qr(w)[:1]][0], W)
    _check_grads(lambda w: torch.linalg.qr(w).R.mT @ torch.linalg.qr(w).R, W)
    _check_grads(lambda w: (torch.linalg.svdvals(w), torch.linalg.pinv(w)), W)
    _check_grads(lambda w: (lambda u: u @ u.mT)(torch.linalg.svd(w, False).U), W)
    _check_grads(lambda s: (lambda e: (e[0], e[1] @ torch.diag_embed(e[0] ** 2) @ e[1].mT))(
        torch.linalg.eigh(s)), S)
    _check_grads(lambda w, y: torch.linalg.lstsq(w, y).solution, W, _rand(5, 2, seed=4))
    _check_grads(lambda a, b: torch.linalg.cross(a, b), W, _rand(5, 3, seed=5))
    _check_grads(lambda a: torch.take(a, torch.tensor([[0, 7], [7, -1]], device=a.device)), W)
    singular = A.clone()
    singular[0, :, 1] = 0
    _check_grads(torch.linalg.det, singular)  # torch's perturbed LU at a zero pivot


def test_second_order_gradients():
    """create_graph=True: torch's backward formulas then recompute the factorizations."""
    A, S, B = _rand(2, 3, 3), _rand(2, 3, 3, pd=True, seed=1), _rand(2, 3, 2, seed=2)
    for fn, xs in ((torch.linalg.det, (A,)), (torch.linalg.solve, (A, B)), (torch.linalg.inv, (A,)),
                   (torch.linalg.cholesky, (S,)), (torch.linalg.eigvalsh, (S,))):
        hessians = []
        for dev in ("cpu", OCL):
            leaves = [x.detach().clone().to(dev).requires_grad_() for x in xs]
            grads = torch.autograd.grad(fn(*leaves).sum(), leaves, create_graph=True)
            hessians.append(torch.autograd.grad(sum((g * g).sum() for g in grads), leaves))
        _close(hessians[1], hessians[0], scale=100)


def _train(make_loss, params, steps, dev):
    params = [p.detach().clone().to(dev).requires_grad_() for p in params]
    opt = torch.optim.Adam(params, lr=0.05)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = make_loss(*params)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return [p.detach() for p in params] + losses


def test_least_squares_and_gaussian_process_training():
    """A least-squares fit and a Gaussian-process regression (Cholesky solve of an RBF kernel of
    cdist distances) whose length scale and noise Adam fits: as on the CPU, step by step."""
    X, Y = _rand(8, 3), _rand(8, 1, seed=1)

    def ridge(log_lam):
        """Validation error of ridge fits on 6 rows, by lstsq of the system stacked with
        sqrt(lam) I and by solve of the normal equations, as a function of log(lam)."""
        x, y, one = X[:6], Y[:6], torch.eye(3, dtype=X.dtype, device=X.device)
        stacked = torch.cat([x, (log_lam / 2).exp() * one])
        w_lstsq = torch.linalg.lstsq(stacked, torch.cat([y, y.new_zeros(3, 1)])).solution
        w_solve = torch.linalg.solve(x.mT @ x + log_lam.exp() * one, x.mT @ y)
        return sum(((X[6:] @ w - Y[6:]) ** 2).sum() for w in (w_lstsq, w_solve))

    def gp(log_len, log_noise):
        K = torch.exp(-torch.cdist(X, X) ** 2 / (2 * log_len.exp() ** 2))
        K = K + (log_noise.exp() + 1e-3) * torch.eye(8, dtype=X.dtype, device=X.device)
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(Y, L)
        return 0.5 * (Y * alpha).sum() + L.diagonal().log().sum()
    for loss, params in ((ridge, [torch.tensor(0.0, dtype=X.dtype)]),
                         (gp, [torch.tensor(0.2, dtype=X.dtype), torch.tensor(-1.0, dtype=X.dtype)])):
        want = _train(loss, params, 4, "cpu")
        X, Y = X.to(OCL), Y.to(OCL)
        _close(_train(loss, params, 4, OCL), want, scale=100)
        X, Y = X.cpu(), Y.cpu()
