#include "program.hpp"

namespace flashlab::sim::detail {

std::vector<StepRun> inner_steps(Index n, Index B, bool grouped, const KindOf& kind_of) {
  const Index T = tile_count(n, B), T_whole = n / B;
  std::vector<StepRun> runs;
  if (!grouped) {
    for (Index t = 0; t < T; ++t) {
      const Index rows = tile_rows(n, B, t);
      runs.push_back({t, 1, rows, kind_of(t, rows)});
    }
    return runs;
  }
  for (Index s = 0; s < T_whole;) {
    const cpu::TileKind kind = kind_of(s, B);
    Index lo = s, hi = T_whole - 1;  // the last whole tile of this kind lies in [lo, hi]
    while (lo < hi) {
      const Index mid = lo + (hi - lo + 1) / 2;
      if (kind_of(mid, B) == kind) lo = mid;
      else hi = mid - 1;
    }
    runs.push_back({s, lo - s + 1, B, kind});
    s = lo + 1;
  }
  if (T > T_whole) {
    const Index rows = n - T_whole * B;
    runs.push_back({T_whole, 1, rows, kind_of(T_whole, rows)});
  }
  return runs;
}

SteadyState::SteadyState(Machine& machine, bool enabled, std::vector<Machine::TensorId> moving,
                         Index block)
    : machine_(machine), enabled_(enabled), moving_(std::move(moving)), block_(block) {}

Index SteadyState::after(Index it, Index alike) {
  if (!enabled_ || alike < 1) {
    have_last_ = false;
    return 0;
  }
  std::vector<std::int64_t> signature = machine_.l2_signature(moving_, it * block_);
  Machine::Books books = machine_.books();
  if (have_last_ && signature == last_signature_) {  // iteration `it` left the L2 as `it - 1` did
    machine_.add_books(last_books_, books, alike);
    machine_.shift_l2(moving_, alike * block_);
    have_last_ = false;
    return alike;
  }
  last_signature_ = std::move(signature);
  last_books_ = std::move(books);
  have_last_ = true;
  return 0;
}

void allocate_weights(Machine& machine, const Problem& problem, Index Br, Index Bc) {
  if (problem.weight_dtype)
    machine.allocate("sP", "the weight tile P_ij", Br, Bc, *problem.weight_dtype);
}

// A matrix product of (a, k) by (k, b) costs a * b * k multiply-adds, 2 FLOPs each.
constexpr std::int64_t kFlopsPerMultiplyAdd = 2;

OpCounts score_ops(Index rows, Index cols, Index d) {
  return {.matrix_flops = kFlopsPerMultiplyAdd * rows * cols * d};
}

// m' = max(m, rowmax(S)); alpha = exp(m - m'); W = exp(S - m');
// l = alpha l + rowsum(W); U = alpha U + W V_j.
OpCounts update_ops(Index rows, Index cols, Index d) {
  return {.matrix_flops = kFlopsPerMultiplyAdd * rows * cols * d,
          .exp = rows * cols + rows,
          .max = rows * cols + rows,
          .sum = rows * cols,
          .rescale = rows * d + rows};
}

// m = max(m_a, m_b); alpha, beta = exp(m_a - m), exp(m_b - m);
// l = alpha l_a + beta l_b; U = alpha U_a + beta U_b.
OpCounts merge_ops(Index rows, Index d) {
  return {.exp = 2 * rows, .max = rows, .rescale = 2 * rows * d + 2 * rows};
}

OpCounts unnormalise_ops(Index rows, Index d) { return {.rescale = rows * d}; }

OpCounts finalize_ops(Index rows, Index d) { return {.exp = rows, .divide = rows * d}; }

// m = rowmax(S); P = exp(S - m) / rowsum(exp(S - m)).
OpCounts softmax_ops(Index rows, Index cols) {
  return {.exp = rows * cols, .max = rows * cols, .sum = rows * cols, .divide = rows * cols};
}

}  // namespace flashlab::sim::detail
