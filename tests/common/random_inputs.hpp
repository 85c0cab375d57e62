// Fresh random inputs for the tests: every run draws a new seed and prints it (CTest shows
// a test's output when it fails), so a failure can be replayed with FLASHLAB_SEED=<seed>.
#pragma once

#include "flashlab/cpu/types.hpp"

#include <cstdio>
#include <cstdlib>
#include <random>

namespace flashlab::test {

inline std::uint64_t fresh_seed() {
  const char* fixed = std::getenv("FLASHLAB_SEED");
  const std::uint64_t seed =
      fixed ? std::strtoull(fixed, nullptr, 10) : std::uint64_t{std::random_device{}()};
  std::printf("[flashlab] random inputs from seed %llu (FLASHLAB_SEED=%llu replays them)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  return seed;
}

// Entries drawn from N(0, sigma^2), rounded to T.
template <class T>
cpu::Matrix<T> random_matrix(cpu::Index rows, cpu::Index cols, std::mt19937_64& rng,
                             double sigma = 1.0) {
  std::normal_distribution<double> normal(0.0, sigma);
  cpu::Matrix<T> X(rows, cols);
  for (cpu::Index i = 0; i < X.size(); ++i) X.data()[i] = static_cast<T>(normal(rng));
  return X;
}

}  // namespace flashlab::test
