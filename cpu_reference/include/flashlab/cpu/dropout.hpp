// Dropout on the attention weights, drawn from Philox4x32-10 so that the mask is a pure
// function of where a weight sits: the forward pass draws it tile by tile, the backward
// pass draws the very same mask again instead of storing an (N_q, N_k) matrix of bits, and
// a GPU kernel that evaluates the same function reproduces it bit for bit.
//
// Weight P[r, c] of head (batch, head) is kept exactly when the Philox word
//   philox4x32_10(counter = (c / 4, r, batch * 2^16 + head, offset),
//                 key     = (low 32 bits of seed, high 32 bits of seed))[c % 4]
// is at least floor(p * 2^32): one Philox call serves four neighbouring columns.
// A kept weight is scaled by 1/(1 - p), so the expected output is the output without dropout.
#pragma once

#include "flashlab/cpu/philox.hpp"
#include "flashlab/cpu/philox_rule.hpp"
#include "flashlab/cpu/types.hpp"

#include <cstdint>

namespace flashlab::cpu {

struct Dropout {
  double p = 0;              // probability that a weight is dropped, in [0, 1)
  std::uint64_t seed = 0;    // the Philox key
  std::uint32_t offset = 0;  // which dropout call: distinct offsets give independent masks
};

// kColumnsPerPhiloxCall and kMaxBatchOrHead, the counter's layout: philox_rule.hpp.

// Throws InvalidArgument unless 0 <= p < 1 (p = 1 would drop everything and scale by 1/0).
void check_dropout(const Dropout& dropout);

// The dropout mask of one (batch, head) attention matrix.
class DropoutMask {
 public:
  // Throws InvalidArgument for p outside [0, 1) and for batch or head outside [0, 2^16).
  explicit DropoutMask(const Dropout& dropout, Index batch = 0, Index head = 0);

  double p() const { return dropout_.p; }
  // A Philox word below this value drops its weight: floor(p * 2^32).
  std::uint32_t threshold() const { return threshold_; }

  bool keep(Index row, Index column) const;

  // Z (rows, cols) for rows [q0, q0 + rows) and columns [k0, k0 + cols): 0 where the weight
  // is dropped, 1/(1 - p) where it is kept. With p = 0 every entry is exactly 1.
  template <class T>
  Matrix<T> multipliers(Index q0, Index rows, Index k0, Index cols) const;

 private:
  PhiloxCounter counter(Index row, Index column_group) const;
  PhiloxKey key() const;

  Dropout dropout_;
  std::uint32_t head_word_;  // batch * 2^16 + head
  std::uint32_t threshold_;
};

}  // namespace flashlab::cpu
