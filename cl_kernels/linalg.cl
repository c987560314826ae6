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
 *
 * Tunables: T (float or double), LA_GROUP (work-items per group: a power of two; also the
 * length of the local reduction arrays).
 */
#ifndef T
#define T float
#endif
#ifndef LA_GROUP
#define LA_GROUP 64
#endif

#define ONE_GROUP __attribute__((reqd_work_group_size(LA_GROUP, 1, 1)))

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
