// What every GPU backward test does: draw fresh random Q, K, V and dO, run the fa2 forward
// for O and LSE, run flashlab_backward on gradients poisoned with NaN, and measure the
// error of dQ, dK, dV against the fp64 CPU reference beside the error of the naive backward
// computed in the same low precision (ANCHORS.md's rule: 3x for gradients). With dropout,
// all of them draw the same mask (the CPU reference's Philox rule).
#pragma once

#include "harness.hpp"

#include "flashlab/flashlab.h"

#include <cstdint>
#include <string>
#include <vector>

namespace flashlab::gpu::test {

struct BackwardCase {
  flashlab_dtype dtype = FLASHLAB_BF16;
  int batch = 1, heads_q = 1, heads_kv = 1, n_q = 1, n_k = 1, d = 64;
  flashlab_causal causal = FLASHLAB_CAUSAL_NONE;
  Layout layout = Layout::bhsd;
  bool deterministic = false;
  // Dropout, the same in the forward (O, LSE) and the backward, and in the CPU backwards that
  // the result is measured against (cpu::DropoutMask of each (batch, query head)).
  double dropout_p = 0;
  uint64_t dropout_seed = 0;
  uint32_t dropout_offset = 0;

  std::string describe() const;
};

// One gradient's numbers.
struct GradientOutcome {
  double err = 0;               // max |X - X_ref| over every element, X_ref in fp64
  double err_naive = 0;         // the same for the CPU naive backward in the case's dtype
  double bound = 0;             // 3 err_naive + the fp32 order slack (backward_harness.cpp)
  int64_t unwritten = 0;        // elements still NaN (poison) after the run
  int64_t padding_written = 0;  // padding elements that are no longer NaN
};

struct BackwardOutcome {
  GradientOutcome dq, dk, dv;
};

// Runs the case once on fresh random inputs drawn from `seed`.
BackwardOutcome run_backward_case(const BackwardCase& c, uint64_t seed);

// The raw bytes of dQ, dK and dV (one after the other) of `runs` backward calls on the same
// inputs, O and LSE (for determinism).
std::vector<std::vector<uint8_t>> run_backward_repeated(const BackwardCase& c, uint64_t seed,
                                                        int runs);

}  // namespace flashlab::gpu::test
