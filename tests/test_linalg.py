"""cltensor.linalg (cltensor/ops/linalg.py, cl_kernels/linalg.cl): LU, solves, inverses,
determinants, Cholesky, triangular solves, norms, QR, eigh and SVD against float64 numpy
references and torch, on batches, strided views and sizes past one work-group; singular, not
positive-definite and non-finite matrices; gradients by finite differences; bad input.

NOTE: the kernels build once per dtype (one program each): every test runs many cases."""
import numpy as np
import pytest

import cltensor
from cltensor.testing import gradcheck, random_array

LA = cltensor.linalg
SIZES = (1, 2, 5, 33, 70)  # 70: more rows than a CPU work-group has work-items


def _fp(device):
    return np.float64 if device.has_fp64 else np.float32


def _tol(device):
    return {"rtol": 1e-9, "atol": 1e-9} if device.has_fp64 else {"rtol": 2e-3, "atol": 2e-3}


def _close(got, want, tol, what=""):
    np.testing.assert_allclose(got.numpy() if hasattr(got, "numpy") else got, want,
                               err_msg=what, **tol)


def T(a, device, grad=False):
    t = cltensor.from_numpy(np.array(a, dtype=_fp(device), order="C"), device=device)
    return t.requires_grad_() if grad else t


def _well(rng, shape):
    """Random matrices made well-conditioned: uniform entries plus n on the diagonal."""
    return random_array(rng, shape, np.float64) + shape[-1] * np.eye(shape[-1])


def _spd(rng, shape):
    a = random_array(rng, shape, np.float64)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def _np_lu(a):
    """LAPACK's getrf in numpy: (LU, 1-based pivots) with partial pivoting."""
    a = a.copy()
    m, n = a.shape
    piv = []
    for k in range(min(m, n)):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        piv.append(p + 1)
        a[[k, p]] = a[[p, k]]
        if a[k, k] != 0:
            a[k + 1:, k] /= a[k, k]
        a[k + 1:, k + 1:] -= np.outer(a[k + 1:, k], a[k, k + 1:])
    return a, np.array(piv)


def _mask(n, upper, diagonal=0):
    """A constant triangle of ones (tril and triu do not record gradients)."""
    ones = np.ones((n, n))
    return np.triu(ones, diagonal) if upper else np.tril(ones, diagonal)


# ---- values -------------------------------------------------------------------------------------

def test_lu_factor_and_lu_solve(device, rng):
    tol = _tol(device)
    for n in SIZES:
        a = random_array(rng, (2, n, n), np.float64)  # not diagonally dominant: rows get swapped
        LU, piv = LA.lu_factor(T(a, device))
        assert piv.dtype == cltensor.int64 and piv.shape == (2, n)
        for i in range(2):
            want, want_piv = _np_lu(a[i])
            _close(LU[i], want, tol, f"LU n={n}")
            assert piv[i].tolist() == want_piv.tolist(), n
        b = random_array(rng, (2, n, 3), np.float64)
        _close(LA.lu_solve(LU, piv, T(b, device)), np.linalg.solve(a, b), tol, f"n={n}")
        at = np.swapaxes(a, -1, -2)
        _close(LA.lu_solve(LU, piv, T(b, device), adjoint=True), np.linalg.solve(at, b), tol)
        bt = np.swapaxes(b, -1, -2)
        want = np.swapaxes(np.linalg.solve(at, b), -1, -2)  # X A = B^T
        _close(LA.lu_solve(LU, piv, T(bt, device), left=False), want, tol)
    for shape in ((3, 5), (5, 3), (4, 1)):  # rectangular: min(m, n) pivots
        a = random_array(rng, shape, np.float64)
        LU, piv, info = LA.lu_factor_ex(T(a, device))
        want, want_piv = _np_lu(a)
        _close(LU, want, tol, str(shape))
        assert piv.tolist() == want_piv.tolist() and info.item() == 0
    # one factor for a batch of right-hand sides, the factor read through a transposed view
    a, b = _well(rng, (4, 4)), random_array(rng, (3, 4, 2), np.float64)
    LU, piv = LA.lu_factor(T(a.T, device).mT)
    _close(LA.lu_solve(LU, piv, T(b, device)), np.linalg.solve(a, b), tol)


def test_solve_inv_det_slogdet(device, rng):
    tol = _tol(device)
    for n in SIZES:
        a = random_array(rng, (3, n, n), np.float64)
        A = T(a, device)
        sign, logabs = np.linalg.slogdet(a)
        if n <= 33:  # NOTE: det of 70 x 70 random matrices overflows float32
            _close(LA.det(A), np.linalg.det(a), tol, f"det n={n}")
        got = LA.slogdet(A)
        _close(got.sign, sign, tol, f"sign n={n}")
        _close(got.logabsdet, logabs, tol, f"logabsdet n={n}")
        w = _well(rng, (2, n, n))
        W = T(w, device)
        _close(LA.inv(W), np.linalg.inv(w), tol, f"inv n={n}")
        b = random_array(rng, (2, n, 3), np.float64)
        _close(LA.solve(W, T(b, device)), np.linalg.solve(w, b), tol, f"solve n={n}")
        v = random_array(rng, (n,), np.float64)  # one vector for both matrices
        _close(LA.solve(W, T(v, device)), np.linalg.solve(w, v[None, :, None])[..., 0], tol)
    a = np.array([[2.0, 1.0], [1.0, -3.0]])  # det -7: logdet NaN
    assert np.isnan(cltensor.logdet(T(a, device)).item())
    a[1, 1] = 4.0  # det 7
    _close(cltensor.logdet(T(a, device)), np.log(7.0), tol)


