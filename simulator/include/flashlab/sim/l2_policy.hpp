// Which line of a full L2 makes room, and where a line may live: the policies the simulator's
// L2 (the programs' one L2, Problem::l2_replacement; the grid model's partitions,
// GridProblem::replacement) can run, and the geometry the set-associative one takes.
//
// lru     Fully associative over the tiles the programs move; the least recently used tile
//         goes. What the lessons teach and every closed form assumes: a stream that fits the
//         L2 is all kept, one that does not is all lost, a step.
// random  Fully associative; any resident tile goes, each as likely (Philox4x32-10 keyed by
//         the seed). A line survives m misses in an L2 of C lines with probability about
//         exp(-m / C): no step, but also part of every stream kept, however large.
// sets    Set-associative, as a hardware L2 is: 128-byte lines (kL2LineBytes, four 32-byte
//         sectors), W lines a set (kL2Ways, or the profile's l2_ways), LRU within a set. A
//         tile is cut into its lines and each line is placed in a set by a hash of (tensor,
//         tile, line, seed), which stands for the L2's hashed set index over physical
//         addresses the model does not know: the lines of a stream of L lines land in S sets
//         as balls in bins, so a set holds about Poisson(L / S) of them. A set keeps a
//         stream's lines while it holds at most W of them (LRU within it) and loses them all,
//         as LRU does, once it holds more. With C = S W lines and L = f C, p_k the
//         Poisson(f W) probabilities, the share of a stream's lines that sit in overfull sets,
//         and so are re-read when it comes round again, is
//             sum_{k > W} k p_k / (f W) = P(Poisson(f W) >= W):
//         with W = 16, 0.13% at f = 0.41, 25% at f = 0.82, 53% at f = 1, 97% at f = 1.5; with
//         W = 64, about 0, 7%, 52% and 100% (LRU: 0, 0, 0 and 100%). More ways, a sharper
//         edge. The L2 holds S W lines, S = floor(its bytes / (W kL2LineBytes)), at least 1.
#pragma once

#include "flashlab/sim/warp_store.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab::sim {

enum class L2Replacement { lru, random, sets };
// Every policy: what the programs' --replacement options offer.
inline constexpr std::array kL2Replacements = {L2Replacement::lru, L2Replacement::random,
                                               L2Replacement::sets};
std::string_view to_string(L2Replacement replacement);
// The policy whose to_string is `name`, or nothing.
std::optional<L2Replacement> parse_l2_replacement(std::string_view name);
// Every policy's name, in kL2Replacements' order (a command line's choices).
std::vector<std::string> l2_replacement_names();
// Throws cpu::InvalidArgument unless it is one of kL2Replacements.
void check(L2Replacement replacement);

// An L2 line: four sectors (Nsight Compute and NVIDIA's CUDA documentation describe the
// L1 and L2 lines of Volta to Hopper as 128 bytes of four 32-byte sectors).
inline constexpr Bytes kL2LineBytes = 4 * kSectorBytes;
// The lines a tile of `bytes` spans, and the bytes of its line `line`: whole lines but the
// last, which holds what is left.
constexpr std::int64_t l2_lines(Bytes bytes) { return (bytes + kL2LineBytes - 1) / kL2LineBytes; }
constexpr Bytes l2_line_bytes(Bytes bytes, std::int64_t line) {
  return std::min(kL2LineBytes, bytes - line * kL2LineBytes);
}
// The lines of a set where no hardware profile says (HardwareProfile::l2_ways). NVIDIA
// publishes no associativity; 16 is the figure third-party descriptions give for Volta's L2
// (measured there, estimated for later parts). The sets policy's spread narrows as
// 1 / sqrt(ways). The GH100's profiles take 16 too: its measured edges fit 64, its backward
// with GQA only 16 (profiles.cpp's kGh100L2Ways says why).
inline constexpr int kL2Ways = 16;
inline constexpr int kMaxL2Ways = 1024;
// Throws cpu::InvalidArgument unless 1 <= ways <= kMaxL2Ways.
void check_l2_ways(int ways);
// Reduced lines kept (the sets policy; GridProblem::l2_reduced_window): where a set's least
// recently used line has been reduced into (an atomic add the L2 performed: the backward's dQ
// accumulator), the victim is the least recently used line not reduced into among the set's
// `window` least recently used, where there is one; 1 is plain LRU. Not a published policy: a
// rule tried against the backward's DRAM reads split by operation, which with a window of 3
// fits the calls it was chosen on and fails the calls held out from it, so no profile takes
// it (docs/IO-LEVELS.md, "The backward's DRAM reads by operation"). Throws cpu::InvalidArgument
// unless 1 <= window <= ways, and unless window is 1 where the policy is not sets.
void check_l2_reduced_window(int window, int ways, L2Replacement replacement);
// The largest L2 the sets policy takes (it keeps a record of every line): 1 GiB.
inline constexpr Bytes kMaxSetsL2Bytes = Bytes{1} << 30;

// Home copies (the sets policy): the partition, of `partitions`, that line `line` of the tile
// of tensor number `tensor` whose first row is `row0` is homed in, by a hash keyed by `seed`
// (standing for the hash of physical addresses that picks a line's home slice). The grid
// model (GridProblem::l2_home_copies) places a line's home copy there.
int l2_line_home(int tensor, std::int64_t row0, std::int64_t line, std::uint64_t seed,
                 int partitions);
// The models of one L2 for partitions alike (Problem::l2_home_partitions): whether that line
// is homed in its reader's partition (l2_line_home's partition 0 standing for it: one line in
// `partitions`). A line homed elsewhere that is read from DRAM or written takes room twice:
// its own copy and its home copy.
bool l2_line_homed_here(int tensor, std::int64_t row0, std::int64_t line, std::uint64_t seed,
                        int partitions);

}  // namespace flashlab::sim
