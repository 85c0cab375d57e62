// cp.async double buffering as a timeline. fa2 (03_fa2.cu) loads Q and the first K, V tile,
// then for each KV tile j: waits for K_j, V_j; one barrier; issues the copy of K_{j+1},
// V_{j+1} into the other buffer; computes tile j. With one buffer the copy of tile j + 1
// could only start once tile j's compute had finished with it. Each copy takes `load`, each
// tile's compute `compute` (any unit), so for Tc tiles:
//   one buffer:   Tc (load + compute)
//   two buffers:  load + (Tc - 1) max(load, compute) + compute
#pragma once

#include <string>
#include <vector>

namespace flashlab::app {

struct TileSpan {
  double load_start = 0, load_end = 0;        // the copy of K_j, V_j
  double compute_start = 0, compute_end = 0;  // S = Q K_j^T, softmax, U += W V_j
  int buffer = 0;                             // which SRAM buffer holds tile j
};

// Throws std::invalid_argument for tiles < 1, buffers not 1 or 2, or a negative time.
std::vector<TileSpan> buffered_timeline(int tiles, int buffers, double load, double compute);

// Two text rows of `width` columns for the times [0, end]: the copies' and the warps'
// activity, each tile drawn with its index digit (j % 10), idle time with '.'. Throws
// std::invalid_argument for end <= 0 or width < 1.
std::vector<std::string> draw_timeline(const std::vector<TileSpan>& spans, double end, int width);

}  // namespace flashlab::app
