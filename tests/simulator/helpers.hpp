// Inputs and small tools shared by the simulator's tests.
#pragma once

#include "flashlab/cpu/types.hpp"
#include "flashlab/sim/sim.hpp"
#include "random_inputs.hpp"

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace flashlab::sim::test {

using cpu::Index;

// A fresh (rows, cols) matrix of standard normal entries, rounded to In.
template <class In>
cpu::Matrix<In> random_matrix(Index rows, Index cols, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  cpu::Matrix<float> X(rows, cols);
  for (Index r = 0; r < rows; ++r)
    for (Index c = 0; c < cols; ++c) X(r, c) = normal(rng);
  return X.template cast<In>();
}

// Seeded by flashlab::test::fresh_seed(), which prints the seed; FLASHLAB_SEED replays it.
inline std::mt19937_64 fresh_rng() { return std::mt19937_64(flashlab::test::fresh_seed()); }

inline Index ceil_div(Index a, Index b) { return (a + b - 1) / b; }

// The least-squares slope of log(y) against log(x): the exponent p of y ~ x^p.
inline double fitted_exponent(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t k = 0; k < x.size(); ++k) {
    const double lx = std::log(x[k]), ly = std::log(y[k]);
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
  }
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

inline Problem problem(Index N, Index d, DType dtype, Bytes sram,
                       cpu::Causal causal = cpu::Causal::none) {
  Problem p;
  p.N = N;
  p.d = d;
  p.dtype = dtype;
  p.sram_bytes = sram;
  p.causal = causal;
  return p;
}

// What f threw (its what()), or "" when it threw nothing.
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace flashlab::sim::test
