// The conditional-rescaling figure (lesson 9): along one query row of the lesson's growing
// scores, the running max after each KV tile against the base r that FlashAttention-4
// keeps, with r + tau ln 2, the line the max must cross before r moves.
#include "09-conditional-rescaling/book_data.hpp"
#include "book/figures.hpp"
#include "book/svg_plot.hpp"

#include "kit/terminal.hpp"

#include <fmt/core.h>

namespace flashlab::app::book {

namespace {

constexpr cpu::Index kRow = 0;
constexpr double kWidth = 760, kHeight = 340;
constexpr double kLeft = 80, kRight = 600, kTop = 20, kBottom = 290;

// A value that holds over each tile: (k0, v), (k0 + tile, v) for each tile.
void steps(const std::vector<double>& v, cpu::Index tile, std::vector<double>& xs,
           std::vector<double>& ys, double shift = 0) {
  for (std::size_t k = 0; k < v.size(); ++k) {
    xs.push_back(double(k) * double(tile));
    xs.push_back(double(k + 1) * double(tile));
    ys.push_back(v[k] + shift);
    ys.push_back(v[k] + shift);
  }
}

}  // namespace

Figure rescaling_figure() {
  const BaseAlongRow r = base_along_row(kRow);
  std::vector<double> mx, my, bx, by, tx, ty;
  steps(r.running_max, r.tile, mx, my);
  steps(r.base, r.tile, bx, by);
  steps(r.base, r.tile, tx, ty, r.threshold);
  std::vector<double> all = my;
  all.insert(all.end(), ty.begin(), ty.end());
  all.insert(all.end(), by.begin(), by.end());
  Svg svg(kWidth, kHeight, "the base r against the running max along one row");
  Chart chart(svg, Scale(0, mx.back(), kLeft, kRight), fit_scale(all, kBottom, kTop, false));
  chart.axes(
      "keys seen", "score", [](double v) { return num(v, 4); }, [](double v) { return num(v, 3); });
  chart.line(tx, ty, 2, true);
  chart.line(mx, my, 0);
  chart.line(bx, by, 1);
  chart.legend({{"running max", 0}, {"base r", 1}, {"r + tau ln 2", 2, true}});
  return {"base-vs-max",
          fmt::format("Query row {} of lesson 9's scores that grow along the sequence, in KV tiles "
                      "of {} keys, swept with conditional rescaling (tau = 8, so r moves only when "
                      "the max passes r + 8 ln 2 = r + {}). The running max rises at many tiles; "
                      "the base moved {} times after the first tile set it.",
                      r.row, r.tile, num(r.threshold, 3), r.rescales),
          svg.str()};
}

}  // namespace flashlab::app::book
