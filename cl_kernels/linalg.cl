/*
 * linalg.cl: factorizations and solves of batches of dense matrices, for cltensor.linalg
 * (cltensor/ops/linalg.py): LU with partial pivoting, its solves and determinants, Cholesky
 * and its solves, triangular solves.
 *
 * Layout: every matrix is row-major and contiguous, the matrices of a batch one after another
 * from the buffer's start (an m x n matrix is m rows of n elements). A right-hand side B is
 * n x nrhs, solved in place (overwritten by the solution X). A read-only factor is found
 * `step` elements after the previous matrix's: step 0 makes one factor serve the whole batch
 * (broadcasting); the solves take (n, nrhs, B, factor, step, ...). A triangular operand is
 * read through strides, T[i][j] = t[i * rs + j * cs], so that swapped strides read its
 * transpose.
 *
 * Work decomposition: one work-group of LA_GROUP work-items per matrix; the batch is the
 * NDRange's dim 1 (get_global_id(1) is the matrix). Columns (or rows, for substitution) are
 * taken in order, one step each, with barriers between the steps; the work within a step is
 * spread over the group, in loops that cover any n (n > LA_GROUP included). No blocking: a
 * matrix costs O(n^3 / LA_GROUP) operations and O(n) barriers, meant for n up to a few hundred.
 *
 * lu_factor       A (m x n) := L (unit lower, below the diagonal) and U (upper) with
 *                 P A = L U, as LAPACK's getrf: at step k the row i >= k of the largest
 *                 |a[i][k]| (the first such; NaN counts as the largest) is swapped into row k
 *                 and piv[k] = that row + 1 (1-based, as LAPACK and torch). info = the first
 *                 k (1-based) with U[k][k] == 0, else 0; the factorization goes on past a zero
 *                 pivot (its column left unscaled).
 * lu_solve        B := A^-1 B (adjoint 0) or A^-T B (adjoint 1), from lu_factor's LU and piv.
 * lu_det          det, sign and log|det| of each matrix from its LU and piv: a reduction over
 *                 the diagonal (sign 0 and log|det| -inf when a pivot is 0).
 * cholesky        A (n x n, symmetric positive-definite; only its lower triangle is read) :=
 *                 L, lower, with A = L L^T and zeros above the diagonal. info = the first k
 *                 (1-based) whose leading minor is not positive-definite (the step's pivot is
 *                 <= 0 or NaN), else 0; the factorization stops there.
 * cholesky_solve  B := (L L^T)^-1 B, L lower read through (rs, cs).
 * tri_solve       B := T^-1 B, T lower (upper 0) or upper, its diagonal taken as ones when unit.
 * qr              A (m x n) := R (zeros below the diagonal) by Householder reflections as
 *                 LAPACK's geqrf (dlarfg's reflector: R[k][k] = -sign(a[k][k]) times the
 *                 column's norm, none when the column is zero below the diagonal, so R's
 *                 diagonal keeps LAPACK's signs), tau (min(m, n)) the reflectors' scales, and
 *                 q (m x qc) := the first qc columns of Q = H_0 ... H_{k-1}, as orgqr.
 * geqrf           qr's first part alone, as LAPACK's geqrf: A := R on and above the diagonal,
 *                 reflector k's v below it (v[k] = 1 implied), tau (min(m, n)).
 * orgqr           q (m x n) := the first n columns of H_0 ... H_{k-1} (k <= n), the
 *                 reflectors read from below A's diagonal and tau (k), as LAPACK's orgqr.
 * eigh            A (n x n, symmetric from its lower (upper 0) triangle) := scratch; w (n) :=
 *                 its eigenvalues ascending and (vectors 1) vo (n x n) := the eigenvectors as
 *                 columns, each with its largest-magnitude entry (the first such) positive.
 *                 Cyclic two-sided Jacobi in parallel rounds: the n (rounded up to even)
 *                 indices are paired round-robin, n/2 disjoint rotations per round, n - 1
 *                 rounds per sweep; rot holds each round's (c, s) and new diagonal per pair,
 *                 vt (n x n) the rotations' product transposed.
 * svd             W (r x c, r <= c) := scratch: one-sided (Hestenes) Jacobi rotates pairs of
 *                 W's rows, in the same parallel rounds, until they are orthogonal: W = J S
 *                 Uhat^T. s (r) := the singular values (row norms) descending; (vectors 1)
 *                 wo (r x c) := Uhat^T's rows (zero for a zero singular value) and jo (r x r)
 *                 := J's columns as rows, in that order; jt (r x r) accumulates J^T. The row
 *                 of wo (u_rows 1) or of jo (u_rows 0) that is a column of U gets its
 *                 largest-magnitude entry positive, its partner the same sign.
 *                 The sweeps of eigh and svd stop after one that rotates nothing (an
 *                 off-diagonal entry or dot product within LA_EPS of its diagonal's or norms'
 *                 scale); info := 1 when LA_SWEEPS sweeps did not get there or the input is not
 *                 finite, else 0. nrm (r) is scratch.
 *
 * Tunables: T (float or double), LA_GROUP (work-items per group: a power of two; also the
 * length of the local reduction arrays), LA_SWEEPS (the most Jacobi sweeps).
 */
