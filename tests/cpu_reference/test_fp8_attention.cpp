// FlashAttention-3's FP8 forward, emulated: per-block scales, the Hadamard rotation, and the
// attention output's error, on awkward sizes and on inputs with outlier channels.
#include "flashlab/cpu/fp8.hpp"
#include "flashlab/cpu/fp8_attention.hpp"
#include "flashlab/cpu/naive.hpp"
#include "random_inputs.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace flashlab::cpu;
using flashlab::test::random_matrix;

namespace {

// e4m3 keeps 3 mantissa bits: rounding to nearest errs by at most half a spacing, 2^-4 of
// the value (relative) for normals, and 2^-10 absolute below 2^-6 (the subnormals).
constexpr double kHalfSpacing = 1.0 / 16, kSubnormalHalfSpacing = 1.0 / 1024;

Matrix<double> reference(const Matrix<float>& Q, const Matrix<float>& K, const Matrix<float>& V) {
  return naive_attention<double>(Q.cast<double>(), K.cast<double>(), V.cast<double>()).O;
}

// N(0, 1) entries, with `outliers` channels of Q and K multiplied by `gain`: the outlier
// features FlashAttention-3's error measurement imitates.
struct Inputs {
  Matrix<float> Q, K, V;
};
Inputs with_outliers(Index n_q, Index n_k, Index d, Index outliers, float gain,
                     std::mt19937_64& rng) {
  Inputs in{random_matrix<float>(n_q, d, rng), random_matrix<float>(n_k, d, rng),
            random_matrix<float>(n_k, d, rng)};
  for (Index c = 0; c < outliers; ++c) {
    in.Q.col(c * 7 % d) *= gain;
    in.K.col(c * 7 % d) *= gain;
  }
  return in;
}

}  // namespace

TEST_CASE(
    "block quantisation: each block's largest magnitude lands on 448, the rest within half a "
    "spacing") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  for (const Index rows : {1, 17, 97}) {
    for (const Index block : {1, 16, 64, 1000}) {
      CAPTURE(rows);
      CAPTURE(block);
      Matrix<float> X = random_matrix<float>(rows, 24, rng, 3.0);
      X(rows / 2, 5) = 0.0f;
      const auto q = quantise_e4m3(X, block);
      CHECK(q.scales.size() == static_cast<std::size_t>((rows + block - 1) / block));
      const Matrix<float> back = q.dequantised();
      for (Index r0 = 0; r0 < rows; r0 += block) {
        const Index n = std::min(block, rows - r0);
        CHECK(q.values.middleRows(r0, n).cwiseAbs().maxCoeff() == kE4m3Max);
        const double scale = q.scales[std::size_t(r0 / block)];
        for (Index r = r0; r < r0 + n; ++r)
          for (Index c = 0; c < X.cols(); ++c) {
            const double x = X(r, c), err = std::fabs(back(r, c) - x);
            CHECK(err <= std::max(kHalfSpacing * std::fabs(x), kSubnormalHalfSpacing * scale) *
                             (1 + 1e-6));
            CHECK(round_to_e4m3(q.values(r, c)) == q.values(r, c));  // on the grid
          }
      }
    }
  }
}

TEST_CASE("block quantisation: a block of zeros, and the errors for bad input") {
  const auto q = quantise_e4m3(Matrix<float>::Zero(3, 4), 2);
  CHECK(q.values.isZero());
  CHECK(q.scales == std::vector<float>{1.0f, 1.0f});
  CHECK_THROWS_WITH_AS(quantise_e4m3(Matrix<float>::Ones(3, 4), 0),
                       doctest::Contains("at least one row"), InvalidArgument);
  Matrix<float> bad = Matrix<float>::Ones(3, 4);
  bad(1, 2) = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(quantise_e4m3(bad, 2), doctest::Contains("inf or NaN"), InvalidArgument);
}