def test_strided_broadcast_and_empty(device, rng):
    tol = _tol(device)
    n = 5
    w = _well(rng, (4, n, n))
    base = T(w, device)
    views = {"transposed": (base.mT, np.swapaxes(w, -1, -2)),
             "every other": (base[::2], w[::2]),
             "offset": (base[1:], w[1:]),
             "expanded": (base[0].expand(3, n, n), np.broadcast_to(w[0], (3, n, n)))}
    b = random_array(rng, (n, 6), np.float64)  # NOTE: 6 columns: no batch of vectors
    for what, (A, a) in views.items():
        _close(LA.inv(A), np.linalg.inv(a), tol, what)
        _close(LA.det(A), np.linalg.det(a), tol, what)
        _close(LA.solve(A, T(b, device)), np.linalg.solve(a, b), tol, what)
        want = np.swapaxes(np.linalg.solve(np.swapaxes(a, -1, -2), b), -1, -2)  # X A = B^T
        _close(LA.solve(A, T(b.T.copy(), device).mT.mT, left=False), want, tol, what)
    # batches broadcast: A (3, 1, n, n) with B (2, n, k); vectors, one per matrix
    a3 = _well(rng, (3, 1, n, n))
    b2 = random_array(rng, (2, n, 4), np.float64)
    got = LA.solve(T(a3, device), T(b2, device))
    assert got.shape == (3, 2, n, 4)
    _close(got, np.linalg.solve(a3, b2), tol)
    v = random_array(rng, (3, 1, n), np.float64)
    _close(LA.solve(T(a3, device), T(v, device)), np.linalg.solve(a3, v[..., None])[..., 0], tol)
    # many small matrices (the batch is dim 1 of the launch)
    many = _well(rng, (300, 3, 3))
    _close(LA.inv(T(many, device)), np.linalg.inv(many), tol)
    # empty matrices and batches, and 1 x 1
    dev = {"device": device, "dtype": cltensor.float32}
    assert LA.det(cltensor.zeros(2, 0, 0, **dev)).tolist() == [1.0, 1.0]
    assert LA.slogdet(cltensor.zeros(0, 0, **dev)).logabsdet.item() == 0.0
    assert LA.inv(cltensor.zeros(0, 0, **dev)).shape == (0, 0)
    assert LA.solve(cltensor.zeros(0, 0, **dev), cltensor.zeros(0, 3, **dev)).shape == (0, 3)
    assert LA.det(cltensor.zeros(0, 3, 3, **dev)).shape == (0,)
    assert LA.cholesky(cltensor.zeros(0, 0, **dev)).shape == (0, 0)
    assert LA.lu_factor(cltensor.zeros(0, 4, 4, **dev)).pivots.shape == (0, 4)
    assert LA.inv(T([[4.0]], device)).item() == 0.25


def test_cholesky_and_its_solves(device, rng):
    tol = _tol(device)
    for n in SIZES:
        s = _spd(rng, (2, n, n))
        want = np.linalg.cholesky(s)
        junk = np.triu(random_array(rng, (n, n), np.float64), 1)  # only one triangle is read
        L = LA.cholesky(T(s + junk, device))
        _close(L, want, tol, f"n={n}")
        _close(LA.cholesky(T(s + junk.T, device), upper=True), np.swapaxes(want, -1, -2), tol)
        b = random_array(rng, (2, n, 3), np.float64)
        _close(cltensor.cholesky_solve(T(b, device), L), np.linalg.solve(s, b), tol, f"n={n}")
        _close(cltensor.cholesky_solve(T(b, device), L.mT, upper=True), np.linalg.solve(s, b),
               tol)
        _close(cltensor.cholesky_inverse(L), np.linalg.inv(s), tol, f"n={n}")
    L, info = LA.cholesky_ex(T(_spd(rng, (3, 3)), device))
    assert info.item() == 0


def test_solve_triangular(device, rng):
    tol = _tol(device)
    for n in (1, 5, 70):
        a = random_array(rng, (2, n, n), np.float64) / n + 2 * np.eye(n)  # well-conditioned
        b = random_array(rng, (2, n, 3), np.float64)
        for upper in (False, True):
            for unit in (False, True):
                tri = np.triu(a) if upper else np.tril(a)
                if unit:
                    tri = tri - np.diagonal(tri, 0, -2, -1)[..., None] * np.eye(n) + np.eye(n)
                what = f"n={n} upper={upper} unit={unit}"
                got = LA.solve_triangular(T(a, device), T(b, device), upper=upper,
                                          unitriangular=unit)
                _close(got, np.linalg.solve(tri, b), tol, what)
                bt = np.swapaxes(b, -1, -2)  # X A = B^T
                got = LA.solve_triangular(T(a, device), T(bt, device), upper=upper, left=False,
                                          unitriangular=unit)
                want = np.swapaxes(np.linalg.solve(np.swapaxes(tri, -1, -2), b), -1, -2)
                _close(got, want, tol, what + " right")
    a, b = np.triu(_well(rng, (4, 4))), random_array(rng, (4, 2), np.float64)
    got = cltensor.triangular_solve(T(b, device), T(a, device), transpose=True)
    _close(got.solution, np.linalg.solve(a.T, b), tol)
    _close(got.cloned_coefficient, a, tol)


# ---- failures and bad input ---------------------------------------------------------------------

