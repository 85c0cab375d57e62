// Sectors touched by a warp's store: the arithmetic of warp_store.hpp.
#include "flashlab/sim/warp_store.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/types.hpp"

#include <fmt/format.h>

namespace flashlab::sim {

namespace {

constexpr int kWarpLanes = 32;
constexpr int kWidestStore = 16;  // st.global.v4.b32 / red.global.add.v4.f32

Bytes ceil_div(Bytes a, Bytes b) { return (a + b - 1) / b; }

}  // namespace

void check(const WarpStore& s) {
  if (s.bytes_per_thread < 1 || s.bytes_per_thread > kWidestStore)
    throw cpu::InvalidArgument(
        fmt::format("a warp store of {} bytes per lane is impossible: a lane stores 1 to {} bytes",
                    s.bytes_per_thread, kWidestStore));
  if (s.threads < 1 || s.threads > kWarpLanes)
    throw cpu::InvalidArgument(
        fmt::format("a warp store by {} lanes is impossible: a warp has 1 to {} active lanes",
                    s.threads, kWarpLanes));
  if (s.runs < 1 || s.runs > s.threads || s.threads % s.runs != 0)
    throw cpu::InvalidArgument(fmt::format(
        "a warp store of {} lanes cannot fall in {} runs of equal length: the runs must divide "
        "the lanes (1 run: consecutive addresses; {} runs: a lane per row)",
        s.threads, s.runs, s.threads));
}

Bytes sectors_touched(Bytes offset, Bytes bytes) {
  if (bytes <= 0) return 0;
  return ceil_div(offset % kSectorBytes + bytes, kSectorBytes);
}

Bytes sectors_touched(const WarpStore& s, Bytes offset) {
  check(s);
  return s.runs * sectors_touched(offset, s.run_bytes());
}

Bytes bytes_out(const WarpStore& s, Bytes data, Bytes offset) {
  check(s);
  const Bytes run = s.run_bytes(), whole = data / run, rest = data % run;
  const Bytes sectors = cpu::checked_add(
      cpu::checked_mul(whole, sectors_touched(offset, run), "the sectors of a store"),
      sectors_touched(offset, rest), "the sectors of a store");
  return cpu::checked_mul(sectors, kSectorBytes, "the bytes of a store");
}

Bytes bytes_out_of_heads(const WarpStore& s, Bytes data, Bytes heads) {
  Bytes total = 0;
  for (Bytes h = 0; h < heads; ++h) {
    // Head h starts h x data bytes into the tensor; only that modulo a sector matters, taken
    // factor by factor so that no product can overflow.
    const Bytes offset = (h % kSectorBytes) * (data % kSectorBytes) % kSectorBytes;
    total = cpu::checked_add(total, bytes_out(s, data, offset), "the bytes of a store");
  }
  return total;
}

}  // namespace flashlab::sim
