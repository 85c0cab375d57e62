// wgmma: the warpgroup matrix multiply of Hopper. Four warps (a warpgroup, 128 threads)
// issue one instruction together; it runs asynchronously on the tensor cores while the
// threads go on, and they wait for it with commit/wait groups (like cp.async).
//   D (64, N) fp32 += A (64, 16) * B (16, N), A and B bf16 or fp16
// B always comes from SRAM through a 64-bit matrix descriptor; A from SRAM as well
// (wgmma_ss, for S = Q K^T) or from registers (wgmma_rs, for U += W V, where W has just been
// computed in registers). PTX ISA: "Asynchronous Warpgroup Level Matrix Multiply-Accumulate".
//
// The accumulator D in registers: warp w of the warpgroup holds rows 16 w .. 16 w + 15, laid
// out as N / 8 tiles of mma.sync's m16n8 C fragment, 4 floats each (N / 2 per thread). With
// g = lane / 4, t = lane % 4, element 4 j + e is
//   row 16 w + g + 8 (e / 2),  column 8 j + 2 t + (e % 2).
// A from registers: warp w's rows 16 w .. + 15 of the (64, 16) A, as mma.sync's A fragment:
//   a0 (g, 2t..2t+1)  a1 (g+8, 2t..2t+1)  a2 (g, 2t+8..2t+9)  a3 (g+8, 2t+8..2t+9)
// which is exactly what two neighbouring C tiles of a previous product hold, packed to 16 bits.
//
// The SRAM layout the descriptors describe is TMA's 128-byte swizzle (tma.cuh): a matrix is
// kept in slabs of 64 16-bit elements (128 bytes) per row, row r of a slab at byte 128 r and
// its 16-byte chunk c at chunk c ^ (r % 8); groups of 8 rows (1024 bytes, the swizzle atom)
// follow each other, and every slab starts 1024-byte aligned. The hardware applies the XOR
// to the address bits it computes, which is why a descriptor may point into the middle of a
// row (the k-th 16 columns start 32 k bytes in) as long as the atom itself is aligned.
#pragma once

#include "../ptx.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace flashlab::gpu::hopper {

inline constexpr int kWgmmaM = 64;  // rows of D per warpgroup
inline constexpr int kWgmmaK = 16;  // the K of one instruction (16-bit inputs)
inline constexpr int kSwizzleRowBytes = 128;
inline constexpr int kSwizzleAtomBytes = 8 * kSwizzleRowBytes;

// The descriptor's fields (PTX ISA, "Matrix Descriptor Format"), addresses and offsets in
// units of 16 bytes: start address bits 0-13, leading-dimension byte offset (LBO) bits
// 16-29, stride-dimension byte offset (SBO) bits 32-45, swizzle mode bits 62-63 (1: 128 B).
inline constexpr uint64_t kSwizzle128B = 1;
__device__ __forceinline__ uint64_t matrix_descriptor(const void* sram, uint32_t lbo_bytes,
                                                      uint32_t sbo_bytes) {
  constexpr uint32_t kField = (1u << 14) - 1;
  return uint64_t((ptx::sram_address(sram) >> 4) & kField) |
         uint64_t((lbo_bytes >> 4) & kField) << 16 | uint64_t((sbo_bytes >> 4) & kField) << 32 |
         kSwizzle128B << 62;
}

// A K-major operand (the reduction dimension contiguous in SRAM): Q as A of S = Q K^T, and
// K as its B ((Bc, d) in SRAM is (N, K) with K contiguous: "B transposed", no flag needed).
// `sram` points at row 0, column 16 k of the 16 columns one instruction reads: that is
// slab (16 k / 64) + 32 (k % 4) bytes. Rows step by 8-row atoms (SBO = 1024 bytes); the
// leading offset is unused with this swizzle (one instruction never leaves its slab).
__device__ __forceinline__ uint64_t descriptor_k_major(const void* sram) {
  return matrix_descriptor(sram, /*lbo_bytes=*/16, /*sbo_bytes=*/kSwizzleAtomBytes);
}

// An MN-major operand (N contiguous): V as B of U += W V. V is (Bc, d) in SRAM with d
// contiguous, so the instruction's K (keys) steps over rows and its N (d) runs along them.
// `sram` points at key row 16 k of slab 0; the 16 keys of one instruction are two 8-row
// atoms (SBO = 1024 bytes apart), and N crosses from one 64-wide slab of d to the next
// every 64 columns (LBO = the slab's size, rows x 128 bytes). wgmma's transpose-B flag is set.
__device__ __forceinline__ uint64_t descriptor_mn_major(const void* sram, int slab_rows) {
  return matrix_descriptor(sram, /*lbo_bytes=*/uint32_t(slab_rows) * kSwizzleRowBytes,
                           /*sbo_bytes=*/kSwizzleAtomBytes);
}

// The descriptor of the same operand `bytes` further on in SRAM: only the start address
// field moves. It holds the address in units of 16 bytes in bits 0-13, which no SRAM
// address (below 256 KiB) carries out of, so an add does it: the loops over a tile take
// one descriptor per tile and step it, instead of rebuilding it for every instruction.
__device__ __forceinline__ uint64_t descriptor_plus(uint64_t desc, uint32_t bytes) {
  return desc + (bytes >> 4);
}

// Orders this thread's earlier register writes (to accumulators or an A operand) before the
// wgmma that reads them; needed before the first wgmma and whenever registers changed.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
// Closes the group of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most `pending` committed groups are still running; their D is then valid.
template <int pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(pending) : "memory");
}

