/*
 * common.cl: the strided-view definitions that the kernel families share.
 *
 * A kernel file takes them with the line `#include "common.cl"`, which cltensor's build replaces
 * by this file's text (cltensor/program.py, read_source), so a program's source is one string and
 * the build caches see every change. The build defines MAX_DIMS first, from the Python constant
 * program.MAX_DIMS that the launchers check shapes against; a `#line` after the text keeps the
 * including file's line numbers in compiler logs (NVIDIA's compiler ignores it: its logs count
 * the spliced lines too).
 *
 * Layout: a tensor operand is a View: an element offset into its buffer and one stride per dim,
 * in elements (stride 0 broadcasts); a Shape gives the sizes of the `nd` dims (nd <= MAX_DIMS)
 * that a launch walks in row-major order.
 */
#ifndef CLTENSOR_COMMON_CL
#define CLTENSOR_COMMON_CL

#ifndef MAX_DIMS
#error "MAX_DIMS is defined by cltensor's build (program.MAX_DIMS)"
#endif

typedef struct { long size[MAX_DIMS]; } Shape;
typedef struct { long offset; long stride[MAX_DIMS]; } View;

/* Element offset of row-major index i over the nd dims of `shape` in view v (v.offset included). */
inline long view_offset(long i, const int nd, const Shape shape, const View v) {
  long o = v.offset;
  for (int d = nd - 1; d >= 0; --d) {
    o += (i % shape.size[d]) * v.stride[d];
    i /= shape.size[d];
  }
  return o;
}

/* The same without v.offset, and one dim without a division: reductions and scans add their
 * views' offsets once per row themselves. */
inline long strided_offset(long i, const int nd, const Shape shape, const View v) {
  if (nd == 1) return i * v.stride[0];
  long o = 0;
  for (int d = nd - 1; d >= 0; --d) {
    const long n = shape.size[d];
    o += (i % n) * v.stride[d];
    i /= n;
  }
  return o;
}


/* ---- storage types: LD reads element i of a T buffer into REG(T), its compute type, and ST
 * writes a value back. float16 ("half") and bfloat16 ("bf16": a ushort holding a float32's
 * upper half) compute in float; the other types are their own compute types. Both convert by
 * integer bit operations, rounding to nearest even (no cl_khr_fp16 needed; PoCL's
 * vload_half/vstore_half_rte ran relu on float16 1.5x slower than these, bit for bit the
 * same). T must be one token: the host's type names. */
typedef ushort bf16;
#define CL_CAT_(a, b) a##b
#define CL_CAT(a, b) CL_CAT_(a, b)
#define LD(T, p, i) CL_CAT(LD_, T)(p, i)
#define ST(T, p, i, v) CL_CAT(ST_, T)(p, i, v)
#define REG(T) CL_CAT(REG_, T)

#define LD_half(p, i) half_bits_to_float(((__global const ushort*)(p))[i])
#define ST_half(p, i, v) (((__global ushort*)(p))[i] = float_to_half_bits((float)(v)))
#define REG_half float
/* float16 bits to float, exactly: the exponent rebiased by a multiply, subnormals as integer
 * multiples of 2^-24 (no float denormal on the way), infinity and NaN by their exponent */
inline float half_bits_to_float(const ushort h) {
  const uint e = h & 0x7fffu;
  float f = e < 0x400u ? (float)e * 0x1p-24f : as_float(e << 13) * 0x1p112f;
  f = e >= 0x7c00u ? as_float((e << 13) | 0x7f800000u) : f;
  return as_float(as_uint(f) | ((uint)(h & 0x8000u) << 16));
}
/* float to float16 bits, rounded to nearest even: normal halves by integer rounding of the 13
 * dropped bits, subnormal ones by a float add of 0.5 (whose ulp, 2^-24, is their spacing) */
