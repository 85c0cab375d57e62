// The dataflow figure: HBM above, SRAM below, one column per tensor, an arrow down for the
// bytes read and one up for the bytes written, naive attention beside the fused kernel's
// program (fa2, with its kernel's tiles). The simulator counts every byte; arrows are
// drawn with a width that grows with log(bytes), so 512 KiB and 32 MiB both stay visible.
#include "book/figures.hpp"
#include "book/svg_plot.hpp"
#include "gpu_bridge/kernels.hpp"

#include "flashlab/sim/simulate.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

namespace flashlab::app::book {

namespace {

constexpr cpu::Index kN = 4096, kD = 64;
constexpr double kPanelWidth = 420, kHeight = 330;
constexpr double kHbmTop = 40, kBandHeight = 44, kSramTop = 250;
constexpr double kMaxArrowWidth = 7;

double arrow_width(double bytes, double largest) {
  if (bytes <= 0) return 0;
  return 1 + (kMaxArrowWidth - 1) * std::log2(1 + bytes) / std::log2(1 + largest);
}

void panel(Svg& svg, double left, const sim::Report& r, std::string_view name, double largest) {
  svg.text({left + kPanelWidth / 2, 22},
           fmt::format("{}: {} read, {} written", name, sim::format_bytes(double(r.bytes_read())),
                       sim::format_bytes(double(r.bytes_written()))),
           "middle", 13);
  svg.rect(left + 10, kHbmTop, kPanelWidth - 20, kBandHeight, "#eef3fa", "#1f6fb4");
  svg.text({left + 16, kHbmTop + 14}, "HBM", "start", 11);
  svg.rect(left + 10, kSramTop, kPanelWidth - 20, kBandHeight, "#fdf1e6", "#d9661f");
  svg.text({left + 16, kSramTop + kBandHeight - 6}, "SRAM (on chip)", "start", 11);
  const double column = (kPanelWidth - 40) / double(r.tensors.size());
  for (std::size_t k = 0; k < r.tensors.size(); ++k) {
    const sim::TensorTraffic& t = r.tensors[k];
    const double x = left + 30 + column * (double(k) + 0.5);
    svg.text({x, kHbmTop + 32}, t.name, "middle", 14);
    const double top = kHbmTop + kBandHeight + 4, bottom = kSramTop - 4;
    if (t.read > 0) {
      svg.arrow({x - 8, top}, {x - 8, bottom}, series_colour(0),
                arrow_width(double(t.read), largest));
      svg.text({x - 12, top + 40}, sim::format_bytes(double(t.read)), "middle", 9, kInk, -90);
    }
    if (t.written > 0) {
      svg.arrow({x + 8, bottom}, {x + 8, top}, series_colour(1),
                arrow_width(double(t.written), largest));
      svg.text({x + 20, bottom - 40}, sim::format_bytes(double(t.written)), "middle", 9, kInk, -90);
    }
  }
}

}  // namespace

Figure dataflow_figure() {
  const sim::Problem p{
      .N = kN, .d = kD, .dtype = sim::DType::bf16, .sram_bytes = target_profile().sram_per_sm};
  const sim::Report naive = sim::count(sim::Algorithm::naive, p);
  const sim::Report fused = sim::count(sim::Algorithm::fa2, fa2_kernel_problem(p));
  double largest = 0;
  for (const auto* r : {&naive, &fused})
    for (const auto& t : r->tensors)
      largest = std::max({largest, double(t.read), double(t.written)});
  Svg svg(2 * kPanelWidth, kHeight, "HBM and SRAM traffic per tensor, naive against fused");
  panel(svg, 0, naive, "naive", largest);
  panel(svg, kPanelWidth, fused, "fused (fa2)", largest);
  svg.line({kPanelWidth, 10}, {kPanelWidth, kHeight - 10}, kGrid);
  svg.arrow({30, kHeight - 20}, {30, kHeight - 40}, series_colour(1), 2);
  svg.text({40, kHeight - 24}, "written to HBM", "start", 11);
  svg.arrow({160, kHeight - 40}, {160, kHeight - 20}, series_colour(0), 2);
  svg.text({170, kHeight - 24}, "read from HBM", "start", 11);
  return {
      "dataflow",
      fmt::format("Bytes each tensor moves between HBM and SRAM for one head, N = {}, d = {}, "
                  "bf16, counted by the simulator on one H200 block's SRAM; the fused program "
                  "(fa2) with the tiles of flashlab's fa2 kernel (Br = {}). Naive attention writes "
                  "S and P to HBM and reads them back; the fused program keeps them on chip and "
                  "re-reads K and V once per query tile instead.",
                  kN, kD, fused.tiles->tiles.Br),
      svg.str()};
}

}  // namespace flashlab::app::book
