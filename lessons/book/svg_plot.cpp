#include "book/svg_plot.hpp"

#include "flashlab/cpu/types.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace flashlab::app::book {

namespace {

constexpr double kLegendLine = 18;      // pixels between legend entries
constexpr double kTickLength = 4;       // pixels
constexpr double kLinearMargin = 0.05;  // share of the span left free at each end
constexpr double kLogMargin = 1.5;      // factor left free at each end of a log axis

std::string px(double v) { return fmt::format("{:.1f}", v); }

}  // namespace

Scale::Scale(double lo_, double hi_, double px_lo_, double px_hi_, bool log_)
    : lo(lo_), hi(hi_), px_lo(px_lo_), px_hi(px_hi_), log(log_) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi))
    throw cpu::InvalidArgument(fmt::format(
        "an axis from {} to {} is empty or not finite: it needs finite lo < hi", lo, hi));
  if (log && lo <= 0)
    throw cpu::InvalidArgument(fmt::format(
        "a logarithmic axis cannot start at {}: it needs lo > 0 (or a linear axis)", lo));
}

double Scale::at(double value) const {
  const double t = log ? (std::log10(value) - std::log10(lo)) / (std::log10(hi) - std::log10(lo))
                       : (value - lo) / (hi - lo);
  return px_lo + t * (px_hi - px_lo);
}

std::vector<double> Scale::ticks(int max) const {
  std::vector<double> out;
  if (log) {
    for (double base : {10.0, 2.0}) {
      out.clear();
      for (double p = std::floor(std::log(lo) / std::log(base));
           std::pow(base, p) <= hi * (1 + 1e-12); ++p)
        if (std::pow(base, p) >= lo * (1 - 1e-12)) out.push_back(std::pow(base, p));
      if (out.size() >= 2) break;
    }
    while (int(out.size()) > max) {  // keep every other tick, the first one kept
      std::vector<double> fewer;
      for (std::size_t k = 0; k < out.size(); k += 2) fewer.push_back(out[k]);
      out = fewer;
    }
    return out;
  }
  const double raw = (hi - lo) / std::max(1, max);
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  double step = decade * 10;
  for (double m : {1.0, 2.0, 5.0})
    if (m * decade >= raw) {
      step = m * decade;
      break;
    }
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; ++k)
    out.push_back(k * step + 0.0);  // multiples of step, so no error accumulates; + 0: no -0
  return out;
}

Scale fit_scale(const std::vector<double>& values, double px_lo, double px_hi, bool log) {
  double lo = INFINITY, hi = -INFINITY;
  for (double v : values)
    if (std::isfinite(v) && (!log || v > 0)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!(lo <= hi))
    throw cpu::InvalidArgument(
        fmt::format("no {}finite value to scale an axis to ({} values given)",
                    log ? "positive " : "", values.size()));
  if (log) return Scale(lo / kLogMargin, hi * kLogMargin, px_lo, px_hi, true);
  const double span = hi > lo ? hi - lo : std::max(std::abs(lo), 1.0);
  return Scale(lo - kLinearMargin * span, hi + kLinearMargin * span, px_lo, px_hi, false);
}

std::string_view series_colour(std::size_t k) {
  static constexpr std::array<std::string_view, 6> kColours{"#1f6fb4", "#d9661f", "#2e9a3e",
                                                            "#b8322e", "#7b52ab", "#8a6d3b"};
  return kColours[k % kColours.size()];
}

std::string escape_xml(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Svg::Svg(double width, double height, std::string_view title) : width_(width), height_(height) {
  body_ = fmt::format("<title>{}</title>\n", escape_xml(title));
  rect(0, 0, width, height, "#ffffff");
}

void Svg::rect(double x, double y, double w, double h, std::string_view fill,
               std::string_view stroke) {
  body_ += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"{}\"/>\n", px(x),
      px(y), px(w), px(h), fill, stroke);
}

void Svg::line(Point a, Point b, std::string_view stroke, double width, bool dashed) {
  body_ += fmt::format(
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\"{}/>\n",
      px(a.x), px(a.y), px(b.x), px(b.y), stroke, width, dashed ? " stroke-dasharray=\"6 4\"" : "");
}

void Svg::polyline(const std::vector<Point>& points, std::string_view stroke, double width) {
  std::string coords;
  for (const Point& p : points) coords += (coords.empty() ? "" : " ") + px(p.x) + "," + px(p.y);
  body_ +=
      fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"/>\n",
                  coords, stroke, width);
}

