// Strides as given: BSHD (flash-attn's layout) and BHSD with padded rows, whose padding
// must come back untouched.
#include "checks.hpp"

namespace flashlab::gpu::test {
namespace {

void layout_sweep(Layout layout) {
  for (flashlab_kernel kernel : all_kernels())
    for (int d : shared_head_dims())
      for (flashlab_causal causal : {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT}) {
        Case c;
        c.kernel = kernel;
        c.layout = layout;
        c.batch = 2;
        c.heads_q = 6;
        c.heads_kv = 3;
        c.n_q = 97;
        c.n_k = 211;
        c.d = d;
        c.causal = causal;
        expect_matches_reference(c);
      }
}

TEST_CASE("every kernel reads and writes BSHD strides") { layout_sweep(Layout::bshd); }

TEST_CASE("every kernel honours padded BHSD row strides and leaves the padding alone") {
  layout_sweep(Layout::bhsd_padded);
}

}  // namespace
}  // namespace flashlab::gpu::test
