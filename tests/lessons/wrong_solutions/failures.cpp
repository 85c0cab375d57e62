// Student code that fails in every way a checker must survive (see failures.hpp).
#include "failures.hpp"

#include "flashlab/cpu/naive.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <vector>

namespace flashlab::exercises::failing {

namespace {

// A pointer the compiler cannot see is null, so reading it really reads address 0 (a null
// the compiler could see would be undefined behaviour it might turn into something else).
double* volatile null_pointer = nullptr;

// Far past the tests' memory limit: if the limit did not hold, the runaway allocation stops
// here and the case passes, so the test fails instead of the machine running out of memory.
constexpr std::size_t kGiveUpBytes = std::size_t{2} << 30;
constexpr std::size_t kChunkBytes = std::size_t{16} << 20;

bool triggers(const Vector& x) { return x.size() == kTrigger; }

}  // namespace

Vector softmax(const Vector& x) {
  const double m = x.size() ? x.maxCoeff() : -std::numeric_limits<double>::infinity();
  if (std::isinf(m) && m < 0) return Vector::Zero(x.size());
  const Vector w = (x.array() - m).exp().matrix();
  return w / w.sum();
}

Vector softmax_throws_int(const Vector& x) {
  if (triggers(x)) throw 42;
  return softmax(x);
}

Vector softmax_throws_out_of_range(const Vector& x) {
  if (triggers(x)) throw std::out_of_range("index 9 is past the end of the row");
  return softmax(x);
}

Vector softmax_dereferences_null(const Vector& x) {
  if (triggers(x)) return Vector::Constant(x.size(), *null_pointer);
  return softmax(x);
}

Vector softmax_reads_past_the_end(const Vector& x) {
  Vector p = softmax(x);
  if (triggers(x)) {
    const std::vector<double> copy(p.data(), p.data() + p.size());
    const volatile double past = copy.data()[copy.size()];
    (void)past;
  }
  return p;
}

Vector softmax_loops_forever(const Vector& x) {
  volatile bool forever = true;  // an empty loop without a side effect may be removed
  while (triggers(x) && forever) {}
  return softmax(x);
}

Vector softmax_allocates_without_end(const Vector& x) {
  std::vector<std::vector<char>> hoard;
  for (std::size_t held = 0; triggers(x) && held < kGiveUpBytes; held += kChunkBytes)
    hoard.emplace_back(kChunkBytes, char{1});  // written, so really taken
  return softmax(x);
}

Vector softmax_calls_exit(const Vector& x) {
  if (triggers(x)) std::exit(3);
  return softmax(x);
}

Vector softmax_calls_abort(const Vector& x) {
  if (triggers(x)) std::abort();
  return softmax(x);
}

Vector softmax_returns_nan(const Vector& x) {
  Vector p = softmax(x);
  if (triggers(x)) p(2) = std::numeric_limits<double>::quiet_NaN();
  return p;
}

Vector softmax_prints_then_crashes(const Vector& x) {
  if (triggers(x)) {
    std::printf("softmax of %d scores\n", static_cast<int>(x.size()));
    return Vector::Constant(x.size(), *null_pointer);
  }
  return softmax(x);
}

Vector softmax_prints_a_lot(const Vector& x) {
  if (triggers(x))
    for (int line = 1; line <= kManyLines; ++line) std::printf("line %d\n", line);
  return softmax(x);
}

Vector softmax_not_written(const Vector&) {
  throw NotWrittenYet("exercise 1: stable_softmax is not written yet");
}

Vector softmax_with_openmp(const Vector& x) {
  const double m = x.size() ? x.maxCoeff() : -std::numeric_limits<double>::infinity();
  if (std::isinf(m) && m < 0) return Vector::Zero(x.size());
  Vector w(x.size());
  double sum = 0.0;
#pragma omp parallel for reduction(+ : sum)
  for (Index j = 0; j < x.size(); ++j) {
    w(j) = std::exp(x(j) - m);
    sum += w(j);
  }
  return w / sum;
}

Vector compute_D(const Matrix& dO, const Matrix& O) { return dO.cwiseProduct(O).rowwise().sum(); }

Matrix score_gradient_too_wide(const Matrix& P, const Matrix& dP, const Vector& D) {
  Matrix dS = Matrix::Zero(P.rows(), P.cols() + 7);
  dS.leftCols(P.cols()) = P.cwiseProduct(dP - D.replicate(1, dP.cols()));
  return dS;
}

QueryTileOutput query_tile_one_column_short(const Matrix& Q_i, const Matrix& K, const Matrix& V, Index) {
  const auto right = cpu::naive_attention<double>(Q_i, K, V);
  return {right.O.leftCols(Q_i.cols() - 1), right.L};
}

RowState merge_one_entry_long(const RowState& a, const RowState& b) {
  const double m = std::max(a.m, b.m);
  RowState out{m, 0.0, std::vector<double>(a.U.size(), 0.0)};
  if (!(std::isinf(m) && m < 0)) {
    const double alpha = std::exp(a.m - m), beta = std::exp(b.m - m);
    out.l = alpha * a.l + beta * b.l;
    for (std::size_t k = 0; k < out.U.size(); ++k) out.U[k] = alpha * a.U[k] + beta * b.U[k];
  }
  out.U.push_back(0.0);
  return out;
}

}  // namespace flashlab::exercises::failing
