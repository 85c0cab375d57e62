// The handful of PTX instructions the tensor-core kernel is built from, each wrapped once
// with the shapes it moves. PTX ISA names in the comments, so a learner can look them up.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace flashlab::gpu::ptx {

__device__ __forceinline__ uint32_t sram_address(const void* sram) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(sram));
}

// This thread's lane in its warp, read from the %laneid register. Unlike threadIdx.x % 32,
// the compiler cannot derive it from values it already holds, so a kernel's epilogue can
// take it afresh instead of keeping one more register live across the mainloop.
__device__ __forceinline__ int lane_id() {
  int lane;
  asm volatile("mov.u32 %0, %%laneid;\n" : "=r"(lane));
  return lane;
}

// cp.async: copy 16 bytes HBM -> SRAM without passing through registers, asynchronously.
// With valid == false nothing is read and the 16 bytes are zero-filled (the ragged edge).
__device__ __forceinline__ void cp_async_16(void* sram, const void* hbm, bool valid) {
  constexpr int kBytes = 16;
  asm volatile("cp.async.cg.shared.global [%0], [%1], %2, %3;\n" ::"r"(sram_address(sram)),
               "l"(hbm), "n"(kBytes), "r"(valid ? kBytes : 0));
}
// createpolicy.fractional.L2::evict_first: an L2 cache policy (an opaque 64-bit value) that
// marks every line a hinted access touches as the first to be replaced in its set. Made once
// per thread and passed to the accesses below.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
// cp_async_16 with an L2 cache policy (cp.async ... .L2::cache_hint): the same copy, and the
// line it brings into the L2 carries the policy's eviction priority.
__device__ __forceinline__ void cp_async_16(void* sram, const void* hbm, bool valid,
                                            uint64_t l2_policy) {
  constexpr int kBytes = 16;
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], %2, %3, %4;\n" ::"r"(
                   sram_address(sram)),
               "l"(hbm), "n"(kBytes), "r"(valid ? kBytes : 0), "l"(l2_policy));
}
// The same for 4 bytes (one fp32), through L1 (.ca: the only caching a 4-byte copy allows).
__device__ __forceinline__ void cp_async_4(void* sram, const void* hbm, bool valid) {
  constexpr int kBytes = 4;
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(sram_address(sram)),
               "l"(hbm), "n"(kBytes), "r"(valid ? kBytes : 0));
}
// Closes the group of cp.async issued so far by this thread.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most `pending` of this thread's groups are still in flight.
template <int pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
}

// ld.global.nc.L1::no_allocate.v4: 16 bytes HBM -> registers through the read-only path,
// without keeping a copy in L1 (the data is used once, by this thread). With valid == false
// nothing is read and the 16 bytes are zero (the ragged edge, a bad page).
__device__ __forceinline__ uint4 ld_global_nc_16(const void* hbm, bool valid) {
  uint4 r = make_uint4(0u, 0u, 0u, 0u);
  if (valid)
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(hbm));
  return r;
}

// ldmatrix.x4: four 8x8 tiles of 16-bit elements from SRAM into registers, laid out as an
// mma operand. Lanes 8i..8i+7 give the row addresses of tile i; r[i] receives tile i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* sram) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(sram_address(sram)));
}
// The same, each 8x8 tile transposed: what V needs, stored (keys, d) but used as (k, n).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* sram) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(sram_address(sram)));
}

// mma.sync m16n8k16: C (16x8, fp32) += A (16x16, row) * B (16x8, col), one warp.
// With g = lane / 4 and t = lane % 4 the fragments hold
//   A: a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
//   B: b0 (k = 2t..2t+1, n = g)          b1 (k = 2t+8.., n = g)
//   C: c0, c1 (g, 2t..2t+1)              c2, c3 (g+8, 2t..2t+1)
template <class T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1);

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4],
                                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_16816<__half>(float (&c)[4], const uint32_t (&a)[4],
                                                  uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two fp32 values rounded to the 16-bit type and packed, lo in the low half: one A register.
template <class T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The inverse of pack2: the two 16-bit values of a register, as fp32 (lo, hi).
template <class T> __device__ __forceinline__ float2 unpack2(uint32_t r);
template <>
__device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t r) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r));
}
template <>
__device__ __forceinline__ float2 unpack2<__half>(uint32_t r) {
  return __half22float2(*reinterpret_cast<const __half2*>(&r));
}

// red.global.add.v4.f32 (PTX ISA 8.1, sm_90): adds four consecutive floats into global
// memory in one reduction, with no value returned; gmem must be 16-byte aligned. One
// instruction (RED.E.ADD.F32x4) where four scalar atomicAdds would take four.
__device__ __forceinline__ void red_add_v4(float* gmem, float a, float b, float c, float d) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(gmem), "f"(a), "f"(b),
               "f"(c), "f"(d)
               : "memory");
}

// ex2.approx: 2^x on the special-function unit, one instruction; 2^-inf = 0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace flashlab::gpu::ptx
