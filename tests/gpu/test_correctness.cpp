// Every kernel against the fp64 CPU reference: awkward sizes, both head dimensions, causal
// and not, GQA, N_q != N_k with both causal alignments, every dtype each kernel takes.
#include "checks.hpp"

namespace flashlab::gpu::test {
namespace {

constexpr int kSquareN[] = {1, 17, 97, 128, 1023};
constexpr flashlab_causal kCausalModes[] = {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT};

void square_sweep(flashlab_kernel kernel) {
  for (int d : shared_head_dims())
    for (int n : kSquareN)
      for (flashlab_causal causal : kCausalModes) {
        Case c;
        c.kernel = kernel;
        c.batch = 2;
        c.heads_q = 4;
        c.heads_kv = 2;  // GQA: two query heads per KV head
        c.n_q = c.n_k = n;
        c.d = d;
        c.causal = causal;
        expect_matches_reference(c);
      }
}

TEST_CASE("naive kernel matches the fp64 reference: bf16, N in {1..1023}, every d all kernels take, GQA") {
  square_sweep(FLASHLAB_KERNEL_NAIVE);
}

TEST_CASE("scalar kernel matches the fp64 reference: bf16, N in {1..1023}, every d all kernels take, GQA") {
  square_sweep(FLASHLAB_KERNEL_SCALAR);
}

TEST_CASE("fa2 kernel matches the fp64 reference: bf16, N in {1..1023}, every d all kernels take, GQA") {
  square_sweep(FLASHLAB_KERNEL_FA2);
}

TEST_CASE("fa3 kernel matches the fp64 reference: bf16, N in {1..1023}, every d all kernels take, GQA") {
  square_sweep(FLASHLAB_KERNEL_FA3);
}

TEST_CASE("every kernel at N = 4096, d = 128, causal and not") {
  for (flashlab_kernel kernel : all_kernels())
    for (flashlab_causal causal : kCausalModes) {
      Case c;
      c.kernel = kernel;
      c.heads_q = 2;
      c.heads_kv = 1;
      c.n_q = c.n_k = 4096;
      c.d = 128;
      c.causal = causal;
      expect_matches_reference(c);
    }
}

TEST_CASE("every kernel with N_q != N_k under no mask and both causal alignments") {
  constexpr int kPairs[][2] = {{113, 203}, {203, 113}, {1, 339}, {1023, 1024}};
  constexpr flashlab_causal kAll[] = {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT,
                                      FLASHLAB_CAUSAL_BOTTOM_RIGHT};
  for (flashlab_kernel kernel : all_kernels())
    for (int d : shared_head_dims())
      for (const auto& pair : kPairs)
        for (flashlab_causal causal : kAll) {
          Case c;
          c.kernel = kernel;
          c.heads_q = 2;
          c.heads_kv = 2;
          c.n_q = pair[0];
          c.n_k = pair[1];
          c.d = d;
          c.causal = causal;
          expect_matches_reference(c);
        }
}

TEST_CASE("every kernel in fp16, and naive and scalar in fp32") {
  for (flashlab_kernel kernel : all_kernels())
    for (flashlab_dtype dtype : {FLASHLAB_FP16, FLASHLAB_FP32}) {
      if (!find_kernel(kernel)->dtypes.contains(dtype)) continue;  // e.g. fa2 takes no fp32
      for (int d : shared_head_dims())
        for (int n : {97, 1023}) {
          Case c;
          c.kernel = kernel;
          c.dtype = dtype;
          c.heads_q = 2;
          c.heads_kv = 1;
          c.n_q = c.n_k = n;
          c.d = d;
          c.causal = FLASHLAB_CAUSAL_TOP_LEFT;
          expect_matches_reference(c);
        }
    }
}

TEST_CASE("every kernel with MQA (one KV head for eight query heads) and a given scale") {
  for (flashlab_kernel kernel : all_kernels()) {
    Case c;
    c.kernel = kernel;
    c.batch = 3;
    c.heads_q = 8;
    c.heads_kv = 1;
    c.n_q = c.n_k = 300;
    c.d = 64;
    c.causal = FLASHLAB_CAUSAL_BOTTOM_RIGHT;
    c.scale = 0.3;
    expect_matches_reference(c);
  }
}

TEST_CASE("sanitizer: every kernel once at a small size (compute-sanitizer runs only this)") {
  for (flashlab_kernel kernel : all_kernels())
    for (int d : shared_head_dims()) {
      Case c;
      c.kernel = kernel;
      c.heads_q = 2;
      c.heads_kv = 1;
      c.n_q = 97;
      c.n_k = 203;
      c.d = d;
      c.causal = FLASHLAB_CAUSAL_BOTTOM_RIGHT;
      expect_matches_reference(c);
    }
}

}  // namespace
}  // namespace flashlab::gpu::test
