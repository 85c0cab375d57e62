#include "flashlab/sim/problem.hpp"

#include "flashlab/sim/limits.hpp"
#include "flashlab/sim/units.hpp"

#include "program.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace flashlab::sim {

namespace {

// The paper's M / 4d: four (Bc, d) tiles (K_j, V_j, Q_i, O_i) in M elements.
constexpr cpu::Index kPaperTilesInM = 4;

cpu::TileSizes paper_tiles(const Problem& p) {
  const cpu::Index Bc = (p.M() + kPaperTilesInM * p.d - 1) / (kPaperTilesInM * p.d);
  return {std::min(Bc, p.d), Bc};
}

// Problem's fields for a kernel mirror: the passes over S and the GEMMs' output tiles.
void check_kernel_facts(const Problem& p) {
  if (p.score_reads < 1 || p.score_reads > kMaxScoreReads)
    throw cpu::InvalidArgument(fmt::format(
        "score_reads = {}: the softmax reads S back from HBM between 1 and {} times (1 as "
        "the paper counts)",
        p.score_reads, kMaxScoreReads));
  const auto check_tile = [](const GemmTile& t, std::string_view gemm) {
    if (t.m < 0 || t.n < 0)
      throw cpu::InvalidArgument(fmt::format(
          "the {} GEMM's output tile is {} x {}: give sizes of at least 1, or 0 for a whole "
          "dimension in one tile",
          gemm, t.m, t.n));
  };
  check_tile(p.score_gemm, "S = Q K^T");
  check_tile(p.output_gemm, "O = P V");
  if (p.softmax_rows_in_flight < 1)
    throw cpu::InvalidArgument(fmt::format(
        "softmax_rows_in_flight = {}: the softmax has at least one row of S in flight (1: one "
        "row after another, as one SM runs them; its resident blocks on a GPU)",
        p.softmax_rows_in_flight));
}

}  // namespace

std::string_view to_string(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::naive: return "naive";
    case Algorithm::fa1: return "fa1";
    case Algorithm::fa2: return "fa2";
    case Algorithm::naive_kernel: return "naive-kernel";
  }
  return "?";
}

Algorithm parse_algorithm(std::string_view name) {
  for (Algorithm a : {Algorithm::naive, Algorithm::fa1, Algorithm::fa2, Algorithm::naive_kernel})
    if (name == to_string(a)) return a;
  throw cpu::InvalidArgument(fmt::format(
      "unknown algorithm '{}': the simulator runs naive, fa1, fa2 and naive-kernel", name));
}

std::vector<Algorithm> parse_algorithms(std::string_view list) {
  std::vector<Algorithm> out;
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    const Algorithm a = parse_algorithm(list.substr(start, comma - start));
    if (std::find(out.begin(), out.end(), a) != out.end())
      throw cpu::InvalidArgument(fmt::format("'{}' is listed twice in '{}'", to_string(a), list));
    out.push_back(a);
    start = comma + 1;
  }
  return out;
}

