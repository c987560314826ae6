/*
 * ctc.cl: the connectionist temporal classification loss (Graves et al., 2006) as torch computes
 * it, in log space over each batch element's extended label sequence
 * l' = (blank, l_1, blank, l_2, ..., l_S, blank) of length 2S + 1.
 *
 * Layout: lp is a contiguous (steps, N, C) tensor of log-probabilities; lens is (3, N): rows
 * toff, ilen and tlen; batch element b's k-th label is tg[toff[b] + k * tstride] (padded (N, S)
 * targets or their concatenation), ilen[b] and tlen[b] its input and target lengths (one
 * upload for the three). log_alpha is contiguous (N, steps, L),
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
 * Tunables: none; any work-group size works (the work-items take positions and classes in
 * chunks of the group's size) and the launcher picks it (cltensor/nn/functional/ctc.py, GROUP).
 * NOTE: PoCL runs a group's work-items as a loop between barriers, which it vectorizes only
 * where the code between them is straight: hence the inlined helpers, log_1_3 in place of
 * log(), and a barrier per chunk of classes.
 */
#ifndef T
#define T float
#endif

#define NEG_INF ((T)(-INFINITY))
/* inlined into the loops over positions, so that PoCL vectorizes them across work-items */
#define HELPER inline __attribute__((always_inline))

/* Extended position s's class: the blank at even s, label s / 2 at odd s. */
HELPER long ext_label(__global const long* tg, const long off, const long tstride, const long s,
                      const long blank) {
  return (s & 1) ? tg[off + (s >> 1) * tstride] : blank;
}

/* lp_t(c) from the row of time t, NaN for a class outside [0, C) */
HELPER T log_prob(__global const T* row, const long c, const long C) {
  return (c >= 0 && c < C) ? row[c] : (T)NAN;
}

/* exp(x - m) of one term: 1 for the largest and 0 for -inf without an exp */
HELPER T lse_term(const T x, const T m) {
  return x == m ? (T)1 : x == NEG_INF ? (T)0 : exp(x - m);
}

/* log(x) for x in [1, 3] (lse3's sums: the largest term is 1, the others at most 1) as
 * k ln2 + 2 atanh(z), x = 2^k y, y in [0.75, 1.5], z = (y - 1) / (y + 1) in [-1/7, 1/5], the
 * atanh series to z^21 (double's precision): plain arithmetic, which PoCL vectorizes across
 * work-items, where its log() is a scalar call of about 30 ns */
HELPER T log_1_3(const T x) {
  const bool halve = x > (T)1.5;
  const T y = halve ? x * (T)0.5 : x;
  const T z = (y - 1) / (y + 1), z2 = z * z;
  T p = (T)(1.0 / 21);
  p = p * z2 + (T)(1.0 / 19);
  p = p * z2 + (T)(1.0 / 17);
  p = p * z2 + (T)(1.0 / 15);
  p = p * z2 + (T)(1.0 / 13);
  p = p * z2 + (T)(1.0 / 11);
  p = p * z2 + (T)(1.0 / 9);
  p = p * z2 + (T)(1.0 / 7);
  p = p * z2 + (T)(1.0 / 5);
  p = p * z2 + (T)(1.0 / 3);
  p = p * z2 + (T)1;
  return (halve ? (T)M_LN2 : (T)0) + 2 * z * p;
}

HELPER T lse3(const T a, const T b, const T c) {
  const T m = fmax(a, fmax(b, c));
  if (m == NEG_INF) return NEG_INF;
  return log_1_3(lse_term(a, m) + lse_term(b, m) + lse_term(c, m)) + m;
}

