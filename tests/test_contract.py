"""Products and contractions (cltensor/composed/contract.py): einsum, tensordot, inner, vdot, kron,
cross, addmv, addr, addbmm, matrix_power, chain_matmul, dist, cdist, renorm, against float64
numpy references and torch, gradients by finite differences, bad input."""
import warnings

import numpy as np
import pytest

import cltensor
from cltensor.testing import assert_close, gradcheck, random_array


def _fp(device):
    return np.float64 if device.has_fp64 else np.float32


def _tol(device):
    return {"rtol": 1e-10, "atol": 1e-10} if device.has_fp64 else {"rtol": 1e-5, "atol": 1e-5}


def _close(got, want, tol, what=""):
    np.testing.assert_allclose(got, want, err_msg=what, **tol)


def T(a, device, grad=False):
    t = cltensor.from_numpy(np.array(a, dtype=_fp(device), order="C"), device=device)
    return t.requires_grad_() if grad else t


EINSUM_CASES = [  # (equation, operand shapes)
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),                        # implicit output: ik
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]),                                # diagonal
    ("ii", [(4, 4)]),                                   # trace
    ("iij->j", [(3, 3, 2)]),
    ("ij->", [(3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ijk->kji", [(2, 3, 4)]),
    ("ijk,jl->il", [(2, 3, 4), (3, 5)]),                # k summed in one operand alone
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),  # broadcast ellipsis dims
    ("...ij,...jk", [(3, 4), (4, 2)]),                  # empty ellipsis, implicit
    ("a...,a->...", [(3, 2, 4), (3,)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),    # three operands
    ("aB,Bc->ac", [(2, 3), (3, 4)]),                   # upper-case labels
    ("i j , j->i", [(3, 4), (4,)]),                    # spaces
    ("ij,kj->ik", [(2, 1), (3, 4)]),                    # a size-1 summed dim broadcast
]


def test_einsum_against_numpy(device, rng):
    tol = _tol(device)
    for eq, shapes in EINSUM_CASES:
        arrays = [random_array(rng, s, np.float64).astype(_fp(device)) for s in shapes]
        got = cltensor.einsum(eq, *[T(a, device) for a in arrays])
        np_eq = eq.replace(" ", "")
        if eq == "ij,kj->ik":  # numpy does not broadcast a size-1 summed dim
            want = np.einsum("ij,kj->ik", np.broadcast_to(arrays[0], (2, 4)), arrays[1])
        else:
            want = np.einsum(np_eq, *[a.astype(np.float64) for a in arrays])
        assert got.shape == want.shape, (eq, got.shape, want.shape)
        _close(got.numpy(), want, tol, eq)
    # the operands as one list, as torch allows
    a, b = random_array(rng, (2, 3), np.float64), random_array(rng, (3,), np.float64)
    got = cltensor.einsum("ij,j->i", [T(a, device), T(b, device)])
    _close(got.numpy(), a @ b, tol)


def test_einsum_gradients_and_torch(device, rng):
    if not device.has_fp64:
        pytest.skip("gradcheck needs float64")
    for eq, shapes in [("bn,anm,bm->ba", [(2, 3), (2, 3, 2), (2, 2)]),
                       ("ii,ij->j", [(3, 3), (3, 2)]),
                       ("...ij,...jk->...ik", [(2, 1, 2, 3), (2, 3, 2)])]:
        ts = [T(random_array(rng, s, np.float64), device, grad=True) for s in shapes]
        assert gradcheck(lambda *xs, eq=eq: cltensor.einsum(eq, *xs), ts), eq
    torch = pytest.importorskip("torch")
    arrays = [random_array(rng, s, np.float64) for s in [(2, 3, 4), (4, 3, 5)]]
    ours = [T(a, device, grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    g = random_array(rng, (2, 5), np.float64)
    out = cltensor.einsum("ijk,kjl->il", *ours)
    out.backward(T(g, device))
    ref = torch.einsum("ijk,kjl->il", *theirs)
    ref.backward(torch.tensor(g))
    _close(out.numpy(), ref.detach().numpy(), _tol(device))
    for o, t in zip(ours, theirs):
        _close(o.grad.numpy(), t.grad.numpy(), _tol(device))


def test_einsum_bad_input(device):
    a, b = T(np.ones((2, 3)), device), T(np.ones((4, 5)), device)
    for args, err, msg in [
            (("ij,jk->ik", a), ValueError, "2 operand subscripts"),
            (("ij,jk->ik", a, b), ValueError, "label 'j'"),
            (("ijk", a), ValueError, "number of subscripts"),
            (("ij->k", a), ValueError, "output subscript k"),
            (("ij->ii", a), ValueError, "more than once"),
            (("i1->i", a), ValueError, "invalid subscripts"),
            (("ii->i", a), ValueError, "sizes don't match"),
            (("...ijk->i", a), ValueError, "too many subscripts"),
            ((3, a), TypeError, "string"),
            (("ij", np.ones((2, 3))), TypeError, "operand 0"),
            (("",), ValueError, "at least one operand")]:
        with pytest.raises(err, match=msg):
            cltensor.einsum(*args)


def test_tensordot_inner_vdot_kron(device, rng):
    tol = _tol(device)
    a, b = random_array(rng, (2, 3, 4), np.float64), random_array(rng, (3, 4, 5), np.float64)
    A, B = T(a, device), T(b, device)
    _close(cltensor.tensordot(A, B).numpy(), np.tensordot(a, b), tol)
    _close(A.tensordot(B, 1 - 1).numpy(), np.tensordot(a, b, 0), tol)
    c = random_array(rng, (4, 2, 3), np.float64)
    _close(cltensor.tensordot(A, T(c, device), ([0, 2], [1, 0])).numpy(),
           np.tensordot(a, c, ([0, 2], [1, 0])), tol)
    _close(cltensor.tensordot(A, T(c, device), ([-1], [0])).numpy(),
           np.tensordot(a, c, ([2], [0])), tol)
    d = random_array(rng, (5, 4), np.float64)
    _close(cltensor.inner(A, T(d, device)).numpy(), np.inner(a, d), tol)
    _close(cltensor.inner(A, T(np.array(2.5), device)).numpy(), a * 2.5, tol)
    u, v = random_array(rng, (6,), np.float64), random_array(rng, (6,), np.float64)
    _close(cltensor.vdot(T(u, device), T(v, device)).numpy(), np.vdot(u, v), tol)
    for sa, sb in [((2, 3), (4, 5)), ((3,), (2, 2)), ((2, 1, 3), (3, 2))]:
        x, y = random_array(rng, sa, np.float64), random_array(rng, sb, np.float64)
        got = T(x, device).kron(T(y, device))
        _close(got.numpy(), np.kron(x, y), tol, f"kron {sa} {sb}")
    with pytest.raises(ValueError, match="sizes 4 and 3"):
        cltensor.tensordot(A, B, ([2], [0]))
    with pytest.raises(ValueError, match="dims must be in"):
        cltensor.tensordot(A, B, 4)
    with pytest.raises(ValueError, match="same length"):
        cltensor.tensordot(A, B, ([0, 1], [0]))
    with pytest.raises(ValueError, match="last dims"):
        cltensor.inner(A, B)
    with pytest.raises(ValueError, match="1-d"):
        cltensor.vdot(A, B)


def test_cross(device, rng):
    tol = _tol(device)
    a, b = random_array(rng, (4, 3), np.float64), random_array(rng, (2, 1, 3), np.float64)
    got = cltensor.cross(T(a, device), T(b, device), dim=-1)
    _close(got.numpy(), np.cross(a, b), tol)
    c, d = random_array(rng, (3, 5), np.float64), random_array(rng, (3, 5), np.float64)
    with pytest.warns(UserWarning, match="first dim of size 3"):
        got = T(c, device).cross(T(d, device))
    _close(got.numpy(), np.cross(c, d, axis=0), tol)
    with pytest.raises(ValueError, match="does not have size 3"):
        cltensor.cross(T(c, device), T(d, device), dim=1)
    if device.has_fp64:
        x, y = T(a, device, grad=True), T(random_array(rng, (4, 3), np.float64), device, grad=True)
        assert gradcheck(lambda p, q: cltensor.cross(p, q, dim=1), [x, y])


def test_addmv_addr_addbmm(device, rng):
    tol = _tol(device)
    m, v = random_array(rng, (3, 4), np.float64), random_array(rng, (4,), np.float64)
    inp = random_array(rng, (3,), np.float64)
    got = cltensor.addmv(T(inp, device), T(m, device), T(v, device), beta=0.5, alpha=2)
    _close(got.numpy(), 0.5 * inp + 2 * (m @ v), tol)
    nan_in = np.full((3,), np.nan)  # beta 0: input ignored, its NaN not propagated
    got = T(nan_in, device).addmv(T(m, device), T(v, device), beta=0)
    _close(got.numpy(), m @ v, tol)
    u, w = random_array(rng, (3,), np.float64), random_array(rng, (5,), np.float64)
    base = random_array(rng, (1, 5), np.float64)  # broadcast over rows
    got = cltensor.addr(T(base, device), T(u, device), T(w, device), alpha=-1)
    _close(got.numpy(), base - np.outer(u, w), tol)
    b1, b2 = random_array(rng, (4, 2, 3), np.float64), random_array(rng, (4, 3, 5), np.float64)
    inp = random_array(rng, (2, 5), np.float64)
    got = T(inp, device).addbmm(T(b1, device), T(b2, device), beta=2, alpha=0.5)
    _close(got.numpy(), 2 * inp + 0.5 * np.einsum("bij,bjk->ik", b1, b2), tol)
    with pytest.raises(ValueError, match="does not broadcast"):
        cltensor.addmv(T(np.ones(5), device), T(m, device), T(v, device))
    with pytest.raises(ValueError, match="same number of matrices"):
        cltensor.addbmm(T(inp, device), T(b1, device), T(b2[:2], device))
    with pytest.raises(TypeError, match="beta must be a number"):
        cltensor.addr(T(base, device), T(u, device), T(w, device), beta="1")
    if device.has_fp64:
        ts = [T(random_array(rng, s, np.float64), device, grad=True) for s in [(2, 5), (4, 2, 3), (4, 3, 5)]]
        assert gradcheck(lambda i, x, y: cltensor.addbmm(i, x, y, beta=0.5, alpha=3), ts)


def test_matrix_power_and_chain_matmul(device, rng):
    tol = _tol(device)
    a = random_array(rng, (2, 3, 3), np.float64) / 2
    A = T(a, device)
    for n in (0, 1, 2, 5, 6):
        got = cltensor.matrix_power(A, n)
        _close(got.numpy(), np.linalg.matrix_power(a, n), tol, f"n={n}")
    well = a + 2 * np.eye(3)  # negative powers: of the inverse (cltensor.linalg.inv)
    for n in (-1, -2, -3):
        got = T(well, device).matrix_power(n)
        _close(got.numpy(), np.linalg.matrix_power(well, n), tol, f"n={n}")
    with pytest.raises(cltensor.linalg.LinAlgError, match="singular"):
        cltensor.matrix_power(T(np.ones((3, 3)), device), -1)
    with pytest.raises(ValueError, match="square"):
        cltensor.matrix_power(T(np.ones((2, 3)), device), 2)
    ms = [random_array(rng, s, np.float64) for s in [(2, 3), (3, 4), (4, 2)]]
    got = cltensor.chain_matmul(*[T(x, device) for x in ms])
    _close(got.numpy(), ms[0] @ ms[1] @ ms[2], tol)
    with pytest.raises(ValueError, match="2-d"):
        cltensor.chain_matmul(A, A)
    if device.has_fp64:
        assert gradcheck(lambda x: cltensor.matrix_power(x, 3), [T(a, device, grad=True)])
        assert gradcheck(lambda x: cltensor.matrix_power(x, -2), [T(well, device, grad=True)])


def _np_cdist(x1, x2, p):
    d = np.abs(x1[..., :, None, :] - x2[..., None, :, :])
    if p == 0:
        return (d != 0).sum(-1).astype(np.float64)
    if np.isinf(p):
        return d.max(-1)
    return (d ** p).sum(-1) ** (1 / p)


def test_dist_cdist_renorm(device, rng):
    tol = _tol(device)
    x1, x2 = random_array(rng, (2, 4, 3), np.float64), random_array(rng, (2, 5, 3), np.float64)
    x2[0, 1] = x1[0, 2]  # one distance of exactly 0 (and p = 0's count of 0)
    X1, X2 = T(x1, device), T(x2, device)
    for p in (0, 1, 2, 3, float("inf")):
        got = cltensor.cdist(X1, X2, p)
        _close(got.numpy(), _np_cdist(x1, x2, p), tol, f"p={p}")
    mm = cltensor.cdist(X1, X2, compute_mode="use_mm_for_euclid_dist")
    assert_close(mm.numpy(), _np_cdist(x1, x2, 2), rtol=1e-5, atol=1e-5)
    for p in (1, 2, float("inf")):
        got = cltensor.dist(X1[0], X2[0, :1], p)
        want = np.linalg.norm((x1[0] - x2[0, :1]).ravel(), p)
        _close(got.numpy(), want, tol, f"dist p={p}")
    r = random_array(rng, (3, 4, 2), np.float64) * 3
    for p, dim in ((2, 1), (1, 0), (3, -1)):
        others = tuple(d for d in range(3) if d != dim % 3)
        norms = (np.abs(r) ** p).sum(others, keepdims=True) ** (1 / p)
        maxnorm = float(np.median(norms))
        want = r * np.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
        assert (norms > maxnorm).any() and (norms <= maxnorm).any(), "both kinds of slices"
        _close(T(r, device).renorm(p, dim, maxnorm).numpy(), want, tol)
    with pytest.raises(ValueError, match="same M"):
        cltensor.cdist(X1, T(np.ones((5, 2)), device))
    with pytest.raises(ValueError, match="non-negative"):
        cltensor.cdist(X1, X2, -1)
    with pytest.raises(ValueError, match="compute_mode"):
        cltensor.cdist(X1, X2, compute_mode="fast")
    if device.has_fp64:
        ts = [T(random_array(rng, s, np.float64), device, grad=True) for s in [(3, 2), (4, 2)]]
        assert gradcheck(lambda a, b: cltensor.cdist(a, b, 3), ts)
        assert gradcheck(lambda a: a.renorm(2, 0, 1.0), [T(r[:2, :2], device, grad=True)])


def test_against_torch(device, rng):
    torch = pytest.importorskip("torch")
    tol = _tol(device)
    a, b = random_array(rng, (3, 4), np.float64), random_array(rng, (4, 3), np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [("kron", (a, b), {}), ("tensordot", (a, b), {"dims": 1}),
                 ("cdist", (a, b.T.copy()), {"p": 1.5}), ("renorm", (a,), {"p": 2, "dim": 0,
                                                                          "maxnorm": 1.0}),
                 ("cross", (a[:, :3], b[:3]), {"dim": 1})]
        for name, args, kwargs in cases:
            ours = [T(x, device, grad=True) for x in args]
            theirs = [torch.tensor(x, requires_grad=True) for x in args]
            out = getattr(cltensor, name)(*ours, **kwargs)
            ref = getattr(torch, name)(*theirs, **kwargs)
            g = random_array(rng, tuple(ref.shape), np.float64)
            out.backward(T(g, device))
            ref.backward(torch.tensor(g))
            _close(out.numpy(), ref.detach().numpy(), tol, name)
            for o, t in zip(ours, theirs):
                _close(o.grad.numpy(), t.grad.numpy(), tol, f"{name} grad")
