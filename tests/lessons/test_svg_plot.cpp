// The book's plotting helper: the pixels it computes for data, its ticks, its refusals, and
// the SVG it writes for a bar and a line, worked out by hand.
#include "book/svg_plot.hpp"

#include "flashlab/cpu/types.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace flashlab::app::book;

TEST_CASE("a linear scale maps its ends to its pixels and is affine between") {
  const Scale x(0, 10, 100, 200);
  CHECK(x.at(0) == doctest::Approx(100));
  CHECK(x.at(10) == doctest::Approx(200));
  CHECK(x.at(2.5) == doctest::Approx(125));
  CHECK(x.at(-10) == doctest::Approx(0));  // outside [lo, hi] it extrapolates
  const Scale y(0, 4, 300, 100);           // a y axis: larger values higher, smaller pixels
  CHECK(y.at(1) == doctest::Approx(250));
  CHECK(y.at(4) == doctest::Approx(100));
}

TEST_CASE("a log scale gives each decade the same length") {
  const Scale x(1, 1000, 0, 300, true);
  CHECK(x.at(1) == doctest::Approx(0));
  CHECK(x.at(10) == doctest::Approx(100));
  CHECK(x.at(100) == doctest::Approx(200));
  CHECK(x.at(std::sqrt(10.0)) == doctest::Approx(50));
}

TEST_CASE("ticks: 1, 2 or 5 times a power of ten on a linear axis, powers on a log axis") {
  CHECK(Scale(0, 10, 0, 1).ticks() == std::vector<double>{0, 2, 4, 6, 8, 10});
  const std::vector<double> ticks = Scale(-0.3, 0.7, 0, 1).ticks();
  const std::vector<double> expected{-0.2, 0, 0.2, 0.4, 0.6};
  REQUIRE(ticks.size() == expected.size());
  for (std::size_t k = 0; k < ticks.size(); ++k) CHECK(ticks[k] == doctest::Approx(expected[k]));
  CHECK(Scale(0.5, 2000, 0, 1, true).ticks() == std::vector<double>{1, 10, 100, 1000});
  // Less than two decades inside: powers of two instead.
  CHECK(Scale(3, 20, 0, 1, true).ticks() == std::vector<double>{4, 8, 16});
  // Too many decades for max ticks: every other one.
  CHECK(Scale(1, 1e8, 0, 1, true).ticks(5) == std::vector<double>{1, 100, 1e4, 1e6, 1e8});
}

TEST_CASE("a scale refuses an empty interval, a non-finite bound, and lo <= 0 on a log axis") {
  CHECK_THROWS_AS(Scale(1, 1, 0, 1), flashlab::cpu::InvalidArgument);
  CHECK_THROWS_AS(Scale(2, 1, 0, 1), flashlab::cpu::InvalidArgument);
  CHECK_THROWS_AS(Scale(0, INFINITY, 0, 1), flashlab::cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(Scale(0, 1, 0, 1, true), doctest::Contains("needs lo > 0"),
                       flashlab::cpu::InvalidArgument);
}

TEST_CASE("fit_scale leaves a margin: 5% of the span, or a factor 1.5 on a log axis") {
  const Scale lin = fit_scale({2, 12, 7}, 0, 100, false);
  CHECK(lin.lo == doctest::Approx(1.5));
  CHECK(lin.hi == doctest::Approx(12.5));
  const Scale log = fit_scale({10, 1000, -5, 0}, 0, 100, true);  // non-positive values skipped
  CHECK(log.lo == doctest::Approx(10 / 1.5));
  CHECK(log.hi == doctest::Approx(1500));
  const Scale one = fit_scale({3}, 0, 100, false);  // a single value still gets a span
  CHECK(one.lo < 3);
  CHECK(one.hi > 3);
  CHECK_THROWS_AS(fit_scale({-1, 0}, 0, 100, true), flashlab::cpu::InvalidArgument);
  CHECK_THROWS_AS(fit_scale({}, 0, 100, false), flashlab::cpu::InvalidArgument);
}

TEST_CASE("a bar and a line land on the pixels their data give") {
  Svg svg(100, 200, "test");
  Chart chart(svg, Scale(0, 10, 0, 100), Scale(0, 10, 200, 0));
  CHECK(chart.at(5, 4).x == doctest::Approx(50));
  CHECK(chart.at(5, 4).y == doctest::Approx(120));
  chart.bar(5, 4, 10, 0);  // from y = 0 (pixel 200) up to y = 4 (pixel 120), 10 pixels wide
  chart.line({0, 5, 10}, {0, 10, 5}, 1);
  const std::string out = svg.str();
  CHECK(out.find("<rect x=\"45.0\" y=\"120.0\" width=\"10.0\" height=\"80.0\" fill=\"" +
                 std::string(series_colour(0)) + "\"") != std::string::npos);
  CHECK(out.find("<polyline points=\"0.0,200.0 50.0,0.0 100.0,100.0\"") != std::string::npos);
  CHECK(out.find("viewBox=\"0 0 100.0 200.0\"") != std::string::npos);
}

TEST_CASE("text in a figure is escaped") {
  CHECK(escape_xml("a < b & \"c\" > 'd'") == "a &lt; b &amp; &quot;c&quot; &gt; &#39;d&#39;");
  Svg svg(10, 10, "<title>");
  svg.text({1, 2}, "x < y");
  const std::string out = svg.str();
  CHECK(out.find("<title>&lt;title&gt;</title>") != std::string::npos);
  CHECK(out.find(">x &lt; y</text>") != std::string::npos);
}
