// What `flashlab book` takes from lesson 9: one query row of its growing scores, swept
// tile by tile with conditional rescaling (tau = 8), the base r against the running max.
#pragma once

#include "flashlab/cpu/types.hpp"

#include <vector>

namespace flashlab::app {

struct BaseAlongRow {
  cpu::Index row = 0, tile = 0;           // the query row, keys per KV tile
  double threshold = 0;                   // tau ln 2: how far the max may pass r before r moves
  std::vector<double> running_max, base;  // after each KV tile
  cpu::Index rescales = 0;                // tiles where r moved (the first tile only sets it)
};

BaseAlongRow base_along_row(cpu::Index row);

}  // namespace flashlab::app