inline ushort float_to_half_bits(const float f) {
  const uint u = as_uint(f), a = u & 0x7fffffffu;
  const uint r = a - 0x38000000u;                       /* exponent rebiased 127 -> 15 */
  uint h = a >= 0x38800000u ? (r + 0xfffu + ((r >> 13) & 1u)) >> 13   /* 2^-14 and up */
                            : as_uint(as_float(a) + 0.5f) - 0x3f000000u;
  h = a >= 0x477ff000u ? 0x7c00u : h;                   /* 65520 and up: infinity */
  h = a > 0x7f800000u ? 0x7e00u : h;                    /* NaN: a quiet NaN */
  return (ushort)(((u >> 16) & 0x8000u) | h);
}
#define LD_bf16(p, i) as_float((uint)(p)[i] << 16)
#define ST_bf16(p, i, v) ((p)[i] = float_to_bf16((float)(v)))
#define REG_bf16 float
/* round to nearest even; a NaN stays a (quiet) NaN rather than rounding into infinity */
inline ushort float_to_bf16(const float f) {
  const uint u = as_uint(f);
  if (isnan(f)) return (ushort)((u >> 16) | 0x40);
  return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
/* N = 4, 8 or 16 consecutive elements at once, for CPUs' vector paths: VLD<N>(T, p, i) reads
 * p[i .. i+N-1] of a float, half or bf16 buffer as a floatN, VST<N>(T, p, i, v) writes them back
 * with ST's rounding. PoCL compiles vload_half16/vstore_half16_rte to F16C's conversions, bit for
 * bit torch's; per element, vload_half/vstore_half_rte were calls, 5 to 10x slower. bfloat16
 * shifts. */
#define VLD16(T, p, i) CL_CAT(VLD16_, T)(p, i)
#define VST16(T, p, i, v) CL_CAT(VST16_, T)(p, i, v)
#define VLD8(T, p, i) CL_CAT(VLD8_, T)(p, i)
#define VST8(T, p, i, v) CL_CAT(VST8_, T)(p, i, v)
#define VLD4(T, p, i) CL_CAT(VLD4_, T)(p, i)
#define VST4(T, p, i, v) CL_CAT(VST4_, T)(p, i, v)
#define VLD16_float(p, i) vload16(0, (p) + (i))
#define VST16_float(p, i, v) vstore16((v), 0, (p) + (i))
#define VLD16_half(p, i) vload_half16(0, (p) + (i))
#define VST16_half(p, i, v) vstore_half16_rte((v), 0, (p) + (i))
#define VLD16_bf16(p, i) as_float16(convert_uint16(vload16(0, (p) + (i))) << 16)
#define VST16_bf16(p, i, v) (*(__global ushort16_a2*)((p) + (i)) = float16_to_bf16(v))
#define VLD8_float(p, i) vload8(0, (p) + (i))
#define VST8_float(p, i, v) vstore8((v), 0, (p) + (i))
#define VLD8_half(p, i) vload_half8(0, (p) + (i))
#define VST8_half(p, i, v) vstore_half8_rte((v), 0, (p) + (i))
#define VLD8_bf16(p, i) as_float8(convert_uint8(vload8(0, (p) + (i))) << 16)
#define VST8_bf16(p, i, v) (*(__global ushort8_a2*)((p) + (i)) = float8_to_bf16(v))
#define VLD4_float(p, i) vload4(0, (p) + (i))
#define VST4_float(p, i, v) vstore4((v), 0, (p) + (i))
#define VLD4_half(p, i) vload_half4(0, (p) + (i))
#define VST4_half(p, i, v) vstore_half4_rte((v), 0, (p) + (i))
#define VLD4_bf16(p, i) as_float4(convert_uint4(vload4(0, (p) + (i))) << 16)
#define VST4_bf16(p, i, v) (*(__global ushort4_a2*)((p) + (i)) = float4_to_bf16(v))
/* NOTE: bf16 vectors are stored through pointers to these (vector types aligned like their
 * elements): PoCL split vstore16 of a ushort16 into 16 scalar stores, 2.5x slower */
typedef ushort16 __attribute__((aligned(2))) ushort16_a2;
typedef ushort8 __attribute__((aligned(2))) ushort8_a2;
typedef ushort4 __attribute__((aligned(2))) ushort4_a2;
/* float_to_bf16 lane by lane */
#define FLOATN_TO_BF16(N)                                                            \
  inline ushort##N float##N##_to_bf16(const float##N f) {                            \
    const uint##N u = as_uint##N(f);                                                 \
    const uint##N r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;                        \
    return convert_ushort##N(select(r, (u >> 16) | 0x40u, as_uint##N(isnan(f))));    \
  }
FLOATN_TO_BF16(4)
FLOATN_TO_BF16(8)
FLOATN_TO_BF16(16)
/* the types that compute as themselves */
#define LD_uchar(p, i) ((p)[i])
#define LD_char(p, i) ((p)[i])
#define LD_short(p, i) ((p)[i])
#define LD_ushort(p, i) ((p)[i])
#define LD_int(p, i) ((p)[i])
#define LD_uint(p, i) ((p)[i])
#define LD_long(p, i) ((p)[i])
#define LD_ulong(p, i) ((p)[i])
#define LD_float(p, i) ((p)[i])
#define LD_double(p, i) ((p)[i])
#define ST_uchar(p, i, v) ((p)[i] = (v))
#define ST_char(p, i, v) ((p)[i] = (v))
#define ST_short(p, i, v) ((p)[i] = (v))
#define ST_ushort(p, i, v) ((p)[i] = (v))
#define ST_int(p, i, v) ((p)[i] = (v))
#define ST_uint(p, i, v) ((p)[i] = (v))
#define ST_long(p, i, v) ((p)[i] = (v))
#define ST_ulong(p, i, v) ((p)[i] = (v))
#define ST_float(p, i, v) ((p)[i] = (v))
#define ST_double(p, i, v) ((p)[i] = (v))
#define REG_uchar uchar
#define REG_char char
#define REG_short short
#define REG_ushort ushort
#define REG_int int
#define REG_uint uint
#define REG_long long
#define REG_ulong ulong
#define REG_float float
#define REG_double double

#endif