// Tells the compiler the accumulator registers are read and written here, so it moves no
// use of them across a wgmma_wait (it does not know the asynchronous unit writes them).
template <int n>
__device__ __forceinline__ void fence_registers(float (&d)[n]) {
#pragma unroll
  for (int i = 0; i < n; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int n>
__device__ __forceinline__ void fence_registers(uint32_t (&a)[n]) {
#pragma unroll
  for (int i = 0; i < n; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// D (64, N) = A (64, 16) * B (16, N) + (scale_d ? D : 0), A and B from SRAM, both K-major.
template <class T, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                                         int scale_d);
// D (64, N) = A (64, 16) * B (16, N) + (scale_d ? D : 0), A and B from SRAM, both MN-major
// (transposed): M and N contiguous, K over rows, as dS^T (keys, queries) and K (keys, d) are
// stored when the backward forms dQ = dS K (descriptor_mn_major for both).
template <class T, int N>
__device__ __forceinline__ void wgmma_ss_mn(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                                            int scale_d);
// D (64, N) = A (64, 16) * B (16, N) + (scale_d ? D : 0), A from registers (layout above),
// B from SRAM MN-major (transposed).
template <class T, int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b,
                                         int scale_d);

// The instructions themselves, one per (dtype, N) the kernels use: the operand lists are
// long because D is N / 2 registers per thread, each its own asm operand. They differ
// between bf16 and fp16 only in the type the PTX names, so one macro writes both sets.

// D's registers, as asm operands and as the instruction's list of them.
#define FLASHLAB_WGMMA_D32 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
    "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
    "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
    "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
    "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define FLASHLAB_WGMMA_D64 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
    "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
    "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
    "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
    "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), \
    "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), \
    "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
    "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), \
    "+f"(d[63])
#define FLASHLAB_WGMMA_REGS32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FLASHLAB_WGMMA_REGS64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

// wgmma_ss at N = 128 (S = Q K^T, Bc = 128) and N = 64 (the backward's S^T = K Q^T and
// dP^T = V dO^T, Br = 64), wgmma_rs at N = 128 and 64 (U += W V, d = 128 or 64; the
// backward's dV += P^T dO and dK += dS^T Q), and wgmma_ss_mn at N = 64 (the backward's
// dQ += dS K, one 64-column slab of d per instruction) for the element type T, whose PTX name is
// TYPE ("bf16", "f16"). The predicate p is scale_d != 0; the immediates are the scales of A
// and B (1) and, for ss, A and B K-major (0, 0); for rs, B transposed (1); for ss_mn, A and
// B transposed (1, 1).
#define FLASHLAB_WGMMA_INSTRUCTIONS(T, TYPE)                                                    \
  template <>                                                                                  \
  __device__ __forceinline__ void wgmma_ss<T, 128>(float(&d)[64], uint64_t desc_a,             \
                                                   uint64_t desc_b, int scale_d) {             \
    asm volatile("{\n.reg .pred p;\n"                                                          \
                 "setp.ne.b32 p, %66, 0;\n"                                                    \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " "              \
                 FLASHLAB_WGMMA_REGS64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"                        \
                 : FLASHLAB_WGMMA_D64                                                          \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                    \
  }                                                                                            \
  template <>                                                                                  \
  __device__ __forceinline__ void wgmma_ss<T, 64>(float(&d)[32], uint64_t desc_a,              \
                                                  uint64_t desc_b, int scale_d) {              \
    asm volatile("{\n.reg .pred p;\n"                                                          \
                 "setp.ne.b32 p, %34, 0;\n"                                                    \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "               \
                 FLASHLAB_WGMMA_REGS32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"                        \
                 : FLASHLAB_WGMMA_D32                                                          \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                    \
  }                                                                                            \
  template <>                                                                                  \
  __device__ __forceinline__ void wgmma_ss_mn<T, 64>(float(&d)[32], uint64_t desc_a,           \
                                                     uint64_t desc_b, int scale_d) {           \
    asm volatile("{\n.reg .pred p;\n"                                                          \
                 "setp.ne.b32 p, %34, 0;\n"                                                    \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "               \
                 FLASHLAB_WGMMA_REGS32 ", %32, %33, p, 1, 1, 1, 1;\n}\n"                        \
                 : FLASHLAB_WGMMA_D32                                                          \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                    \
  }                                                                                            \
  template <>                                                                                  \
  __device__ __forceinline__ void wgmma_rs<T, 128>(float(&d)[64], const uint32_t(&a)[4],       \
                                                   uint64_t desc_b, int scale_d) {             \
    asm volatile("{\n.reg .pred p;\n"                                                          \
                 "setp.ne.b32 p, %69, 0;\n"                                                    \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " "              \
                 FLASHLAB_WGMMA_REGS64 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"         \
                 : FLASHLAB_WGMMA_D64                                                          \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));    \
  }                                                                                            \
  template <>                                                                                  \
  __device__ __forceinline__ void wgmma_rs<T, 64>(float(&d)[32], const uint32_t(&a)[4],        \
                                                  uint64_t desc_b, int scale_d) {              \
    asm volatile("{\n.reg .pred p;\n"                                                          \
                 "setp.ne.b32 p, %37, 0;\n"                                                    \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "               \
                 FLASHLAB_WGMMA_REGS32 ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"         \
                 : FLASHLAB_WGMMA_D32                                                          \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));    \
  }

FLASHLAB_WGMMA_INSTRUCTIONS(__nv_bfloat16, "bf16")
FLASHLAB_WGMMA_INSTRUCTIONS(__half, "f16")

#undef FLASHLAB_WGMMA_INSTRUCTIONS
#undef FLASHLAB_WGMMA_REGS64
#undef FLASHLAB_WGMMA_REGS32
#undef FLASHLAB_WGMMA_D64
#undef FLASHLAB_WGMMA_D32

}  // namespace flashlab::gpu::hopper
