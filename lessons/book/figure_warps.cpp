// The warp-partitioning figure (lesson 7): one score tile of Br query rows by Bc keys,
// coloured by the warp that computes each part. Under split-K each warp takes a slice of
// the keys for every row, so every row ends in W partial states that must be merged; under
// split-Q each warp owns a slice of the rows and no state crosses between warps.
#include "07-work-partitioning/book_data.hpp"
#include "book/figures.hpp"
#include "book/svg_plot.hpp"

#include "kit/terminal.hpp"

#include <fmt/core.h>

namespace flashlab::app::book {

namespace {

constexpr double kPanelWidth = 380, kHeight = 330, kTile = 200, kTop = 50;

void panel(Svg& svg, double left, const WarpSplitRun& r, bool split_keys) {
  const double x0 = left + (kPanelWidth - kTile) / 2;
  svg.text({left + kPanelWidth / 2, 24},
           split_keys ? "split-K: warps share the rows" : "split-Q: warps share the keys", "middle",
           13);
  for (cpu::Index w = 0; w < r.W; ++w) {
    const double share = kTile / double(r.W);
    const double x = split_keys ? x0 + share * double(w) : x0;
    const double y = split_keys ? kTop : kTop + share * double(w);
    svg.rect(x, y, split_keys ? share : kTile, split_keys ? kTile : share, series_colour(w),
             "#ffffff");
    const Point centre = split_keys ? Point{x + share / 2, kTop + kTile / 2}
                                    : Point{x0 + kTile / 2, y + share / 2 + 4};
    svg.text(centre, fmt::format("warp {}", w), "middle", 11, "#ffffff", split_keys ? -90 : 0);
  }
  svg.text({x0 + kTile / 2, kTop - 6}, fmt::format("Bc = {} keys", r.Bc), "middle", 11);
  svg.text({x0 - 8, kTop + kTile / 2}, fmt::format("Br = {} rows", r.Br), "middle", 11, kInk, -90);
  const std::string exchanged =
      split_keys
          ? fmt::format("{} merges, {} bytes of (m, l, U) exchanged", r.merges, r.state_bytes)
          : "no merge, no state exchanged";
  svg.text({left + kPanelWidth / 2, kTop + kTile + 30}, exchanged, "middle", 12);
  svg.text(
      {left + kPanelWidth / 2, kTop + kTile + 50},
      fmt::format("max |O - forward| = {}", num(split_keys ? r.split_k_error : r.split_q_error, 3)),
      "middle", 12);
}

}  // namespace

Figure warp_split_figure() {
  const WarpSplitRun r = warp_split_run();
  Svg svg(2 * kPanelWidth, kHeight, "split-K against split-Q across the warps of a block");
  panel(svg, 0, r, true);
  panel(svg, kPanelWidth, r, false);
  svg.line({kPanelWidth, 10}, {kPanelWidth, kHeight - 10}, kGrid);
  return {"warp-split",
          fmt::format("One score tile of query tile Q_0 ({} rows) against a KV tile of {} keys, "
                      "W = {} warps, N = {}, d = {}, computed both ways by lesson 7 on the CPU "
                      "reference; the merges and bytes are the lesson's own counts.",
                      r.Br, r.Bc, r.W, r.N, r.d),
          svg.str()};
}

}  // namespace flashlab::app::book
