// Hardware profiles turn counts into t >= max(FLOPs / throughput, bytes / bandwidth).
#include "helpers.hpp"

#include "flashlab/sim/profiles.hpp"

#include <doctest/doctest.h>

#include <algorithm>

namespace flashlab::sim::test {

TEST_CASE("each profile is found by name and has every figure") {
  CHECK(profiles().size() >= 4);
  for (const auto& hw : profiles()) {
    CAPTURE(hw.name);
    CHECK(&find_profile(hw.name) == &hw);
    CHECK(hw.sm_count > 0);
    CHECK(hw.sram_per_sm > 0);
    CHECK(hw.hbm_bytes_per_s > 0);
    CHECK(hw.matrix_flops_per_s > hw.exp_per_s);  // why exp can bind at small d
    CHECK(hw.l2_bytes_per_s > hw.hbm_bytes_per_s);  // why re-reads from the L2 are cheaper
  }
}

TEST_CASE("the bound is the largest of its three terms, and names it") {
  for (const auto& hw : profiles()) {
    for (const Algorithm a : {Algorithm::naive, Algorithm::fa1, Algorithm::fa2}) {
      for (const Index d : {Index{16}, Index{128}}) {
        const Report r = count(a, problem(4096, d, DType::bf16, hw.sram_per_sm));
        const Bound b = roofline(r, hw);
        CHECK(b.matrix_s == doctest::Approx(double(r.ops.matrix_flops) / hw.matrix_flops_per_s));
        CHECK(b.exp_s == doctest::Approx(double(r.ops.exp) / hw.exp_per_s));
        CHECK(b.memory_s == doctest::Approx(double(r.bytes_total()) / hw.hbm_bytes_per_s));
        const double largest = std::max({b.matrix_s, b.exp_s, b.memory_s});
        CHECK(b.seconds() == largest);
        const double named = b.binding() == "memory" ? b.memory_s
                             : b.binding() == "matrix" ? b.matrix_s
                                                       : b.exp_s;
        CHECK(named == largest);
      }
    }
  }
}

TEST_CASE("on an H200, the naive program's bound is set by memory") {
  // S and P cost 4 N^2 bytes-of-element moves against 4 N^2 d FLOPs: at bf16 that is
  // 8 bytes per 4d FLOPs, far below the chip's FLOPs-per-byte balance for d = 64.
  const Report r = count(Algorithm::naive, problem(8192, 64, DType::bf16, 192 * kKiB));
  CHECK(roofline(r, find_profile("h200")).binding() == "memory");
}

}  // namespace flashlab::sim::test
