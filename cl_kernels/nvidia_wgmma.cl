/*
 * nvidia_wgmma.cl: TF32 GEMM on Hopper's warpgroup tensor-core instruction (wgmma.mma_async,
 * sm_90a) through inline PTX, a kernel of the NVIDIA plug-in (cltensor/plugins/nvidia.py).
 * Prepended with gemm_common.cl (argument lists, batches, epilogue). nvwg_gemm computes what
 * nvidia_mma.cl's nvmma_gemm computes, with the same epilogue:
 *
 *   Co[b] = act(alpha * A[b] @ B[b] + beta * Ci[b] + biases)   (or split-K partial sums)
 *
 * from operands that gemm_pack.cl's pack_tf32_slices has rounded to TF32 (or, with HALF,
 * pack_half_slices has copied as pairs of 16-bit values, K-consecutive, per 32-bit word) and
 * laid out as this kernel's local memory holds them: A in row blocks of BM rows, B in blocks of BN columns, each
 * block in slices of BK of K (one slice: BM or BN rows of BK floats, K-major, in the wgmma's
 * BK * 4-byte swizzle), slice t of block p at P + b * bs + (p * ceil(K / BK) + t) * rows * BK.
 *
 * Building: NVIDIA's OpenCL compiler writes PTX for .target sm_90, where ptxas refuses wgmma.
 * Every sm_90a instruction here is therefore written behind the marker SM90A, which makes it a
 * PTX comment: the plug-in builds this file, takes the PTX that the driver returns as the
 * program's binary, removes the markers, sets .target sm_90a and builds that PTX.
 *
 * nvwg_gemm: a work-group of WGS_M warpgroups (128 work-items each, the consumers) computes a
 * BM x BN tile of C (BM = 64 * WGS_M), warpgroup w the rows 64w .. 64w + 63, with one wgmma
 * m64nBNk8 per 8 of K and its accumulators in registers (BN / 2 per work-item, laid out as
 * mma.sync's m16n8 results: warp i of the warpgroup has rows 16i .. 16i + 15). Slice t of both
 * operands goes through local buffer t % STAGES: the producer (PRODUCER 1: the first
 * work-item of one more warp; 0: consumer work-item 0, between its wgmmas) waits until every
 * consumer has released the buffer (mbarrier `empty`), then copies the two slices with one bulk
 * copy each (cp.async.bulk, the copy engine: no work-item moves data), which complete on
 * mbarrier `full`; the consumers wait on `full`, issue the slice's wgmmas, wait until at most
 * WG_WAIT groups of them are in flight and release the buffer of the slice whose wgmmas are done.
 * There is no work-group barrier after the mbarriers' set-up.
 *
 * Local memory: STAGES * BK * (BM + BN) * 4 bytes of buffers and 16 * STAGES of mbarriers;
 * NVIDIA's OpenCL allows 48 KiB in all, less 16 bytes of its own. Registers: 164 per work-item
 * with BN 256 for TF32 and float16, 194 for bfloat16 (one work-group a compute unit) unless
 * the host caps them (the plug-in's MIN_GROUPS: `.minnctapersm` on the entry).
 *
 * Tunables: BN (64, 128, 160, 192, 224, 240 or 256), WGS_M (1 or 2), BK (8, 16 or 32), STAGES,
 * WG_WAIT (0 or 1), PRODUCER (0 or 1), GROUP_M (gemm_common.cl's tile_of); HALF, the operand
 * type (below). gemm_common.cl's TC and TR store C and read the biases in 16 bits.
 *
 * nvwg_peak (built with NVWG_PEAK): the ceiling of wgmma m64nBNk8 TF32 on the device, for
 * benchmarks/gemm.py --tf32: each warpgroup runs `iters` groups of PER wgmmas on one slice in
 * local memory, waiting for all but WG_WAIT groups after each; one sum per work-item is stored
 * so that the compiler keeps the chain.
 */
#ifndef BN
#define BN 256
#endif
#ifndef WGS_M
#define WGS_M 1
#endif
#ifndef BK
#define BK 8
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef WG_WAIT
#define WG_WAIT 1
#endif
#ifndef PRODUCER
#define PRODUCER 1
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif

