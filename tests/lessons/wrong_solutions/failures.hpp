// Student code that fails in every way a checker must survive, for testing it. Each function
// is right for every input but one: exercise 1's functions go wrong only on a row of 7 scores
// (the case "random scores, N = 7"), so a test can see that case fail with the right
// explanation while the checker lives on and passes the others.
#pragma once

#include "exercises.hpp"

namespace flashlab::exercises::failing {

constexpr Index kTrigger = 7;  // the row length on which exercise 1's functions go wrong

// Exercise 1, right except on N = kTrigger, where each one:
Vector softmax(const Vector& x);                      // (right everywhere: the control)
Vector softmax_throws_int(const Vector& x);           // throw 42
Vector softmax_throws_out_of_range(const Vector& x);  // a std::exception, with a message
Vector softmax_dereferences_null(const Vector& x);
Vector softmax_reads_past_the_end(const Vector& x);   // of a heap array: only a sanitizer notices
Vector softmax_loops_forever(const Vector& x);
Vector softmax_allocates_without_end(const Vector& x);  // stops at kGiveUpBytes (see .cpp)
Vector softmax_calls_exit(const Vector& x);           // exit(3)
Vector softmax_calls_abort(const Vector& x);
Vector softmax_returns_nan(const Vector& x);          // one NaN entry
Vector softmax_prints_then_crashes(const Vector& x);  // prints a line, then a null dereference
Vector softmax_prints_a_lot(const Vector& x);         // prints kManyLines lines, then is right
Vector softmax_not_written(const Vector& x);          // the skeleton's NotWrittenYet, always
Vector softmax_with_openmp(const Vector& x);          // right everywhere, its sum an OpenMP loop

constexpr int kManyLines = 10000;

// Exercise 6: D right; dS of shape (N, N + 7).
Vector compute_D(const Matrix& dO, const Matrix& O);
Matrix score_gradient_too_wide(const Matrix& P, const Matrix& dP, const Vector& D);

// Exercise 3: O_i with one column too few.
QueryTileOutput query_tile_one_column_short(const Matrix& Q_i, const Matrix& K, const Matrix& V, Index Bc);

// Exercise 2: U with one entry too many.
RowState merge_one_entry_long(const RowState& a, const RowState& b);

}  // namespace flashlab::exercises::failing
