// Exercise 3: one query tile of the tiled forward pass. Contract:
// lessons/exercises/exercises.hpp. Check with `flashlab check 3`.
#include "exercises.hpp"

#include <cmath>

namespace flashlab::exercises {

QueryTileOutput forward_query_tile(const Matrix& Q_i, const Matrix& K, const Matrix& V, Index Bc) {
  (void)Q_i, (void)K, (void)V, (void)Bc;
  throw NotWrittenYet("exercise 3: forward_query_tile is not written yet "
                      "(lessons/exercises/student/ex03_forward_query_tile.cpp)");
}

}  // namespace flashlab::exercises