#ifndef T
#define T float
#endif
#ifndef LA_GROUP
#define LA_GROUP 64
#endif

#ifndef LA_SWEEPS
#define LA_SWEEPS 40
#endif

#define ONE_GROUP __attribute__((reqd_work_group_size(LA_GROUP, 1, 1)))
// T's machine epsilon (powers of two, exact as float literals)
#define LA_EPS (sizeof(T) == 8 ? 0x1p-52f : 0x1p-23f)

// |x| at row i beats |y| at row j as a pivot: larger, NaN the largest, ties to the first row
inline bool beats(const T x, const long i, const T y, const long j) {
  const T ax = fabs(x), ay = fabs(y);
  if (isnan(ax) || isnan(ay)) return isnan(ax) && (!isnan(ay) || i < j);
  return ax > ay || (ax == ay && i < j);
}

// The pivot row of column k (rows k..m-1 of a, m x n), its value in *pivot: the group's
// argmax of |a[i][k]| by a local reduction. Called by the whole group.
inline long pivot_row(const long m, const long n, const long k, __global const T* a,
                      __local T* val, __local long* at, T* pivot) {
  const long lid = get_local_id(0);
  T v = 0;
  long p = m;  // no row yet: every row beats it
  for (long i = k + lid; i < m; i += LA_GROUP) {
    const T x = a[i * n + k];
    if (beats(x, i, v, p)) {
      v = x;
      p = i;
    }
  }
  val[lid] = v;
  at[lid] = p;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = LA_GROUP / 2; s > 0; s >>= 1) {
    if (lid < s && beats(val[lid + s], at[lid + s], val[lid], at[lid])) {
      val[lid] = val[lid + s];
      at[lid] = at[lid + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const long row = at[0];
  *pivot = val[0];
  // all have read the column and the result before the row swap and the next search write
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  return row;
}

__kernel ONE_GROUP void lu_factor(const long m, const long n, __global T* a,
                                  __global long* piv, __global int* info) {
  __local T val[LA_GROUP];
  __local long at[LA_GROUP];
  const long lid = get_local_id(0), mat = get_global_id(1), kn = min(m, n);
  a += mat * m * n;
  piv += mat * kn;
  int first_zero = 0;
  for (long k = 0; k < kn; ++k) {
    T pv;
    const long p = pivot_row(m, n, k, a, val, at, &pv);
    if (p != k) {
      for (long j = lid; j < n; j += LA_GROUP) {
        const T t = a[k * n + j];
        a[k * n + j] = a[p * n + j];
        a[p * n + j] = t;
      }
    }
    if (lid == 0) piv[k] = p + 1;
    if (pv == 0 && first_zero == 0) first_zero = k + 1;
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (pv != 0) {
      for (long i = k + 1 + lid; i < m; i += LA_GROUP) a[i * n + k] /= pv;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    // the trailing (m - k - 1) x w block minus column k's multipliers times row k
    const long w = n - k - 1;
    for (long e = lid; e < (m - k - 1) * w; e += LA_GROUP) {
      const long i = k + 1 + e / w, j = k + 1 + e % w;
      a[i * n + j] -= a[i * n + k] * a[k * n + j];
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
  }
  if (lid == 0) info[mat] = first_zero;
}

// The row swaps of piv applied to B (n x nrhs), in order (backward: in reverse order, which
// undoes them); each work-item takes whole columns, so no barrier is needed. Swaps naming a
// row outside 1..n are skipped.
inline void swap_rows(const long n, const long nrhs, __global const long* piv, __global T* b,
                      const int backward) {
  for (long c = get_local_id(0); c < nrhs; c += LA_GROUP) {
    for (long s = 0; s < n; ++s) {
      const long k = backward ? n - 1 - s : s, p = piv[k] - 1;
      if (p != k && p >= 0 && p < n) {
        const T t = b[k * nrhs + c];
        b[k * nrhs + c] = b[p * nrhs + c];
        b[p * nrhs + c] = t;
      }
    }
  }
}

// B (n x nrhs) := T^-1 B by substitution, T[i][j] = t[i * rs + j * cs] lower (upper 0) or
// upper, unit: its diagonal taken as ones. Each step updates the rows after the finished row k
// (before it, upper) and divides the next row to finish by its diagonal. Called by the group.
inline void tri_solve_group(const long n, const long nrhs, __global const T* t, const long rs,
                            const long cs, const int upper, const int unit, __global T* b) {
  const long lid = get_local_id(0);
  const long first = upper ? n - 1 : 0, dir = upper ? -1 : 1;
  if (n > 0) {
    const T d = unit ? (T)1 : t[first * (rs + cs)];
    for (long c = lid; c < nrhs; c += LA_GROUP) b[first * nrhs + c] /= d;
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  for (long s = 0; s < n - 1; ++s) {
    const long k = first + dir * s, next = k + dir;
    const long lo = upper ? 0 : k + 1, rows = upper ? k : n - 1 - k;
    const T d = unit ? (T)1 : t[next * (rs + cs)];
    for (long e = lid; e < rows * nrhs; e += LA_GROUP) {
      const long i = lo + e / nrhs, c = e % nrhs;
      const T v = b[i * nrhs + c] - t[i * rs + k * cs] * b[k * nrhs + c];
      b[i * nrhs + c] = i == next ? v / d : v;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
  }
}

__kernel ONE_GROUP void lu_solve(const long n, const long nrhs, __global T* b,
                                 __global const T* lu, const long step,
                                 __global const long* piv, const int adjoint) {
  const long mat = get_global_id(1);
  lu += mat * step;
  piv += step ? mat * n : 0;
  b += mat * n * nrhs;
  // A = P^T L U: solve L U X = P B; adjoint: U^T L^T (P X) = B, then undo the swaps
  const long rs = adjoint ? 1 : n, cs = adjoint ? n : 1;
  if (!adjoint) swap_rows(n, nrhs, piv, b, 0);
  barrier(CLK_GLOBAL_MEM_FENCE);
  tri_solve_group(n, nrhs, lu, rs, cs, 0, !adjoint, b);
  tri_solve_group(n, nrhs, lu, rs, cs, 1, adjoint, b);
  if (adjoint) swap_rows(n, nrhs, piv, b, 1);
}

__kernel ONE_GROUP void lu_det(const long n, __global const T* lu, __global const long* piv,
                               __global T* det, __global T* sign, __global T* logabs) {
  __local T prod[LA_GROUP];
  __local T logs[LA_GROUP];
  // bit 0: an odd count of negative pivots; bit 1: of row swaps; bit 2: a zero pivot
  __local int flags[LA_GROUP];
  const long lid = get_local_id(0), mat = get_global_id(1);
  lu += mat * n * n;
  piv += mat * n;
  T p = 1, l = 0;
  int f = 0;
  for (long i = lid; i < n; i += LA_GROUP) {
    const T d = lu[i * n + i];
    p *= d;
    l += log(fabs(d));
    f ^= (d < 0) | (piv[i] != i + 1) << 1;
    f |= (d == 0) << 2;
  }
  prod[lid] = p;
  logs[lid] = l;
  flags[lid] = f;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = LA_GROUP / 2; s > 0; s >>= 1) {
    if (lid < s) {
      prod[lid] *= prod[lid + s];
      logs[lid] += logs[lid + s];
      flags[lid] = ((flags[lid] ^ flags[lid + s]) & 3) | ((flags[lid] | flags[lid + s]) & 4);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    const T la = logs[0];
    const int fl = flags[0];
    // det: the diagonal's product (with its own sign) times the permutation's sign
    det[mat] = fl & 2 ? -prod[0] : prod[0];
    sign[mat] = isnan(la) ? la : fl & 4 ? (T)0 : ((fl ^ fl >> 1) & 1) ? (T)-1 : (T)1;
    logabs[mat] = la;
  }
}

__kernel ONE_GROUP void cholesky(const long n, __global T* a, __global int* info) {
  const long lid = get_local_id(0), mat = get_global_id(1);
  a += mat * n * n;
  int bad = 0;
  for (long k = 0; k < n; ++k) {
    const T d = a[k * n + k];
    if (!(d > 0) && !bad) bad = k + 1;
    const long live = !bad;  // after a failed step the loops below run no work
    const T l = sqrt(d);
    for (long i = k + 1 + lid; i < n * live; i += LA_GROUP) a[i * n + k] /= l;
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (lid == 0 && live) a[k * n + k] = l;  // nobody reads a[k][k] in this phase
    const long w = n - k - 1;
    for (long e = lid; e < w * w * live; e += LA_GROUP) {
      const long i = k + 1 + e / w, j = k + 1 + e % w;
      if (j <= i) a[i * n + j] -= a[i * n + k] * a[j * n + k];
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
  }
  for (long e = lid; e < n * n; e += LA_GROUP) {
    if (e % n > e / n) a[e] = 0;
  }
  if (lid == 0) info[mat] = bad;
}

__kernel ONE_GROUP void cholesky_solve(const long n, const long nrhs, __global T* b,
                                       __global const T* l, const long step, const long rs,
                                       const long cs) {
  const long mat = get_global_id(1);
  l += mat * step;
  b += mat * n * nrhs;
  tri_solve_group(n, nrhs, l, rs, cs, 0, 0, b);  // L Y = B
  tri_solve_group(n, nrhs, l, cs, rs, 1, 0, b);  // L^T X = Y
}

__kernel ONE_GROUP void tri_solve(const long n, const long nrhs, __global T* b,
                                  __global const T* t, const long step, const long rs,
                                  const long cs, const int upper, const int unit) {
  const long mat = get_global_id(1);
  tri_solve_group(n, nrhs, t + mat * step, rs, cs, upper, unit, b + mat * n * nrhs);
}

// ---- QR, eigh, svd ------------------------------------------------------------------------------

// The group's sum of v (is_max 0), or its largest v with NaN the largest (is_max 1), for all
// work-items. Called by the whole group.
inline T group_reduce(T v, __local T* red, const int is_max) {
  const int lid = get_local_id(0);
  red[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = LA_GROUP / 2; s > 0; s >>= 1) {
    if (lid < s) {
      const T x = red[lid], y = red[lid + s];
      red[lid] = !is_max ? x + y : (isnan(y) || y > x) ? y : x;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const T out = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);  // all have read red[0] before the next reduction writes it
  return out;
}

// geqrf on a (m x n): R on and above the diagonal, reflector k's v below it (its leading 1
// implied), tau (min(m, n)); a column of the trailing matrix per work-item. Called by the group.
inline void householder(const long m, const long n, __global T* a, __global T* tau,
                        __local T* red) {
  const long lid = get_local_id(0), kn = min(m, n);
  for (long k = 0; k < kn; ++k) {
    T ss = 0;
    for (long i = k + 1 + lid; i < m; i += LA_GROUP) ss += a[i * n + k] * a[i * n + k];
    const T xnorm = sqrt(group_reduce(ss, red, 0)), alpha = a[k * n + k];
    T beta = alpha, t = 0;
    if (xnorm != 0) {  // dlarfg: H (alpha, x)^T = (beta, 0)^T, v = (1, x / (alpha - beta))
      beta = signbit(alpha) ? hypot(alpha, xnorm) : -hypot(alpha, xnorm);
      t = (beta - alpha) / beta;
      const T scale = 1 / (alpha - beta);
      for (long i = k + 1 + lid; i < m; i += LA_GROUP) a[i * n + k] *= scale;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);  // v is whole, and all have read alpha
    if (lid == 0) {
      a[k * n + k] = beta;
      tau[k] = t;
    }
    // the columns after k := H those columns, H = I - t v v^T
    for (long j = k + 1 + lid; j < n; j += LA_GROUP) {
      T w = a[k * n + j];
      for (long i = k + 1; i < m; ++i) w += a[i * n + k] * a[i * n + j];
      w *= t;
      a[k * n + j] -= w;
      for (long i = k + 1; i < m; ++i) a[i * n + j] -= a[i * n + k] * w;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
  }
}

// orgqr: q (m x qc) := the first qc columns of H_0 ... H_{kn-1}, reflector k's v below the
// diagonal of a (m x n) and its scale tau[k]; a column of q per work-item
inline void form_q(const long m, const long n, const long kn, __global const T* a,
                   __global const T* tau, __global T* q, const long qc) {
  // Q's column j: H_0 ... H_{kn-1} e_j, backward (H_k for k > j leaves e_j as it is)
  for (long j = get_local_id(0); j < qc; j += LA_GROUP) {
    for (long i = 0; i < m; ++i) q[i * qc + j] = i == j;
    for (long k = min(j, kn - 1); k >= 0; --k) {
      T w = q[k * qc + j];
      for (long i = k + 1; i < m; ++i) w += a[i * n + k] * q[i * qc + j];
      w *= tau[k];
      q[k * qc + j] -= w;
      for (long i = k + 1; i < m; ++i) q[i * qc + j] -= a[i * n + k] * w;
    }
  }
}

// Householder QR: R and the first qc columns of Q
__kernel ONE_GROUP void qr(const long m, const long n, __global T* a, __global T* tau,
                           __global T* q, const long qc) {
  __local T red[LA_GROUP];
  const long mat = get_global_id(1), kn = min(m, n);
  a += mat * m * n;
  tau += mat * kn;
  q += mat * m * qc;
  householder(m, n, a, tau, red);
  form_q(m, n, kn, a, tau, q, qc);
  barrier(CLK_GLOBAL_MEM_FENCE);  // Q is built: the reflectors below the diagonal may go
  for (long e = get_local_id(0); e < m * n; e += LA_GROUP) {
    if (e / n > e % n) a[e] = 0;
  }
}

// LAPACK's geqrf: R and the reflectors in a, their scales in tau
__kernel ONE_GROUP void geqrf(const long m, const long n, __global T* a, __global T* tau) {
  __local T red[LA_GROUP];
  const long mat = get_global_id(1);
  householder(m, n, a + mat * m * n, tau + mat * min(m, n), red);
}

// LAPACK's orgqr (torch's householder_product): q (m x n) := the first n columns of
// H_0 ... H_{k-1} from the reflectors below a's diagonal (m x n) and tau (k)
__kernel ONE_GROUP void orgqr(const long m, const long n, const long k, __global const T* a,
                              __global const T* tau, __global T* q) {
  const long mat = get_global_id(1);
  form_q(m, n, k, a + mat * m * n, tau + mat * k, q + mat * m * n, n);
}

// Pair i (< N / 2) of round r (< N - 1) of a round-robin over N (even) indices, as p < q:
// over the N - 1 rounds every pair meets once, and the pairs of a round are disjoint
inline void pair_of(const long N, const long r, const long i, long* p, long* q) {
  const long x = i == 0 ? r : (r + i) % (N - 1), y = i == 0 ? N - 1 : (r - i + N - 1) % (N - 1);
  *p = min(x, y);
  *q = max(x, y);
}

// tan of the Jacobi rotation angle for zeta = cot(2 angle), the smaller root (|t| <= 1)
inline T jacobi_tan(const T zeta) {
  return (zeta >= 0 ? (T)1 : (T)-1) / (fabs(zeta) + hypot((T)1, zeta));
}

// Row i of x (n wide) times the sign that makes its largest-magnitude entry positive
inline T sign_of_largest(const long n, __global const T* x) {
  long big = 0;
  for (long k = 1; k < n; ++k) {
    if (fabs(x[k]) > fabs(x[big])) big = k;
  }
  return x[big] < 0 ? (T)-1 : (T)1;
}

// Rows p and q of x (len wide) := c row p - s row q, s row p + c row q
inline void rotate_rows(const long len, __global T* x, const long p, const long q, const T c,
                        const T s) {
  for (long k = 0; k < len; ++k) {
    const T xp = x[p * len + k], xq = x[q * len + k];
    x[p * len + k] = c * xp - s * xq;
    x[q * len + k] = s * xp + c * xq;
  }
}

// The ends of a Jacobi sweep: *sweep counts it, *flag (set by a rotation) is read and cleared;
// 0 to stop: converged, or *bad := 1 when LA_SWEEPS are done. Called by the whole group.
inline int next_sweep(int* sweep, volatile __local int* flag, int* bad) {
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  const int rotated = *flag;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (get_local_id(0) == 0) *flag = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (rotated && ++*sweep > LA_SWEEPS) *bad = 1;
  return rotated && !*bad;
}

__kernel ONE_GROUP void eigh(const long n, __global T* a, __global T* vt, __global T* rot,
                             __global T* w, __global T* vo, __global int* info, const int upper,
                             const int vectors) {
  __local T red[LA_GROUP];
  __local int flag;
  const long lid = get_local_id(0), mat = get_global_id(1), N = n + (n & 1), pairs = N / 2;
  a += mat * n * n;
  vt += mat * n * n * vectors;
  vo += mat * n * n * vectors;
  rot += mat * 4 * pairs;
  w += mat * n;
  T big = 0;
  for (long e = lid; e < n * n; e += LA_GROUP) {  // A symmetric from the one triangle; V = I
    const long i = e / n, j = e % n, from = (upper ? i > j : i < j) ? j * n + i : e;
    const T x = a[from];  // NOTE: the triangle read is never written here
    if (from != e) a[e] = x;
    if (vectors) vt[e] = i == j;
    big = isnan(x) || fabs(x) > big ? fabs(x) : big;
  }
  if (lid == 0) flag = 1;
  // off-diagonal entries below floor, or small beside their diagonal, are taken as zero
  const T floor = LA_EPS * group_reduce(big, red, 1);
  int bad = !isfinite(floor), sweep = 0;
  while (next_sweep(&sweep, &flag, &bad)) {
    for (long r = 0; r < N - 1; ++r) {
      for (long i = lid; i < pairs; i += LA_GROUP) {  // each pair's rotation, from A as it is
        long p, q;
        pair_of(N, r, i, &p, &q);
        if (q >= n) continue;
        const T apq = a[p * n + q], app = a[p * n + p], aqq = a[q * n + q];
        T c = 1, s = 0, t = 0;
        if (fabs(apq) > floor && fabs(apq) > LA_EPS * sqrt(fabs(app)) * sqrt(fabs(aqq))) {
          t = jacobi_tan((aqq - app) / (2 * apq));
          c = 1 / sqrt(1 + t * t);
          s = t * c;
          atomic_or(&flag, 1);
        }
        __global T* out = rot + 4 * i;
        out[0] = c;
        out[1] = s;
        out[2] = app - t * apq;
        out[3] = aqq + t * apq;
      }
      barrier(CLK_GLOBAL_MEM_FENCE);
      for (long e = lid; e < n * pairs; e += LA_GROUP) {  // A J: columns p and q of row k
        const long k = e / pairs, i = e % pairs;
        long p, q;
        pair_of(N, r, i, &p, &q);
        if (q >= n) continue;
        const T c = rot[4 * i], s = rot[4 * i + 1], x = a[k * n + p], y = a[k * n + q];
        a[k * n + p] = c * x - s * y;
        a[k * n + q] = s * x + c * y;
      }
      barrier(CLK_GLOBAL_MEM_FENCE);
      for (long e = lid; e < n * pairs; e += LA_GROUP) {  // J^T (A J) and V J: rows p and q
        const long k = e % n, i = e / n;
        long p, q;
        pair_of(N, r, i, &p, &q);
        if (q >= n) continue;
        __global const T* cs = rot + 4 * i;
        const T c = cs[0], s = cs[1], x = a[p * n + k], y = a[q * n + k];
        // NOTE: the pair's 2 x 2 block exactly: its new diagonal, zeros off it
        a[p * n + k] = k == p ? cs[2] : k == q ? 0 : c * x - s * y;
        a[q * n + k] = k == q ? cs[3] : k == p ? 0 : s * x + c * y;
        if (vectors) {
          const T vp = vt[p * n + k], vq = vt[q * n + k];
          vt[p * n + k] = c * vp - s * vq;
          vt[q * n + k] = s * vp + c * vq;
        }
      }
      barrier(CLK_GLOBAL_MEM_FENCE);
    }
  }
  for (long i = lid; i < n; i += LA_GROUP) {  // ascending: each eigenvalue's rank, ties by index
    const T d = a[i * n + i];
    long rank = 0;
    for (long j = 0; j < n; ++j) rank += a[j * n + j] < d || (a[j * n + j] == d && j < i);
    w[rank] = d;
    if (vectors) {
      const T sg = sign_of_largest(n, vt + i * n);
      for (long k = 0; k < n; ++k) vo[k * n + rank] = sg * vt[i * n + k];
    }
  }
  if (lid == 0) info[mat] = bad;
}

__kernel ONE_GROUP void svd(const long r, const long c, __global T* w, __global T* jt,
                            __global T* nrm, __global T* s, __global T* wo, __global T* jo,
                            __global int* info, const int vectors, const int u_rows) {
  __local T red[LA_GROUP];
  __local int flag;
  const long lid = get_local_id(0), mat = get_global_id(1), N = r + (r & 1), pairs = N / 2;
  w += mat * r * c;
  nrm += mat * r;
  s += mat * r;
  jt += mat * r * r * vectors;
  jo += mat * r * r * vectors;
  wo += mat * r * c * vectors;
  T big = 0;
  for (long e = lid; e < r * c; e += LA_GROUP) {
    const T x = fabs(w[e]);
    big = isnan(x) || x > big ? x : big;
  }
  for (long e = lid; e < r * r * vectors; e += LA_GROUP) jt[e] = e / r == e % r;
  if (lid == 0) flag = 1;
  const T tol = LA_EPS * sqrt((T)c);  // dot products below tol times the norms are zeros
  int bad = !isfinite(group_reduce(big, red, 1)), sweep = 0;
  while (next_sweep(&sweep, &flag, &bad)) {
    for (long rd = 0; rd < N - 1; ++rd) {
      for (long i = lid; i < pairs; i += LA_GROUP) {  // a pair of rows per work-item
        long p, q;
        pair_of(N, rd, i, &p, &q);
        if (q >= r) continue;
        T alpha = 0, beta = 0, gamma = 0;
        for (long k = 0; k < c; ++k) {
          const T x = w[p * c + k], y = w[q * c + k];
          alpha += x * x;
          beta += y * y;
          gamma += x * y;
        }
        if (fabs(gamma) > tol * sqrt(alpha) * sqrt(beta)) {
          const T t = jacobi_tan((beta - alpha) / (2 * gamma)), cs = 1 / sqrt(1 + t * t);
          rotate_rows(c, w, p, q, cs, t * cs);
          if (vectors) rotate_rows(r, jt, p, q, cs, t * cs);
          atomic_or(&flag, 1);
        }
      }
      barrier(CLK_GLOBAL_MEM_FENCE);
    }
  }
  for (long i = lid; i < r; i += LA_GROUP) {
    T ss = 0;
    for (long k = 0; k < c; ++k) ss += w[i * c + k] * w[i * c + k];
    nrm[i] = sqrt(ss);
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  for (long i = lid; i < r; i += LA_GROUP) {  // descending: each value's rank, ties by index
    const T d = nrm[i];
    long rank = 0;
    for (long j = 0; j < r; ++j) rank += nrm[j] > d || (nrm[j] == d && j < i);
    s[rank] = d;
    if (vectors) {
      const T sg = u_rows ? sign_of_largest(c, w + i * c) : sign_of_largest(r, jt + i * r);
      const T scale = d > 0 ? sg / d : 0;
      for (long k = 0; k < c; ++k) wo[rank * c + k] = scale * w[i * c + k];
      for (long k = 0; k < r; ++k) jo[rank * r + k] = sg * jt[i * r + k];
    }
  }
  if (lid == 0) info[mat] = bad;
}
