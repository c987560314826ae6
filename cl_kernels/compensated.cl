/*
 * compensated.cl: a header of long float sums that keep their rounding errors, for the kernels
 * whose work-items each sum thousands of terms (softmax.cl's rows, norm.cl's batch-norm chunks
 * on CPUs): plain float32 sums of 1e5 terms drifted 1e-5 to 1e-2 relative.
 *
 * Build options: T, the sum's type (float or double), as the file it is prepended to.
 */

/* s + c += v, c collecting the rounding errors of s (Neumaier's variant of Kahan's sum: any
 * magnitudes, either sign); the sum is s + c at the end. */
inline void ksum(T* s, T* c, const T v) {
  const T t = *s + v;
  *c += fabs(*s) >= fabs(v) ? (*s - t) + v : (v - t) + *s;
  *s = t;
}

/* ksum lane by lane, without a branch: 16 lanes of float sums (the CPUs' vector forms) */
inline void ksum16(float16* s, float16* c, const float16 v) {
  const float16 t = *s + v;
  *c += select((v - t) + *s, (*s - t) + v, isgreaterequal(fabs(*s), fabs(v)));
  *s = t;
}
