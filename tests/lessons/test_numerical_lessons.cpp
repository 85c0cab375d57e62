// The numerical chapters (dropout, FP8, FlashAttention-4's exponential): the numbers they
// print, checked against computations made here from the definitions (the Philox rule, the
// e4m3 format, the profiles' rates), not against the lessons' own code paths. Lessons are
// found by folder, so that renumbering them touches no test.
#include "flashlab/cpu/exp2_poly.hpp"
#include "flashlab/cpu/fp8.hpp"
#include "flashlab/cpu/philox.hpp"
#include "flashlab/sim/profiles.hpp"
#include "kit/lesson_registry.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <sstream>

using namespace flashlab::app;
namespace cpu = flashlab::cpu;
namespace sim = flashlab::sim;

namespace {

std::string run_folder(std::string_view folder) {
  for (const auto& lesson : all_lessons())
    if (lesson.folder == folder) {
      std::ostringstream out;
      std::istringstream in;
      LessonContext ctx(out, in, Style::plain(), false);
      lesson.run(ctx);
      return out.str();
    }
  FAIL("no lesson in folder " << folder);
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The tab-separated cells of the first line that starts with prefix; empty when none does.
std::vector<std::string> row_of(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(prefix, 0) == 0) {
      std::vector<std::string> cells;
      std::istringstream in(line);
      for (std::string cell; std::getline(in, cell, '\t');) cells.push_back(cell);
      return cells;
    }
  return {};
}

double cell(const std::vector<std::string>& row, std::size_t i) {
  REQUIRE(i < row.size());
  return std::stod(row[i]);
}

}  // namespace

TEST_CASE("dropout lesson: one Philox call and the mask, from the rule's definition") {
  const auto out = run_folder("13-dropout");
  constexpr double p = 0.25;
  constexpr std::uint64_t seed = 2026;
  const auto threshold = static_cast<std::uint32_t>(std::floor(p * 4294967296.0));
  CHECK(contains(out, fmt::format("threshold floor(p 2^32) = {}.", threshold)));
  const cpu::PhiloxKey key{std::uint32_t(seed), std::uint32_t(seed >> 32)};
  // counter = (column / 4, row, batch * 2^16 + head, offset), word column % 4.
  const auto word = [&](std::uint32_t row, std::uint32_t col) {
    return cpu::philox4x32_10({col / 4, row, 0, 0}, key)[col % 4];
  };
  for (std::uint32_t c = 0; c < 4; ++c)
    CHECK(contains(
        out, fmt::format("\n{}\t{}\t{}\n", c, word(0, c), word(0, c) >= threshold ? "yes" : "no")));
  int kept = 0;
  for (std::uint32_t r = 0; r < 6; ++r) {
    std::string line = fmt::format("  row {}  ", r);
    for (std::uint32_t c = 0; c < 16; ++c) {
      line += word(r, c) >= threshold ? '#' : '.';
      kept += word(r, c) >= threshold;
    }
    CHECK(contains(out, line + "\n"));
  }
  CHECK(contains(out, fmt::format("{} of 96 kept", kept)));
}

TEST_CASE("dropout lesson: the bytes of a stored mask at N = 8192, 32 heads") {
  const auto out = run_folder("13-dropout");
  constexpr double weights = 32.0 * 8192 * 8192, MiB = 1 << 20;
  CHECK(contains(out, fmt::format("\t{:.0f} MiB\t{:.0f} MiB\n", weights / MiB, 2 * weights / MiB)));
  CHECK(contains(out,
                 fmt::format("\t{:.0f} MiB\t{:.0f} MiB\n", weights / 8 / MiB, weights / 4 / MiB)));
  CHECK(contains(out, "seed and offset\t12 bytes\t0\n"));  // a 64-bit seed and a 32-bit offset
}

TEST_CASE("dropout lesson: the replay agrees, another offset does not, differences agree") {
  const auto out = run_folder("13-dropout");
  const auto same = row_of(out, "tiled, same (seed, offset)\t");
  const auto other = row_of(out, "tiled, offset + 1\t");
  REQUIRE(same.size() == 4);
  REQUIRE(other.size() == 4);
  for (std::size_t i = 1; i < 4; ++i) {
    CHECK(cell(same, i) < 1e-12);  // fp64 sums of ~100 terms of size ~1
    CHECK(cell(other, i) > 0.1);   // a different mask: errors the size of the gradients
  }
  for (const char* tensor : {"Q\t", "K\t", "V\t"}) {
    const auto row = row_of(out, tensor);
    REQUIRE(row.size() == 4);
    CHECK(cell(row, 2) > 0.1);   // the gradient is not trivially zero
    CHECK(cell(row, 3) < 1e-8);  // central differences with h = 1e-5: O(h^2) = 1e-10
  }
}