#define SM90A "//SM90A "
#define BM (64 * WGS_M)
#define NT (128 * WGS_M)       /* the consumers */
#define NTB (NT + 32 * PRODUCER) /* the work-group */
#define NACC (BN / 2)
#define A_BYTES (BM * BK * 4) /* one slice */
#define B_BYTES (BN * BK * 4)
#define LBO 16     /* unused by the swizzled K-major layouts */
#define SBO (32 * BK) /* bytes from 8 rows to the next 8 */
#define SWIZZLE_MODE (BK == 32 ? 1 : BK == 16 ? 2 : 3) /* 128, 64 or 32 bytes */
#define KSTEP 32   /* bytes from one k8 step to the next in a row */
#define STR_(x) #x
#define STR(x) STR_(x)

/* ---- the PTX instructions ------------------------------------------------------------------ */

inline uint local_addr(__local const void* p) { return (uint)(size_t)p; }

/* A wgmma shared-memory matrix descriptor of the layout above, at local address 0 (add the
 * address / 16). */
#define DESC_LAYOUT                                                                        \
  (((ulong)(LBO >> 4) << 16) | ((ulong)(SBO >> 4) << 32) | ((ulong)SWIZZLE_MODE << 62))
inline ulong desc_at(__local const float4* p) {
  return DESC_LAYOUT | ((local_addr(p) & 0x3FFFF) >> 4);
}

/* The accumulators' operand numbers in the wgmma's text, by ranges (as ACC_OPS below), and
 * the two descriptors' after them. */
#define REGS_0_31 \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
  "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define REGS_32_63 \
  "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47," \
  "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define REGS_64_79 "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79"
#define REGS_80_95 "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95"
#define REGS_96_111 "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111"
#define REGS_112_119 "%112,%113,%114,%115,%116,%117,%118,%119"
#define REGS_120_127 "%120,%121,%122,%123,%124,%125,%126,%127"
#define REGS_0_63 REGS_0_31 "," REGS_32_63
#define REGS_0_95 REGS_0_63 "," REGS_64_79 "," REGS_80_95
#define REGS_0_111 REGS_0_95 "," REGS_96_111
#if BN == 64
#define WG_REGS REGS_0_31
#define WG_DESCS "%32, %33"
#elif BN == 128
#define WG_REGS REGS_0_63
#define WG_DESCS "%64, %65"
#elif BN == 160
#define WG_REGS REGS_0_63 "," REGS_64_79
#define WG_DESCS "%80, %81"
#elif BN == 192
#define WG_REGS REGS_0_95
#define WG_DESCS "%96, %97"
#elif BN == 224
#define WG_REGS REGS_0_111
#define WG_DESCS "%112, %113"
#elif BN == 240
#define WG_REGS REGS_0_111 "," REGS_112_119
#define WG_DESCS "%120, %121"
#elif BN == 256
#define WG_REGS REGS_0_111 "," REGS_112_119 "," REGS_120_127
#define WG_DESCS "%128, %129"
#else
#error "nvidia_wgmma.cl: BN must be 64, 128, 160, 192, 224, 240 or 256"
#endif
#define ACC8(i)                                                                            \
  "+f"(acc[i]), "+f"(acc[(i) + 1]), "+f"(acc[(i) + 2]), "+f"(acc[(i) + 3]), "+f"(acc[(i) + 4]), \
      "+f"(acc[(i) + 5]), "+f"(acc[(i) + 6]), "+f"(acc[(i) + 7])
#define ACC16(i) ACC8(i), ACC8((i) + 8)
#define ACC32(i) ACC16(i), ACC16((i) + 16)
#if BN == 64
#define ACC_OPS ACC32(0)
#elif BN == 128
#define ACC_OPS ACC32(0), ACC32(32)
#elif BN == 160
#define ACC_OPS ACC32(0), ACC32(32), ACC16(64)
#elif BN == 192
#define ACC_OPS ACC32(0), ACC32(32), ACC32(64)
#elif BN == 224
#define ACC_OPS ACC32(0), ACC32(32), ACC32(64), ACC16(96)
#elif BN == 240
#define ACC_OPS ACC32(0), ACC32(32), ACC32(64), ACC16(96), ACC8(112)
#else
#define ACC_OPS ACC32(0), ACC32(32), ACC32(64), ACC32(96)
#endif

/* The operands' type: TF32 (HALF 0, k8 per wgmma), float16 (HALF 1) or bfloat16 (HALF 2), k16
 * per wgmma. A row of a slice holds BK 32-bit words either way (BK of TF32, 2 * BK of 16-bit K),
 * so local memory, descriptors and swizzles are the same in bytes; K (the kernel's argument)
 * counts words. The 16-bit forms take two more immediates: no transpose (both K-major). */
