// What `flashlab book` takes from lesson 10: the query and cache its step 2 splits and merges.
#pragma once

#include "flashlab/cpu/types.hpp"

#include <cstdint>

namespace flashlab::app {

struct DecodeMergeExample {
  cpu::Matrix<double> q;     // (1, d): one query
  cpu::Matrix<double> K, V;  // (N_k, d): the cache
};

DecodeMergeExample decode_merge_example();

}  // namespace flashlab::app
