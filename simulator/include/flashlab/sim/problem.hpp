// What to simulate: the algorithm, the attention shape, the dtype and the SRAM size; and
// how the block sizes Br, Bc are chosen when the caller does not give them.
#pragma once

#include "flashlab/cpu/mask.hpp"
#include "flashlab/cpu/options.hpp"
#include "flashlab/sim/dtype.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab::sim {

// naive: three operators, S and P materialised in HBM (the paper's Algorithm 0)
// fa1:   KV-outer, O, l, m read and written at every inner step (the paper's Algorithm 1)
// fa2:   Q-outer, the state stays on chip; O and L written once per query tile
enum class Algorithm { naive, fa1, fa2 };

std::string_view to_string(Algorithm algorithm);
// "naive", "fa1", "fa2"; otherwise cpu::InvalidArgument listing them.
Algorithm parse_algorithm(std::string_view name);
// A comma-separated list, "naive,fa1,fa2"; empty names and repeats are refused.
std::vector<Algorithm> parse_algorithms(std::string_view list);

inline constexpr Bytes kKiB = 1024;

struct Problem {
  cpu::Index N = 1024;  // sequence length of queries and keys
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

  // The paper's M: the SRAM's capacity in elements of the input type.
  cpu::Index M() const { return sram_bytes / bytes_of(dtype); }
};

// Throws cpu::InvalidArgument, saying what was wrong and what would be right, unless
// 1 <= N <= 2^22, 1 <= d <= 2^12, the SRAM and the L2 are at most kMaxCapacityBytes (1 PiB),
// d <= M (the paper's analysis assumes d <= M <= Nd; below d not even one row of K fits),
// any given Br, Bc are >= 1, and causal and the dtypes hold valid values.
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
