// The backward (v3, the wgmma kernel, where fa3_backward::takes the call: the default mode
// without dropout; v2 otherwise) against the fp64 CPU reference, under ANCHORS.md's rule for
// gradients: dQ, dK and dV each within 3x of the error of the naive backward computed in the same
// low precision, on awkward shapes, GQA, every layout and both causal alignments, with the
// gradients poisoned with NaN before the call. A failure prints the case, the gradient and
// both errors.
#include "backward_harness.hpp"
#include "checks.hpp"

#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

namespace flashlab::gpu::test {
namespace {

void expect_gradients_match(const BackwardCase& c) {
  const uint64_t seed = fresh_seed();
  const BackwardOutcome out = run_backward_case(c, seed);
  const std::pair<const char*, const GradientOutcome*> grads[] = {
      {"dQ", &out.dq}, {"dK", &out.dk}, {"dV", &out.dv}};
  for (const auto& [name, g] : grads) {
    INFO(c.describe(), " seed=", seed, " ", name, ": err=", g->err,
         " naive-same-precision err=", g->err_naive, " bound=", g->bound,
         " unwritten=", g->unwritten, " padding written=", g->padding_written);
    CHECK(g->unwritten == 0);
    CHECK(g->padding_written == 0);
    CHECK(g->err <= g->bound);
  }
}

BackwardCase square(int n, int d, flashlab_causal causal = FLASHLAB_CAUSAL_NONE) {
  BackwardCase c;
  c.n_q = c.n_k = n;
  c.d = d;
  c.causal = causal;
  return c;
}

TEST_CASE("backward: awkward N, d = 64 and 128, bf16, causal and not") {
  for (int d : {64, 128})
    for (int n : {1, 17, 97, 113, 1023})
      for (flashlab_causal causal : {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT})
        expect_gradients_match(square(n, d, causal));
  expect_gradients_match(square(2049, 128, FLASHLAB_CAUSAL_TOP_LEFT));
  expect_gradients_match(square(2049, 64));
}

TEST_CASE("backward: fp16") {
  for (int d : {64, 128}) {
    BackwardCase c = square(113, d, FLASHLAB_CAUSAL_TOP_LEFT);
    c.dtype = FLASHLAB_FP16;
    expect_gradients_match(c);
    c = square(1023, d);
    c.dtype = FLASHLAB_FP16;
    expect_gradients_match(c);
  }
}

TEST_CASE("backward: N_q != N_k both ways, both causal alignments") {
  const std::pair<int, int> sizes[] = {{113, 203}, {203, 113}, {1023, 1024}, {1024, 1023},
                                       {1, 339},   {339, 1},   {17, 2049}};
  for (const auto& [n_q, n_k] : sizes)
    for (flashlab_causal causal :
         {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT, FLASHLAB_CAUSAL_BOTTOM_RIGHT}) {
      BackwardCase c;
      c.n_q = n_q;
      c.n_k = n_k;
      c.d = 64;
      c.causal = causal;
      expect_gradients_match(c);
      c.d = 128;
      expect_gradients_match(c);
    }
}

TEST_CASE("backward: GQA (4 query heads over 2 and over 1), batches") {
  for (int heads_kv : {2, 1})
    for (flashlab_causal causal : {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_BOTTOM_RIGHT}) {
      BackwardCase c;
      c.batch = 2;
      c.heads_q = 4;
      c.heads_kv = heads_kv;
      c.n_q = 97;
      c.n_k = 203;
      c.d = 128;
      c.causal = causal;
      expect_gradients_match(c);
    }
}

TEST_CASE("backward: BSHD and padded rows") {
  for (Layout layout : {Layout::bshd, Layout::bhsd_padded}) {
    BackwardCase c;
    c.batch = 2;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.n_q = 113;
    c.n_k = 97;
    c.d = 64;
    c.layout = layout;
    c.causal = FLASHLAB_CAUSAL_TOP_LEFT;
    expect_gradients_match(c);
  }
}

// v3's own risks: its two buffers of Q_i, dO_i through many phases of their barriers (a
// block's steps run over the GQA group's query heads), dQ split by slabs of d (d = 128) or by keys
// (d = 64), a warpgroup whose 64 keys lie wholly past N_k, and blocks whose keys no query sees
// (they load nothing and write zeros).
TEST_CASE(
    "backward v3: many steps a block (GQA 4 over 1, N_q = 1023), d = 64 and 128, fp16 and bf16") {
  for (flashlab_dtype dtype : {FLASHLAB_BF16, FLASHLAB_FP16})
    for (int d : {64, 128}) {
      BackwardCase c;
      c.dtype = dtype;
      c.heads_q = 4;
      c.heads_kv = 1;
      c.n_q = 1023;
      c.n_k = 300;
      c.d = d;
      expect_gradients_match(c);
      c.causal = FLASHLAB_CAUSAL_BOTTOM_RIGHT;
      expect_gradients_match(c);
    }
}

TEST_CASE("backward v3: a warpgroup's keys past N_k, and blocks no query sees") {
  for (int d : {64, 128}) {
    // N_k = 17, 65: the second warpgroup's keys are all past N_k; 129: a second block of one key.
    for (int n_k : {17, 65, 129}) {
      BackwardCase c;
      c.n_q = 200;
      c.n_k = n_k;
      c.d = d;
      expect_gradients_match(c);
    }
    // Top-left with N_k > N_q: keys past N_q - 1 are seen by no query, whole blocks of them.
    BackwardCase c;
    c.heads_q = 2;
    c.heads_kv = 2;
    c.n_q = 100;
    c.n_k = 700;
    c.d = d;
    c.causal = FLASHLAB_CAUSAL_TOP_LEFT;
    expect_gradients_match(c);
  }
}

TEST_CASE("backward, deterministic mode: the same rule, and bitwise equal over 50 runs") {
  constexpr int kRuns = 50;
  for (flashlab_causal causal : {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_BOTTOM_RIGHT}) {
    BackwardCase c;
    c.batch = 2;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.n_q = 1023;
    c.n_k = 1024;
    c.d = 128;
    c.causal = causal;
    c.deterministic = true;
    expect_gradients_match(c);
    const auto runs = run_backward_repeated(c, fresh_seed(), kRuns);
    INFO(c.describe());
    int differing = 0;
    for (int r = 1; r < kRuns; ++r) differing += runs[r] != runs[0];
    CHECK(differing == 0);
  }
  for (int n : {1, 17, 113}) {
    BackwardCase c = square(n, 64, FLASHLAB_CAUSAL_TOP_LEFT);
    c.deterministic = true;
    expect_gradients_match(c);
  }
  // Bottom-right with N_q > N_k: rows 0 to 105 see no key, so the dQ kernel's first query
  // tile walks no KV tile at all and writes its zeros through SRAM once its Q and dO land.
  // Top-left with N_k > N_q: keys 100 to 699 are in every query's future, so the main
  // kernel's blocks of KV tiles past the first walk no step and write zeros the same way.
  for (int d : {64, 128})
    for (const auto& [n_q, n_k, causal] : {std::tuple{203, 97, FLASHLAB_CAUSAL_BOTTOM_RIGHT},
                                           std::tuple{100, 700, FLASHLAB_CAUSAL_TOP_LEFT}}) {
      BackwardCase c;
      c.heads_q = 2;
      c.heads_kv = 1;
      c.n_q = n_q;
      c.n_k = n_k;
      c.d = d;
      c.causal = causal;
      c.deterministic = true;
      expect_gradients_match(c);
    }
}

TEST_CASE(
    "sanitizer: the backward v3 at d = 64 and 128, bf16 and fp16, GQA, ragged and causal, "
    "several steps a block (compute-sanitizer runs this)") {
  for (flashlab_dtype dtype : {FLASHLAB_BF16, FLASHLAB_FP16})
    for (int d : {64, 128}) {
      BackwardCase c;
      c.dtype = dtype;
      c.heads_q = 2;
      c.heads_kv = 1;
      c.n_q = 130;
      c.n_k = 203;
      c.d = d;
      c.causal = d == 64 ? FLASHLAB_CAUSAL_BOTTOM_RIGHT : FLASHLAB_CAUSAL_TOP_LEFT;
      expect_gradients_match(c);
    }
}

TEST_CASE(
    "sanitizer: the backward once at a small size, both modes, with and without dropout "
    "(compute-sanitizer runs this)") {
  // Bottom-right N_q = 203 over 97 keys: the dQ kernel's blocks that see no key; top-left 100
  // over 300: main-kernel blocks whose keys no query sees (v2, which runs with dropout and in
  // the deterministic mode, walks no step there and writes its zeros through SRAM).
  struct Shape {
    int n_q, n_k;
    flashlab_causal causal;
  };
  for (bool deterministic : {false, true})
    for (double p_drop : {0.0, 0.25})
      for (const Shape shape : {Shape{97, 113, FLASHLAB_CAUSAL_BOTTOM_RIGHT},
                                Shape{203, 97, FLASHLAB_CAUSAL_BOTTOM_RIGHT},
                                Shape{100, 300, FLASHLAB_CAUSAL_TOP_LEFT}}) {
        BackwardCase c;
        c.heads_q = 2;
        c.heads_kv = 1;
        c.n_q = shape.n_q;
        c.n_k = shape.n_k;
        c.d = 64;
        c.causal = shape.causal;
        c.deterministic = deterministic;
        c.dropout_p = p_drop;
        c.dropout_seed = fresh_seed();
        expect_gradients_match(c);
      }
}

// Dropout: the forward (O, LSE) and the backward draw the same mask, and so do the fp64 and
// low-precision CPU backwards the result is measured against; a mask drawn wrong anywhere
// (transposed, another head's, another offset's) moves dV and dS by whole weights, far past
// the 3x rule. Every case in both modes: the main kernel draws the mask on P^T, the dQ kernel
// of the deterministic mode on P.
// N_k = 1 is left out here (N_q = 1 is in): with one key, P = 1 and the naive backward's
// dS = P o (dP - rowsum(P o dP)) is exactly 0, so its dQ and dK have no error at all and 3x
// of it allows none; the kernel's D = rowsum(dO o O) comes from the forward's O, whose kept
// weight was rounded to the input dtype as 1/(1 - p) (for p = 0.17: 1.203 in bf16 against
// 1.2048), so its dS is that rounding times dP, not 0. Without dropout O = V exactly there
// and the case is tested above.
BackwardCase with_dropout(BackwardCase c, double p_drop, bool deterministic) {
  c.dropout_p = p_drop;
  c.dropout_seed = fresh_seed();
  c.dropout_offset = uint32_t(fresh_seed());
  c.deterministic = deterministic;
  return c;
}

TEST_CASE("backward with dropout: awkward N, d = 64 and 128, causal and not, both modes") {
  for (bool deterministic : {false, true})
    for (int d : {64, 128})
      for (int n : {17, 97, 113, 1023})
        for (flashlab_causal causal : {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT})
          expect_gradients_match(with_dropout(square(n, d, causal), 0.17, deterministic));
  for (double p_drop : {0.5, 0.9})
    expect_gradients_match(with_dropout(square(257, 128), p_drop, false));
}

TEST_CASE("backward with dropout: fp16, N_q != N_k both ways, bottom-right causal") {
  const std::pair<int, int> sizes[] = {{113, 203}, {203, 113}, {1, 339}, {339, 17}};
  for (bool deterministic : {false, true})
    for (const auto& [n_q, n_k] : sizes) {
      BackwardCase c;
      c.dtype = FLASHLAB_FP16;
      c.n_q = n_q;
      c.n_k = n_k;
      c.d = 128;
      c.causal = FLASHLAB_CAUSAL_BOTTOM_RIGHT;
      expect_gradients_match(with_dropout(c, 0.3, deterministic));
      c.d = 64;
      c.causal = FLASHLAB_CAUSAL_NONE;
      expect_gradients_match(with_dropout(c, 0.3, deterministic));
    }
}

TEST_CASE("backward with dropout: GQA, batches and BSHD (the mask of the QUERY head)") {
  for (bool deterministic : {false, true})
    for (int heads_kv : {2, 1})
      for (Layout layout : {Layout::bhsd, Layout::bshd}) {
        BackwardCase c;
        c.batch = 2;
        c.heads_q = 4;
        c.heads_kv = heads_kv;
        c.n_q = 97;
        c.n_k = 203;
        c.d = heads_kv == 2 ? 128 : 64;
        c.causal = FLASHLAB_CAUSAL_BOTTOM_RIGHT;
        c.layout = layout;
        expect_gradients_match(with_dropout(c, 0.2, deterministic));
      }
}

// The raw bytes of dQ, dK, dV of one deterministic run of c on the inputs of `seed`.
std::vector<uint8_t> deterministic_bytes(BackwardCase c, uint64_t seed) {
  c.deterministic = true;
  return run_backward_repeated(c, seed, 1).at(0);
}

TEST_CASE("backward with dropout_p = 0 is bitwise the backward without dropout, any seed") {
  for (flashlab_causal causal : {FLASHLAB_CAUSAL_NONE, FLASHLAB_CAUSAL_TOP_LEFT}) {
    const BackwardCase plain = square(203, 128, causal);
    BackwardCase zero = plain;
    zero.dropout_seed = fresh_seed() | 1;  // p = 0: the seed and offset must not matter
    zero.dropout_offset = 12345;
    const uint64_t seed = fresh_seed();
    INFO(zero.describe(), " input seed=", seed);
    CHECK(deterministic_bytes(zero, seed) == deterministic_bytes(plain, seed));
  }
}

TEST_CASE("backward with dropout: the mask matters, and the deterministic mode stays bitwise") {
  // Another seed or another offset is another mask: the gradients change.
  const BackwardCase base = with_dropout(square(113, 64), 0.3, true);
  BackwardCase other_seed = base, other_offset = base;
  other_seed.dropout_seed ^= 1;
  other_offset.dropout_offset ^= 1;
  const uint64_t seed = fresh_seed();
  const std::vector<uint8_t> a = deterministic_bytes(base, seed);
  INFO(base.describe(), " input seed=", seed);
  CHECK(a != deterministic_bytes(other_seed, seed));
  CHECK(a != deterministic_bytes(other_offset, seed));
  // Bitwise equal over runs with dropout too.
  constexpr int kRuns = 20;
  BackwardCase c = with_dropout(square(1023, 128, FLASHLAB_CAUSAL_TOP_LEFT), 0.1, true);
  c.heads_q = 2;
  c.heads_kv = 1;
  const auto runs = run_backward_repeated(c, fresh_seed(), kRuns);
  INFO(c.describe());
  int differing = 0;
  for (int r = 1; r < kRuns; ++r) differing += runs[r] != runs[0];
  CHECK(differing == 0);
}

}  // namespace
}  // namespace flashlab::gpu::test
