// FlashAttention-2's loop order: the outer loop runs over query tiles Q_i; each keeps its
// state (m, l, U) in SRAM while every KV tile streams past, and writes O_i and L_i once.
//
// HBM traffic, non-causal: Q, O and L once; K and V once per query tile, Tr times. With
// N_q query rows and N keys (Problem::N_q), Tr = ceil(N_q / Br) and Tc = ceil(N / Bc); under
// the causal mask a query tile loads the KV tiles up to its last row's last visible key
// (none where no row of it sees a key: bottom-right with N_q > N), as the kernels do.
// As a mirror of a kernel (the scalar kernel, fa2), O and L written are the sectors of the
// kernel's epilogue stores (Problem::o_store, l_store; warp_store.hpp): the scalar kernel's
// O 16 N d in bf16 (a thread per row, a sector per 2-byte store), fa2's 2 N d b (8 rows x
// 16 bytes a warp store); L exact for both, 32 bytes a sector of whole runs. DRAM (and an
// L2) still see the data.
#include "program.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/forward.hpp"

namespace flashlab::sim::detail {

namespace {

struct Fa2Buffers {
  Machine::BufferId sQ, sK, sV, sS, sU, sm, sl;

  static Fa2Buffers allocate(Machine& machine, const Problem& p, cpu::TileSizes t) {
    const Index Br = std::min(t.Br, p.queries()), Bc = std::min(t.Bc, p.N), d = p.d;
    Fa2Buffers b{machine.allocate("sQ", "the query tile Q_i", Br, d, p.dtype),
                 machine.allocate("sK", "the key tile K_j", Bc, d, p.dtype),
                 machine.allocate("sV", "the value tile V_j", Bc, d, p.dtype),
                 machine.allocate("sS", "the score tile S_ij", Br, Bc, p.score_dtype),
                 machine.allocate("sU", "the unnormalised output U_i", Br, d, kAccumulator),
                 machine.allocate("sm", "the running max m_i", Br, 1, kAccumulator),
                 machine.allocate("sl", "the running sum l_i", Br, 1, kAccumulator)};
    allocate_weights(machine, p, Br, Bc);
    return b;
  }
};

}  // namespace

Bytes fa2_footprint(const Problem& problem, cpu::TileSizes tiles) {
  Machine machine(Machine::kUnbounded);
  Fa2Buffers::allocate(machine, problem, tiles);
  return machine.peak_sram();
}

Bytes fa2_numerics_bytes(const Problem& p, cpu::TileSizes t) {
  const Index Br = std::min(t.Br, p.queries()), Bc = std::min(t.Bc, p.N);
  // O (N_q, d) and L (N_q); one query tile's scaled Q_i, S_ij and state (m, l, U) at a time.
  const Index floats =
      cpu::checked_add(cpu::checked_product({p.queries(), p.d + 1}, "fa2's outputs"),
                       cpu::checked_product({Br, 2 * p.d + Bc + 2}, "fa2's tile"), "fa2's numbers");
  return cpu::checked_mul(floats, bytes_of(kAccumulator), "fa2's numbers");
}

template <class In>
void run_fa2(Machine& machine, const Problem& p, cpu::TileSizes t, const Inputs<In>* in,
             Outputs* out, const Progress& progress) {
  const Index N_q = p.queries(), N = p.N, d = p.d, Br = t.Br, Bc = t.Bc;
  const cpu::Mask mask{p.causal, N_q, N};
  const float scale = static_cast<float>(cpu::AttentionOptions{}.scale_for(d));
  const auto gQ = machine.add_tensor("Q", N_q, d, p.dtype);
  const auto gK = machine.add_tensor("K", N, d, p.dtype);
  const auto gV = machine.add_tensor("V", N, d, p.dtype);
  const auto gO = machine.add_tensor("O", N_q, d, p.dtype);
  const auto gL = machine.add_tensor("L", N_q, 1, kAccumulator);
  if (p.o_store) machine.set_store(gO, *p.o_store);  // a kernel's epilogue: its sectors
  if (p.l_store) machine.set_store(gL, *p.l_store);
  const Fa2Buffers s = Fa2Buffers::allocate(machine, p, t);
  if (in) *out = {cpu::Matrix<float>(N_q, d), cpu::Vector<float>(N_q)};
  const bool grouped = !in && !machine.tracing() && !machine.has_l2();
  const Index Tr = tile_count(N_q, Br), Tr_whole = N_q / Br;
  SteadyState steady(machine, !in && !machine.tracing() && machine.has_l2(), {gQ, gO, gL}, Br);

  for (Index i = 0; i < Tr; ++i) {  // outer: query tiles, each loaded once
    const Index q0 = i * Br, rows = tile_rows(N_q, Br, i);
    machine.load(s.sQ, gQ, q0, rows, {i, -1});
    cpu::Matrix<float> rQ_scaled;  // (rows, d) Q_i * scale
    auto state = cpu::SoftmaxState<float>::empty(rows, d);  // m = -inf, l = 0, U = 0
    if (in) rQ_scaled = in->Q.middleRows(q0, rows).template cast<float>() * scale;

    const auto kind_of = [&](Index j, Index cols) { return mask.classify(q0, rows, j * Bc, cols); };
    for (const StepRun& run : inner_steps(N, Bc, grouped, kind_of)) {  // inner: KV tiles
      const TileCoord at{i, run.first};
      if (run.kind == cpu::TileKind::skipped) {  // wholly in the future: costs nothing
        machine.skip(at, run.count);
        continue;
      }
      const Index k0 = run.first * Bc, cols = run.rows;
      machine.load(s.sK, gK, k0, cols, at, run.count);
      machine.load(s.sV, gV, k0, cols, at, run.count);
      machine.compute("S", score_ops(rows, cols, d), at, run.kind, run.count);
      if (in) {
        const auto S = cpu::score_tile<In>(rQ_scaled, in->K.middleRows(k0, cols), q0, k0,
                                           run.kind, mask, kScoreTileOptions);
        cpu::update<float, In>(state, S, in->V.middleRows(k0, cols));
      }
      machine.compute("update", update_ops(rows, cols, d), at, std::nullopt, run.count,
                      in ? &state : nullptr);
    }

    machine.compute("finalize", finalize_ops(rows, d), {i, -1}, std::nullopt);
    if (in) {
      const auto [O_i, L_i] = cpu::finalize(state);  // normalise once, at the end
      out->O.middleRows(q0, rows) = as_stored<In>(O_i);
      out->L.segment(q0, rows) = L_i;
    }
    machine.store(s.sU, gO, q0, rows, {i, -1});  // O_i = U / l, rounded to the input type
    machine.store(s.sm, gL, q0, rows, {i, -1});  // L_i = m + log l, computed in place of m

    // Whole query tiles with no mask sweep the same KV tiles: each is alike to the next.
    const Index alike = p.causal == cpu::Causal::none && i < Tr_whole ? Tr_whole - 1 - i : 0;
    i += steady.after(i, alike);
    if (progress) progress(i + 1, Tr);
  }
}

template void run_fa2<float>(Machine&, const Problem&, cpu::TileSizes, const Inputs<float>*,
                             Outputs*, const Progress&);
template void run_fa2<cpu::bf16>(Machine&, const Problem&, cpu::TileSizes,
                                 const Inputs<cpu::bf16>*, Outputs*, const Progress&);
template void run_fa2<cpu::fp16>(Machine&, const Problem&, cpu::TileSizes,
                                 const Inputs<cpu::fp16>*, Outputs*, const Progress&);

}  // namespace flashlab::sim::detail