#ifndef HALF
#define HALF 0
#endif
#if HALF == 1
#define WG_TYPES "k16.f32.f16.f16"
#define WG_TRANS ", 0, 0"
#elif HALF == 2
#define WG_TYPES "k16.f32.bf16.bf16"
#define WG_TRANS ", 0, 0"
#else
#define WG_TYPES "k8.f32.tf32.tf32"
#define WG_TRANS ""
#endif

/* acc += A (64 x 8 words at descriptor da) @ B (8 words x BN at db): one wgmma of the
 * warpgroup. */
#define WGMMA(da, db)                                                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n" SM90A                              \
               "wgmma.mma_async.sync.aligned.m64n" STR(BN) WG_TYPES " {" WG_REGS            \
               "}, " WG_DESCS ", p, 1, 1" WG_TRANS ";\n}"                                  \
               : ACC_OPS                                                                   \
               : "l"(da), "l"(db)                                                          \
               : "memory")
/* Wait until at most n groups of this warpgroup's wgmmas are in flight; the accumulators are
 * operands so that the compiler reads none of them before. */
#define WGMMA_WAIT(n) \
  asm volatile(SM90A "wgmma.wait_group.sync.aligned " STR(n) ";" : ACC_OPS::"memory")
#define WGMMA_FENCE() asm volatile(SM90A "wgmma.fence.sync.aligned;" : ACC_OPS :: "memory")
#define WGMMA_COMMIT() asm volatile(SM90A "wgmma.commit_group.sync.aligned;" ::: "memory")

#ifdef NVWG_PEAK
#ifndef PER
#define PER 4
#endif
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void nvwg_peak(const int iters, const float seed, __global float* dst) {
  __local float4 a_buf[BM * 2] __attribute__((aligned(1024)));
  __local float4 b_buf[BN * 2] __attribute__((aligned(1024)));
  const int tid = get_local_id(0), wg = tid / 128;
  for (int i = tid; i < BM * 2; i += NT) a_buf[i] = seed * (float4)(i % 7, i % 5, i % 3, 1);
  for (int i = tid; i < BN * 2; i += NT) b_buf[i] = seed * (float4)(i % 3, i % 7, 1, i % 5);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  barrier(CLK_LOCAL_MEM_FENCE);
  const ulong da = desc_at(a_buf) + wg * (64 / 8 * SBO / 16), db = desc_at(b_buf);
  float acc[NACC];
  for (int i = 0; i < NACC; ++i) acc[i] = 0.0f;
  for (int t = 0; t < iters; ++t) {
    WGMMA_FENCE();
#pragma unroll
    for (int p = 0; p < PER; ++p) WGMMA(da, db);
    WGMMA_COMMIT();
    WGMMA_WAIT(WG_WAIT);
  }
  WGMMA_WAIT(0);
  float sum = 0.0f;
  for (int i = 0; i < NACC; ++i) sum += acc[i];
  dst[get_global_id(0)] = sum;
}
#else

/* ---- mbarriers and bulk copies ------------------------------------------------------------- */

inline void bar_init(__local ulong* bar, const uint count) {
  asm volatile(SM90A "mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(local_addr(bar)),
               "r"(count)
               : "memory");
}
inline void bar_arrive(__local ulong* bar) {
  asm volatile("{\n.reg .b64 st;\n" SM90A "mbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(
                   local_addr(bar))
               : "memory");
}
inline void bar_expect(__local ulong* bar, const uint bytes) {
  asm volatile("{\n.reg .b64 st;\n" SM90A
               "mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(
                   local_addr(bar)),
               "r"(bytes)
               : "memory");
}
/* Wait until the phase of parity `parity` of the mbarrier has completed. */
inline void bar_wait(__local ulong* bar, const uint parity) {
  uint done = 0;
  while (!done)
    asm volatile("{\n.reg .pred p;\n" SM90A
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n" SM90A
                 "selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(local_addr(bar)), "r"(parity)
                 : "memory");
}
inline void bulk_copy(__local float4* dst, __global const float* src, const uint bytes,
                      __local ulong* bar) {
  asm volatile(SM90A "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
               "[%0], [%1], %2, [%3];" ::"r"(local_addr(dst)),
               "l"(src), "r"(bytes), "r"(local_addr(bar))
               : "memory");
}