TEST_CASE("dropout lesson: the kept share and the mean output converge as they should") {
  const auto out = run_folder("13-dropout");
  constexpr double p = 0.25, weights = 10000.0 * 16 * 16;
  const auto last = row_of(out, "10000\t");
  const auto first = row_of(out, "10\t");
  REQUIRE(last.size() == 4);
  REQUIRE(first.size() == 4);
  const double sigma = std::sqrt(p * (1 - p) / weights);  // the binomial share's deviation
  CHECK(std::fabs(cell(last, 1) - (1 - p)) < 5 * sigma);
  CHECK(cell(last, 2) < cell(first, 2) / 5);  // 1/sqrt(seeds): 1000 times the seeds, 31x less
  CHECK(cell(last, 3) > 10 * cell(last, 2));  // without 1/(1 - p) the mean stays off
}

namespace {

// The e4m3 value nearest x, by search over the format's values (ties to the even code),
// saturating at 448: the format's definition, independent of fp8.cpp.
std::pair<int, double> e4m3_nearest(double x) {
  if (std::fabs(x) >= 448) return {x > 0 ? 0x7E : 0xFE, x > 0 ? 448 : -448};
  int best = 0;
  double best_value = 0, best_distance = std::numeric_limits<double>::infinity();
  for (int code = 0; code < 0x7F; ++code) {
    const int E = code >> 3, M = code & 7;
    const double v = E == 0 ? M * std::ldexp(1.0, -9) : (1 + M / 8.0) * std::ldexp(1.0, E - 7);
    const double distance = std::fabs(v - std::fabs(x));
    if (distance < best_distance || (distance == best_distance && code % 2 == 0)) {
      best = code;
      best_value = v;
      best_distance = distance;
    }
  }
  return {x < 0 ? best | 0x80 : best, x < 0 ? -best_value : best_value};
}

}  // namespace

TEST_CASE("fp8 lesson: the landmarks and the roundings are the format's") {
  const auto out = run_folder("14-fp8");
  CHECK(contains(out, "largest\t0x7E\t448\n"));
  CHECK(contains(out, "one\t0x38\t1\n"));
  CHECK(contains(out, "smallest normal\t0x08\t" + num(std::ldexp(1.0, -6), 6) + "\n"));
  CHECK(contains(out, "smallest subnormal\t0x01\t" + num(std::ldexp(1.0, -9), 6) + "\n"));
  CHECK(contains(out, "\n254 of the 256 codes are finite"));  // 2 x 127, less the two NaNs
  for (const float x : {1.0625f, 1.1875f, 3.3f, 300.0f, 440.0f, 1000.0f, 0.02f, 0.0013f, 0.0009f}) {
    CAPTURE(x);
    const auto [code, value] = e4m3_nearest(x);
    CHECK(contains(out, fmt::format("\n{}\t0x{:02X}\t{}\t", num(x, 6), code, num(value, 6))));
  }
}

TEST_CASE("fp8 lesson: the rotation and the per-tile scale do what the text says") {
  const auto out = run_folder("14-fp8");
  // Step 2: the quiet tile's values, per tile against per tensor.
  const auto quiet_tensor = row_of(out, "tokens 0-127 x0.0001\tQ, per tensor\t");
  const auto quiet_tile = row_of(out, "tokens 0-127 x0.0001\tQ, per tile\t");
  REQUIRE(quiet_tile.size() == 4);
  CHECK(cell(quiet_tile, 3) < cell(quiet_tensor, 3) / 1.5);
  CHECK(cell(quiet_tile, 3) < 1.0 / 16);  // within e4m3's half spacing of 2^-4
  // Step 3: on outlier channels the rotation lowers the output error; FP8 on N(0, 1) costs
  // about an order of magnitude against bf16 (2^4 coarser, partly averaged out).
  const auto base = row_of(out, "4 channels x10\te4m3, per tensor\t");
  const auto both = row_of(out, "4 channels x10\te4m3, per tile + rotation\t");
  const auto bf16 = row_of(out, "4 channels x10\tbf16\t");
  REQUIRE(both.size() == 5);
  CHECK(cell(both, 2) < cell(base, 2) / 2);
  const auto plain = row_of(out, "N(0, 1)\te4m3, per tensor\t");
  CHECK(cell(plain, 4) > 5);
  CHECK(cell(plain, 4) < 16);
  // Step 4 quotes the ratios of those cells.
  CHECK(
      contains(out, fmt::format("errs {:.1f} times less than per-tensor FP8,\n{:.1f} times bf16's",
                                cell(base, 2) / cell(both, 2), cell(both, 2) / cell(bf16, 2))));
}

namespace {

double matrix_per_clock_per_sm(const sim::HardwareProfile& hw) {
  const double clock = hw.exp_per_s / (16.0 * hw.sm_count);  // the exp rate: 16 per clock per SM
  return hw.matrix_flops_per_s / (hw.sm_count * clock);
}

}  // namespace

