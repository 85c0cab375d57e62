// What the three programs share: their inputs and outputs, the inner loop's steps, and
// the operation counts of cpu_reference's algebra. Private to simulator/.
#pragma once

#include "flashlab/cpu/mask.hpp"
#include "flashlab/cpu/score_tile.hpp"
#include "flashlab/cpu/softmax_state.hpp"
#include "flashlab/sim/machine.hpp"
#include "flashlab/sim/problem.hpp"

#include <algorithm>
#include <functional>
#include <vector>

namespace flashlab::sim::detail {

using cpu::Index;

// The program's view of HBM values; absent in count-only mode.
template <class In>
struct Inputs {
  const cpu::Matrix<In>& Q;  // (N, d)
  const cpu::Matrix<In>& K;  // (N, d)
  const cpu::Matrix<In>& V;  // (N, d)
};

struct Outputs {
  cpu::Matrix<float> O;  // (N, d): naive and FA2 round it to In as stored; FA1 returns
                         // its fp32 running O unrounded
  cpu::Vector<float> L;  // (N)
};

using cpu::tile_count;
inline Index tile_rows(Index n, Index B, Index t) { return std::min(B, n - t * B); }

// Consecutive steps of an inner loop that are alike: tiles first .. first + count - 1,
// all of `rows` rows and of the same kind under the mask.
struct StepRun {
  Index first = 0;
  Index count = 1;
  Index rows = 0;
  cpu::TileKind kind = cpu::TileKind::full;
};

// The kind of inner tile t, which has `rows` rows (keys or queries).
using KindOf = std::function<cpu::TileKind(Index t, Index rows)>;

// The steps of an inner loop over the tiles of n rows in blocks of B. Ungrouped: one run
// per tile, in order. Grouped (count-only mode): one run per stretch of whole tiles of one
// kind, plus the ragged last tile. Under a causal mask the kinds of an inner loop come in
// contiguous stretches (full, partial, skipped in one order or the other), so each
// stretch's end is found by bisection.
std::vector<StepRun> inner_steps(Index n, Index B, bool grouped, const KindOf& kind_of);

// The options the programs hand to cpu::score_tile: like a GPU kernel, they do not stop at
// a score that is inf or NaN (check_finite off).
inline const cpu::AttentionOptions kScoreTileOptions{};

// Rounds an fp32 tile to the input type, as a store of O to HBM does.
template <class In>
cpu::Matrix<float> as_stored(const cpu::Matrix<float>& X) {
  return X.template cast<In>().template cast<float>();
}

// The work of each piece of the algebra, for a tile of `rows` query rows and `cols` keys.
// The 1/sqrt(d) scale is folded into Q once per tile load and is not counted.
OpCounts score_ops(Index rows, Index cols, Index d);   // S = Q_i K_j^T
OpCounts update_ops(Index rows, Index cols, Index d);  // cpu::update (and cpu::tile_state)
OpCounts merge_ops(Index rows, Index d);               // cpu::merge
OpCounts unnormalise_ops(Index rows, Index d);         // U = diag(l) O
OpCounts finalize_ops(Index rows, Index d);            // cpu::finalize: O = U / l, L = m + log l
OpCounts softmax_ops(Index rows, Index cols);          // P = softmax(S), row by row

// The programs. inputs is null in count-only mode; outputs is then left alone.
template <class In>
void run_naive(Machine& machine, const Problem& problem, const Inputs<In>* inputs,
               Outputs* outputs);
template <class In>
void run_fa1(Machine& machine, const Problem& problem, cpu::TileSizes tiles,
             const Inputs<In>* inputs, Outputs* outputs);
template <class In>
void run_fa2(Machine& machine, const Problem& problem, cpu::TileSizes tiles,
             const Inputs<In>* inputs, Outputs* outputs);

// The SRAM each tiled program allocates at these block sizes.
Bytes fa1_footprint(const Problem& problem, cpu::TileSizes tiles);
Bytes fa2_footprint(const Problem& problem, cpu::TileSizes tiles);

}  // namespace flashlab::sim::detail
