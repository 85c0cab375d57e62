// The one assertion every correctness test makes, written once.
#pragma once

#include "harness.hpp"

#include "random_inputs.hpp"

#include <doctest/doctest.h>

namespace flashlab::gpu::test {

// L is computed in fp32 from the exact (already rounded) inputs, so its error is fp32
// rounding over N_k terms plus ex2.approx's 2-ulp error: ~1e-5 at these sizes. 1e-3 leaves a
// 100x margin and still sits 10x below bf16's rounding step at |L| ~ 4, so an L computed
// from bf16-rounded scores, or with a wrong scale, would fail.
constexpr double kLseTolerance = 1e-3;

// Fresh inputs on every run; the seed is printed, and FLASHLAB_SEED=<seed> replays it.
using ::flashlab::test::fresh_seed;

inline void expect_matches_reference(const Case& c) {
  const uint64_t seed = fresh_seed();
  const Outcome out = run_case(c, seed);
  INFO(c.describe(), " seed=", seed, " err=", out.err, " naive-same-precision err=",
       out.err_naive, " bound=", out.bound, " LSE err=", out.lse_err);
  CHECK(out.unwritten == 0);
  CHECK(out.padding_written == 0);
  CHECK(out.err <= out.bound);
  CHECK(out.lse_inf_matches);
  CHECK(out.lse_err <= kLseTolerance);
}

inline constexpr flashlab_kernel kAllKernels[] = {FLASHLAB_KERNEL_NAIVE, FLASHLAB_KERNEL_SCALAR,
                                                  FLASHLAB_KERNEL_FA2};

}  // namespace flashlab::gpu::test
