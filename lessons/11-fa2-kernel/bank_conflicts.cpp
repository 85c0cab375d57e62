#include "11-fa2-kernel/bank_conflicts.hpp"

#include "flashlab/gpu/swizzle.hpp"

#include <algorithm>
#include <array>
#include <set>
#include <stdexcept>

namespace flashlab::app {

namespace {

constexpr int kPhaseLanes = 8;
constexpr int kElemBytes = 2;  // bf16 or fp16
constexpr int kLanes = 32;
namespace swz = gpu::swizzle;

// Adds the phases of one instruction: its 32 lanes' (row, chunk), 8 lanes a phase.
void add_instruction(AccessCount& c, const std::array<LaneRow, kLanes>& lanes, int row_elems) {
  ++c.instructions;
  for (int phase = 0; phase < kLanes / kPhaseLanes; ++phase) {
    const std::span<const LaneRow> eight(lanes.data() + phase * kPhaseLanes, kPhaseLanes);
    const int s = wavefronts(phase_addresses(eight, row_elems, true), swz::kChunkBytes);
    const int p = wavefronts(phase_addresses(eight, row_elems, false), swz::kChunkBytes);
    ++c.phases;
    c.wavefronts_swizzled += s;
    c.wavefronts_plain += p;
    c.worst_swizzled = std::max(c.worst_swizzled, s);
    c.worst_plain = std::max(c.worst_plain, p);
  }
}

// One ldmatrix.x4 of `op` whose lane rows are those of ldmatrix_lane_row, moved by row0 rows
// and chunk0 chunks (the other m16 tiles, key tiles, d tiles of the same product).
std::array<LaneRow, kLanes> shifted(Operand op, int kk, int row0, int chunk0) {
  std::array<LaneRow, kLanes> lanes;
  for (int lane = 0; lane < kLanes; ++lane) {
    const LaneRow r = ldmatrix_lane_row(op, lane, kk);
    lanes[lane] = {r.row + row0, r.chunk + chunk0};
  }
  return lanes;
}

}  // namespace

int wavefronts(std::span<const std::int64_t> addresses, int bytes_each) {
  if (bytes_each < kBankBytes || bytes_each % kBankBytes != 0)
    throw std::invalid_argument("an access of " + std::to_string(bytes_each) +
                                " bytes is not whole 4-byte words: use 4, 8 or 16");
  std::array<std::set<std::int64_t>, kBanks> words;  // the distinct words asked of each bank
  for (const std::int64_t a : addresses) {
    if (a % kBankBytes != 0)
      throw std::invalid_argument("address " + std::to_string(a) + " is not 4-byte aligned");
    for (int b = 0; b < bytes_each; b += kBankBytes) {
      const std::int64_t word = (a + b) / kBankBytes;
      words[std::size_t(bank_of(a + b))].insert(word);
    }
  }
  std::size_t most = 0;
  for (const auto& w : words) most = std::max(most, w.size());
  return int(most);
}

std::vector<std::int64_t> phase_addresses(std::span<const LaneRow> lanes, int row_elems,
                                          bool swizzled) {
  std::vector<std::int64_t> out;
  for (const LaneRow& l : lanes) {
    const int elems = swizzled ? swz::offset(row_elems, l.row, l.chunk)
                               : l.row * row_elems + l.chunk * swz::kChunk;
    out.push_back(std::int64_t(elems) * kElemBytes);
  }
  return out;
}

std::vector<AccessCount> fa2_sram_accesses(int d, int Br, int Bc, int threads) {
  const int warps = threads / kLanes, m_tiles = Br / warps / 16;
  AccessCount q{.what = "ldmatrix Q"}, k{.what = "ldmatrix K"}, v{.what = "ldmatrix.trans V"};
  for (int kk = 0; kk < d / 16; ++kk) {
    for (int mt = 0; mt < m_tiles; ++mt) add_instruction(q, shifted(Operand::Q, kk, 16 * mt, 0), d);
    for (int np = 0; np < Bc / 16; ++np) add_instruction(k, shifted(Operand::K, kk, 16 * np, 0), d);
  }
  for (int kk = 0; kk < Bc / 16; ++kk)
    for (int dp = 0; dp < d / 16; ++dp) add_instruction(v, shifted(Operand::V, kk, 0, 2 * dp), d);
  // load_tile: thread t copies chunk t % (d / 8) of row t / (d / 8), then rows further down by
  // threads / (d / 8) at a time; a warp's 32 copies per pass, 8 lanes a phase.
  AccessCount w{.what = "cp.async K and V (writes)"};
  const int chunks = d / swz::kChunk, rows_per_pass = threads / chunks;
  constexpr int kTensors = 2;  // K_j and V_j, the same copy each
  for (int tensor = 0; tensor < kTensors; ++tensor)
    for (int warp = 0; warp < warps; ++warp)
      for (int pass = 0; pass < Bc / rows_per_pass; ++pass) {
        std::array<LaneRow, kLanes> lanes;
        for (int lane = 0; lane < kLanes; ++lane) {
          const int t = warp * kLanes + lane;
          lanes[lane] = {t / chunks + pass * rows_per_pass, t % chunks};
        }
        add_instruction(w, lanes, d);
      }
  // Per warp: the copies above were the whole block's.
  w.instructions /= warps, w.phases /= warps, w.wavefronts_swizzled /= warps,
      w.wavefronts_plain /= warps;
  return {q, k, v, w};
}

}  // namespace flashlab::app
