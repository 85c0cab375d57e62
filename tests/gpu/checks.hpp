// The one assertion every correctness test makes, written once.
#pragma once

#include "harness.hpp"

#include "random_inputs.hpp"

#include "flashlab/gpu/kernel_info.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace flashlab::gpu::test {

// L is computed in fp32 from the exact (already rounded) inputs, so its error is fp32
// rounding over N_k terms plus ex2.approx's 2-ulp error: ~1e-5 at these sizes. 1e-3 leaves a
// 100x margin and still sits 10x below bf16's rounding step at |L| ~ 4, so an L computed
// from bf16-rounded scores, or with a wrong scale, would fail.
constexpr double kLseTolerance = 1e-3;

// Fresh inputs on every run; the seed is printed, and FLASHLAB_SEED=<seed> replays it.
using ::flashlab::test::fresh_seed;

// What every run is held to against its references (`c` and `seed` printed with a failure).
inline void check_outcome(const Case& c, uint64_t seed, const Outcome& out) {
  INFO(c.describe(), " seed=", seed, " err=", out.err, " naive-same-precision err=",
       out.err_naive, " bound=", out.bound, " LSE err=", out.lse_err);
  CHECK(out.unwritten == 0);
  CHECK(out.padding_written == 0);
  CHECK(out.err <= out.bound);
  CHECK(out.lse_inf_matches);
  CHECK(out.lse_err <= kLseTolerance);
}

inline void expect_matches_reference(const Case& c) {
  const uint64_t seed = fresh_seed();
  check_outcome(c, seed, run_case(c, seed));
}

// fa3 on the case with each of `each`'s options, all on the same fresh inputs, each held to
// the same references (computed once) as expect_matches_reference holds one run.
inline void expect_each_matches_reference(const Case& c,
                                          const std::vector<flashlab_fa3_options>& each) {
  REQUIRE(!each.empty());
  const uint64_t seed = fresh_seed();
  const std::vector<Outcome> outs = run_case_each(c, seed, each);
  REQUIRE(outs.size() == each.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    Case ran = c;
    ran.fa3 = each[i];
    check_outcome(ran, seed, outs[i]);
  }
}

// Whether FLASHLAB_SKIP_FA3 is set (to anything but "" or "0"): the tests that run every
// kernel then leave fa3 out. A fault in a kernel (an illegal instruction, say) is sticky: it
// ends every later CUDA call of the process, so the device script runs the other kernels'
// tests with fa3 left out, and fa3's own in a process of their own.
inline bool skip_fa3() {
  const char* v = std::getenv("FLASHLAB_SKIP_FA3");
  return v != nullptr && std::string_view(v) != "" && std::string_view(v) != "0";
}

// Every kernel of the ladder, from gpu/'s table: a kernel added there is tested here.
inline const std::vector<flashlab_kernel>& all_kernels() {
  static const std::vector<flashlab_kernel> ids = [] {
    std::vector<flashlab_kernel> out;
    for (const KernelRecord& k : kKernels)
      if (!(k.id == FLASHLAB_KERNEL_FA3 && skip_fa3())) out.push_back(k.id);
    if (out.size() != kKernels.size())
      std::printf("FLASHLAB_SKIP_FA3 is set: the tests over every kernel leave fa3 out\n");
    return out;
  }();
  return ids;
}

// The head dimensions every kernel takes (the table's sets, intersected), so that each case
// runs on all of them.
inline const std::vector<int>& shared_head_dims() {
  static const std::vector<int> dims = [] {
    std::vector<int> out;
    for (const KernelRecord& k : kKernels)
      for (int i = 0; i < k.head_dims.count; ++i) {
        const int64_t d = k.head_dims.values[i];
        bool everywhere = true;
        for (const KernelRecord& other : kKernels) everywhere = everywhere && other.head_dims.contains(d);
        if (everywhere && std::find(out.begin(), out.end(), int(d)) == out.end()) out.push_back(int(d));
      }
    return out;
  }();
  return dims;
}

}  // namespace flashlab::gpu::test
