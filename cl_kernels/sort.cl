/*
 * sort.cl: rows sorted together with their original indices by a bitonic network (Batcher's),
 * for sort, argsort and topk (cltensor/ops/sort.py).
 *
 * src holds `rows` contiguous rows of n elements of T. The network runs over P positions per
 * row, P the power of two at least n; positions from n on are pads, which order after every
 * element. Order: ascending (DESCENDING 1: descending); NaN counts as larger than any number
 * (last ascending, first descending, as torch); equal values keep their original order (ties
 * go by index), so the sort is stable whichever flag the caller passed.
 *
 * sort_rows_local: one work-group per row runs the whole network in local memory (P values
 *   and P indices) and writes the row's first n to out_vals / out_idx (rows x n, contiguous).
 * sort_init, sort_stage, sort_final: the network in global memory, for rows too long for
 *   local memory: sort_init copies the rows into (rows x P) scratch with their indices,
 *   sort_stage runs one (k, j) stage (one work-item per compared pair), sort_final copies each
 *   row's first n out. The caller launches every stage in order.
 * search_sorted: searchsorted and bucketize, one work-item per value: a binary search of the
 *   value's row of the sorted sequence (rows of n contiguous elements, `per_row` values each),
 *   read through `sorter` (the row's sorting positions) when use_sorter. Built with the sort's
 *   options (it ignores DESCENDING), so it shares the ascending sort's program.
 *
 * Tunables: T (the value storage type), IS_FLOAT (NaN checks), DESCENDING.
 * half and bf16 values are read through LD as floats and compared so; the network and its
 * scratch hold K = REG(T) (exact: every 16-bit value is a float) and ST writes them back.
 */
#include "common.cl"
#ifndef T
#define T float
#endif
#define K REG(T)
#ifndef DESCENDING
#define DESCENDING 0
#endif
#ifdef IS_FLOAT
#define IS_NAN(v) isnan(v)
#else
#define IS_NAN(v) 0
#endif

// true when (va at index ia) comes before (vb at index ib); indices from n on are pads
inline bool before(K va, long ia, K vb, long ib, long n) {
  if (ia >= n || ib >= n) return ia < ib;
  const bool na = IS_NAN(va), nb = IS_NAN(vb);
  if (na != nb) return DESCENDING ? na : nb;
  if (!na && va != vb) return DESCENDING ? va > vb : va < vb;
  return ia < ib;
}

// the pair (i, i + j) of compared pair q at stage (k, j); ascending where bit k of i is clear
#define PAIR(q, j) (2 * (j) * ((q) / (j)) + (q) % (j))

__kernel void sort_rows_local(const long n, const long P, __global const T* src,
                              __global T* out_vals, __global long* out_idx,
                              __local K* vals, __local long* idx) {
  const long row = get_group_id(0);
  const long lid = get_local_id(0), W = get_local_size(0);
  __global const T* s = src + row * n;
  for (long p = lid; p < P; p += W) {
    vals[p] = p < n ? LD(T, s, p) : (K)0;
    idx[p] = p;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (long k = 2; k <= P; k <<= 1) {
    for (long j = k >> 1; j > 0; j >>= 1) {
      for (long q = lid; q < P / 2; q += W) {
        const long i = PAIR(q, j), l = i + j;
        const K vi = vals[i], vl = vals[l];
        const long ii = idx[i], il = idx[l];
        const bool swap = (i & k) == 0 ? !before(vi, ii, vl, il, n) : !before(vl, il, vi, ii, n);
        if (swap) {
          vals[i] = vl;
          vals[l] = vi;
          idx[i] = il;
          idx[l] = ii;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }
  for (long p = lid; p < n; p += W) {
    ST(T, out_vals, row * n + p, vals[p]);
    out_idx[row * n + p] = idx[p];
  }
}

__kernel void sort_init(const long rows, const long n, const long P, __global const T* src,
                        __global K* vals, __global long* idx) {
  const long g = get_global_id(0);
  if (g >= rows * P) return;
  const long row = g / P, p = g % P;
  vals[g] = p < n ? LD(T, src, row * n + p) : (K)0;
  idx[g] = p;
}

__kernel void sort_stage(const long rows, const long n, const long P, const long k,
                         const long j, __global K* vals, __global long* idx) {
  const long g = get_global_id(0), pairs = P / 2;
  if (g >= rows * pairs) return;
  const long base = (g / pairs) * P, i = PAIR(g % pairs, j), l = i + j;
  const K vi = vals[base + i], vl = vals[base + l];
  const long ii = idx[base + i], il = idx[base + l];
  const bool swap = (i & k) == 0 ? !before(vi, ii, vl, il, n) : !before(vl, il, vi, ii, n);
  if (swap) {
    vals[base + i] = vl;
    vals[base + l] = vi;
    idx[base + i] = il;
    idx[base + l] = ii;
  }
}

__kernel void sort_final(const long rows, const long n, const long P, __global const K* vals,
                         __global const long* idx, __global T* out_vals, __global long* out_idx) {
  const long g = get_global_id(0);
  if (g >= rows * n) return;
  const long from = (g / n) * P + g % n;
  ST(T, out_vals, g, vals[from]);
  out_idx[g] = idx[from];
}

/* The insertion point of vals[g] in its row of seq: the first position whose element is >= the
 * value (right: > the value), n when there is none. NOTE: the predicates and midpoints are
 * torch's, so a NaN (among the values or at the end of the sequence) lands where torch puts it. */
__kernel void search_sorted(const long count, const long n, const long per_row,
                            __global const T* seq, __global const long* sorter,
                            const int use_sorter, __global const T* vals, const int right,
                            __global long* out) {
  const long g = get_global_id(0);
  if (g >= count) return;
  const long base = (g / per_row) * n;
  const K v = LD(T, vals, g);
  long lo = 0, hi = n;
  while (lo < hi) {
    const long mid = lo + ((hi - lo) >> 1);
    const K s = LD(T, seq, base + (use_sorter ? sorter[base + mid] : mid));
    if (right ? !(s > v) : !(s >= v)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  out[g] = lo;
}
