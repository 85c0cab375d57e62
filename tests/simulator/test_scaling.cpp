// The scaling of the paper's Theorem 2, read off sweeps by fitting exponents: standard
// attention moves Theta(Nd + N^2) elements, FlashAttention Theta(N^2 d^2 / M).
#include "helpers.hpp"

#include <doctest/doctest.h>

namespace flashlab::sim::test {

namespace {

// The fits run where the leading term dominates; the lower-order terms (Nd against N^2,
// the one-off reads of K and V against Tc re-reads of Q and O) and the rounding up of
// Tc = ceil(N / Bc) move an exponent by a few hundredths at these sizes.
constexpr double kExponentTolerance = 0.06;

std::vector<double> powers_of_two(double from, double to) {
  std::vector<double> out;
  for (double x = from; x <= to; x *= 2) out.push_back(x);
  return out;
}

double bytes(Algorithm a, const Problem& p) { return static_cast<double>(count(a, p).bytes_total()); }

}  // namespace

TEST_CASE("Theorem 2: naive traffic grows as N^2") {
  const auto N = powers_of_two(2048, 65536);
  std::vector<double> y;
  for (double n : N) y.push_back(bytes(Algorithm::naive, problem(Index(n), 64, DType::bf16, 96 * kKiB)));
  CHECK(fitted_exponent(N, y) == doctest::Approx(2.0).epsilon(kExponentTolerance / 2));
}

TEST_CASE("Theorem 2: FA1 and FA2 traffic grow as N^2 at fixed M") {
  const auto N = powers_of_two(4096, 131072);
  for (const Algorithm a : {Algorithm::fa1, Algorithm::fa2}) {
    std::vector<double> y;
    for (double n : N) y.push_back(bytes(a, problem(Index(n), 64, DType::fp32, 64 * kKiB)));
    CAPTURE(to_string(a));
    CHECK(fitted_exponent(N, y) == doctest::Approx(2.0).epsilon(kExponentTolerance / 2));
  }
}

TEST_CASE("Theorem 2: FA1 traffic falls as 1/M at fixed N, for d <= M <= Nd") {
  const Index N = 16384, d = 64;
  // M from 4096 to 65536 fp32 elements: Bc = M / 4d from 16 to 256, well inside [d, Nd].
  const auto M = powers_of_two(4096, 65536);
  std::vector<double> y;
  for (double m : M) {
    REQUIRE(m >= d);
    REQUIRE(m <= double(N) * d);
    y.push_back(bytes(Algorithm::fa1, problem(N, d, DType::fp32, Bytes(m) * 4)));
  }
  CHECK(fitted_exponent(M, y) == doctest::Approx(-1.0).epsilon(kExponentTolerance));
}

TEST_CASE("Theorem 2: FA1 traffic grows as d^2 at fixed N and M") {
  // d from 32 up: below, the 4N elements of l and m per KV tile weigh against 3Nd.
  const Index N = 16384;
  const auto d = powers_of_two(32, 256);
  std::vector<double> y;
  for (double dd : d) y.push_back(bytes(Algorithm::fa1, problem(N, Index(dd), DType::fp32, 256 * kKiB)));
  CHECK(fitted_exponent(d, y) == doctest::Approx(2.0).epsilon(kExponentTolerance / 2));
}

}  // namespace flashlab::sim::test
