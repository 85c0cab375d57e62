// A WRONG exercise 2, for testing the checker: the sums are added without moving them to
// a common base, so they add weights taken at two different bases.
#include "exercises.hpp"

#include <algorithm>

namespace flashlab::exercises {

RowState merge(const RowState& a, const RowState& b) {
  RowState out{std::max(a.m, b.m), a.l + b.l, a.U};
  for (std::size_t k = 0; k < out.U.size(); ++k) out.U[k] += b.U[k];
  return out;
}

}  // namespace flashlab::exercises
