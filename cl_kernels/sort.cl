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
 * topk_select: topk's k best of each row without sorting it (described below).
 *
 * Tunables: T (the value storage type), IS_FLOAT (NaN checks), DESCENDING, TOPK_CAP.
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

/* topk_select: the k best (DESCENDING 1: largest) elements of each segment, in order, without
 * sorting it: one work-group per segment; each work-item keeps the best k of its strided share
 * in private memory (an insertion into a sorted list, most elements rejected by one compare
 * with the k-th), then the work-items' lists are merged pairwise in local memory, a tree of
 * log2(W) steps (W a power of two), and work-item 0 writes the segment's k.
 * A segment is `len` elements of a row of row_len (`chunks` segments per row, group g the
 * segment g % chunks of row g / chunks); out holds k per segment. Each element's position is
 * its place in the row, or src_idx's entry there with use_idx (a second pass over the
 * segments' candidates). Ties go by position; positions from n on are empty slots, after every
 * element (a segment shorter than k writes some).
 * Tunables: TOPK_CAP (the private lists' capacity, at least k).
 */
#ifndef TOPK_CAP
#define TOPK_CAP 8
#endif
#define EMPTY_SLOT LONG_MAX

// (v, i) into the sorted list (lv, li) of k if it belongs there
inline void topk_insert(K* lv, long* li, const long k, const K v, const long i, const long n) {
  if (!before(v, i, lv[k - 1], li[k - 1], n)) return;
  long j = k - 1;
  for (; j > 0 && before(v, i, lv[j - 1], li[j - 1], n); j--) {
    lv[j] = lv[j - 1];
    li[j] = li[j - 1];
  }
  lv[j] = v;
  li[j] = i;
}

__kernel void topk_select(const long n, const long row_len, const long len, const long chunks,
                          const long k, __global const T* src, __global const long* src_idx,
                          const int use_idx, __global T* out_vals, __global long* out_idx,
                          __local K* sv, __local long* si) {
  const long g = get_group_id(0), lid = get_local_id(0), W = get_local_size(0);
  const long row = g / chunks, start = (g % chunks) * len;
  const long end = min(row_len, start + len);
  K pv[TOPK_CAP], mv[TOPK_CAP];
  long pi[TOPK_CAP], mi[TOPK_CAP];
  for (long j = 0; j < k; j++) {
    pv[j] = (K)0;
    pi[j] = EMPTY_SLOT;
  }
  __global const T* s = src + row * row_len;
  for (long p = start + lid; p < end; p += W) {
    topk_insert(pv, pi, k, LD(T, s, p), use_idx ? src_idx[row * row_len + p] : p, n);
  }
  for (long j = 0; j < k; j++) {
    sv[lid * k + j] = pv[j];
    si[lid * k + j] = pi[j];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (long step = W >> 1; step > 0; step >>= 1) {
    if (lid < step) {  // merge the list of lid + step into this one
      __local const K* ov = sv + (lid + step) * k;
      __local const long* oi = si + (lid + step) * k;
      long a = 0, b = 0;
      for (long j = 0; j < k; j++) {
        const bool mine = before(pv[a], pi[a], ov[b], oi[b], n);
        mv[j] = mine ? pv[a] : ov[b];
        mi[j] = mine ? pi[a] : oi[b];
        a += mine;
        b += !mine;
      }
      for (long j = 0; j < k; j++) {
        pv[j] = mv[j];
        pi[j] = mi[j];
        sv[lid * k + j] = mv[j];
        si[lid * k + j] = mi[j];
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    for (long j = 0; j < k; j++) {
      ST(T, out_vals, g * k + j, pv[j]);
      out_idx[g * k + j] = pi[j];
    }
  }
}
