/*
 * conv_taps.cl: the virtual padded source that the implicit-GEMM kernels gather from
 * (conv_implicit.cl for CPUs, conv_xgemm.cl for GPUs); prepended to both by the host.
 *
 * A convolution tap reads the source plane (H rows, W columns; row and column strides xs2, xs3
 * in scope where the macros are used) at (ty, tx) = (py - OY, px - OX) of the padded plane,
 * upsampled by (UH, UW) (the input gradient reads the output gradient so): the element where
 * that is an exact, in-range index, else 0.
 *   TAP_IN(ty, tx)     whether the tap reads an element
 *   TAP_INDEX(ty, tx)  its offset from the channel's origin
 * Build options: UH, UW (default 1); H and W may be -D constants or variables in scope.
 */
#ifndef UH
#define UH 1
#endif
#ifndef UW
#define UW 1
#endif

#if UH == 1 && UW == 1
#define TAP_IN(ty, tx) ((uint)(ty) < (uint)H && (uint)(tx) < (uint)W)
#define TAP_INDEX(ty, tx) ((ty) * xs2 + (tx) * xs3)
#else
#define TAP_IN(ty, tx)                                                                     \
  ((ty) >= 0 && (tx) >= 0 && (ty) % UH == 0 && (tx) % UW == 0 && (ty) / UH < H &&          \
   (tx) / UW < W)
#define TAP_INDEX(ty, tx) (((ty) / UH) * xs2 + ((tx) / UW) * xs3)
#endif
