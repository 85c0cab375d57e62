// kernel_case PLUGIN EXERCISE: runs one case of a kernel exercise's kernel from PLUGIN in this
// process, nothing forked, so that compute-sanitizer (racecheck, memcheck) sees the kernel;
// `flashlab check` runs its cases in child processes instead. The case: N_q = 97 query rows
// against N_k = 1023 keys (many tiles, so stages are reused), d = 64, causal; for exercise 23,
// 7 splits of 97 rows. Prints whether the kernel ran; exit status 0 when it did. Judging the
// numbers is the checker's work (test_kernel_checker.cpp), judging the accesses the sanitizer's.
#include "kernel_plugin.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <exception>
#include <random>
#include <string>
#include <vector>

namespace {

std::vector<float> random_floats(std::mt19937_64& gen, std::size_t n) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> x(n);
  for (float& v : x) v = u(gen);
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fmt::print(stderr, "usage: kernel_case PLUGIN EXERCISE (21, 22 or 23)\n");
    return 2;
  }
  const int exercise = std::atoi(argv[2]);
  if (exercise < 21 || exercise > 23) {
    fmt::print(stderr, "exercise {}: it must be 21, 22 or 23\n", argv[2]);
    return 2;
  }
  try {
    const auto plugin = flashlab::exercises::load_kernel_plugin(argv[1]);
    std::mt19937_64 gen(2024);
    flashlab_kx_result result{};
    constexpr int64_t kNq = 97, kNk = 1023, kD = 64, kSplits = 7;
    if (exercise == 23) {
      const auto o_splits = random_floats(gen, kSplits * kNq * kD);
      const auto lse_splits = random_floats(gen, kSplits * kNq);
      std::vector<float> o(kNq * kD), lse(kNq);
      const flashlab_kx_combine_call call{
          o_splits.data(), lse_splits.data(), o.data(), lse.data(), kSplits, kNq, kD};
      plugin.combine(&call, &result);
    } else {
      const auto q = random_floats(gen, kNq * kD), k = random_floats(gen, kNk * kD),
                 v = random_floats(gen, kNk * kD);
      std::vector<float> o(kNq * kD), lse(kNq);
      const flashlab_kx_forward_call call{exercise,   q.data(), k.data(), v.data(), o.data(),
                                          lse.data(), kNq,      kNk,      kD,       1};
      plugin.forward(&call, &result);
    }
    if (!result.ran) {
      fmt::print("exercise {}: the kernel did not run: {}\n", exercise, result.message);
      return 1;
    }
    fmt::print("exercise {}: the kernel ran{}\n", exercise,
               result.not_written ? " (a skeleton: not written yet)" : "");
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
}
