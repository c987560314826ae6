/*
 * ctc.cl: the connectionist temporal classification loss (Graves et al., 2006) as torch computes
 * it, in log space over each batch element's extended label sequence
 * l' = (blank, l_1, blank, l_2, ..., l_S, blank) of length 2S + 1.
 *
 * Layout: lp is a contiguous (steps, N, C) tensor of log-probabilities; batch element b's k-th
 * label is tg[toff[b] + k * tstride] (padded (N, S) targets or their concatenation); ilen and
 * tlen hold each element's input and target length. log_alpha is contiguous (N, steps, L),
 * L = 2 max(tlen) + 1, -inf outside each element's first ilen rows and 2 tlen + 1 columns.
 * lse(...) below is log(sum(exp(...))) taken about the largest term (0 when all are -inf).
 *   ctc_alpha  one work-group per batch element steps through time, a barrier between steps:
 *              alpha_0(0) = lp_0(blank), alpha_0(1) = lp_0(l_1),
 *              alpha_t(s) = lp_t(l'_s) + lse(alpha_{t-1}(s), alpha_{t-1}(s-1), alpha_{t-1}(s-2)),
 *              the last term only where l'_s differs from l'_{s-2} (no skip between equal
 *              labels, nor from a blank); nll = -lse(alpha_{T-1}(2S), alpha_{T-1}(2S-1)), T = ilen
 *              (an empty input: 0 for an empty target, else inf)
 *   ctc_grad   one work-group per batch element steps back in time: beta likewise (two rows of
 *              scratch), and the gradient with respect to lp, torch's formula times g[b]:
 *              grad_t(c) = (exp(lp_t(c)) - sum_{s: l'_s = c} exp(alpha_t(s) + beta_t(s) + nll
 *              - lp_t(c))) g[b]; every c first gets the empty sum's value (exp(-inf + nll - lp):
 *              0, or NaN for an infinite nll, as torch), then the blank and each label's first
 *              position overwrite theirs, following a chain of the label's later positions.
 *              0 at t >= ilen, and for every t when zero_inf is set and nll is inf.
 * A label outside [0, C) reads its log-probability as NaN (torch does not check labels).
 * Build options:
 *   T  the compute and storage type (float or double; 16-bit inputs are widened by the caller)
 * Tunables: none; any work-group size works (work-items stride over positions and classes),
 * and the launcher picks it (cltensor/nn/functional/ctc.py, GROUP).
 */
#ifndef T
#define T float
#endif

#define NEG_INF ((T)(-INFINITY))

/* Extended position s's class: the blank at even s, label s / 2 at odd s. */
inline long ext_label(__global const long* tg, const long off, const long tstride, const long s,
                      const long blank) {
  return (s & 1) ? tg[off + (s >> 1) * tstride] : blank;
}

/* lp_t(c) from the row of time t, NaN for a class outside [0, C) */
inline T log_prob(__global const T* row, const long c, const long C) {
  return (c >= 0 && c < C) ? row[c] : (T)NAN;
}

inline T lse3(const T a, const T b, const T c) {
  T m = fmax(a, fmax(b, c));
  m = m == NEG_INF ? (T)0 : m;
  return log(exp(a - m) + exp(b - m) + exp(c - m)) + m;
}

__kernel void ctc_alpha(const long steps, const long N, const long C, const long L,
                        const long blank, __global const T* lp, __global const long* tg,
                        __global const long* toff, const long tstride,
                        __global const long* ilen, __global const long* tlen,
                        __global T* log_alpha, __global T* nll) {
  const long b = get_group_id(0), lid = get_local_id(0), G = get_local_size(0);
  const long Tb = ilen[b], Lb = 2 * tlen[b] + 1, off = toff[b];
  __global T* a = log_alpha + b * steps * L;
  for (long s = lid; s < L; s += G) {
    const bool start = Tb > 0 && s < min(Lb, 2L);
    a[s] = start ? log_prob(lp + b * C, ext_label(tg, off, tstride, s, blank), C) : NEG_INF;
  }
  for (long t = 1; t < Tb; ++t) {
    barrier(CLK_GLOBAL_MEM_FENCE);
    __global const T* prev = a + (t - 1) * L;
    __global const T* row = lp + (t * N + b) * C;
    for (long s = lid; s < L; s += G) {
      T v = NEG_INF;
      if (s < Lb) {
        const long l = ext_label(tg, off, tstride, s, blank);
        const T a2 = s > 0 ? prev[s - 1] : NEG_INF;
        const bool skip = s > 1 && l != ext_label(tg, off, tstride, s - 2, blank);
        v = lse3(prev[s], a2, skip ? prev[s - 2] : NEG_INF) + log_prob(row, l, C);
      }
      a[t * L + s] = v;
    }
  }
  for (long i = max(Tb, 1L) * L + lid; i < steps * L; i += G) a[i] = NEG_INF;
  barrier(CLK_GLOBAL_MEM_FENCE);
  if (lid == 0) {
    T ll = tlen[b] == 0 ? (T)0 : NEG_INF;
    if (Tb > 0) {
      const T l1 = a[(Tb - 1) * L + Lb - 1], l2 = Lb > 1 ? a[(Tb - 1) * L + Lb - 2] : NEG_INF;
      ll = lse3(l1, l2, NEG_INF);
    }
    nll[b] = -ll;
  }
}

