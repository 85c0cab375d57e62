// A small plotting helper for the book's figures, drawn from data as inline SVG: a canvas
// (Svg) of shapes and text, and on it a chart (Chart) that maps data to pixels through two
// axes, linear or logarithmic, and draws lines, points and bars with a frame, ticks, labels
// and a legend. Pixels grow rightwards and downwards, as in SVG; a chart's y axis is flipped
// so that larger values sit higher.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab::app::book {

// One axis: the data interval [lo, hi] onto the pixel interval [px_lo, px_hi] (px_hi may be
// smaller, as for a y axis). A log axis maps log10 of the value, so each decade takes the
// same length. Throws cpu::InvalidArgument for lo >= hi, a non-finite bound, or lo <= 0 on a
// log axis.
struct Scale {
  double lo = 0, hi = 1;
  double px_lo = 0, px_hi = 1;
  bool log = false;

  Scale(double lo, double hi, double px_lo, double px_hi, bool log = false);
  double at(double value) const;  // the pixel of value (outside [lo, hi] it extrapolates)
  // Tick values inside [lo, hi]: powers of 10 on a log axis (powers of 2 when fewer than two
  // decades are inside), else multiples of 1, 2 or 5 times a power of 10, at most about max.
  std::vector<double> ticks(int max = 6) const;
};

// The smallest and largest of values (the positive ones when positive_only), widened so
// that neither sits on the frame: by 5% of the span on a linear axis, a factor of 1.5 on a
// log one. Throws cpu::InvalidArgument when no value qualifies.
Scale fit_scale(const std::vector<double>& values, double px_lo, double px_hi, bool log);

struct Point {
  double x = 0, y = 0;
};

// The palette of the figures: distinguishable, and readable on white.
inline constexpr std::string_view kInk = "#222222";
inline constexpr std::string_view kGrid = "#dddddd";
std::string_view series_colour(std::size_t k);

// An SVG canvas of width x height pixels; its title is the figure's accessible name.
class Svg {
 public:
  Svg(double width, double height, std::string_view title);
  void rect(double x, double y, double w, double h, std::string_view fill,
            std::string_view stroke = "none");
  void line(Point a, Point b, std::string_view stroke, double width = 1, bool dashed = false);
  void polyline(const std::vector<Point>& points, std::string_view stroke, double width = 2);
  void circle(Point centre, double r, std::string_view fill);
  // anchor is "start", "middle" or "end"; rotate turns the text about its anchor point.
  void text(Point at, std::string_view text, std::string_view anchor = "start", double size = 12,
            std::string_view fill = kInk, double rotate = 0);
  // An arrow from a to b with its head at b.
  void arrow(Point a, Point b, std::string_view stroke, double width = 2);
  std::string str() const;  // the <svg> element
  double width() const { return width_; }
  double height() const { return height_; }

 private:
  double width_, height_;
  std::string body_;
};

// Text made safe inside an XML or HTML element or attribute.
std::string escape_xml(std::string_view text);

// A chart in the rectangle (left, top, width, height) of an Svg, with the two scales given.
class Chart {
 public:
  using Format = std::function<std::string(double)>;
  Chart(Svg& svg, Scale x, Scale y);
  Point at(double x, double y) const { return {x_.at(x), y_.at(y)}; }
  // The frame, grid lines and tick labels, and the axis titles.
  void axes(std::string_view x_title, std::string_view y_title, const Format& x_format,
            const Format& y_format);
  void line(const std::vector<double>& xs, const std::vector<double>& ys, std::size_t series,
            bool dashed = false);
  void points(const std::vector<double>& xs, const std::vector<double>& ys, std::size_t series);
  // A vertical bar from the x axis's baseline (y = lo) up to y, centred on x, width pixels wide.
  void bar(double x, double y, double width, std::size_t series);
  // A legend to the right of the chart's frame, from its top, one entry per line, in the
  // series' colours (leave about 200 pixels free there).
  struct Entry {
    std::string label;
    std::size_t series = 0;
    bool dashed = false;  // drawn as a dashed line
    bool point = false;   // drawn as a point (a measured value) rather than a line
  };
  void legend(const std::vector<Entry>& entries);

  const Scale& x() const { return x_; }
  const Scale& y() const { return y_; }

 private:
  Svg* svg_;
  Scale x_, y_;
};

}  // namespace flashlab::app::book
