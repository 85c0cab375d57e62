#include "flashlab/cpu/dropout.hpp"

#include <sstream>

namespace flashlab::cpu {

namespace {

constexpr int kWordBits = 32;
constexpr Index kMaxCounterWord = Index{1} << kWordBits;

// Rows and column groups each fill one 32-bit counter word.
void check_position(Index row, Index column) {
  if (row < 0 || column < 0 || row >= kMaxCounterWord ||
      column / kColumnsPerPhiloxCall >= kMaxCounterWord) {
    std::ostringstream why;
    why << "dropout position (" << row << ", " << column
        << ") does not fit the Philox counter: rows must lie in [0, 2^32) and columns in "
           "[0, 2^34)";
    throw InvalidArgument(why.str());
  }
}

}  // namespace

void check_dropout(const Dropout& dropout) {
  if (!(dropout.p >= 0 && dropout.p < 1)) {  // also rejects NaN
    std::ostringstream why;
    why << "dropout probability p = " << dropout.p
        << " is outside [0, 1): p is the chance that a weight is dropped, and p = 1 would "
           "drop every weight and scale the survivors by 1/(1 - p) = 1/0; use p = 0 for no "
           "dropout";
    throw InvalidArgument(why.str());
  }
}

DropoutMask::DropoutMask(const Dropout& dropout, Index batch, Index head) : dropout_(dropout) {
  check_dropout(dropout);
  if (batch < 0 || batch >= kMaxBatchOrHead || head < 0 || head >= kMaxBatchOrHead) {
    std::ostringstream why;
    why << "dropout mask for batch " << batch << ", head " << head
        << ": both must lie in [0, 65536), since they share one 32-bit Philox counter word";
    throw InvalidArgument(why.str());
  }
  head_word_ = dropout_head_word(batch, head);
  threshold_ = dropout_threshold(dropout.p);
}

PhiloxCounter DropoutMask::counter(Index row, Index column_group) const {
  return {static_cast<std::uint32_t>(column_group), static_cast<std::uint32_t>(row), head_word_,
          dropout_.offset};
}

PhiloxKey DropoutMask::key() const {
  return {static_cast<std::uint32_t>(dropout_.seed),
          static_cast<std::uint32_t>(dropout_.seed >> kWordBits)};
}

bool DropoutMask::keep(Index row, Index column) const {
  check_position(row, column);
  const PhiloxCounter words = philox4x32_10(counter(row, column / kColumnsPerPhiloxCall), key());
  return words[column % kColumnsPerPhiloxCall] >= threshold_;
}

template <class T>
Matrix<T> DropoutMask::multipliers(Index q0, Index rows, Index k0, Index cols) const {
  Matrix<T> Z = Matrix<T>::Zero(rows, cols);  // (rows, cols)
  if (rows == 0 || cols == 0) return Z;
  check_position(q0, k0);
  check_position(q0 + rows - 1, k0 + cols - 1);
  const T kept = static_cast<T>(dropout_keep_scale(dropout_.p));
  for (Index r = 0; r < rows; ++r) {
    PhiloxCounter words{};
    for (Index c = 0; c < cols; ++c) {
      const Index column = k0 + c, lane = column % kColumnsPerPhiloxCall;
      if (c == 0 || lane == 0)  // a new group of four columns: one Philox call
        words = philox4x32_10(counter(q0 + r, column / kColumnsPerPhiloxCall), key());
      if (words[lane] >= threshold_) Z(r, c) = kept;
    }
  }
  return Z;
}

template Matrix<double> DropoutMask::multipliers(Index, Index, Index, Index) const;
template Matrix<float> DropoutMask::multipliers(Index, Index, Index, Index) const;

}  // namespace flashlab::cpu