TEST_CASE("the random Hadamard rotation is orthogonal and leaves Q K^T unchanged") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  for (const Index d : {1, 2, 64, 128}) {
    CAPTURE(d);
    const Matrix<double> M = random_hadamard(d, rng());
    CHECK((M.transpose() * M - Matrix<double>::Identity(d, d)).cwiseAbs().maxCoeff() < 1e-14);
    CHECK((M.cwiseAbs().array() - 1 / std::sqrt(double(d))).abs().maxCoeff() < 1e-15);
    const Matrix<double> Q = random_matrix<double>(17, d, rng),
                         K = random_matrix<double>(13, d, rng);
    CHECK(((Q * M) * (K * M).transpose() - Q * K.transpose()).cwiseAbs().maxCoeff() < 1e-12);
  }
  // One large channel is spread evenly: every rotated entry has magnitude gain / sqrt(d).
  const Index d = 64;
  Matrix<double> e = Matrix<double>::Zero(1, d);
  e(0, 3) = 100.0;
  const Matrix<double> spread = e * random_hadamard(d, 5);
  CHECK((spread.cwiseAbs().array() - 100.0 / 8).abs().maxCoeff() < 1e-12);
  for (const Index bad : {0, 3, 96})
    CHECK_THROWS_WITH_AS(random_hadamard(bad, 1), doctest::Contains("power of two"),
                         InvalidArgument);
}

TEST_CASE("fp8 attention: within e4m3's rounding of fp64 at awkward sizes, every variant") {
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  for (const auto& [n_q, n_k] : {std::pair<Index, Index>{1, 1}, {17, 97}, {113, 17}, {97, 203}}) {
    const auto in = with_outliers(n_q, n_k, 64, 0, 1.0f, rng);
    const Matrix<double> exact = reference(in.Q, in.K, in.V);
    for (const auto scaling : {Fp8Scaling::per_tensor, Fp8Scaling::per_block})
      for (const bool incoherent : {false, true}) {
        CAPTURE(n_q);
        CAPTURE(n_k);
        CAPTURE(incoherent);
        const Matrix<float> O = fp8_attention(in.Q, in.K, in.V,
                                              {.scaling = scaling,
                                               .tiles = {16, 32},
                                               .incoherent = incoherent,
                                               .hadamard_seed = rng()});
        REQUIRE(O.rows() == n_q);
        REQUIRE(O.allFinite());
        // Each of V and P's weights errs by at most 2^-4 of itself, and the scores' error
        // moves the weights by a few times that: the output by a few 2^-4 of max |V|.
        const double bound = 4 * kHalfSpacing * in.V.cwiseAbs().maxCoeff();
        CHECK((O.cast<double>() - exact).cwiseAbs().maxCoeff() < bound);
      }
  }
}

TEST_CASE("fp8 attention: with outlier channels, block scales and the rotation lower the error") {
  // FlashAttention-3's claim, on fresh inputs: both together beat per-tensor FP8.
  std::mt19937_64 rng(flashlab::test::fresh_seed());
  const auto in = with_outliers(256, 256, 128, 4, 10.0f, rng);
  const Matrix<double> exact = reference(in.Q, in.K, in.V);
  const auto rms = [&](const Fp8Options& o) {
    const Matrix<double> e = fp8_attention(in.Q, in.K, in.V, o).cast<double>() - exact;
    return std::sqrt(e.squaredNorm() / double(e.size()));
  };
  const double baseline = rms({.scaling = Fp8Scaling::per_tensor});
  const double both =
      rms({.scaling = Fp8Scaling::per_block, .incoherent = true, .hadamard_seed = rng()});
  CHECK(both < baseline);
}

TEST_CASE("fp8 attention: bad shapes and a rotation of d = 59 are refused") {
  const Matrix<float> Q = Matrix<float>::Ones(4, 59), K = Matrix<float>::Ones(5, 59);
  CHECK_THROWS_AS(fp8_attention(Q, K, Matrix<float>::Ones(4, 59), {}), InvalidArgument);
  CHECK_NOTHROW(fp8_attention(Q, K, Matrix<float>::Ones(5, 59), {}));
  CHECK_THROWS_WITH_AS(fp8_attention(Q, K, Matrix<float>::Ones(5, 59), {.incoherent = true}),
                       doctest::Contains("power of two"), InvalidArgument);
}
