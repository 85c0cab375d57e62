// FlashAttention-1, the paper's Algorithm 1: the outer loop runs over KV tiles K_j, V_j,
// each loaded once; the inner loop over query tiles Q_i reads O_i, l_i, m_i from HBM,
// merges the tile's state into them and writes them back at every step.
//
// HBM traffic, non-causal, in elements: the initialisation O = 0, l = 0, m = -inf writes
// Nd + 2N; K and V are read once (2Nd); each of the Tc KV tiles reads Q, O, l, m and
// writes O, l, m (3Nd + 4N). Total Nd + 2N + 2Nd + Tc (3Nd + 4N).
//
// The running O is an accumulator and stays fp32 in HBM, like l and m: rounding it to
// bf16 at each of its Tc stores compounds the error past what the low-precision rule of
// ANCHORS.md allows (tests/simulator/test_numerics.cpp shows the rule holding with fp32).
#include "program.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/forward.hpp"

#include <limits>

namespace flashlab::sim::detail {

namespace {

struct Fa1Buffers {
  Machine::BufferId sK, sV, sQ, sO, sS, sU, sl, sm, sl_tile, sm_tile;

  static Fa1Buffers allocate(Machine& machine, const Problem& p, cpu::TileSizes t) {
    const Index Br = std::min(t.Br, p.N), Bc = std::min(t.Bc, p.N), d = p.d;
    Fa1Buffers b{machine.allocate("sK", "the key tile K_j", Bc, d, p.dtype),
                 machine.allocate("sV", "the value tile V_j", Bc, d, p.dtype),
                 machine.allocate("sQ", "the query tile Q_i", Br, d, p.dtype),
                 machine.allocate("sO", "the output tile O_i", Br, d, kAccumulator),
                 machine.allocate("sS", "the score tile S_ij", Br, Bc, p.score_dtype),
                 machine.allocate("sU", "the tile's unnormalised output", Br, d, kAccumulator),
                 machine.allocate("sl", "the stored sums l_i", Br, 1, kAccumulator),
                 machine.allocate("sm", "the stored maxima m_i", Br, 1, kAccumulator),
                 machine.allocate("sl_tile", "the tile's row sums", Br, 1, kAccumulator),
                 machine.allocate("sm_tile", "the tile's row maxima", Br, 1, kAccumulator)};
    allocate_weights(machine, p, Br, Bc);
    return b;
  }
};

// The paper's HBM-resident O, l, m, as the numerics see them.
struct HbmState {
  cpu::Matrix<float> O;  // (N, d) fp32, the running output
  cpu::Vector<float> l;  // (N)
  cpu::Vector<float> m;  // (N)

