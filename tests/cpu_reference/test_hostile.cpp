// Hostile values at every entry point of the CPU API: 2^31 +- 1, 2^63 - 1, negative sizes,
// NaN and -0.0, and enum values cast from bad integers. Each is refused with InvalidArgument
// naming the value, or (tile sizes past N) gives the right answer; none wraps round.
#include "flashlab/cpu/backward.hpp"
#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/conditional_rescaling.hpp"
#include "flashlab/cpu/decode.hpp"
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/multihead.hpp"
#include "flashlab/cpu/naive.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace flashlab::cpu;

namespace {

constexpr Index kMax = kMaxIndex;  // 2^63 - 1
constexpr Index kTwo31 = Index{1} << 31;

template <class F>
std::string refusal(F&& call) {
  try {
    call();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(accepted)";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

using flashlab::test::random_matrix;

}  // namespace

TEST_CASE("tile_count never overflows, and refuses what is not a count") {
  CHECK(tile_count(0, kMax) == 0);
  CHECK(tile_count(1, kMax) == 1);
  CHECK(tile_count(kMax, kMax) == 1);
  CHECK(tile_count(kMax, 1) == kMax);
  CHECK(tile_count(kMax, 2) == kMax / 2 + 1);
  CHECK(tile_count(kTwo31 + 1, kTwo31) == 2);
  CHECK(tile_count(kTwo31 - 1, kTwo31) == 1);
  CHECK(contains(refusal([] { tile_count(5, 0); }), "tiles of 0 rows"));
  CHECK(contains(refusal([] { tile_count(-1, 4); }), "-1 rows"));
  CHECK(contains(refusal([] { tile_count(4, -kMax); }), std::to_string(-kMax)));
}

TEST_CASE("tile sizes near 2^63 give the O and L of one tile, in every loop order") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Matrix<double> Q = random_matrix<double>(13, 5, rng), K = random_matrix<double>(11, 5, rng),
                       V = random_matrix<double>(11, 5, rng);
  const auto exact = naive_attention<double>(Q, K, V);
  for (const Index huge : {kTwo31 - 1, kTwo31 + 1, kMax - 1, kMax}) {
    CAPTURE(huge);
    AttentionOptions options;
    options.tiles = {huge, huge};
    for (const auto& r : {forward_q_outer<double>(Q, K, V, options),
                          forward_kv_outer<double>(Q, K, V, options)}) {
      CHECK((r.O - exact.O).cwiseAbs().maxCoeff() <= 1e-12);
      CHECK((r.L - exact.L).cwiseAbs().maxCoeff() <= 1e-12);
      CHECK(r.tiles.computed == 1);
    }
    const auto c = forward_conditional<double>(Q, K, V, options);
    CHECK((c.O - exact.O).cwiseAbs().maxCoeff() <= 1e-12);
  }
}

TEST_CASE("negative extents are refused as InvalidArgument naming them, not length_error") {
  for (const Index bad : {Index{-1}, -kTwo31, -kMax}) {
    CAPTURE(bad);
    CHECK(contains(refusal([&] { HeadTensor<float>(bad, 1, 4, 4); }),
                   "batch = " + std::to_string(bad)));
    CHECK(contains(refusal([&] { HeadTensor<float>(1, bad, 4, 4); }),
                   "heads = " + std::to_string(bad)));
    CHECK(contains(refusal([&] { HeadTensor<float>(1, 1, bad, 4); }),
                   "rows = " + std::to_string(bad)));
    CHECK(contains(refusal([&] { HeadTensor<float>(1, 1, 4, bad); }),
                   "cols = " + std::to_string(bad)));
  }
  // A tensor whose public fields were set by hand: the shape check says so first.
  HeadTensor<float> Q(1, 1, 4, 8), K(1, 1, 4, 8), V(1, 1, 4, 8);
  Q.rows = -4;
  CHECK(contains(refusal([&] { forward_multihead<float>(Q, K, V); }), "-4"));
}

TEST_CASE("tensors whose entries overflow 64 bits are refused before any allocation") {
  for (const auto& [b, h, n, d] : {std::array<Index, 4>{kTwo31 + 1, kTwo31 + 1, 4, 4},
                                   std::array<Index, 4>{1, 1, kMax, 2},
                                   std::array<Index, 4>{kTwo31, kTwo31, kTwo31, 0}}) {
    const std::string why = refusal([&] { HeadTensor<float>(b, h, n, d); });
    CHECK(contains(why, "exceeds 9223372036854775807"));
  }
}

TEST_CASE("head(b, h) outside the tensor is refused") {
  HeadTensor<float> X(2, 3, 4, 5);
  CHECK(contains(refusal([&] { X.head(2, 0); }), "head(2, 0)"));
  CHECK(contains(refusal([&] { X.head(0, -1); }), "head(0, -1)"));
  CHECK(contains(refusal([&] { X.head(kMax, kMax); }), "[0, batch)"));
}

TEST_CASE("a Causal value cast from a bad integer is refused by every entry point") {
  const Matrix<double> Q = Matrix<double>::Ones(4, 8), K = Matrix<double>::Ones(4, 8);
  for (const int bad : {3, 7, -1}) {
    AttentionOptions options;
    options.causal = static_cast<Causal>(bad);
    const std::string named = "causal = " + std::to_string(bad);
    CAPTURE(bad);
    CHECK(contains(refusal([&] { forward_q_outer<double>(Q, K, K, options); }), named));
    CHECK(contains(refusal([&] { forward_kv_outer<double>(Q, K, K, options); }), named));
    CHECK(contains(refusal([&] { naive_attention<double>(Q, K, K, options); }), named));
    CHECK(contains(refusal([&] { forward_conditional<double>(Q, K, K, options); }), named));
    CHECK(contains(refusal([&] { decode<double>(Q, K, K, {2}, options); }), named));
    const Vector<double> L = Vector<double>::Zero(4);
    CHECK(contains(refusal([&] { backward_kv_outer<double>(Q, K, K, Q, L, Q, options); }),
                   named));
    HeadTensor<double> X(1, 1, 4, 8);
    CHECK(contains(refusal([&] { forward_multihead<double>(X, X, X, options); }), named));
  }
}

TEST_CASE("other enums cast from bad integers are refused") {
  const Matrix<double> Q = Matrix<double>::Ones(3, 4);
  RescaleOptions rescale;
  rescale.variant = static_cast<RescaleVariant>(5);
  CHECK(contains(refusal([&] { forward_conditional<double>(Q, Q, Q, {}, rescale); }),
                 "rescale variant 5"));
  DecodeOptions order{2, static_cast<MergeOrder>(9)};
  CHECK(contains(refusal([&] { decode<double>(Q, Q, Q, order); }), "MergeOrder 9"));
}

TEST_CASE("NaN, -0.0, infinities and 2^63 - 1 as numbers of the API") {
  const Matrix<double> Q = Matrix<double>::Ones(3, 4);
  for (const double scale : {std::nan(""), -0.0, 0.0, -1.0,
                             std::numeric_limits<double>::infinity()}) {
    AttentionOptions options;
    options.scale = scale;
    CAPTURE(scale);
    CHECK(contains(refusal([&] { forward_q_outer<double>(Q, Q, Q, options); }),
                   "not a positive finite number"));
  }
  for (const double p : {std::nan(""), 1.0, -1e-300, std::numeric_limits<double>::infinity()}) {
    CAPTURE(p);
    CHECK(contains(refusal([&] { check_dropout(Dropout{p, 0}); }), "outside [0, 1)"));
  }
  check_dropout(Dropout{-0.0, 0});  // -0.0 is 0: no dropout, accepted
  CHECK(contains(refusal([&] { decode<double>(Q, Q, Q, {kMax}); }),
                 "n_splits = 9223372036854775807"));
  HeadTensor<double> X(1, 1, 3, 4);
  for (const Index length : {kTwo31 + 1, kMax, Index{-1}}) {
    CAPTURE(length);
    CHECK(contains(refusal([&] { decode_multihead<double>(X, X, X, {1}, {}, std::vector<Index>{length}); }),
                   std::to_string(length)));
  }
}

TEST_CASE("found by the fuzzer: decode with Bc near 2^63, and zero query heads") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const Matrix<double> q = random_matrix<double>(1, 6, rng), K = random_matrix<double>(19, 6, rng),
                       V = random_matrix<double>(19, 6, rng);
  const auto exact = naive_attention<double>(q, K, V);
  for (const Index Bc : {kTwo31 + 1, kMax - 1, kMax}) {
    AttentionOptions options;
    options.tiles = {1, Bc};
    CAPTURE(Bc);
    CHECK((decode<double>(q, K, V, {3}, options).O - exact.O).cwiseAbs().maxCoeff() <= 1e-12);
  }
  HeadTensor<double> Q0(1, 0, 4, 8), X(1, 1, 4, 8);
  CHECK(contains(refusal([&] { forward_multihead<double>(Q0, X, X); }), "0 query heads"));
}