void Svg::circle(Point centre, double r, std::string_view fill) {
  body_ += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\"/>\n", px(centre.x),
                       px(centre.y), r, fill);
}

void Svg::text(Point at, std::string_view text, std::string_view anchor, double size,
               std::string_view fill, double rotate) {
  const std::string turn =
      rotate == 0 ? "" : fmt::format(" transform=\"rotate({} {} {})\"", rotate, px(at.x), px(at.y));
  body_ += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"{}\" font-size=\"{}\" fill=\"{}\"{}>{}</text>\n",
      px(at.x), px(at.y), anchor, size, fill, turn, escape_xml(text));
}

void Svg::arrow(Point a, Point b, std::string_view stroke, double width) {
  constexpr double kHead = 8;  // pixels from the tip back along the shaft
  line(a, b, stroke, width);
  const double len = std::hypot(b.x - a.x, b.y - a.y);
  if (len == 0) return;
  const double ux = (b.x - a.x) / len, uy = (b.y - a.y) / len;
  const Point base{b.x - kHead * ux, b.y - kHead * uy};
  body_ += fmt::format("<polygon points=\"{},{} {},{} {},{}\" fill=\"{}\"/>\n", px(b.x), px(b.y),
                       px(base.x - kHead / 2 * uy), px(base.y + kHead / 2 * ux),
                       px(base.x + kHead / 2 * uy), px(base.y - kHead / 2 * ux), stroke);
}

std::string Svg::str() const {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" role=\"img\">\n{2}</svg>\n",
      px(width_), px(height_), body_);
}

Chart::Chart(Svg& svg, Scale x, Scale y) : svg_(&svg), x_(x), y_(y) {}

void Chart::axes(std::string_view x_title, std::string_view y_title, const Format& x_format,
                 const Format& y_format) {
  const double left = x_.px_lo, right = x_.px_hi, bottom = y_.px_lo, top = y_.px_hi;
  for (double v : x_.ticks()) {
    const double p = x_.at(v);
    svg_->line({p, top}, {p, bottom}, kGrid);
    svg_->line({p, bottom}, {p, bottom + kTickLength}, kInk);
    svg_->text({p, bottom + 16}, x_format(v), "middle", 11);
  }
  for (double v : y_.ticks()) {
    const double p = y_.at(v);
    svg_->line({left, p}, {right, p}, kGrid);
    svg_->line({left - kTickLength, p}, {left, p}, kInk);
    svg_->text({left - 7, p + 4}, y_format(v), "end", 11);
  }
  svg_->rect(left, top, right - left, bottom - top, "none", std::string(kInk));
  svg_->text({(left + right) / 2, bottom + 34}, x_title, "middle", 12);
  svg_->text({left - 64, (top + bottom) / 2}, y_title, "middle", 12, kInk, -90);
}

void Chart::line(const std::vector<double>& xs, const std::vector<double>& ys, std::size_t series,
                 bool dashed) {
  if (dashed) {
    for (std::size_t k = 1; k < std::min(xs.size(), ys.size()); ++k)
      svg_->line(at(xs[k - 1], ys[k - 1]), at(xs[k], ys[k]), series_colour(series), 2, true);
    return;
  }
  std::vector<Point> points;
  for (std::size_t k = 0; k < std::min(xs.size(), ys.size()); ++k)
    points.push_back(at(xs[k], ys[k]));
  svg_->polyline(points, series_colour(series));
}

void Chart::points(const std::vector<double>& xs, const std::vector<double>& ys,
                   std::size_t series) {
  constexpr double kRadius = 4;
  for (std::size_t k = 0; k < std::min(xs.size(), ys.size()); ++k)
    svg_->circle(at(xs[k], ys[k]), kRadius, series_colour(series));
}

void Chart::bar(double x, double y, double width, std::size_t series) {
  const Point base = at(x, y_.lo), tip = at(x, y);
  svg_->rect(base.x - width / 2, std::min(base.y, tip.y), width, std::abs(base.y - tip.y),
             series_colour(series));
}

void Chart::legend(const std::vector<Entry>& entries) {
  const double x = x_.px_hi + 12;
  double y = y_.px_hi + 12;
  for (const Entry& e : entries) {
    const std::string_view colour = series_colour(e.series);
    if (e.point)
      svg_->circle({x + 9, y - 4}, 4, colour);
    else
      svg_->line({x, y - 4}, {x + 18, y - 4}, colour, 2, e.dashed);
    svg_->text({x + 24, y}, e.label, "start", 11);
    y += kLegendLine;
  }
}

}  // namespace flashlab::app::book
