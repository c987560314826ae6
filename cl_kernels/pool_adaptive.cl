/*
 * pool_adaptive.cl: adaptive average and adaptive max pooling (with its int h * W + w argmax),
 * forward and backward, built appended to pool.cl (its View4, Pool, element() walk and max
 * rules) with pool.cl's build options; the items form only.
 *
 * Windows (torch's): output oh averages or takes the largest of rows [floor(oh * H / OH),
 * ceil((oh + 1) * H / OH)), and the columns likewise; the max by max_pool's rules (the first
 * largest, NaN beats every number).
 * Kernels: adaptive_avg_pool2d_fwd, adaptive_avg_pool2d_bwd, adaptive_max_pool2d_fwd,
 *          adaptive_max_pool2d_bwd.
 * Tunables: none.
 */
#if !BAKED  /* windows from the sizes alone: never built with a window baked */

/* ---- adaptive average ----------------------------------------------------------------------- */

inline int start_of(const int o, const int in, const int out) {
  return (int)(((long)o * in) / out);
}

inline int end_of(const int o, const int in, const int out) {
  return (int)(((long)(o + 1) * in + out - 1) / out);
}

__kernel void adaptive_avg_pool2d_fwd(const Pool p, const int c_last,
                                      __global const DATA_T* x, const View4 vx, __global DATA_T* y,
                                      const View4 vy) {
  Pos q;
  if (!element(p.N, p.C, p.OH, p.OW, c_last, &q)) return;
  const int oh = q.y, ow = q.x;
  const int h0 = start_of(oh, p.H, p.OH), h1 = end_of(oh, p.H, p.OH);
  const int w0 = start_of(ow, p.W, p.OW), w1 = end_of(ow, p.W, p.OW);
  const OFF base = plane(vx, q);
  /* summed by rows, then the rows: a float32 sum of a whole 512 x 512 plane element by element
   * (global pooling) was 6e-6 relative off, torch 1e-7 */
  T acc = 0;
  for (int h = h0; h < h1; ++h) {
    T row = 0;
    for (int w = w0; w < w1; ++w) row += LD(DATA_T, x, base + h * vx.h + w * vx.w);
    acc += row;
  }
  ST(DATA_T, y, at(vy, q), acc / (T)((h1 - h0) * (w1 - w0)));
}

/* Input row h lies in the windows of outputs floor(h * OH / H) .. ceil((h + 1) * OH / H) - 1;
 * each candidate is checked against its window. */
__kernel void adaptive_avg_pool2d_bwd(const Pool p, const int c_last,
                                      __global const DATA_T* g, const View4 vg, __global DATA_T* gx,
                                      const View4 vgx) {
  Pos q;
  if (!element(p.N, p.C, p.H, p.W, c_last, &q)) return;
  const int h = q.y, w = q.x;
  const int oh0 = start_of(h, p.OH, p.H), oh1 = min(end_of(h, p.OH, p.H), p.OH);
  const int ow0 = start_of(w, p.OW, p.W), ow1 = min(end_of(w, p.OW, p.W), p.OW);
  const OFF gb = plane(vg, q);
  T acc = 0;
  for (int oh = oh0; oh < oh1; ++oh) {
    const int h0 = start_of(oh, p.H, p.OH), h1 = end_of(oh, p.H, p.OH);
    if (h < h0 || h >= h1) continue;
    for (int ow = ow0; ow < ow1; ++ow) {
      const int w0 = start_of(ow, p.W, p.OW), w1 = end_of(ow, p.W, p.OW);
      if (w < w0 || w >= w1) continue;
      acc += LD(DATA_T, g, gb + oh * vg.h + ow * vg.w) / (T)((h1 - h0) * (w1 - w0));
    }
  }
  ST(DATA_T, gx, at(vgx, q), acc);
}

/* ---- adaptive max ---------------------------------------------------------------------------- */

/* the largest input of output (oh, ow)'s adaptive window (the first one, or the last NaN, as
 * max_pool2d), and its position h * W + w */
__kernel void adaptive_max_pool2d_fwd(const Pool p, const int c_last, const int with_idx,
                                      __global const DATA_T* x, const View4 vx, __global DATA_T* y,
                                      const View4 vy, __global int* idx, const View4 vi) {
  Pos q;
  if (!element(p.N, p.C, p.OH, p.OW, c_last, &q)) return;
  const int h0 = start_of(q.y, p.H, p.OH), h1 = end_of(q.y, p.H, p.OH);
  const int w0 = start_of(q.x, p.W, p.OW), w1 = end_of(q.x, p.W, p.OW);
  const OFF base = plane(vx, q);
  T best = -INFINITY;
  int pos = h0 * p.W + w0;
  for (int h = h0; h < h1; ++h)
    for (int w = w0; w < w1; ++w) {
      const T v = LD(DATA_T, x, base + h * vx.h + w * vx.w);
      const int take = v > best || v != v;
      best = take ? v : best;
      pos = take ? h * p.W + w : pos;
    }
  ST(DATA_T, y, at(vy, q), best);
  if (with_idx) idx[at(vi, q)] = pos;
}

/* an input gathers the gradients of the outputs whose argmax it is */
__kernel void adaptive_max_pool2d_bwd(const Pool p, const int c_last,
                                      __global const DATA_T* g, const View4 vg,
                                      __global const int* idx, const View4 vi, __global DATA_T* gx,
                                      const View4 vgx) {
  Pos q;
  if (!element(p.N, p.C, p.H, p.W, c_last, &q)) return;
  const int me = q.y * p.W + q.x;
  const int oh0 = start_of(q.y, p.OH, p.H), oh1 = min(end_of(q.y, p.OH, p.H), p.OH);
  const int ow0 = start_of(q.x, p.OW, p.W), ow1 = min(end_of(q.x, p.OW, p.W), p.OW);
  const OFF gb = plane(vg, q), ib = plane(vi, q);
  T acc = 0;
  for (int oh = oh0; oh < oh1; ++oh)
    for (int ow = ow0; ow < ow1; ++ow)
      if (idx[ib + oh * vi.h + ow * vi.w] == me) acc += LD(DATA_T, g, gb + oh * vg.h + ow * vg.w);
  ST(DATA_T, gx, at(vgx, q), acc);
}
#endif