def test_singular_and_not_positive_definite(device):
    z = np.array([[1.0, 0.0, 2.0], [3.0, 0.0, 1.0], [1.0, 0.0, 1.0]])  # column 1 is zero
    Z = T(z, device)
    assert LA.det(Z).item() == 0.0
    sign, logabs = LA.slogdet(Z)
    assert sign.item() == 0.0 and logabs.item() == -np.inf
    assert LA.lu_factor_ex(Z).info.item() == 2
    with pytest.raises(LA.LinAlgError, match=r"^linalg.inv: The diagonal element 2 is zero, the "
                                             r"inversion could not be completed because the "
                                             r"input matrix is singular"):
        LA.inv(Z)
    assert issubclass(LA.LinAlgError, RuntimeError)
    assert LA.inv_ex(Z).info.item() == 2
    batch = T(np.stack([np.eye(3), z]), device)
    with pytest.raises(LA.LinAlgError, match=r"\(Batch element 1\): The diagonal element 2"):
        cltensor.inverse(batch)
    with pytest.raises(LA.LinAlgError, match="The solver failed because the input matrix is "
                                             "singular"):
        LA.solve(Z, T(np.ones(3), device))
    with pytest.raises(LA.LinAlgError, match=r"U\[2,2\] is zero"):
        LA.lu_factor(Z)
    with pytest.raises(LA.LinAlgError, match="singular"):
        cltensor.matrix_power(Z, -2)
    with pytest.raises(LA.LinAlgError, match="diagonal element 2 is zero"):
        cltensor.cholesky_inverse(T(np.diag([1.0, 0.0, 2.0]), device))
    indefinite = T(np.array([[1.0, 2.0], [2.0, 1.0]]), device)
    with pytest.raises(LA.LinAlgError, match=r"not positive-definite \(the leading minor of "
                                             r"order 2 is not positive-definite\)"):
        LA.cholesky(indefinite)
    assert LA.cholesky_ex(indefinite).info.item() == 2
    with pytest.raises(LA.LinAlgError, match=r"\(Batch element 2\).*leading minor of order 1"):
        T(np.stack([np.eye(2), np.eye(2), -np.eye(2)]), device).cholesky()
    if device.has_fp64:
        Zg = T(z, device, grad=True)
        with pytest.raises(LA.LinAlgError, match="gradient at a singular matrix"):
            LA.det(Zg).backward()


def test_bad_input(device):
    A, B = T(np.eye(3), device), T(np.ones((3, 2)), device)
    rect = T(np.ones((2, 3)), device)
    ints = cltensor.ones(3, 3, dtype=cltensor.int64, device=device)
    cases = [
        (lambda: LA.inv(rect), ValueError, r"square matrices, got shape \(2, 3\)"),
        (lambda: LA.det(rect), ValueError, "2 by 3 matrices"),
        (lambda: LA.cholesky(rect), ValueError, "square"),
        (lambda: LA.solve(rect, B), ValueError, "square"),
        (lambda: LA.inv(ints), TypeError, "float32 or float64, got int64"),
        (lambda: LA.inv(T(np.ones(3), device)), ValueError, r"batch of matrices, got shape \(3,\)"),
        (lambda: LA.inv(np.eye(3)), TypeError, "must be a tensor, got ndarray"),
        (lambda: LA.solve(A, T(np.ones((4, 2)), device)), ValueError,
         r"incompatible shapes of A \(3, 3\) and B \(4, 2\) for the equation AX = B"),
        (lambda: LA.solve(A, B, left=False), ValueError, "XA = B"),
        (lambda: LA.solve(T(np.ones((2, 3, 3)), device), T(np.ones((4, 3, 1)), device)),
         ValueError, "batch dims"),
        (lambda: LA.solve_triangular(A, T(np.ones(3), device), upper=True), ValueError,
         "batch of matrices"),
        (lambda: LA.solve_triangular(A, B, upper=1), TypeError, "upper must be a bool"),
        (lambda: LA.lu_solve(A, cltensor.ones(2, dtype=cltensor.int64, device=device), B),
         ValueError, r"pivots of shape \(2,\) do not match LU"),
        (lambda: LA.lu_solve(A, T(np.ones(3), device), B), TypeError, "int64 or int32"),
        (lambda: LA.lu_factor(A, pivot=False), NotImplementedError, "pivot=True"),
        (lambda: cltensor.cholesky_solve(B, rect), ValueError, "square"),
    ]
    if device.has_fp64:
        other = T(np.eye(3), device).to(cltensor.float32)
        cases.append((lambda: LA.solve(A, other), TypeError, "same dtype"))
    for fn, err, msg in cases:
        with pytest.raises(err, match=msg):
            fn()
    if device.has_fp64:  # not differentiable: refused rather than silently without gradients
        with pytest.raises(NotImplementedError, match="not differentiable"):
            LA.lu_factor(T(np.eye(2), device, grad=True))
        LU, piv = LA.lu_factor(A)
        with pytest.raises(NotImplementedError, match="with respect to LU"):
            LA.lu_solve(LU.requires_grad_(), piv, B)


# ---- gradients ----------------------------------------------------------------------------------

def test_gradients(device, rng):
    if not device.has_fp64:
        pytest.skip("gradcheck needs float64")
    n = 3
    a = _well(rng, (2, n, n))
    a[1] = -a[1]  # a negative determinant (slogdet's sign -1) in the batch
    A = T(a, device, grad=True)
    lower = T(_mask(n, False), device)
    upper = T(_mask(n, True), device)
    b = T(random_array(rng, (2, n, 2), np.float64), device, grad=True)
    v = T(random_array(rng, (n,), np.float64), device, grad=True)
    one = T(_well(rng, (n, n)), device, grad=True)  # broadcast against the batch
    cases = {
        "inv": (lambda x: LA.inv(x), [A]),
        "det": (lambda x: LA.det(x), [A]),
        "slogdet": (lambda x: LA.slogdet(x).logabsdet, [A]),
        "logdet": (lambda x: cltensor.logdet(x), [T(_spd(rng, (n, n)), device, True)]),
        "solve": (lambda x, y: LA.solve(x, y), [A, b]),
        "solve vector": (lambda x, y: LA.solve(x, y), [A, v]),
        "solve broadcast": (lambda x, y: LA.solve(x, y), [one, b]),
        "solve left=False": (lambda x, y: LA.solve(x, y.mT, left=False), [A, b]),
        "cholesky": (lambda x: LA.cholesky(x @ x.mT), [A]),
        "cholesky upper": (lambda x: LA.cholesky(x @ x.mT, upper=True), [A]),
        "solve_triangular": (lambda x, y: LA.solve_triangular(x * lower, y, upper=False),
                             [A, b]),
        "solve_triangular right unit": (lambda x, y: LA.solve_triangular(
            x * upper, y.mT, upper=True, left=False, unitriangular=True), [A, b]),
        # the whole of A: its diagonal and upper triangle are never read, their gradient 0
        "solve_triangular lower unit": (lambda x, y: LA.solve_triangular(
            x, y, upper=False, unitriangular=True), [A, b]),
        "cholesky_solve": (lambda x, y: cltensor.cholesky_solve(y, x * lower), [A, b]),
        "cholesky_inverse": (lambda x: cltensor.cholesky_inverse(x * upper, upper=True), [A]),
        "lu_solve": (lambda y: LA.lu_solve(*LA.lu_factor(A.detach()), y, adjoint=True), [b]),
        "matrix_power -2": (lambda x: LA.matrix_power(x, -2), [A]),
        "triangular_solve": (lambda x, y: cltensor.triangular_solve(y, x * upper).solution,
                             [A, b]),
    }
    for what, (fn, inputs) in cases.items():
        assert gradcheck(fn, inputs), what