/* chain[k] of label k: 2 (k' + 1) + first, k' the next position holding the same class (-1 for
 * none), first = 1 when no earlier position holds it */
inline void label_chain(__global const long* tg, const long off, const long tstride,
                        const long S, __global long* chain, const long lid, const long G) {
  for (long k = lid; k < S; k += G) {
    const long l = tg[off + k * tstride];
    long next = -1, first = 1;
    for (long j = k + 1; j < S && next < 0; ++j) next = tg[off + j * tstride] == l ? j : -1;
    for (long j = 0; j < k && first; ++j) first = tg[off + j * tstride] != l;
    chain[k] = 2 * (next + 1) + first;
  }
}

__kernel void ctc_grad(const long steps, const long N, const long C, const long L,
                       const long blank, __global const T* lp, __global const long* tg,
                       __global const long* toff, const long tstride,
                       __global const long* ilen, __global const long* tlen,
                       __global const T* log_alpha, __global const T* nll,
                       __global const T* gout, const int zero_inf,
                       __global T* scratch, __global long* chains, const long max_s,
                       __global T* grad) {
  const long b = get_group_id(0), lid = get_local_id(0), G = get_local_size(0);
  const long S = tlen[b], Lb = 2 * S + 1, off = toff[b];
  const T nl = nll[b], g = gout[b];
  const long Tb = zero_inf && nl == (T)INFINITY ? 0 : ilen[b];  /* zero_inf: all rows 0 */
  for (long t = Tb; t < steps; ++t)
    for (long c = lid; c < C; c += G) grad[(t * N + b) * C + c] = 0;
  if (Tb == 0) return;
  __global const T* a = log_alpha + b * steps * L;
  __global T* beta = scratch + b * 3 * L;       /* two rows of beta, then the terms e(s) */
  __global T* e = beta + 2 * L;
  __global long* chain = chains + b * max_s;
  label_chain(tg, off, tstride, S, chain, lid, G);
  for (long t = Tb - 1; t >= 0; --t) {
    barrier(CLK_GLOBAL_MEM_FENCE);
    __global const T* row = lp + (t * N + b) * C;
    __global T* gt = grad + (t * N + b) * C;
    __global const T* next = beta + ((t + 1) & 1) * L;
    __global T* cur = beta + (t & 1) * L;
    for (long s = lid; s < Lb; s += G) {
      const long l = ext_label(tg, off, tstride, s, blank);
      const T p = log_prob(row, l, C);
      T v;
      if (t == Tb - 1) {
        v = s >= Lb - 2 ? p : NEG_INF;
      } else {
        const T b2 = s < Lb - 1 ? next[s + 1] : NEG_INF;
        const bool skip = s < Lb - 2 && l != ext_label(tg, off, tstride, s + 2, blank);
        v = lse3(next[s], b2, skip ? next[s + 2] : NEG_INF) + p;
      }
      cur[s] = v;
      e[s] = exp(a[t * L + s] + v + nl - p);
    }
    for (long c = lid; c < C; c += G) gt[c] = (exp(row[c]) - exp(NEG_INF + nl - row[c])) * g;
    barrier(CLK_GLOBAL_MEM_FENCE);
    for (long k = lid; k <= S; k += G) {
      T sum = 0;
      long c = blank;
      if (k == S) {  /* the blank: every even position, and any label equal to it */
        for (long s = 0; s < Lb; ++s)
          sum += ext_label(tg, off, tstride, s, blank) == blank ? e[s] : (T)0;
      } else {
        c = tg[off + k * tstride];
        if (!(chain[k] & 1) || c == blank || c < 0 || c >= C) continue;
        for (long j = k; j >= 0; j = (chain[j] >> 1) - 1) sum += e[2 * j + 1];
      }
      gt[c] = (exp(row[c]) - sum) * g;
    }
  }
}
