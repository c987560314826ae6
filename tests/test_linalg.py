"""cltensor.linalg (cltensor/ops/linalg.py, cl_kernels/linalg.cl): LU, solves, inverses,
determinants, Cholesky and triangular solves against float64 numpy references and torch, on
batches, strided views and sizes past one work-group; singular and not positive-definite
matrices; gradients by finite differences; bad input.

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
                     "solve_triangular": lambda x: LA.solve_triangular(x, c, upper=True)}.items():
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