def _second_order(fn, w):
    """x -> d(sum(w * fn(x)))/dx, its graph recorded when x requires grad."""
    def grad_of(x):
        with cltensor.enable_grad():
            xi = x if x.requires_grad else x.detach().requires_grad_()
            (g,) = cltensor.autograd.grad([(fn(xi) * w).sum()], [xi],
                                          create_graph=x.requires_grad)
        return g
    return grad_of


def test_second_order_gradients(device, rng):
    if not device.has_fp64:
        pytest.skip("gradcheck needs float64")
    n = 3
    a = _well(rng, (n, n))
    w = T(random_array(rng, (n, n), np.float64), device)
    c = T(random_array(rng, (n, n), np.float64), device)
    for what, fn in {"inv": LA.inv, "det": LA.det, "solve": lambda x: LA.solve(x, c),
                     "cholesky": lambda x: LA.cholesky(x @ x.mT),
                     "solve_triangular": lambda x: LA.solve_triangular(x, c, upper=True),
                     "vector_norm": lambda x: LA.vector_norm(x, 3, 0),
                     "qr": lambda x: LA.qr(x).R, "eigvalsh": lambda x: LA.eigvalsh(x + x.mT),
                     "svdvals": lambda x: LA.svdvals(x)}.items():
        assert gradcheck(_second_order(fn, w), [T(a, device, grad=True)]), what


def test_against_torch(device, rng):
    torch = pytest.importorskip("torch")
    tol = _tol(device)
    if not device.has_fp64:
        pytest.skip("compared in float64")
    a = _well(rng, (2, 4, 4))
    b = random_array(rng, (2, 4, 3), np.float64)
    s = _spd(rng, (2, 4, 4))
    cases = {  # name: (our fn, torch's fn, arrays)
        "det": (LA.det, torch.linalg.det, [a]),
        "slogdet": (lambda x: LA.slogdet(x)[1], lambda x: torch.linalg.slogdet(x)[1], [a]),
        "inv": (LA.inv, torch.linalg.inv, [a]),
        "solve": (LA.solve, torch.linalg.solve, [a, b]),
        "cholesky": (LA.cholesky, torch.linalg.cholesky, [s]),
        "solve_triangular": (lambda x, y: LA.solve_triangular(x, y, upper=False),
                             lambda x, y: torch.linalg.solve_triangular(x.tril(), y,
                                                                       upper=False), [a, b]),
        "vector_norm": (lambda x: LA.vector_norm(x, 3, dim=-1),
                        lambda x: torch.linalg.vector_norm(x, 3, dim=-1), [a]),
        "matrix_norm nuc": (lambda x: LA.matrix_norm(x, "nuc"),
                            lambda x: torch.linalg.matrix_norm(x, "nuc"), [a]),
        "qr Q": (lambda x: LA.qr(x).Q, lambda x: torch.linalg.qr(x).Q, [b]),
        "qr R": (lambda x: LA.qr(x.mT).R, lambda x: torch.linalg.qr(x.mT).R, [b]),
        # eigenvectors and singular vectors squared: the loss does not see their signs
        "eigh": (lambda x: LA.eigh(x).eigenvectors ** 2,
                 lambda x: torch.linalg.eigh(x).eigenvectors ** 2, [s]),
        "eigvalsh": (LA.eigvalsh, torch.linalg.eigvalsh, [s]),
        "svd U": (lambda x: LA.svd(x).U ** 2, lambda x: torch.linalg.svd(x).U ** 2, [b]),
        "svd Vh": (lambda x: LA.svd(x, False).Vh ** 2,
                   lambda x: torch.linalg.svd(x, False).Vh ** 2, [b]),
        "svdvals": (LA.svdvals, torch.linalg.svdvals, [b]),
        "pinv": (LA.pinv, torch.linalg.pinv, [b]),
    }
    for name, (ours_fn, theirs_fn, arrays) in cases.items():
        ours = [T(x, device, grad=True) for x in arrays]
        theirs = [torch.tensor(x, requires_grad=True) for x in arrays]
        out, ref = ours_fn(*ours), theirs_fn(*theirs)
        g = random_array(rng, tuple(ref.shape), np.float64)
        out.backward(T(g, device))
        ref.backward(torch.tensor(g))
        _close(out, ref.detach().numpy(), tol, name)
        for o, t in zip(ours, theirs):
            _close(o.grad, t.grad.numpy(), tol, f"{name} grad")
    r = random_array(rng, (3, 6, 6), np.float64)
    LU, piv = LA.lu_factor(T(r, device))
    tLU, tpiv = torch.linalg.lu_factor(torch.tensor(r))
    _close(LU, tLU.numpy(), tol)
    assert piv.tolist() == tpiv.tolist()


