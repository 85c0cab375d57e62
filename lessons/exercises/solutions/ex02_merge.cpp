// Solution to exercise 2: move both states to the common base m, then add.
#include "exercises.hpp"

#include <algorithm>
#include <cmath>

namespace flashlab::exercises {

RowState merge(const RowState& a, const RowState& b) {
  const double m = std::max(a.m, b.m);
  RowState out{m, 0.0, std::vector<double>(a.U.size(), 0.0)};
  if (std::isinf(m) && m < 0) return out;  // both empty: exp(-inf - (-inf)) would be NaN
  const double alpha = std::exp(a.m - m), beta = std::exp(b.m - m);  // each <= 1
  out.l = alpha * a.l + beta * b.l;
  for (std::size_t k = 0; k < out.U.size(); ++k) out.U[k] = alpha * a.U[k] + beta * b.U[k];
  return out;
}

}  // namespace flashlab::exercises
