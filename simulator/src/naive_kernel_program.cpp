// flashlab's naive GPU kernel as it is built (gpu/kernels/01_naive.cu), beside the paper's
// naive program (naive_program.cpp), which the lessons analyse. The same three operators,
// with what the kernel's own description says of them; its caller passes those facts in
// Problem (score_dtype, weight_dtype, score_reads, score_gemm, output_gemm,
// gemm_operands_held):
//   1. cuBLAS S = Q K^T * scale   writes S in score_dtype; output tiles (m1, n1) = score_gemm
//   2. softmax                    reads each row of S score_reads times (its max, its sum,
//                                 then to write P), only the scores the row sees; writes P
//                                 in weight_dtype (the input dtype when absent) and L in fp32
//   3. cuBLAS O = P V             output tiles (m2, n2) = output_gemm
// A GEMM reads each operand's panel once per output tile: its left operand (Q, P) once per
// column of tiles, its right operand (K, V) once per row of tiles. With
// Problem::gemm_operands_held, through an L2 only the first of the right operand's reads can
// reach DRAM: cuBLAS's kernels here are persistent (grids of 88 to 132 blocks on 132 SMs,
// bench/results/2026-12-03-h200-naive-kernels.csv) and walk one head's output tiles
// together, so the operand they share stays in the L2 while they do (docs/IO-LEVELS.md, "The
// naive kernel: cuBLAS's tiles"). (The left operand's panel is re-read once per column of
// tiles straight away, so it hits in any L2 that holds a panel.)
//
// Bytes per tensor, with b, s, w the bytes of an input, score and weight element,
// T(x, t) = ceil(x / t) tiles along a dimension of x (1 when t = 0), and V_s the scores the
// rows see: N^2, or N(N + 1) / 2 under a causal mask (N_q = N_k: both alignments agree).
//   Q  read     T(N, n1) N d b
//   K  read     T(N, m1) N d b
//   S  written  N^2 s              read  score_reads V_s s
//   P  written  N^2 w              read  T(d, n2) N^2 w
//   L  written  4N                 (32N out of the SMs when Problem::l_store is the
//                                  softmax's: one float a row by one thread, a sector each)
//   V  read     T(N, m2) N d b
//   O  written  N d b
// With s = w = b, score_reads = 1, no mask and every tile 0, Q to O are the paper's
// 4N^2 + 4Nd elements, and L is the one tensor more. The GEMMs compute all of S and of
// P V under a causal mask; only the softmax leaves the future's scores unread (and writes
// their P as 0).
//
// Through an L2 the three operators are three kernel launches. By default one L2 carries S
// and P from one to the next and finish() writes back what is dirty at the end; with
// Problem::l2_emptied_between_kernels, as Nsight Compute measures each launch, the L2 is
// empty when each starts and what it leaves dirty counts as no kernel's DRAM writes, so
// each kernel reads its operands from DRAM (Q and K; S; P and V) and writes to DRAM only the
// lines its own stream pushes out while it runs.
//
// The softmax runs its rows as the GPU's resident blocks do, Problem::softmax_rows_in_flight
// at once, pass by pass, in step or staggered (run_softmax): a row's second and third passes
// find it in the L2 only while the rows in flight fit there, not whenever one row does.
//
// The program moves Q and O by panels of GEMM rows, K and V whole (a row of output tiles
// reads all of their panels), and S and P row by row, the softmax's unit: through an L2,
// each tensor is always cut the same way. The work booked is the paper's (the softmax's
// over the scores the rows see), and the numbers are cpu_reference's naive attention, as
// the paper's program's are: it rounds S to the input type, where the kernel keeps
// score_dtype.
#include "program.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/naive.hpp"