def test_float32(device, rng):
    tol = {"rtol": 1e-4, "atol": 1e-4}
    for n in (5, 70):
        w = _well(rng, (2, n, n))
        W = cltensor.from_numpy(w.astype(np.float32), device=device)
        b = random_array(rng, (2, n, 2), np.float64)
        B = cltensor.from_numpy(b.astype(np.float32), device=device)
        assert LA.inv(W).dtype == cltensor.float32
        _close(LA.inv(W), np.linalg.inv(w), tol, f"inv n={n}")
        _close(LA.solve(W, B), np.linalg.solve(w, b), tol, f"solve n={n}")
        _close(LA.slogdet(W).logabsdet, np.linalg.slogdet(w)[1], tol, f"slogdet n={n}")
        s = _spd(rng, (n, n))
        _close(LA.cholesky(cltensor.from_numpy(s.astype(np.float32), device=device)),
               np.linalg.cholesky(s), tol, f"cholesky n={n}")
        _close(LA.solve_triangular(W, B, upper=True), np.linalg.solve(np.triu(w), b), tol)
        Q, R = LA.qr(W)
        _close(Q.numpy() @ R.numpy(), w, tol, f"qr n={n}")
        _close(R, np.linalg.qr(w)[1], tol, f"qr R n={n}")
        S = cltensor.from_numpy(s.astype(np.float32), device=device)
        _close(LA.eigvalsh(S), np.linalg.eigvalsh(s), {"rtol": 1e-4, "atol": 1e-3}, f"n={n}")
        _orthonormal(LA.eigh(S).eigenvectors, tol, f"eigh n={n}")
        U, S, Vh = LA.svd(W[:, :, : n // 2 + 1], full_matrices=False)
        _close(S, np.linalg.svd(w[:, :, : n // 2 + 1], compute_uv=False), tol, f"svd n={n}")
        _orthonormal(U, tol, f"svd n={n}")


def test_tensor_methods_and_aliases(device, rng):
    tol = _tol(device)
    w = _well(rng, (3, 3))
    W = T(w, device)
    _close(W.inverse(), np.linalg.inv(w), tol)
    _close(W.det(), np.linalg.det(w), tol)
    _close(W.logdet(), np.log(np.linalg.det(w)), tol)
    _close(W.slogdet().logabsdet, np.linalg.slogdet(w)[1], tol)
    assert cltensor.inverse is LA.inv and cltensor.det is LA.det
    assert cltensor.slogdet is LA.slogdet and cltensor.cholesky is LA.cholesky
    s = _spd(rng, (3, 3))
    L = T(s, device).cholesky()
    b = random_array(rng, (3, 2), np.float64)
    _close(T(b, device).cholesky_solve(L), np.linalg.solve(s, b), tol)
    _close(L.cholesky_inverse(), np.linalg.inv(s), tol)
    _close(T(b, device).triangular_solve(T(np.triu(w), device)).solution,
           np.linalg.solve(np.triu(w), b), tol)
    _close(W.matrix_power(-1), np.linalg.inv(w), tol)


# ---- norms, QR, eigh, SVD -----------------------------------------------------------------------

def _sym(rng, shape):
    a = random_array(rng, shape, np.float64)
    return a + np.swapaxes(a, -1, -2)


def _orthonormal(q, tol, what, rows=False):
    """q's columns (rows) orthonormal."""
    q = q.numpy() if hasattr(q, "numpy") else q
    q = np.swapaxes(q, -1, -2) if rows else q
    k = q.shape[-1]
    _close(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k)), tol,
           what + " orthonormal")


def _largest_positive(v, what):
    """Each column of v has its largest-magnitude entry positive (the sign convention)."""
    v = v.numpy()
    idx = np.argmax(np.abs(v), axis=-2)[..., None, :]
    assert (np.take_along_axis(v, idx, -2) > 0).all(), what


@pytest.mark.filterwarnings("ignore:divide by zero")  # numpy's -1-norm of a row with zeros
def test_norms(device, rng):
    tol = _tol(device)
    x = random_array(rng, (3, 4, 5), np.float64)
    x[0, 1, :2] = 0
    X = T(x, device)
    for ord in (2, 1, 0, 3.5, 0.5, -1, np.inf, -np.inf):
        for dim in (None, 1, (0, 2), -1):
            want = np.linalg.norm(x.ravel(), ord) if dim is None else None
            if isinstance(dim, int):
                want = np.linalg.norm(x, ord, axis=dim)
            elif dim is not None:  # numpy's vector norms take one axis: move both to the end
                want = np.linalg.norm(np.moveaxis(x, dim, (-2, -1)).reshape(4, -1), ord, axis=-1)
            _close(LA.vector_norm(X, ord, dim), want, tol, f"ord={ord} dim={dim}")
    assert LA.vector_norm(X, 2, (0, 2), keepdim=True).shape == (1, 4, 1)
    if device.has_fp64:
        got = LA.vector_norm(X.to(cltensor.float32), dtype=cltensor.float64)
        assert got.dtype == cltensor.float64
    for ord in ("fro", "nuc", np.inf, -np.inf, 1, -1, 2, -2):
        _close(LA.matrix_norm(X, ord), np.linalg.norm(x, ord, axis=(-2, -1)), tol, f"{ord}")
        want = np.linalg.norm(x, ord, axis=(2, 0), keepdims=True)
        _close(LA.matrix_norm(X, ord, dim=(2, 0), keepdim=True), want, tol, f"{ord} dim")
    _close(LA.norm(X), np.linalg.norm(x.ravel()), tol)  # torch's dispatch: ord None, 3-d
    _close(LA.norm(X, dim=(1, 2)), np.linalg.norm(x, axis=(1, 2)), tol)
    _close(LA.norm(X[0], 1), np.linalg.norm(x[0], 1), tol, "2-d: a matrix norm")
    _close(LA.norm(X[0, 0], 1), np.linalg.norm(x[0, 0], 1), tol, "1-d: a vector norm")
    _close(LA.norm(X, np.inf, dim=-1), np.linalg.norm(x, np.inf, axis=-1), tol)
    w = _well(rng, (2, 5, 5))
    for p in (None, 2, -2, "fro", "nuc", 1, -np.inf):
        _close(LA.cond(T(w, device), p), np.linalg.cond(w, p), tol, f"cond {p}")
    _close(LA.cond(T(x, device)), np.linalg.cond(x), tol, "cond rectangular")
    assert LA.cond(T(np.ones((3, 3)), device), 1).item() == np.inf
    # the Tensor.norm that was there is not changed
    _close(X.norm(3, 1), np.linalg.norm(x, 3, axis=1), tol)


def test_qr(device, rng):
    tol = _tol(device)
    shapes = [(n, n) for n in SIZES] + [(70, 5), (5, 70), (33, 2), (2, 33), (1, 4), (4, 1)]
    for m, n in shapes:
        a = random_array(rng, (2, m, n), np.float64)
        a[1, :, 0] = 0  # a column of zeros: no reflector there (LAPACK's tau = 0)
        A = T(a, device)
        Q, R = LA.qr(A)
        k = min(m, n)
        assert Q.shape == (2, m, k) and R.shape == (2, k, n), (m, n)
        want_q, want_r = np.linalg.qr(a)  # LAPACK's: the same reflectors, the same signs
        _close(Q, want_q, tol, f"Q {m}x{n}")
        _close(R, want_r, tol, f"R {m}x{n}")
        Qc, Rc = LA.qr(A, mode="complete")
        assert Qc.shape == (2, m, m) and Rc.shape == (2, m, n)
        _close(Qc.numpy() @ Rc.numpy(), a, tol, f"complete {m}x{n}")
        _orthonormal(Qc, tol, f"complete {m}x{n}")
        assert (np.tril(Rc.numpy(), -1) == 0).all()
        _close(LA.qr(A, mode="r").R, want_r, tol)
        assert LA.qr(A, mode="r").Q.numel() == 0
    # a transposed view, and a batch broadcast from a stride-0 view
    a = random_array(rng, (6, 4), np.float64)
    Q, R = LA.qr(T(a.T, device).mT)
    _close(Q.numpy() @ R.numpy(), a, tol, "transposed view")
    Q, R = LA.qr(T(a, device).expand(3, 6, 4))
    _close(Q.numpy() @ R.numpy(), np.broadcast_to(a, (3, 6, 4)), tol, "expanded")
    dev = {"device": device, "dtype": cltensor.float32}
    assert LA.qr(cltensor.zeros(3, 0, **dev)).Q.shape == (3, 0)
    assert LA.qr(cltensor.zeros(3, 0, **dev), mode="complete").Q.tolist() == np.eye(3).tolist()
    assert LA.qr(cltensor.zeros(0, 3, 3, **dev)).R.shape == (0, 3, 3)
    Q, R = cltensor.qr(T(a, device), some=False)
    assert Q.shape == (6, 6) and T(a, device).qr().R.shape == (4, 4)


def test_eigh(device, rng):
    tol = _tol(device)
    for n in SIZES:
        s = _sym(rng, (2, n, n))
        junk = np.triu(random_array(rng, (n, n), np.float64), 1)  # only one triangle is read
        w, V = LA.eigh(T(s + junk, device))
        _close(w, np.linalg.eigvalsh(s), tol, f"n={n}")
        v = V.numpy()
        _close(v @ (w.numpy()[..., :, None] * np.swapaxes(v, -1, -2)), s, tol, f"A n={n}")
        _orthonormal(V, tol, f"n={n}")
        _largest_positive(V, f"n={n}")
        _close(LA.eigh(T(s + junk.T, device), UPLO="U").eigenvalues, np.linalg.eigvalsh(s), tol)
        _close(LA.eigvalsh(T(s + junk, device)), np.linalg.eigvalsh(s), tol, f"eigvalsh n={n}")
    # repeated and zero eigenvalues: still an orthonormal basis
    q = np.linalg.qr(random_array(rng, (6, 6), np.float64))[0]
    for vals in ([2, 2, 2, -1, -1, 0], [0] * 6, [1, 1e-12, 0, 0, 5, 5]):
        s = (q * np.array(vals, dtype=np.float64)) @ q.T
        w, V = LA.eigh(T(s, device))
        _close(w, np.sort(vals), tol, str(vals))
        _orthonormal(V, tol, str(vals))
        _close(V.numpy() @ np.diag(w.numpy()) @ V.numpy().T, s, tol, str(vals))
    s = _sym(rng, (5, 5))
    _close(LA.eigvalsh(T(s.T.copy(), device).mT.expand(3, 5, 5)),  # strided and broadcast
           np.broadcast_to(np.linalg.eigvalsh(s), (3, 5)), tol)
    assert LA.eigh(cltensor.zeros(2, 0, 0, device=device)).eigenvectors.shape == (2, 0, 0)


def test_lstsq(device, rng):
    """Minimum-norm least squares for tall, wide, square and rank-deficient batches, against
    numpy; torch's driver-dependent fields; a vector right-hand side; broadcast batches."""
    tol, fp = _tol(device), _fp(device)
    for m, n, k in ((7, 4, 2), (4, 7, 3), (6, 6, 1)):
        a, b = random_array(rng, (2, m, n), fp), random_array(rng, (2, m, k), fp)
        a[1, :, -1] = a[1, :, 0]  # rank-deficient: the minimum-norm solution
        r = LA.lstsq(T(a, device), T(b, device), driver="gelsd")
        want = [np.linalg.lstsq(a[i].astype(np.float64), b[i], rcond=None)[0] for i in (0, 1)]
        _close(r.solution, np.stack(want), tol, f"{m}x{n}")
        _close(r.singular_values, np.linalg.svd(a.astype(np.float64), compute_uv=False), tol)
        assert r.rank.tolist() == np.linalg.matrix_rank(a).tolist()
        assert r.residuals.shape == (0,)  # one A is rank-deficient
    a, b = random_array(rng, (3, 8, 3), fp), random_array(rng, (1, 8, 2), fp)  # B broadcast
    for driver in (None, "gels", "gelsy", "gelsd", "gelss"):
        r = LA.lstsq(T(a, device), T(b, device), driver=driver)
        sol = [np.linalg.lstsq(a[i].astype(np.float64), b[0], rcond=None) for i in range(3)]
        _close(r.solution, np.stack([s[0] for s in sol]), tol, str(driver))
        if driver in ("gels", "gelsd", "gelss"):
            _close(r.residuals, np.stack([s[1] for s in sol]), tol, str(driver))
        else:
            assert r.residuals.shape == (0,)
        assert r.rank.dtype == cltensor.int64
        assert r.rank.tolist() == ([] if driver == "gels" else [3, 3, 3])
        assert r.singular_values.shape == ((3, 3) if driver in ("gelsd", "gelss") else (0,))
    v = LA.lstsq(T(a[0], device), T(b[0, :, 0], device), driver="gelsd")  # B: one vector
    assert v.solution.shape == (3,) and v.residuals.shape == (1,)
    _close(v.solution, np.linalg.lstsq(a[0].astype(np.float64), b[0, :, 0], rcond=None)[0],
           tol)


def test_lstsq_gradients_and_errors(device, rng):
    if not device.has_fp64:
        pytest.skip("finite differences need float64")
    A = T(random_array(rng, (5, 3), np.float64), device, grad=True)
    B = T(random_array(rng, (5, 2), np.float64), device, grad=True)
    assert gradcheck(lambda a, b: LA.lstsq(a, b, driver="gels").solution, [A, B])
    assert gradcheck(lambda a, b: LA.lstsq(a, b, driver="gels").residuals, [A, B])
    with pytest.raises(ValueError, match="driver must be one of gels, gelsy, gelsd, gelss"):
        LA.lstsq(A, B, driver="gelsx")
    with pytest.raises(ValueError, match=r"A \(5, 3\) has 5 rows but B \(4, 2\) has 4"):
        LA.lstsq(A, T(np.ones((4, 2)), device))
    with pytest.raises(TypeError, match="same dtype"):
        LA.lstsq(A, cltensor.from_numpy(np.ones((5, 2), np.float32), device=device))


def test_float32_jacobi_accuracy(device, rng):
    """float32 singular values and eigenvalues of 128 x 128 matrices within a few float32
    roundings of float64's, and the factors reproducing the matrix: Jacobi's sweeps run in
    float64 where the device has it (in float32 every rotation rounded: 1e-5 off here)."""
    a = random_array(rng, (128, 128), np.float32) + 3 * np.eye(128, dtype=np.float32)
    s = (a @ a.T / 128).astype(np.float32)
    tol = 4e-7 if device.has_fp64 else 1e-4
    A, S = (cltensor.from_numpy(x, device=device) for x in (a, s))
    sv = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    assert np.abs(LA.svdvals(A).numpy() - sv).max() <= tol * sv.max()
    ev = np.linalg.eigvalsh(s.astype(np.float64))
    assert np.abs(LA.eigvalsh(S).numpy() - ev).max() <= tol * np.abs(ev).max()
    U, sig, Vh = LA.svd(A, full_matrices=False)
    assert U.dtype == sig.dtype == Vh.dtype == cltensor.float32
    rebuilt = (U.numpy() * sig.numpy()) @ Vh.numpy()
    assert np.abs(rebuilt - a).max() <= 20 * tol * np.abs(a).max()
    w, V = LA.eigh(S)
    rebuilt = (V.numpy() * w.numpy()) @ V.numpy().T
    assert np.abs(rebuilt - s).max() <= 20 * tol * np.abs(s).max()


def test_svd(device, rng):
    tol = _tol(device)
    shapes = [(n, n) for n in SIZES] + [(70, 5), (5, 70), (33, 2), (2, 33), (1, 4), (4, 1)]
    for m, n in shapes:
        a = random_array(rng, (2, m, n), np.float64)
        a[1, :, -1] = a[1, :, 0]  # rank-deficient (when n > 1)
        A = T(a, device)
        k, what = min(m, n), f"{m}x{n}"
        U, S, Vh = LA.svd(A, full_matrices=False)
        assert U.shape == (2, m, k) and S.shape == (2, k) and Vh.shape == (2, k, n)
        _close(S, np.linalg.svd(a, compute_uv=False), tol, what)
        _close((U.numpy() * S.numpy()[..., None, :]) @ Vh.numpy(), a, tol, what)
        _orthonormal(U, tol, what)
        _orthonormal(Vh, tol, what, rows=True)
        _largest_positive(U[0], what)
        U, S, Vh = LA.svd(A)  # full_matrices
        assert U.shape == (2, m, m) and Vh.shape == (2, n, n)
        _orthonormal(U, tol, what + " full")
        _orthonormal(Vh, tol, what + " full", rows=True)
        _close(U.numpy()[..., :k] * S.numpy()[..., None, :] @ Vh.numpy()[..., :k, :], a, tol)
        _close(LA.svdvals(A), np.linalg.svd(a, compute_uv=False), tol, what)
        _close(LA.pinv(A), np.linalg.pinv(a), tol, "pinv " + what)
        assert LA.matrix_rank(A).tolist() == np.linalg.matrix_rank(a).tolist(), what
    for z in (np.zeros((4, 3)), np.ones((3, 5))):  # zero singular values: U still orthonormal
        U, S, Vh = LA.svd(T(z, device))
        _close(S, np.linalg.svd(z, compute_uv=False), tol)
        _orthonormal(U, tol, "zeros")
        _orthonormal(Vh, tol, "zeros", rows=True)
        _close(U.numpy()[:, :3] * S.numpy() @ Vh.numpy()[:3], z, tol)
    a = random_array(rng, (5, 3), np.float64)
    _close(LA.svdvals(T(a.T, device).mT), np.linalg.svd(a, compute_uv=False), tol, "view")
    s = _sym(rng, (4, 4))
    _close(LA.pinv(T(s, device), hermitian=True), np.linalg.pinv(s, hermitian=True), tol)
    assert LA.matrix_rank(T(s, device), hermitian=True).item() == 4
    assert LA.matrix_rank(T(np.diag([1.0, 1e-3, 0.0]), device), atol=1e-2).item() == 1
    _close(T(a, device).pinverse(), np.linalg.pinv(a), tol)
    dev = {"device": device, "dtype": cltensor.float32}
    U, S, Vh = LA.svd(cltensor.zeros(2, 3, 0, **dev))
    assert U.shape == (2, 3, 3) and S.shape == (2, 0) and Vh.shape == (2, 0, 0)
    assert LA.pinv(cltensor.zeros(3, 0, **dev)).shape == (0, 3)


def test_decompositions_bad_input(device):
    ints = cltensor.ones(3, 3, dtype=cltensor.int64, device=device)
    vec, sq = T(np.ones(3), device), T(np.eye(3), device)
    nan = T(np.full((3, 3), np.nan), device)
    cases = [
        (lambda: LA.qr(vec), ValueError, r"batch of matrices, got shape \(3,\)"),
        (lambda: LA.qr(ints), TypeError, "float32 or float64, got int64"),
        (lambda: LA.qr(sq, mode="full"), ValueError, "'reduced', 'complete' or 'r', got 'full'"),
        (lambda: LA.eigh(sq, UPLO="X"), ValueError, "UPLO must be 'L' or 'U', got 'X'"),
        (lambda: LA.eigh(T(np.ones((2, 3)), device)), ValueError, r"square matrices, got shape"),
        (lambda: LA.svd(ints), TypeError, "got int64"),
        (lambda: LA.svdvals(vec), ValueError, "batch of matrices"),
        (lambda: LA.vector_norm(ints), TypeError, "floating-point tensor, got int64"),
        (lambda: LA.vector_norm(vec, "fro"), TypeError, "ord must be a real number"),
        (lambda: LA.vector_norm(vec, dtype=cltensor.int32), TypeError, "floating-point dtype"),
        (lambda: LA.vector_norm(sq, dim=(0, -2)), ValueError, "names a dim twice"),
        (lambda: LA.matrix_norm(sq, 3), ValueError, "ord must be one of"),
        (lambda: LA.matrix_norm(vec), ValueError, r"at least 2 dims, got shape \(3,\)"),
        (lambda: LA.matrix_norm(sq, dim=(0,)), ValueError, "2-tuple"),
        (lambda: LA.norm(T(np.ones((2, 2, 2)), device), 2), ValueError, "1-d or 2-d"),
        (lambda: LA.norm(sq, "fro", dim=1), ValueError, "is a matrix norm"),
        (lambda: LA.cond(T(np.ones((2, 3)), device), 1), ValueError, "square"),
        (lambda: LA.eigh(nan), LA.LinAlgError, r"linalg.eigh: The algorithm failed to converge"),
        (lambda: LA.eigvalsh(nan), LA.LinAlgError, "failed to converge"),
        (lambda: LA.svd(nan), LA.LinAlgError, r"linalg.svd: The algorithm failed to converge"),
        (lambda: LA.svdvals(T(np.stack([np.eye(3), np.full((3, 3), np.inf)]), device)),
         LA.LinAlgError, r"\(Batch element 1\)"),
    ]
    if device.has_fp64:
        g = T(np.ones((3, 2)), device, grad=True)
        cases += [(lambda: LA.qr(g, mode="r"), NotImplementedError, "mode='r'"),
                  (lambda: LA.qr(g, mode="complete"), NotImplementedError, "more rows")]
    for fn, err, msg in cases:
        with pytest.raises(err, match=msg):
            fn()


def test_decomposition_gradients(device, rng):
    if not device.has_fp64:
        pytest.skip("gradcheck needs float64")
    x = random_array(rng, (2, 3), np.float64)
    x[0, 1] = 0.0  # torch's subgradients where x (or a whole norm) is 0
    X = T(x, device, grad=True)
    a = T(random_array(rng, (2, 4, 3), np.float64), device, grad=True)
    wide = T(random_array(rng, (3, 5), np.float64), device, grad=True)
    sq = T(_well(rng, (3, 3)), device, grad=True)
    cases = {f"vector_norm {o}": (lambda t, o=o: LA.vector_norm(t, o, dim=1), [X])
             for o in (2, 1, 0.5, 1.5, 3, np.inf, -np.inf)}
    cases.update({f"matrix_norm {o}": (lambda t, o=o: LA.matrix_norm(t, o), [a])
                  for o in ("fro", "nuc", np.inf, -1, 2, -2)})
    cases.update({
        "cond": (lambda t: LA.cond(t), [sq]),
        "qr tall": (lambda t: LA.qr(t), [a]),
        "qr square": (lambda t: LA.qr(t, mode="complete"), [sq]),
        "qr wide": (lambda t: LA.qr(t), [wide]),
        "eigh": (lambda t: LA.eigh(t + t.mT), [sq]),  # V's signs are fixed: a smooth function
        "eigvalsh": (lambda t: LA.eigvalsh(t + t.mT, UPLO="U"), [sq]),
        "svd tall": (lambda t: LA.svd(t, full_matrices=False), [a]),
        "svd wide full": (lambda t: [o.narrow(-2 + (i == 0), 0, 3)
                                     for i, o in enumerate(LA.svd(t)) if i != 1], [wide]),
        "svdvals": (lambda t: LA.svdvals(t), [wide]),
        "pinv": (lambda t: LA.pinv(t), [a]),
    })
    for what, (fn, inputs) in cases.items():
        assert gradcheck(fn, inputs), what
    zero = T(np.zeros(3), device, grad=True)
    LA.vector_norm(zero).backward()
    assert zero.grad.tolist() == [0.0, 0.0, 0.0]  # as torch: 0 at 0
