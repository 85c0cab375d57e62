// What to simulate: the algorithm, the attention shape, the dtype and the SRAM size, and for
// a program that mirrors a GPU kernel the facts of that kernel; and how the block sizes
// Br, Bc are chosen when the caller does not give them.
#pragma once

#include "flashlab/cpu/mask.hpp"
#include "flashlab/cpu/options.hpp"
#include "flashlab/sim/dtype.hpp"
#include "flashlab/sim/l2_policy.hpp"
#include "flashlab/sim/warp_store.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab::sim {

// The paper's algorithms, for the lessons' analysis:
// naive:        three operators, S and P materialised in HBM (the paper's Algorithm 0)
// fa1:          KV-outer, O, l, m read and written at every inner step (the paper's Algorithm 1)
// fa2:          Q-outer, the state stays on chip; O and L written once per query tile
// A GPU kernel as built, configured by its caller from the kernel's own description:
// naive_kernel: flashlab's naive kernel: the three operators with S in score_dtype, the
//               softmax's score_reads passes over S, and the GEMMs' output tiles
enum class Algorithm { naive, fa1, fa2, naive_kernel };

std::string_view to_string(Algorithm algorithm);
// "naive", "fa1", "fa2", "naive-kernel"; otherwise cpu::InvalidArgument listing them.
Algorithm parse_algorithm(std::string_view name);
// A comma-separated list, "naive,fa1,fa2"; empty names and repeats are refused.
std::vector<Algorithm> parse_algorithms(std::string_view list);

inline constexpr Bytes kKiB = 1024;

// The output tile of a matrix product as the library kernel that runs it (cuBLAS) picks
// it: m rows and n columns of the row-major output. Each output tile reads its panel of
// each operand, so the left operand is read once per column of tiles and the right one
// once per row of tiles. 0 in either: that whole dimension in one tile, so the operand
// along it is read once, as the paper counts.
struct GemmTile {
  cpu::Index m = 0;
  cpu::Index n = 0;
};

// The most passes over S that Problem::score_reads may ask for: a kernel makes a handful,
// and the bound keeps every count far inside 64 bits.
inline constexpr cpu::Index kMaxScoreReads = 1024;

struct Problem {
  cpu::Index N = 1024;  // sequence length of the keys, and of the queries unless N_q is given
  // Query rows where they differ from the keys (the fa2 program and the kernel mirrors built
  // on it; the naive and fa1 programs take N_q = N). 0: N. Under the causal mask with
  // N_q != N the alignment (top-left or bottom-right) is the causal field's.
  cpu::Index N_q = 0;
  cpu::Index d = 64;    // head dimension
  DType dtype = DType::bf16;
  cpu::Causal causal = cpu::Causal::none;
  // The SRAM one thread block may use. 192 KiB is a round example; a GPU's figure is its
  // profile's HardwareProfile::sram_per_sm.
  Bytes sram_bytes = 192 * kKiB;
  std::optional<cpu::TileSizes> tiles{};  // Br, Bc; chosen by choose_tiles when absent
  // What a kernel keeps on chip, for a program that mirrors one (its description gives
  // them): the score tile S in score_dtype; the weights P = exp(S - m) in weight_dtype, in
  // a (Br, Bc) buffer of their own, or, when absent, in place of S (the paper's programs).
  // They set the SRAM the buffers take; the numerics stay cpu_reference's (S in fp32, the
  // weights rounded to the input type before W V).
  DType score_dtype = kAccumulator;
  std::optional<DType> weight_dtype{};
  // An L2 between HBM and SRAM (LRU over tiles), to predict what reaches HBM's DRAM
  // past it; 0 for the paper's two-level model. With an L2, count-only mode books every
  // step on its own (the L2 must see which rows move), so it is slower at large N.
  Bytes l2_bytes = 0;
  // How that L2 makes room (l2_policy.hpp): LRU over tiles, the default the closed forms
  // assume; random victims; or 128-byte lines in hashed sets, LRU within a set. The seed
  // keys random's draws and the sets' hash.
  L2Replacement l2_replacement = L2Replacement::lru;
  std::uint64_t l2_seed = 0;
  int l2_ways = kL2Ways;  // sets: the lines of a set (the hardware profile's l2_ways)
  // Where that L2 stands for this many partitions alike, the SMs of each side running their
  // share of the traffic (one partition with its share, or all of them with all of it: the
  // same fill; the naive mirror's is the whole L2), with the sets policy: a line read from
  // DRAM, or written, whose home is another partition than its reader's (all but one line in
  // l2_home_partitions, by hash) takes room at its home as well: a home copy, which a read
  // that misses its own copy finds without DRAM while it lasts (l2_cache.hpp). 1: every line
  // is homed where it is read.
  int l2_home_partitions = 1;
  // The most bytes that L2 holds dirty (the naive mirror's: what its GPU was measured to
  // hold, sim::l2_dirty_room, scaled as its l2_bytes is): a write past it writes the oldest
  // dirty lines back to DRAM and keeps them, clean. 0: no cap. 0 <= l2_dirty_cap <= l2_bytes.
  Bytes l2_dirty_cap = 0;
  // The three-operator kernel as built (Algorithm::naive_kernel; the other programs leave
  // them alone): S lives in HBM in score_dtype and P in weight_dtype (the input dtype when
  // absent); the softmax reads S back score_reads times; each GEMM tiles its output so.
  cpu::Index score_reads = 1;  // 1: once, as the paper counts
  GemmTile score_gemm{};       // S = Q K^T, output (N, N)
  GemmTile output_gemm{};      // O = P V, output (N, d)
  // Through an L2: a GEMM's right operand (K, V), read once per row of output tiles, is held
  // in the L2 after its first read (a library's persistent blocks work through one output
  // together, naive_kernel_program.cpp), so only that first read can reach DRAM. False: each
  // row of tiles reads it through the L2 like any other piece.
  bool gemm_operands_held = false;
  // The naive kernel's three launches as Nsight Compute measures them (its default cache
  // control): each starts with the L2 empty, and the lines it leaves dirty are written back
  // between the kernels, counted as no kernel's DRAM writes (Machine::empty_l2_between_kernels).
  // False: one L2 carries S and P from kernel to kernel, and finish() writes back the rest.
  bool l2_emptied_between_kernels = false;
  // The naive kernel's softmax as the GPU runs it: the rows of S whose passes go through
  // the L2 together (its resident blocks, a block per row), taken in groups of this many,
  // pass by pass (naive_kernel_program.cpp). 1: one row after another, as one SM would run
  // them, so a row's later passes find it in the L2 whenever a row fits.
  cpu::Index softmax_rows_in_flight = 1;
  // How those rows take their passes. False: in step, a group's rows pass by pass. True:
  // each block on its own, staggered: slot i of the rows in flight starts its rows at pass
  // i mod score_reads, so at any moment the slots are spread over the passes and P's writes
  // (the last pass) fall between every row's passes, as the GPU's blocks run once they have
  // drifted apart (nothing holds them together).
  bool softmax_staggered = false;
  // The warp stores of a tiled kernel's epilogue (the fa2 program as the scalar or fa2
  // kernel): O and L are then booked as the 32-byte sectors those stores send out of the
  // SMs (warp_store.hpp). Absent: bytes of data, as the paper counts them.
  std::optional<WarpStore> o_store{};
  std::optional<WarpStore> l_store{};

