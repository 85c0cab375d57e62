// What `flashlab book` takes from lesson 7: its split-K and split-Q run on one query tile,
// as step 1 computes and prints it.
#pragma once

#include "flashlab/cpu/types.hpp"

namespace flashlab::app {

struct WarpSplitRun {
  cpu::Index N = 0, d = 0, Br = 0, Bc = 0, W = 0;  // keys, head dim, tile sizes, warps
  cpu::Index merges = 0;         // split-K's warp-to-warp merges (split-Q has none)
  std::int64_t state_bytes = 0;  // the (m, l, U) split-K's merges exchange; split-Q: 0
  double split_k_error = 0, split_q_error = 0;  // max |O - forward| of each
};

WarpSplitRun warp_split_run();

}  // namespace flashlab::app