void check(const Problem& p) {
  check(p.l2_replacement);
  check_l2_ways(p.l2_ways);
  if (p.l2_home_partitions < 1)
    throw cpu::InvalidArgument(fmt::format(
        "l2_home_partitions = {}: the L2 is one of at least 1 partition (1: every line is "
        "homed in it)",
        p.l2_home_partitions));
  if (p.l2_home_partitions > 1 && p.l2_replacement != L2Replacement::sets)
    throw cpu::InvalidArgument(fmt::format(
        "l2_home_partitions = {} with the {} policy: lines go home only in an L2 of hashed "
        "sets (l2_replacement sets), which knows each line's home",
        p.l2_home_partitions, to_string(p.l2_replacement)));
  if (p.N < 1 || p.N > kMaxLength)
    throw cpu::InvalidArgument(fmt::format(
        "N = {}: the sequence length must be between 1 and {} (larger counts would overflow "
        "64-bit integers)",
        p.N, kMaxLength));
  if (p.N_q < 0 || p.N_q > kMaxLength)
    throw cpu::InvalidArgument(fmt::format(
        "N_q = {}: the query rows must be between 1 and {}, or 0 for as many as the keys' N", p.N_q,
        kMaxLength));
  if (p.d < 1 || p.d > kMaxHeadDim)
    throw cpu::InvalidArgument(
        fmt::format("d = {}: the head dimension must be between 1 and {}", p.d, kMaxHeadDim));
  if (p.sram_bytes < 1 || p.sram_bytes > kMaxCapacityBytes)
    throw cpu::InvalidArgument(fmt::format(
        "SRAM of {} bytes: the SRAM must hold between 1 byte and {} bytes (1 PiB)",
        p.sram_bytes, kMaxCapacityBytes));
  if (p.l2_bytes < 0 || p.l2_bytes > kMaxCapacityBytes)
    throw cpu::InvalidArgument(fmt::format(
        "L2 of {} bytes: give a size of at most {} bytes (1 PiB), or 0 for no L2", p.l2_bytes,
        kMaxCapacityBytes));
  if (p.l2_dirty_cap != 0 && p.l2_bytes == 0)
    throw cpu::InvalidArgument(fmt::format(
        "l2_dirty_cap = {} bytes without an L2 (l2_bytes 0): give 0 for no cap, or an L2",
        p.l2_dirty_cap));
  if (p.l2_dirty_cap < 0 || p.l2_dirty_cap > p.l2_bytes)
    throw cpu::InvalidArgument(fmt::format(
        "l2_dirty_cap = {} bytes with an L2 of {} bytes: give 0 for no cap, or at most the "
        "L2's {} bytes",
        p.l2_dirty_cap, p.l2_bytes, p.l2_bytes));
  cpu::check_causal(p.causal);
  const auto check_dtype = [](DType t, std::string_view what) {
    if (t != DType::fp32 && t != DType::bf16 && t != DType::fp16)
      throw cpu::InvalidArgument(fmt::format("{} {}: not a DType; use fp32, bf16 or fp16", what,
                                             static_cast<int>(t)));
  };
  check_dtype(p.dtype, "dtype");
  check_dtype(p.score_dtype, "dtype");
  if (p.weight_dtype) check_dtype(*p.weight_dtype, "weight dtype");
  if (p.o_store) check(*p.o_store);
  if (p.l_store) check(*p.l_store);
  if (p.M() < p.d)
    throw cpu::InvalidArgument(fmt::format(
        "M < d: an SRAM of {} bytes holds M = {} {} elements, fewer than one row of d = {}; "
        "no tile of K or V fits, and the paper's analysis assumes d <= M <= Nd. Give at "
        "least {} bytes (a useful tile needs far more)",
        p.sram_bytes, p.M(), to_string(p.dtype), p.d, p.d * bytes_of(p.dtype)));
  if (p.tiles && (p.tiles->Br < 1 || p.tiles->Bc < 1))
    throw cpu::InvalidArgument(fmt::format(
        "Br = {}, Bc = {}: block sizes must be at least 1 (they need not divide N)",
        p.tiles->Br, p.tiles->Bc));
  check_kernel_facts(p);
}

Bytes sram_footprint(Algorithm algorithm, const Problem& problem, cpu::TileSizes tiles) {
  switch (algorithm) {
    case Algorithm::naive:
    case Algorithm::naive_kernel: return 0;
    case Algorithm::fa1: return detail::fa1_footprint(problem, tiles);
    case Algorithm::fa2: return detail::fa2_footprint(problem, tiles);
  }
  return 0;
}

TileChoice choose_tiles(Algorithm algorithm, const Problem& p) {
  check(p);
  const cpu::TileSizes paper = paper_tiles(p);
  if (p.tiles) return {*p.tiles, paper, "given"};
  // The outer loop's block sets the traffic (Tc re-reads of Q and O for fa1, Tr of K and V
  // for fa2), so the inner loop's block is halved first.
  cpu::TileSizes t = paper;
  cpu::Index& inner = algorithm == Algorithm::fa1 ? t.Br : t.Bc;
  cpu::Index& outer = algorithm == Algorithm::fa1 ? t.Bc : t.Br;
  while (sram_footprint(algorithm, p, t) > p.sram_bytes) {
    if (inner == 1 && outer == 1)
      throw cpu::InvalidArgument(fmt::format(
          "an SRAM of {} bytes is too small for one tile of {}: even Br = Bc = 1 needs {} "
          "bytes at d = {} ({})",
          p.sram_bytes, to_string(algorithm), sram_footprint(algorithm, p, t), p.d,
          to_string(p.dtype)));
    if (inner > 1) inner = (inner + 1) / 2;
    else outer = (outer + 1) / 2;
  }
  const bool halved = t.Br != paper.Br || t.Bc != paper.Bc;
  return {t, paper, halved ? "paper, halved to fit" : "paper"};
}

}  // namespace flashlab::sim