  static HbmState initial(Index N, Index d) {  // O = 0, l = 0, m = -inf
    return {cpu::Matrix<float>::Zero(N, d), cpu::Vector<float>::Zero(N),
            cpu::Vector<float>::Constant(N, -std::numeric_limits<float>::infinity())};
  }
};

// One inner step's numerics: S_ij, the tile's own state, and its merge into O_i, l_i, m_i.
template <class In>
cpu::SoftmaxState<float> fa1_step(HbmState& hbm, const Inputs<In>& in, const cpu::Mask& mask,
                                  const cpu::Matrix<float>& Q_scaled, Index q0, Index rows,
                                  Index k0, Index cols, cpu::TileKind kind) {
  const auto S = cpu::score_tile<In>(Q_scaled.middleRows(q0, rows), in.K.middleRows(k0, cols),
                                     q0, k0, kind, mask, kScoreTileOptions);
  const auto tile = cpu::tile_state<float, In>(S, in.V.middleRows(k0, cols));
  // Undo the stored normalisation (U = diag(l) O), merge, and normalise again.
  return cpu::merge_into_normalised<float>(hbm.O.middleRows(q0, rows), hbm.l.segment(q0, rows),
                                           hbm.m.segment(q0, rows), tile);
}

// The work of one inner step after S: the tile's own state, U = diag(l) O, the merge and
// the normalisation.
OpCounts merge_step_ops(Index rows, Index cols, Index d) {
  OpCounts ops = update_ops(rows, cols, d);
  ops += unnormalise_ops(rows, d);
  ops += merge_ops(rows, d);
  ops += finalize_ops(rows, d);
  return ops;
}

}  // namespace

Bytes fa1_footprint(const Problem& problem, cpu::TileSizes tiles) {
  Machine machine(Machine::kUnbounded);
  Fa1Buffers::allocate(machine, problem, tiles);
  return machine.peak_sram();
}

Bytes fa1_numerics_bytes(const Problem& p) {
  // The HBM state O (N, d), l, m (N); the scaled Q (N, d); L (N). O is handed out as it is.
  const Index floats = cpu::checked_product({p.N, 2 * p.d + 3}, "fa1's numbers");
  return cpu::checked_mul(floats, bytes_of(kAccumulator), "fa1's numbers");
}

template <class In>
void run_fa1(Machine& machine, const Problem& p, cpu::TileSizes t, const Inputs<In>* in,
             Outputs* out, const Progress& progress) {
  const Index N = p.N, d = p.d, Br = t.Br, Bc = t.Bc;
  const cpu::Mask mask{p.causal, N, N};
  const auto gQ = machine.add_tensor("Q", N, d, p.dtype);
  const auto gK = machine.add_tensor("K", N, d, p.dtype);
  const auto gV = machine.add_tensor("V", N, d, p.dtype);
  const auto gO = machine.add_tensor("O", N, d, kAccumulator);
  const auto gl = machine.add_tensor("l", N, 1, kAccumulator);
  const auto gm = machine.add_tensor("m", N, 1, kAccumulator);
  const Fa1Buffers s = Fa1Buffers::allocate(machine, p, t);
  const bool grouped = !in && !machine.tracing() && !machine.has_l2();
  const auto all_full = [](Index, Index) { return cpu::TileKind::full; };

  // Algorithm 1, line 2: O = 0, l = 0, m = -inf in HBM, written tile by tile.
  for (const StepRun& run : inner_steps(N, Br, grouped, all_full)) {
    for (auto [buffer, tensor] : {std::pair{s.sO, gO}, {s.sl, gl}, {s.sm, gm}})
      machine.store(buffer, tensor, run.first * Br, run.rows, {run.first, -1}, run.count);
  }
  HbmState hbm;
  cpu::Matrix<float> Q_scaled;  // (N, d): Q * scale, the scale folded in as each Q_i loads
  if (in) {
    hbm = HbmState::initial(N, d);
    Q_scaled = in->Q.template cast<float>() *
               static_cast<float>(cpu::AttentionOptions{}.scale_for(d));
  }

  const Index Tc = tile_count(N, Bc), Tc_whole = N / Bc;
  SteadyState steady(machine, !in && !machine.tracing() && machine.has_l2(), {gK, gV}, Bc);
  for (Index j = 0; j < Tc; ++j) {  // outer: KV tiles, each loaded once
    const Index k0 = j * Bc, cols = tile_rows(N, Bc, j);
    machine.load(s.sK, gK, k0, cols, {-1, j});
    machine.load(s.sV, gV, k0, cols, {-1, j});
    const auto kind_of = [&](Index i, Index rows) { return mask.classify(i * Br, rows, k0, cols); };
    for (const StepRun& run : inner_steps(N, Br, grouped, kind_of)) {  // inner: query tiles
      const TileCoord at{run.first, j};
      if (run.kind == cpu::TileKind::skipped) {  // wholly in the future: costs nothing
        machine.skip(at, run.count);
        continue;
      }
      const Index q0 = run.first * Br, rows = run.rows, times = run.count;
      machine.load(s.sQ, gQ, q0, rows, at, times);
      machine.load(s.sO, gO, q0, rows, at, times);
      machine.load(s.sl, gl, q0, rows, at, times);
      machine.load(s.sm, gm, q0, rows, at, times);
      machine.compute("S", score_ops(rows, cols, d), at, run.kind, times);
      cpu::SoftmaxState<float> merged;
      if (in) merged = fa1_step<In>(hbm, *in, mask, Q_scaled, q0, rows, k0, cols, run.kind);
      machine.compute("merge", merge_step_ops(rows, cols, d), at, std::nullopt, times,
                      in ? &merged : nullptr);
      machine.store(s.sO, gO, q0, rows, at, times);
      machine.store(s.sl, gl, q0, rows, at, times);
      machine.store(s.sm, gm, q0, rows, at, times);
    }
    // Whole KV tiles with no mask meet the same query tiles: each is alike to the next.
    const Index alike = p.causal == cpu::Causal::none && j < Tc_whole ? Tc_whole - 1 - j : 0;
    j += steady.after(j, alike);
    if (progress) progress(j + 1, Tc);
  }
  if (in) {  // O is normalised at every step already; L = m + log l is read off l and m
    out->O = std::move(hbm.O);
    out->L = cpu::log_sum_exp<float>(hbm.m, hbm.l);
  }
}

template void run_fa1<float>(Machine&, const Problem&, cpu::TileSizes, const Inputs<float>*,
                             Outputs*, const Progress&);
template void run_fa1<cpu::bf16>(Machine&, const Problem&, cpu::TileSizes,
                                 const Inputs<cpu::bf16>*, Outputs*, const Progress&);
template void run_fa1<cpu::fp16>(Machine&, const Problem&, cpu::TileSizes,
                                 const Inputs<cpu::fp16>*, Outputs*, const Progress&);

}  // namespace flashlab::sim::detail