  // The paper's M: the SRAM's capacity in elements of the input type.
  cpu::Index M() const { return sram_bytes / bytes_of(dtype); }
  // The query rows: N_q where given, else N.
  cpu::Index queries() const { return N_q > 0 ? N_q : N; }
};

// Throws cpu::InvalidArgument, saying what was wrong and what would be right, unless
// 1 <= N <= 2^22, 0 <= N_q <= 2^22, 1 <= d <= 2^12, the SRAM and the L2 are at most
// kMaxCapacityBytes (1 PiB), d <= M (the paper's analysis assumes d <= M <= Nd; below d not even
// one row of K fits), any given Br, Bc are >= 1, causal and the dtypes hold valid values, 1 <=
// score_reads <= kMaxScoreReads, the GEMM tiles are >= 0, softmax_rows_in_flight >= 1,
// l2_replacement is one of l2_policy.hpp's, 1 <= l2_ways <= kMaxL2Ways and 0 <= l2_dirty_cap
// <= l2_bytes.
void check(const Problem& problem);

// How the block sizes of a tiled program were chosen.
struct TileChoice {
  cpu::TileSizes tiles{};  // what the program runs with
  cpu::TileSizes paper{};  // the paper's rule: Bc = ceil(M / 4d), Br = min(Bc, d)
  std::string how{};       // "given", "paper" or "paper, halved to fit"
};

// The block sizes for a tiled program (fa1 or fa2). Given tiles are used as they are (a
// program that overflows the SRAM with them throws SramOverflow). Otherwise the paper's
// rule: it is a big-O budget that fits K_j, V_j, Q_i and O_i in M, but not also the score
// tile and the fp32 state that a real kernel keeps on chip, so when the program's buffers
// at those sizes exceed the SRAM, the inner loop's block (Br for fa1, Bc for fa2) is
// halved until they fit, and the outer loop's block, which sets the traffic, only after.
// Throws cpu::InvalidArgument if nothing fits, not even Br = Bc = 1.
TileChoice choose_tiles(Algorithm algorithm, const Problem& problem);

// The SRAM bytes that the program's buffers take at these block sizes.
Bytes sram_footprint(Algorithm algorithm, const Problem& problem, cpu::TileSizes tiles);

}  // namespace flashlab::sim