TEST_CASE("fa4 lesson: clocks per score, matrix against exponential, from the profiles") {
  const auto out = run_folder("15-fa4-exponential");
  for (const char* name : {"h100", "b200"}) {
    const auto& hw = sim::find_profile(name);
    const double matrix = 4 * 128 / matrix_per_clock_per_sm(hw), exp = 1.0 / 16;
    CHECK(contains(
        out, fmt::format("{}\t{}\t{}\t{}\t{:.2f}\n", name, num(matrix_per_clock_per_sm(hw), 4),
                         num(matrix, 3), num(exp, 3), exp / matrix)));
  }
}

TEST_CASE("fa4 lesson: the worked 2^x and the exponent added as an integer") {
  const auto out = run_folder("15-fa4-exponential");
  const auto c = cpu::fit_exp2_polynomial(3);
  const float f = -2.3f - (-3.0f);
  const float p = std::fma(std::fma(std::fma(c[3], f, c[2]), f, c[1]), f, c[0]);  // Horner
  const auto p_bits = std::bit_cast<std::uint32_t>(p);
  const std::uint32_t result_bits = p_bits - (3u << 23);  // j = -3 subtracted from the exponent
  CHECK(contains(out, fmt::format("gives 0x{:08X}", result_bits)));
  CHECK(std::fabs(double(std::bit_cast<float>(result_bits)) - std::exp2(-2.3)) <
        2e-4 * std::exp2(-2.3));
  CHECK(contains(out, "against 2^x = " + num(std::exp2(double(-2.3f)), 8)));
}

TEST_CASE("fa4 lesson: accuracy rows obey the fit's error, and bf16 one ulp from degree 2 on") {
  const auto out = run_folder("15-fa4-exponential");
  for (int degree = 2; degree <= 5; ++degree) {
    CAPTURE(degree);
    const auto row = row_of(out, fmt::format("{}\t", degree));
    REQUIRE(row.size() == 5);
    const double relative = cell(row, 1), ulps = cell(row, 2);
    CHECK(ulps <= 2 * relative * (1 << 23) * 1.01 + 4);  // e m 2^23 ulps, m < 2
    CHECK(ulps >= relative * (1 << 23) / 2);             // and not far below it
    CHECK(cell(row, 4) == 1);
  }
}

TEST_CASE("fa4 lesson: the balanced share minimises the slower of the two pipes") {
  const auto out = run_folder("15-fa4-exponential");
  for (int degree = 2; degree <= 5; ++degree) {
    CAPTURE(degree);
    const double c = degree + 2, b = 2;  // Horner's FMAs + floor + subtraction; FFMA + FADD
    // Bisection on s for the point where the MUFU's time (1 - s)/16 meets the FMA units'
    // (b + s c)/128: the first falls, the second rises.
    double lo = 0, hi = 1;
    for (int i = 0; i < 60; ++i) {
      const double s = (lo + hi) / 2;
      ((1 - s) / 16 > (b + s * c) / 128 ? lo : hi) = s;
    }
    const double clocks = (1 - lo) / 16;
    // The row of this degree in step 4's table: the second row that starts with it (the
    // first is step 3's accuracy row).
    std::istringstream lines(out);
    std::vector<std::string> row;
    int seen = 0;
    for (std::string line; std::getline(lines, line);)
      if (line.rfind(fmt::format("{}\t", degree), 0) == 0 && ++seen == 2) row = row_of(line, line);
    REQUIRE(row.size() == 6);
    CHECK(cell(row, 1) == c);
    CHECK(std::fabs(cell(row, 2) / 100 - lo) <= 0.005);             // printed as a whole percentage
    CHECK(cell(row, 3) == doctest::Approx(clocks).epsilon(0.002));  // 3 significant digits
    CHECK(cell(row, 4) == doctest::Approx(1.0 / 16 / clocks).epsilon(0.005));
  }
}

TEST_CASE("fa4 lesson: registers for S and U, tensor memory filled, 2-CTA operand bytes") {
  const auto out = run_folder("15-fa4-exponential");
  // 128 rows x 128 columns of fp32 over 128 threads: 128 registers each for S and for U.
  CHECK(contains(out, "128\t128\t128\t128\t256\t512\n"));
  CHECK(contains(out, "64\t128\t64\t64\t128\t256\n"));
  CHECK(contains(out, fmt::format("= {} KiB", 128 * 512 * 4 / 1024)));
  CHECK(contains(out, "2 x (128 + 128) = 512 columns"));
  const auto& b200 = sim::find_profile("b200");
  const double mma = 2.0 * 128 * 128 * 128 / matrix_per_clock_per_sm(b200);
  CHECK(contains(out, fmt::format("one CTA (M = 128)\t32768\t32768\t512\t{}\n", num(mma, 4))));
  CHECK(contains(
      out, fmt::format("2-CTA (M = 256 over two SMs)\t32768\t16384\t384\t{}\n", num(mma, 4))));
}
