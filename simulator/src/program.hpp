// What the programs share: their inputs and outputs, the inner loop's steps, and
// the operation counts of cpu_reference's algebra. Private to simulator/.
#pragma once

#include "flashlab/cpu/mask.hpp"
#include "flashlab/cpu/score_tile.hpp"
#include "flashlab/cpu/softmax_state.hpp"
#include "flashlab/sim/machine.hpp"
#include "flashlab/sim/problem.hpp"
#include "flashlab/sim/simulate.hpp"

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
  cpu::Matrix<float> O;  // (N, d): naive, naive-kernel and FA2 round it to In as stored;
                         // FA1 returns its fp32 running O unrounded
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

// A count-only run with an L2 must book every step on its own (the L2 must see which rows
// move), but an outer loop whose iterations are alike (the same steps, the outer tiles one
// block further down their tensors) soon leaves the L2 in the same state relative to the
// loop after every iteration: from then on each iteration books exactly what the last one
// did. SteadyState notices that (equal Machine::l2_signature two iterations running) and
// books the remaining alike iterations at once, so N = 1,048,576 takes seconds; the counts
// are those of booking every step (tests/simulator/test_l2_steady.cpp compares the two).
class SteadyState {
 public:
  // enabled: count-only, with an L2, untraced. moving: the HBM tensors the outer loop walks
  // down, `block` rows per iteration (Q, O, L for fa2; K, V for fa1).
  SteadyState(Machine& machine, bool enabled, std::vector<Machine::TensorId> moving, Index block);

  // Call after outer iteration `it`, with the number of iterations after it that are alike
  // to it. Returns how many of those it booked at once: the loop skips them.
  Index after(Index it, Index alike);

 private:
  Machine& machine_;
  bool enabled_;
  std::vector<Machine::TensorId> moving_;
  Index block_;
  std::vector<std::int64_t> last_signature_{};
  Machine::Books last_books_{};
  bool have_last_ = false;
};

// The options the programs hand to cpu::score_tile: like a GPU kernel, they do not stop at
// a score that is inf or NaN (check_finite off).
inline const cpu::AttentionOptions kScoreTileOptions{};

// The (Br, Bc) buffer of the weights P, when the problem keeps them apart from S
// (Problem::weight_dtype); nothing when they overwrite S in place.
void allocate_weights(Machine& machine, const Problem& problem, Index Br, Index Bc);

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

// The programs. inputs is null in count-only mode; outputs is then left alone. The tiled
// programs report their outer loop's progress after each iteration (or skipped stretch).
template <class In>
void run_naive(Machine& machine, const Problem& problem, const Inputs<In>* inputs,
               Outputs* outputs);
template <class In>
void run_naive_kernel(Machine& machine, const Problem& problem, const Inputs<In>* inputs,
                      Outputs* outputs);
template <class In>
void run_fa1(Machine& machine, const Problem& problem, cpu::TileSizes tiles,
             const Inputs<In>* inputs, Outputs* outputs, const Progress& progress);
template <class In>
void run_fa2(Machine& machine, const Problem& problem, cpu::TileSizes tiles,
             const Inputs<In>* inputs, Outputs* outputs, const Progress& progress);

// The host memory each program's numerics allocate beyond the inputs, in bytes (the naive
// kernel's are the naive program's: the same cpu_reference call).
Bytes naive_numerics_bytes(const Problem& problem);
Bytes fa1_numerics_bytes(const Problem& problem);
Bytes fa2_numerics_bytes(const Problem& problem, cpu::TileSizes tiles);

// The SRAM each tiled program allocates at these block sizes.
Bytes fa1_footprint(const Problem& problem, cpu::TileSizes tiles);
Bytes fa2_footprint(const Problem& problem, cpu::TileSizes tiles);

}  // namespace flashlab::sim::detail