/* ---- the kernel ------------------------------------------------------------------------------ */

/* PA, PB: the packed operands (see the top), flat batch b's at PA + b * pa_bs, PB + b * pb_bs
 * (0 when the batches share one). */
__kernel __attribute__((reqd_work_group_size(NTB, 1, 1)))
void nvwg_gemm(const int M, const int N, const int K, const int row0, BATCH_ARGS,
               __global const float* PA, const long pa_bs, __global const float* PB,
               const long pb_bs, const int splits, __global float* part, EPI_ARGS) {
  __local float4 a_bufs[STAGES][BM * BK / 4] __attribute__((aligned(1024)));
  __local float4 b_bufs[STAGES][BN * BK / 4] __attribute__((aligned(1024)));
  __local ulong full[STAGES], empty[STAGES];
  const int tid = get_local_id(0), wg = tid / 128, warp = tid / 32 % 4, lane = tid % 32;
  int pm, pn;
  tile_of(GROUP_M, &pm, &pn);
  const int m0 = row0 + pm * BM, n0 = pn * BN;
  const long z = batch0 + get_global_id(2), b = z / splits;

  const int total = (K + BK - 1) / BK, share = (total + splits - 1) / splits;
  const int t0 = (int)(z % splits) * share, slices = max(min(total - t0, share), 0);
  __global const float* pa = PA + b * pa_bs + (m0 / BM * total + t0) * (long)(BM * BK);
  __global const float* pb = PB + b * pb_bs + (n0 / BN * total + t0) * (long)(BN * BK);

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      bar_init(&full[s], 1);
      bar_init(&empty[s], NT);
    }
    asm volatile(SM90A "fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  barrier(CLK_LOCAL_MEM_FENCE);

  /* Copy slice t once its buffer is free. NOTE: a new barrier's previous phase, parity 1,
   * counts as completed */
#define PRODUCE(t)                                                                         \
  {                                                                                        \
    const int s_ = (t) % STAGES;                                                           \
    bar_wait(&empty[s_], ((t) / STAGES & 1) ^ 1);                                          \
    bar_expect(&full[s_], A_BYTES + B_BYTES);                                              \
    bulk_copy(a_bufs[s_], pa + (long)(t) * (BM * BK), A_BYTES, &full[s_]);                 \
    bulk_copy(b_bufs[s_], pb + (long)(t) * (BN * BK), B_BYTES, &full[s_]);                 \
  }
#if PRODUCER
  if (tid >= NT) { /* the producer warp */
    if (tid == NT)
      for (int t = 0; t < slices; ++t) PRODUCE(t)
    return;
  }
#else
  if (tid == 0)
    for (int t = 0; t < min(slices, STAGES); ++t) PRODUCE(t)
#endif

  float acc[NACC];
#pragma unroll
  for (int i = 0; i < NACC; ++i) acc[i] = 0.0f;
  for (int t = 0; t < slices; ++t) {
    const int s = t % STAGES;
    bar_wait(&full[s], t / STAGES & 1);
    const ulong da = desc_at(a_bufs[s]) + wg * (64 / 8 * SBO / 16);
    const ulong db = desc_at(b_bufs[s]);
    WGMMA_FENCE();
#pragma unroll
    for (int kk = 0; kk < BK / 8; ++kk) WGMMA(da + kk * (KSTEP / 16), db + kk * (KSTEP / 16));
    WGMMA_COMMIT();
    WGMMA_WAIT(WG_WAIT);
    if (t >= WG_WAIT) bar_arrive(&empty[(t - WG_WAIT) % STAGES]);
#if !PRODUCER
    if (tid == 0 && t >= WG_WAIT && t - WG_WAIT + STAGES < slices) PRODUCE(t - WG_WAIT + STAGES)
#endif
  }
  WGMMA_WAIT(0);

  const long oci = batch_offset(b, nbd, batch, vci);
  const long oco = batch_offset(b, nbd, batch, vco);
  __global float* pz = part + z * M * N;
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int i = 0; i < NACC; ++i) {
    const int m = m0 + 64 * wg + 16 * warp + g + 8 * ((i >> 1) & 1);
    const int n = n0 + 8 * (i >> 2) + 2 * tq + (i & 1);
    if (m < M && n < N) {
      if (splits > 1)
        pz[(long)m * N + n] = acc[i];
      else
        EPILOGUE(m, n, acc[i])
    }
  }
}
#endif
