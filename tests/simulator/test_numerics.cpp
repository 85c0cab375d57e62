// The simulator's outputs are cpu_reference's: FA1 and FA2 compute through the same
// algebra (tile_state, update, merge, finalize) and must match its tiled forwards; the
// naive programs are checked against FA2's order, an independent computation. Random inputs
// at awkward sizes.
#include "helpers.hpp"

#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive.hpp"

#include <doctest/doctest.h>

namespace flashlab::sim::test {

namespace {

struct Shape { Index N, d; };
constexpr Shape kShapes[] = {{1, 59}, {97, 59}, {113, 64}, {1023, 32}};
constexpr cpu::Causal kMasks[] = {cpu::Causal::none, cpu::Causal::top_left};

// The same operations in the same order on the same fp32 values: the results agree to the
// last bit but for the GEMM's internal blocking, which may regroup a sum of d products.
constexpr float kSameAlgebraTolerance = 1e-5f;
// Two fp32 evaluations of the same softmax-weighted mean in different orders (one pass
// over all N keys against tile-by-tile rescaling): each sits a few fp32 ulps of max|V|
// (about 4) from the exact O, summed over up to 1023 keys, so ~1e-6 apart; a wrong mask,
// scale or row would differ by ~0.1.
constexpr float kOtherOrderTolerance = 1e-4f;

float max_abs_diff(const cpu::Matrix<float>& a, const cpu::Matrix<float>& b) {
  return (a - b).cwiseAbs().maxCoeff();
}

template <class In>
cpu::Matrix<float> reference_O(Algorithm a, const cpu::Matrix<In>& Q, const cpu::Matrix<In>& K,
                               const cpu::Matrix<In>& V, const cpu::AttentionOptions& options) {
  switch (a) {
    // Not naive_attention, which the simulator's naive programs call: an independent
    // algorithm, so that the check can fail.
    case Algorithm::naive:
    case Algorithm::naive_kernel: return cpu::forward_q_outer<In>(Q, K, V, options).O;
    case Algorithm::fa1: return cpu::forward_kv_outer<In>(Q, K, V, options).O;
    case Algorithm::fa2: return cpu::forward_q_outer<In>(Q, K, V, options).O;
  }
  return {};
}

}  // namespace

TEST_CASE("fp32: naive, FA1, FA2 and the naive kernel give cpu_reference's O (and L)") {
  auto rng = fresh_rng();
  for (const auto [N, d] : kShapes) {
    for (const cpu::Causal causal : kMasks) {
      for (const Algorithm a :
           {Algorithm::naive, Algorithm::fa1, Algorithm::fa2, Algorithm::naive_kernel}) {
        CAPTURE(N);
        CAPTURE(to_string(a));
        const auto Q = random_matrix<float>(N, d, rng), K = random_matrix<float>(N, d, rng),
                   V = random_matrix<float>(N, d, rng);
        Problem p = problem(N, d, DType::fp32, 48 * kKiB, causal);
        p.tiles = cpu::TileSizes{7, 13};  // awkward: neither divides N
        const auto sim = simulate<float>(a, p, Q, K, V);
        cpu::AttentionOptions options;
        options.causal = causal;
        options.tiles = p.tiles.value();
        const bool three_operators = a == Algorithm::naive || a == Algorithm::naive_kernel;
        const float tolerance = three_operators ? kOtherOrderTolerance : kSameAlgebraTolerance;
        CHECK(max_abs_diff(sim.O, reference_O<float>(a, Q, K, V, options)) <= tolerance);
        if (a != Algorithm::naive) {  // L from the row's whole score vector at once
          const auto L = cpu::naive_attention<float>(Q, K, V, options).L;
          REQUIRE(sim.L.size() == N);
          CHECK((sim.L - L).cwiseAbs().maxCoeff() <= kOtherOrderTolerance);
        }
      }
    }
  }
}

TEST_CASE("FA1's O is the normalised O it kept in HBM, and its L is m + log l") {
  // A row whose first KV tiles are masked away entirely, and a large score range: O must be
  // U / l (not divided by l once more) and L the log-sum-exp, for every row.
  auto rng = fresh_rng();
  const Index N = 37, d = 5;
  auto Q = random_matrix<float>(N, d, rng), K = random_matrix<float>(N, d, rng),
       V = random_matrix<float>(N, d, rng);
  Q *= 4.0f;  // scores of tens: l far from 1, so dividing by it twice would show
  Problem p = problem(N, d, DType::fp32, 48 * kKiB, cpu::Causal::top_left);
  p.tiles = cpu::TileSizes{4, 3};
  const auto sim = simulate<float>(Algorithm::fa1, p, Q, K, V);
  cpu::AttentionOptions options;
  options.causal = cpu::Causal::top_left;
  const auto exact = cpu::naive_attention<double>(Q.cast<double>(), K.cast<double>(),
                                                  V.cast<double>(), options);
  CHECK((sim.O.cast<double>() - exact.O).cwiseAbs().maxCoeff() <= kOtherOrderTolerance);
  CHECK((sim.L.cast<double>() - exact.L).cwiseAbs().maxCoeff() <= kOtherOrderTolerance);
}

TEST_CASE("fp32 with the default block sizes: FA1's O and L are cpu_reference's") {
  auto rng = fresh_rng();
  const Index N = 1023, d = 59;
  const auto Q = random_matrix<float>(N, d, rng), K = random_matrix<float>(N, d, rng),
             V = random_matrix<float>(N, d, rng);
  const Problem p = problem(N, d, DType::fp32, 64 * kKiB, cpu::Causal::top_left);
  const auto sim = simulate<float>(Algorithm::fa1, p, Q, K, V);
  cpu::AttentionOptions options;
  options.causal = cpu::Causal::top_left;
  options.tiles = sim.report.tiles->tiles;
  const auto ref = cpu::forward_kv_outer<float>(Q, K, V, options);
  CHECK(max_abs_diff(sim.O, ref.O) <= kSameAlgebraTolerance);
  CHECK((sim.L - ref.L).cwiseAbs().maxCoeff() <= kSameAlgebraTolerance);
}

TEST_CASE("bf16: FA2's stored O is cpu_reference's O rounded to bf16") {
  auto rng = fresh_rng();
  for (const auto [N, d] : kShapes) {
    for (const cpu::Causal causal : kMasks) {
      const auto Q = random_matrix<cpu::bf16>(N, d, rng), K = random_matrix<cpu::bf16>(N, d, rng),
                 V = random_matrix<cpu::bf16>(N, d, rng);
      const Problem p = problem(N, d, DType::bf16, 64 * kKiB, causal);
      const auto sim = simulate<cpu::bf16>(Algorithm::fa2, p, Q, K, V);
      cpu::AttentionOptions options;
      options.causal = causal;
      options.tiles = sim.report.tiles->tiles;
      const auto ref = cpu::forward_q_outer<cpu::bf16>(Q, K, V, options);
      const cpu::Matrix<float> ref_stored = cpu::round_to<cpu::bf16>(ref.O).cast<float>();
      // Values that agree to fp32 rounding can still round to neighbouring bf16 numbers:
      // at most one bf16 ulp (2^-8 relative below |O| <= max|V|).
      const float ulp = std::ldexp(1.0f, -8) * std::max(1.0f, ref_stored.cwiseAbs().maxCoeff());
      CAPTURE(N);
      CHECK(max_abs_diff(sim.O, ref_stored) <= ulp);
    }
  }
}

TEST_CASE("bf16: FA1 keeps its running O in fp32, equals cpu_reference's FA1 and passes the rule") {
  // ANCHORS.md's rule: the error against an fp64 reference is at most twice that of the
  // naive attention computed in the same low precision.
  auto rng = fresh_rng();
  for (const auto [N, d] : {Shape{97, 59}, Shape{1023, 64}}) {
    const auto Q = random_matrix<cpu::bf16>(N, d, rng), K = random_matrix<cpu::bf16>(N, d, rng),
               V = random_matrix<cpu::bf16>(N, d, rng);
    Problem p = problem(N, d, DType::bf16, 64 * kKiB);
    p.tiles = cpu::TileSizes{16, 16};  // many KV tiles: many round trips of O through HBM
    const auto sim = simulate<cpu::bf16>(Algorithm::fa1, p, Q, K, V);
    cpu::AttentionOptions options;
    options.tiles = *p.tiles;
    CHECK(max_abs_diff(sim.O, cpu::forward_kv_outer<cpu::bf16>(Q, K, V, options).O) <=
          kSameAlgebraTolerance);
    const auto exact = cpu::naive_attention<double>(Q.cast<double>(), K.cast<double>(),
                                                    V.cast<double>()).O;
    const cpu::Matrix<double> low = cpu::naive_attention<cpu::bf16>(Q, K, V).O.cast<double>();
    const double err_sim = (sim.O.cast<double>() - exact).cwiseAbs().maxCoeff();
    const double err_naive = (low - exact).cwiseAbs().maxCoeff();
    CAPTURE(N);
    CHECK(err_sim <= 2 * err_naive);
  }
}

}  // namespace flashlab::sim::test
