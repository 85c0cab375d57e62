// The same inputs give bitwise the same outputs, run after run; and the default scale is
// exactly 1/sqrt(d) whichever way the caller asks for it.
#include "checks.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace flashlab::gpu::test {
namespace {

bool same_bits(const RawRun& a, const RawRun& b) {
  return a.o == b.o && a.lse.size() == b.lse.size() &&
         std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float)) == 0;
}

TEST_CASE("every kernel is bitwise deterministic over repeated runs") {
  constexpr int kRuns = 3;
  for (flashlab_kernel kernel : all_kernels()) {
    Case c;
    c.kernel = kernel;
    c.batch = 2;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.n_q = c.n_k = 1023;
    c.d = 128;
    c.causal = FLASHLAB_CAUSAL_TOP_LEFT;
    const auto runs = run_repeated(c, fresh_seed(), kRuns);
    INFO(c.describe());
    for (int r = 1; r < kRuns; ++r) CHECK(same_bits(runs[0], runs[r]));
  }
}

TEST_CASE("scale 0 and NaN both mean exactly 1/sqrt(d)") {
  for (flashlab_kernel kernel : all_kernels()) {
    Case c;
    c.kernel = kernel;
    c.n_q = c.n_k = 97;
    c.d = 64;
    const uint64_t seed = fresh_seed();
    c.scale = 1.0 / std::sqrt(double(c.d));
    const RawRun given = run_repeated(c, seed, 1)[0];
    c.scale = 0.0;
    const RawRun zero = run_repeated(c, seed, 1)[0];
    c.scale = std::numeric_limits<double>::quiet_NaN();
    const RawRun nan = run_repeated(c, seed, 1)[0];
    INFO(c.describe());
    CHECK(same_bits(given, zero));
    CHECK(same_bits(given, nan));
  }
}

}  // namespace
}  // namespace flashlab::gpu::test