namespace flashlab::sim::detail {

namespace {

// Tiles of size t along a dimension of x; t = 0 (or t >= x): the whole dimension in one.
Index tiles_along(Index x, Index t) { return t == 0 ? 1 : tile_count(x, t); }

// Tile size t along a dimension of x, with 0 meaning the whole dimension.
Index tile_size(Index x, Index t) { return t == 0 ? x : std::min(t, x); }

Bytes row_bytes(Index cols, DType dtype) { return cols * bytes_of(dtype); }

// How a GEMM moves the rows of its operand A or its output C: a panel at a time, or row by
// row where the softmax moves them so (S and P), for an L2 to see each cut the same way.
enum class Rows { panel, one_by_one };

// A library GEMM C = A op(B), C of (rows, cols), tiled `tile`: for each row of output
// tiles, A's panel of those rows once per column of tiles, all of B once (the panels of
// every column of tiles, together), and C's rows. Grouped (count-only, no L2, untraced):
// the alike rows of tiles booked at once.
struct Gemm {
  Machine::TensorId gA, gB, gC;
  Bytes a_row, b_all, c_row;  // bytes of a row of A, of all of B, of a row of C
  Index rows, cols;           // of C
  GemmTile tile;
  Rows a_rows, c_rows;
};

// `times` alike moves of the `rows` rows from r0 on, `bytes_per_row` each, `repeat` times
// each (the same rows again: a panel re-read per column of tiles).
void move_rows(Machine& machine, Machine::TensorId tensor, bool write, Rows how, Index r0,
               Index rows, Bytes bytes_per_row, Index repeat, Index times, bool grouped) {
  const auto move = [&](Index row0, Bytes bytes, Index n) {
    if (write) machine.write_through(tensor, row0, bytes, n);
    else machine.read_through(tensor, row0, bytes, n);
  };
  constexpr std::string_view kWhat = "the rows a GEMM moves";
  if (how == Rows::panel) {
    move(r0, rows * bytes_per_row, cpu::checked_mul(repeat, times, kWhat));
  } else if (grouped) {
    move(r0, bytes_per_row, cpu::checked_product({rows, repeat, times}, kWhat));
  } else {
    for (Index r = r0; r < r0 + rows; ++r) move(r, bytes_per_row, repeat);
  }
}

void run_gemm(Machine& machine, const Gemm& g, bool grouped, bool operands_held) {
  const Index m = tile_size(g.rows, g.tile.m);
  const Index T_rows = tiles_along(g.rows, g.tile.m), T_cols = tiles_along(g.cols, g.tile.n);
  const auto tile_row = [&](Index r0, Index rows, Index times) {  // `times` alike rows of tiles
    move_rows(machine, g.gA, /*write=*/false, g.a_rows, r0, rows, g.a_row, T_cols, times, grouped);
    // Held: B through the L2 for the first row of tiles; the later rows find it there.
    if (!operands_held) {
      machine.read_through(g.gB, 0, g.b_all, times);
    } else if (r0 == 0) {
      machine.read_through(g.gB, 0, g.b_all, 1);
      if (times > 1) machine.read_held_in_l2(g.gB, 0, g.b_all, times - 1);
    } else {
      machine.read_held_in_l2(g.gB, 0, g.b_all, times);
    }
    move_rows(machine, g.gC, /*write=*/true, g.c_rows, r0, rows, g.c_row, 1, times, grouped);
  };
  const Index T_whole = g.rows / m;
  if (grouped) {
    if (T_whole > 0) tile_row(0, m, T_whole);
  } else {
    for (Index i = 0; i < T_whole; ++i) tile_row(i * m, m, 1);
  }
  if (T_rows > T_whole) tile_row(T_whole * m, g.rows - T_whole * m, 1);  // the ragged last
}

// The softmax, its blocks as the GPU runs them: `R` = Problem::softmax_rows_in_flight rows
// at once (its resident blocks), in groups of R rows; a group takes its passes together,
// pass by pass: each row's visible scores once per pass, every row of the group in turn,
// and with the last pass each row's P (whole, 0 past the visible scores) and L. Through an
// LRU L2 of C bytes, with s_r the bytes of row r's visible scores, w of a row of P and 4 of
// its L, a pass after the first finds row i of its group (from 0) where it left it when what
// was touched since that row's previous pass fits: the whole group's scores, and on the last
// pass also the P and L of the i rows before it:
//     hit on passes 2 .. score_reads - 1   iff  sum_group s_r <= C
//     hit on the last pass                  iff  sum_group s_r + i (w + 4) <= C
// R = 1 is one row after another, as one SM would run them: every pass after the first hits
// while a row of S fits. Grouped (count-only, no L2): the order moves no byte, and without a
// mask every row is alike.
//
// Staggered (Problem::softmax_staggered), the blocks as they run once they have drifted
// apart: slot i of the R takes rows i, i + R, i + 2R, ..., one pass a step, its first row
// starting at step i mod score_reads; in each step every slot takes its pass in turn. So
// at any step the slots are spread over the passes, and between two passes of a row the
// L2 sees one pass of every other row in flight and the P (and L) that a third of them
// write: the same bytes as in step, with P's among them for every pass, not only the last.
void run_softmax(Machine& machine, const Problem& p, Machine::TensorId gS, Machine::TensorId gP,
                 Machine::TensorId gL, bool grouped) {
  const Index N = p.N;
  const cpu::Mask mask{p.causal, N, N};
  const Bytes s_row = row_bytes(N, p.score_dtype);
  const Bytes p_row = row_bytes(N, p.weight_dtype.value_or(p.dtype));
  const Bytes l_row = row_bytes(1, kAccumulator);
  if (grouped && p.causal == cpu::Causal::none) {
    machine.read_through(gS, 0, s_row, cpu::checked_mul(N, p.score_reads, "softmax reads"));
    machine.write_through(gP, 0, p_row, N);
    machine.write_through(gL, 0, l_row, N);
    return;
  }
  const auto visible = [&](Index r) {
    return mask.causal == cpu::Causal::none
               ? N
               : std::clamp(r + mask.diagonal_offset() + 1, Index{0}, N);
  };
  const Index R = std::min(p.softmax_rows_in_flight, N);
  const auto pass_of_row = [&](Index r, Index pass) {
    machine.read_through(gS, r, row_bytes(visible(r), p.score_dtype));
    if (pass < p.score_reads) return;
    machine.write_through(gP, r, p_row);
    machine.write_through(gL, r, l_row);
  };
  if (p.softmax_staggered) {
    const Index passes = p.score_reads;
    // Each slot's rows take `passes` steps apiece; the last slot to start begins passes - 1
    // steps late.
    const Index steps = passes * tile_count(N, R) + passes - 1;
    for (Index step = 0; step < steps; ++step)
      for (Index slot = 0; slot < R; ++slot) {
        const Index since = step - slot % passes;  // steps since the slot's first row began
        if (since < 0) continue;
        const Index r = slot + (since / passes) * R;
        if (r < N) pass_of_row(r, since % passes + 1);
      }
    return;
  }
  for (Index r0 = 0; r0 < N; r0 += R) {
    const Index r1 = std::min(r0 + R, N);  // the group: rows [r0, r1)
    for (Index pass = 1; pass <= p.score_reads; ++pass)
      for (Index r = r0; r < r1; ++r) pass_of_row(r, pass);
  }
}

// The scores the rows see: N^2, or N(N + 1) / 2 under a causal mask.
Index visible_scores(const Problem& p) {
  const Index all = cpu::checked_mul(p.N, p.N, "the scores");
  return p.causal == cpu::Causal::none ? all : (all + p.N) / 2;
}

}  // namespace

template <class In>
void run_naive_kernel(Machine& machine, const Problem& p, const Inputs<In>* in, Outputs* out) {
  const Index N = p.N, d = p.d;
  const DType weight_dtype = p.weight_dtype.value_or(p.dtype);
  const auto gQ = machine.add_tensor("Q", N, d, p.dtype);
  const auto gK = machine.add_tensor("K", N, d, p.dtype);
  const auto gV = machine.add_tensor("V", N, d, p.dtype);
  const auto gS = machine.add_tensor("S", N, N, p.score_dtype);
  const auto gP = machine.add_tensor("P", N, N, weight_dtype);
  const auto gL = machine.add_tensor("L", N, 1, kAccumulator);
  const auto gO = machine.add_tensor("O", N, d, p.dtype);
  if (p.l_store) machine.set_store(gL, *p.l_store);  // the softmax's store of L: its sectors
  const bool grouped = !in && !machine.tracing() && !machine.has_l2();
  const Bytes qkv_row = row_bytes(d, p.dtype), qkv_all = cpu::checked_mul(N, qkv_row, "Q");

  const auto between_kernels = [&] {
    if (p.l2_emptied_between_kernels) machine.empty_l2_between_kernels();
  };
  run_gemm(machine,
           {gQ, gK, gS, qkv_row, qkv_all, row_bytes(N, p.score_dtype), N, N, p.score_gemm,
            Rows::panel, Rows::one_by_one},
           grouped, p.gemm_operands_held);
  machine.compute("S = Q K^T", score_ops(N, N, d), {}, std::nullopt);
  between_kernels();

  run_softmax(machine, p, gS, gP, gL, grouped);
  machine.compute("P = softmax(S)", softmax_ops(1, visible_scores(p)), {}, std::nullopt);
  between_kernels();

  run_gemm(machine,
           {gP, gV, gO, row_bytes(N, weight_dtype), qkv_all, qkv_row, N, d, p.output_gemm,
            Rows::one_by_one, Rows::panel},
           grouped, p.gemm_operands_held);
  machine.compute("O = P V", score_ops(N, d, N), {}, std::nullopt);
  between_kernels();

  if (in) {  // the numbers are cpu_reference's naive attention, as the paper's program's are
    cpu::AttentionOptions options;
    options.causal = p.causal;
    const auto result = cpu::naive_attention<In>(in->Q, in->K, in->V, options);
    out->O = result.O.template cast<float>();
    out->L = result.L.template cast<float>();
  }
}

template void run_naive_kernel<float>(Machine&, const Problem&, const Inputs<float>*, Outputs*);
template void run_naive_kernel<cpu::bf16>(Machine&, const Problem&, const Inputs<cpu::bf16>*,
                                          Outputs*);
template void run_naive_kernel<cpu::fp16>(Machine&, const Problem&, const Inputs<cpu::fp16>*,
                                          Outputs*);

}  // namespace flashlab::sim::detail
