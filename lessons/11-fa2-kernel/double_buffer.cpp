#include "11-fa2-kernel/double_buffer.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace flashlab::app {

std::vector<TileSpan> buffered_timeline(int tiles, int buffers, double load, double compute) {
  if (tiles < 1 || (buffers != 1 && buffers != 2) || load < 0 || compute < 0)
    throw std::invalid_argument(
        "a timeline needs tiles >= 1, 1 or 2 buffers and non-negative times, not " +
        std::to_string(tiles) + " tiles, " + std::to_string(buffers) + " buffers");
  std::vector<TileSpan> s(static_cast<std::size_t>(tiles));
  s[0].load_start = 0;
  s[0].load_end = load;
  for (int j = 0; j < tiles; ++j) {
    TileSpan& t = s[std::size_t(j)];
    t.buffer = j % buffers;
    // The barrier: K_j, V_j have landed and every warp has finished tile j - 1.
    t.compute_start = std::max(t.load_end, j > 0 ? s[std::size_t(j - 1)].compute_end : 0.0);
    t.compute_end = t.compute_start + compute;
    if (j + 1 < tiles) {  // the copy of tile j + 1: at the barrier, or once tile j is done
      TileSpan& next = s[std::size_t(j + 1)];
      next.load_start = buffers == 2 ? t.compute_start : t.compute_end;
      next.load_end = next.load_start + load;
    }
  }
  return s;
}

std::vector<std::string> draw_timeline(const std::vector<TileSpan>& spans, double end, int width) {
  if (end <= 0 || width < 1)
    throw std::invalid_argument("a timeline is drawn over a positive time on at least one column");
  std::string copy(std::size_t(width), '.'), warps(std::size_t(width), '.');
  const auto column = [&](double t) {
    return std::clamp(int(std::lround(t / end * width)), 0, width);
  };
  for (std::size_t j = 0; j < spans.size(); ++j) {
    const char digit = char('0' + j % 10);
    for (int c = column(spans[j].load_start); c < column(spans[j].load_end); ++c)
      copy[std::size_t(c)] = digit;
    for (int c = column(spans[j].compute_start); c < column(spans[j].compute_end); ++c)
      warps[std::size_t(c)] = digit;
  }
  return {copy, warps};
}

}  // namespace flashlab::app