__kernel void ctc_alpha(const long steps, const long N, const long C, const long L,
                        const long blank, __global const T* lp, __global const long* tg,
                        __global const long* lens, const long tstride,
                        __global T* log_alpha, __global T* nll) {
  const long b = get_group_id(0), lid = get_local_id(0), G = get_local_size(0);
  const long off = lens[b], Tb = lens[N + b], S = lens[2 * N + b], Lb = 2 * S + 1;
  __global T* a = log_alpha + b * steps * L;
  for (long s = lid; s < L; s += G) {
    const bool start = Tb > 0 && s < min(Lb, 2L);
    a[s] = start ? log_prob(lp + b * C, ext_label(tg, off, tstride, s, blank), C) : NEG_INF;
  }
  for (long t = 1; t < Tb; ++t) {
    barrier(CLK_GLOBAL_MEM_FENCE);
    __global const T* prev = a + (t - 1) * L;
    __global const T* row = lp + (t * N + b) * C;
    for (long s0 = 0; s0 < L; s0 += G) {
      const long s = s0 + lid;
      T v = NEG_INF;
      if (s < Lb) {
        const long l = ext_label(tg, off, tstride, s, blank);
        const T a2 = s > 0 ? prev[s - 1] : NEG_INF;
        const bool skip = s > 1 && l != ext_label(tg, off, tstride, s - 2, blank);
        v = lse3(prev[s], a2, skip ? prev[s - 2] : NEG_INF) + log_prob(row, l, C);
      }
      if (s < L) a[t * L + s] = v;
    }
  }
  for (long i = max(Tb, 1L) * L + lid; i < steps * L; i += G) a[i] = NEG_INF;
  barrier(CLK_GLOBAL_MEM_FENCE);
  if (lid == 0) {
    T ll = S == 0 ? (T)0 : NEG_INF;
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
                       __global const long* lens, const long tstride,
                       __global const T* log_alpha, __global const T* nll,
                       __global const T* gout, const int zero_inf,
                       __global T* scratch, __global long* chains, const long max_s,
                       __global T* grad) {
  const long b = get_group_id(0), lid = get_local_id(0), G = get_local_size(0);
  const long off = lens[b], S = lens[2 * N + b], Lb = 2 * S + 1;
  const T nl = nll[b], g = gout[b];
  const long Tb = zero_inf && nl == (T)INFINITY ? 0 : lens[N + b];  /* zero_inf: all rows 0 */
  for (long t = Tb; t < steps; ++t)
    for (long c0 = 0; c0 < C; c0 += G)
      if (c0 + lid < C) grad[(t * N + b) * C + c0 + lid] = 0;
  if (Tb == 0) return;
  __global const T* a = log_alpha + b * steps * L;
  __global T* beta = scratch + b * 3 * L;       /* two rows of beta, then the terms e(s) */
  __global T* e = beta + 2 * L;
  __global long* chain = chains + b * max_s;
  label_chain(tg, off, tstride, S, chain, lid, G);
  /* the row after the last step: log 1 at the end state 2S, so that the first step gives
   * beta_{T-1}(s) = lp_{T-1}(l'_s) at s = 2S and 2S - 1, -inf elsewhere */
  for (long s = lid; s < Lb; s += G) beta[(Tb & 1) * L + s] = s == Lb - 1 ? (T)0 : NEG_INF;
  for (long t = Tb - 1; t >= 0; --t) {
    barrier(CLK_GLOBAL_MEM_FENCE);
    __global const T* row = lp + (t * N + b) * C;
    __global T* gt = grad + (t * N + b) * C;
    __global const T* next = beta + ((t + 1) & 1) * L;
    __global T* cur = beta + (t & 1) * L;
    for (long s0 = 0; s0 < Lb; s0 += G) {
      const long s = s0 + lid;
      if (s < Lb) {
        const long l = ext_label(tg, off, tstride, s, blank);
        const T p = log_prob(row, l, C);
        const T b2 = s < Lb - 1 ? next[s + 1] : NEG_INF;
        const bool skip = s < Lb - 2 && l != ext_label(tg, off, tstride, s + 2, blank);
        const T v = lse3(next[s], b2, skip ? next[s + 2] : NEG_INF) + p;
        cur[s] = v;
        e[s] = exp(a[t * L + s] + v + nl - p);
      }
    }
    for (long c0 = 0; c0 < C; c0 += G) {
      barrier(CLK_LOCAL_MEM_FENCE);  /* no data shared: lets PoCL vectorize the chunk */
      const long c = c0 + lid;
      /* the empty sum's term exp(-inf + nl - lp): x is -inf (exp 0) or NaN, without an exp */
      const T x = NEG_INF + nl - row[min(c, C - 1)];
      if (c < C) gt[c] = (exp(row[c]) - (x != x ? x : (T)0)) * g;
    }
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
