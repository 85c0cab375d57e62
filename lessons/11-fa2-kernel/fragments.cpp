#include "11-fa2-kernel/fragments.hpp"

#include <stdexcept>
#include <string>

namespace flashlab::app {

namespace {

constexpr int kLanes = 32;

void check_lane(int lane) {
  if (lane < 0 || lane >= kLanes)
    throw std::invalid_argument("lane " + std::to_string(lane) + " is not in a warp: use 0 to 31");
}

}  // namespace

int fragment_rows(Fragment) { return 16; }
int fragment_cols(Fragment f) { return f == Fragment::A ? 16 : 8; }
int fragment_registers(Fragment f) { return f == Fragment::B ? 2 : 4; }
int fragment_halves(Fragment f) { return f == Fragment::C ? 1 : 2; }

Position fragment_position(Fragment f, int lane, int reg, int half) {
  check_lane(lane);
  if (reg < 0 || reg >= fragment_registers(f) || half < 0 || half >= fragment_halves(f))
    throw std::invalid_argument("register " + std::to_string(reg) + ", half " +
                                std::to_string(half) + " is not part of this fragment");
  const int g = lane / 4, t = lane % 4;
  switch (f) {
    case Fragment::A: return {g + 8 * (reg % 2), 2 * t + 8 * (reg / 2) + half};
    case Fragment::B: return {2 * t + 8 * reg + half, g};
    case Fragment::C: return {g + 8 * (reg / 2), 2 * t + reg % 2};
  }
  return {};
}

std::vector<std::vector<Owner>> fragment_owners(Fragment f) {
  std::vector<std::vector<Owner>> owners(fragment_rows(f), std::vector<Owner>(fragment_cols(f)));
  for (int lane = 0; lane < kLanes; ++lane)
    for (int reg = 0; reg < fragment_registers(f); ++reg)
      for (int half = 0; half < fragment_halves(f); ++half) {
        const Position p = fragment_position(f, lane, reg, half);
        owners[p.row][p.col] = {lane, reg, half};
      }
  return owners;
}

std::string_view operand_name(Operand op) {
  switch (op) {
    case Operand::Q: return "Q (A of S = Q K^T)";
    case Operand::K: return "K (B of S = Q K^T)";
    case Operand::V: return "V (B of U += W V)";
  }
  return "";
}

// As compute_scores (Q, K) and mma_wv (V) in 03_fa2.cu compute them.
LaneRow ldmatrix_lane_row(Operand op, int lane, int kk) {
  check_lane(lane);
  switch (op) {
    case Operand::Q: return {lane % 16, 2 * kk + lane / 16};
    case Operand::K: return {lane % 8 + (lane / 16) * 8, 2 * kk + (lane / 8) % 2};
    case Operand::V: return {16 * kk + lane % 8 + ((lane / 8) % 2) * 8, lane / 16};
  }
  return {};
}

bool ldmatrix_transposed(Operand op) { return op == Operand::V; }

Position ldmatrix_element(Operand op, int lane, int reg, int half, int kk) {
  check_lane(lane);
  // Matrix `reg` is the 8 rows that lanes 8 reg .. 8 reg + 7 address.
  const auto row_of = [&](int j) { return ldmatrix_lane_row(op, 8 * reg + j, kk); };
  constexpr int kChunkElems = 8;
  if (!ldmatrix_transposed(op)) {
    const LaneRow r = row_of(lane / 4);
    return {r.row, kChunkElems * r.chunk + 2 * (lane % 4) + half};
  }
  const LaneRow r = row_of(2 * (lane % 4) + half);
  return {r.row, kChunkElems * r.chunk + lane / 4};
}

FeedCheck check_ldmatrix_feeds_mma(Operand op, int kk) {
  FeedCheck c;
  for (int lane = 0; lane < kLanes; ++lane)
    for (int reg = 0; reg < 4; ++reg)
      for (int half = 0; half < 2; ++half) {
        const Position got = ldmatrix_element(op, lane, reg, half, kk);
        Position want;
        if (op == Operand::Q) {  // A (m, k): tile row m, tile column 16 kk + k
          const Position a = fragment_position(Fragment::A, lane, reg, half);
          want = {a.row, 16 * kk + a.col};
        } else if (op == Operand::K) {  // B (k, n) of n-tile reg / 2: key 8 (reg / 2) + n
          const Position b = fragment_position(Fragment::B, lane, reg % 2, half);
          want = {8 * (reg / 2) + b.col, 16 * kk + b.row};
        } else {  // V: B (k, n) of n-tile reg / 2: key 16 kk + k, column 8 (reg / 2) + n
          const Position b = fragment_position(Fragment::B, lane, reg % 2, half);
          want = {16 * kk + b.row, 8 * (reg / 2) + b.col};
        }
        ++c.elements;
        c.matching += got == want ? 1 : 0;
      }
  return c;
}

}  // namespace flashlab::app
