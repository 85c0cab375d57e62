// Every lesson's program, run in-process as `flashlab lesson N` runs it: it finishes, prints
// plain text when asked to, pauses between steps with --step, and prints the key numbers
// the lessons state (checked here against formulas, not against the program's own output).
#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/simulate.hpp"
#include "flashlab/sim/units.hpp"
#include "gpu_bridge/measured_h200.hpp"
#include "kit/lesson_registry.hpp"
#include "tour/tour.hpp"
#include "traces/tile_trace.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace flashlab::app;

namespace {

struct LessonRun {
  std::string output;
  int steps = 0;
};

LessonRun run_lesson(int number, bool step = false, const std::string& input = "") {
  std::ostringstream out;
  std::istringstream in(input);
  LessonContext ctx(out, in, Style::plain(), step);
  find_lesson(number).run(ctx);
  return {out.str(), ctx.steps()};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("every lesson runs to its end in plain text") {
  for (const auto& lesson : all_lessons()) {
    CAPTURE(lesson.number);
    const auto run = run_lesson(lesson.number);
    CHECK(run.steps >= 3);
    CHECK(contains(run.output, "Next:"));
    CHECK_FALSE(contains(run.output, "\033["));  // no escape codes without a terminal
  }
}

TEST_CASE("--step pauses before every step but the first") {
  for (const int number : {2, 4}) {
    const auto run = run_lesson(number, true, std::string(32, '\n'));
    CHECK(count(run.output, "[press Enter for the next step]") ==
          static_cast<std::size_t>(run.steps - 1));
  }
  CHECK(count(run_lesson(2).output, "press Enter") == 0);
}

TEST_CASE("lesson 0: the sizes of S, P and Q at N = 8192, d = 128, bf16") {
  const auto out = run_lesson(0).output;
  constexpr double kMiB = 1 << 20;
  const double square = 8192.0 * 8192.0 * 2 / kMiB, input = 8192.0 * 128 * 2 / kMiB;
  CHECK(contains(out, fmt::format("{:.0f} MiB", square)));           // S or P: 128 MiB
  CHECK(contains(out, fmt::format("{:.0f} MiB", input)));            // Q: 2 MiB
  CHECK(contains(out, fmt::format("{:.0f} GiB", 2 * square * 32 / 1024)));  // 8 GiB
  CHECK(contains(out, fmt::format("moves {:.0f} MiB per head", 4 * square)));  // 512 MiB
}

TEST_CASE("lesson 2: 49/15 from the two tiles, and the shortcut that is wrong") {
  const auto out = run_lesson(2).output;
  CHECK(contains(out, "O = U / l = 6.125 / 1.875 = 3.26666666666666"));
  CHECK(contains(out, "to get 2.66667"));  // (5/3 + 11/3) / 2 = 8/3
}

TEST_CASE("lesson 4: the causal tile counts of 24 tokens in tiles of 4") {
  constexpr int kTiles = 6;
  const int computed = kTiles * (kTiles + 1) / 2;
  CHECK(contains(run_lesson(4).output,
                 fmt::format("{} tiles computed ({} of them diagonal), {} skipped", computed,
                             kTiles, kTiles * kTiles - computed)));
}

TEST_CASE("an unknown lesson number names the ones that exist") {
  const auto last = all_lessons().back().number;
  CHECK_THROWS_WITH_AS(find_lesson(last + 1),
                       doctest::Contains(fmt::format("numbered 0 to {}", last).c_str()), UnknownLesson);
  CHECK_THROWS_AS(find_lesson(-1), UnknownLesson);
}

// The first number printed after `prefix` in text.
double number_after(const std::string& text, const std::string& prefix) {
  const auto at = text.find(prefix);
  REQUIRE_MESSAGE(at != std::string::npos, "no `" << prefix << "` in the output");
  return std::stod(text.substr(at + prefix.size()));
}

TEST_CASE("lesson 5: the fitted exponents are the paper's") {
  const auto out = run_lesson(5).output;
  constexpr double kFitSlack = 0.2;  // five points, block sizes rounded to integers
  CHECK(number_after(out, "Fitted exponents of N: naive ") == doctest::Approx(2.0).epsilon(kFitSlack / 2));
  CHECK(number_after(out, "Fitted exponent of M: fa1 ") == doctest::Approx(-1.0).epsilon(kFitSlack));
  CHECK(number_after(out, "Fitted exponent of d: ") == doctest::Approx(2.0).epsilon(kFitSlack));
}

TEST_CASE("lesson 5: the bytes into the SMs of fa2 as built, in closed form") {
  const auto out = run_lesson(5).output;
  // One head, N = 4096, d = 128, bf16: Q once, K and V once per query tile of Br rows.
  const auto fa2 = flashlab::gpu::kernel_config(FLASHLAB_KERNEL_FA2, 128, FLASHLAB_BF16);
  const double mib = 4096.0 * 128 * 2 / (1 << 20);  // one (N, d) matrix
  const double read = mib + (4096 / fa2.Br) * 2 * mib;
  CHECK(contains(out, "Step 6: Three levels, three counters"));
  CHECK(contains(out, fmt::format("fa2\t{:.1f} MiB", read)));
}

TEST_CASE("lesson 5: the L1 plain loads share, the scalar kernel past it, the naive kernel cold") {
  const auto out = run_lesson(5).output;
  // N = 16384, d = 128, one head, the scalar kernel with plain loads: 256 blocks, SMs 0 to 123
  // hold two of them, so 132 blocks' K and V cross into the SMs; Q once for every block.
  const double q = 16384.0 * 128 * 2, kv_per_block = 2 * q;
  CHECK(contains(out, "At N = 16384 it has 256 blocks of\n64 rows"));
  CHECK(contains(out, fmt::format("crosses into the SMs ({:.3f})",
                                  (q + 132 * kv_per_block) / (q + 256 * kv_per_block))));
  // 16 heads at N = 8192: the draws' range holds their median, and some loads are shared.
  const std::string many = out.substr(out.find("Into the SMs cross "));
  const double low = number_after(many, "Into the SMs cross "), high = number_after(many, " to ");
  const double median = number_after(many, "of the loads (median ");
  CHECK(low <= median);
  CHECK(median <= high);
  CHECK(high < 1.0);
  CHECK(contains(out, fmt::format("measured {:.3f}\n(", measured::kScalarSmReadH16N8192.ratio)));
  // The library's kernel past the L1: what it read against its mirror, and what it pays.
  const measured::LoadsPastTheL1& past = measured::kScalarLoadsPastTheL1;
  REQUIRE(past.sm_read_low == past.sm_read_high);
  CHECK(contains(out, fmt::format("its loads: {:.3f} of its mirror's at {} shapes",
                                  past.sm_read_low, past.shapes)));
  CHECK(contains(out, fmt::format("It runs at {:.3f} to {:.3f} of the plain\nloads' speed at d = "
                                  "128 and {:.3f} to {:.3f} at d = 64",
                                  past.speed_d128_low, past.speed_d128_high, past.speed_d64_low,
                                  past.speed_d64_high)));
  // N = 4096: Q, K and V, S (fp32) and P (bf16) each read from DRAM once.
  const double mib = 1 << 20, n = 4096, d = 128;
  CHECK(contains(out, fmt::format("reads {:.1f} MiB from DRAM at N = 4096",
                                  (3 * n * d * 2 + n * n * 4 + n * n * 2) / mib)));
}

TEST_CASE("lesson 5: the slices' reads, the model's SM bytes over the Coalescer's measured ratio") {
  const auto out = run_lesson(5).output;
  // One head, N = 16384, d = 128: 128 blocks of fa2, one per SM; Q once, K and V per block.
  const auto fa2 = flashlab::gpu::kernel_config(FLASHLAB_KERNEL_FA2, 128, FLASHLAB_BF16);
  const double mib = 16384.0 * 128 * 2 / (1 << 20);
  const double read = mib + (16384 / fa2.Br) * 2 * mib;
  const auto& c = flashlab::app::measured::kFa2Coalescing[1];
  REQUIRE(c.n == 16384);
  REQUIRE(c.heads == 1);
  const double ratio = c.to_sms / c.from_slices;
  CHECK(contains(out, fmt::format("1\t16384\t{}\t1\t", 16384 / fa2.Br)));
  CHECK(contains(out, fmt::format("\t{:.2f}\t{:.1f} MiB", ratio, read / ratio)));
}

TEST_CASE("lesson 8: the ablation's order of timing, quoted from the one measured figure") {
  const auto out = run_lesson(8).output;
  const auto& spread = flashlab::app::measured::kTimedLater;
  REQUIRE(spread.largest >= spread.median);
  CHECK(contains(out, fmt::format("up to {:.1f}% longer", 100 * (spread.largest - 1))));
  CHECK(contains(out, fmt::format("({:.1f}% at the median)", 100 * (spread.median - 1))));
}

TEST_CASE(
    "lesson 12: causal tiles shared in order are at least as even as in fixed "
    "turns") {
  const auto out = run_lesson(12).output;
  REQUIRE(contains(out, "Step 7: Unequal blocks"));
  for (int d : {64, 128})
    for (int n : {1024, 4096, 16384}) {
      // (B = 16384 / N) x (H = 2048 / d) x ceil(N / Br) tiles, Br = fa3's at d.
      const int br = flashlab::gpu::fa3::br(d);
      const int tiles = 16384 / n * (2048 / d) * ((n + br - 1) / br);
      const std::string row = fmt::format("\n{}\t{}\t{}\t", d, n, tiles);
      const auto at = out.find(row);
      REQUIRE_MESSAGE(at != std::string::npos, "no row " << row);
      std::istringstream cells(out.substr(at + row.size()));
      double per_sm = 0, in_turns = 0, in_order = 0;
      cells >> per_sm >> in_turns >> in_order;
      CHECK(in_order >= 1.0);
      CHECK(in_order <= in_turns);
    }
}

TEST_CASE("lesson 6: P at N = 8192 in bf16 for 32 heads, and backward FLOPs 2.5x the forward") {
  const auto out = run_lesson(6).output;
  constexpr double kMiB = 1 << 20;
  CHECK(contains(out, fmt::format("{:.0f} MiB", 32 * 8192.0 * 8192.0 * 2 / kMiB)));
  CHECK(contains(out, fmt::format("{:.1f}x", 5 / 2.0)));
}

TEST_CASE("lesson 9: the wrong variant is far off, the right one within fp32 rounding") {
  const auto out = run_lesson(9).output;
  constexpr double kFar = 0.1, kNear = 1e-3;
  CHECK(number_after(out, "base moved, l and U not rescaled\t") > kFar);
  CHECK(number_after(out, "\ncorrect\t") < kNear);
}

TEST_CASE("lesson 10: bytes per decoding step of ANCHORS.md's shape") {
  const auto out = run_lesson(10).output;
  constexpr double L = 131072, heads_kv = 8, d = 128, bf16 = 2, batch = 8;
  CHECK(contains(out, num(2 * L * heads_kv * d * bf16 * batch, 4)));
}

namespace {

// The SRAM one H200 block gets, from the simulator's profile (its one owner).
flashlab::sim::Bytes h200_sram() { return flashlab::sim::find_profile("h200").sram_per_sm; }

// The line of text that starts with prefix; "" when there is none.
std::string line_starting(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

// The tab-separated cells of a line.
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string cell; std::getline(in, cell, '\t');) out.push_back(cell);
  return out;
}

}  // namespace

TEST_CASE("lesson 0: Q, K and V each print their own first row") {
  const auto out = run_lesson(0).output;
  const auto in = random_inputs({.N = 6, .d = 4, .seed = 0});
  std::vector<std::string> rows;
  for (const auto* X : {&in.Q, &in.K, &in.V}) {
    const auto row = X->row(0);
    rows.push_back(num_row(std::vector<double>(row.begin(), row.end()), 4, 6));
  }
  CHECK(rows[0] != rows[1]);
  CHECK(rows[1] != rows[2]);
  CHECK(contains(out, "Q\t(6, 4)\t" + rows[0] + "\n"));
  CHECK(contains(out, "K\t(6, 4)\t" + rows[1] + "\n"));
  CHECK(contains(out, "V\t(6, 4)\t" + rows[2] + "\n"));
}

TEST_CASE("lesson 0: its SRAM is the h200 profile's, and fa2 runs with its kernel's Br") {
  const auto out = run_lesson(0).output;
  CHECK(contains(out, "on-chip SRAM (" + flashlab::sim::format_bytes(double(h200_sram())) + ","));
  const auto fa2 = flashlab::gpu::kernel_config(FLASHLAB_KERNEL_FA2, 128, FLASHLAB_BF16);
  CHECK(contains(out, fmt::format("once per query tile (Br = {})", fa2.Br)));
}

TEST_CASE("lesson 3: its trace tables say how they number tiles, rows and keys") {
  const auto out = run_lesson(3).output;
  CHECK(contains(out, "Numbering, as in every trace: " + std::string(kNumbering) + "."));
  CHECK(contains(out, "Query tile i = 0: query rows 0-3"));
}

TEST_CASE("lesson 4: step 4 states its SRAM and the fa2 kernel's tiles") {
  const auto out = run_lesson(4).output;
  const auto fa2 = flashlab::gpu::kernel_config(FLASHLAB_KERNEL_FA2, 128, FLASHLAB_BF16);
  CHECK(contains(out, "block (" + flashlab::sim::format_bytes(double(h200_sram())) + ")"));
  CHECK(contains(out, fmt::format("Br = {}, Bc = {}, so Tr = {} query tiles by Tc = {} KV tiles",
                                  fa2.Br, fa2.Bc, 8192 / fa2.Br, 8192 / fa2.Bc)));
  // The diagonal step's rows and keys, from 0: Br = 8, Bc = 4, rows 0-3 miss keys 4-7.
  CHECK(contains(out, "query rows 0-3 see no key\nof KV tile 1 (keys 4-7)"));
}

TEST_CASE("lesson 5: fa1 with the first paper's rule, fa2 with its kernel's tiles, bytes right") {
  using flashlab::sim::Algorithm;
  const auto out = run_lesson(5).output;
  constexpr double N = 4096, d = 64, bf16 = 2, fp32 = 4;
  const double M = double(h200_sram()) / bf16;
  const double Bc1 = std::ceil(M / (4 * d));  // the paper: Bc = ceil(M / 4d), Br = min(Bc, d)
  const double Tc = std::ceil(N / Bc1);
  const auto fa2 = flashlab::gpu::kernel_config(FLASHLAB_KERNEL_FA2, 64, FLASHLAB_BF16);
  const double Tr = N / fa2.Br;
  // fa1 (simulator/src/fa1_program.cpp): O (fp32), l, m initialised; K, V once; per KV tile
  // Q read, O, l, m read and written. fa2: Q once, K, V per query tile, O and L once.
  const double fa1 = N * d * fp32 + 2 * N * fp32 + 2 * N * d * bf16 +
                     Tc * (N * d * bf16 + 2 * N * d * fp32 + 4 * N * fp32);
  const double fa2_bytes = 2 * N * d * bf16 + N * fp32 + Tr * 2 * N * d * bf16;
  const auto fa1_row = cells(line_starting(out, "fa1\t"));
  const auto fa2_row = cells(line_starting(out, "fa2\t"));
  REQUIRE(fa1_row.size() == 8);
  REQUIRE(fa2_row.size() == 8);
  CHECK(fa1_row[2] == fmt::format("{}", Bc1));
  const double Br1 = std::stod(fa1_row[1]);
  CHECK(Br1 <= std::min(Bc1, d));
  if (Br1 < std::min(Bc1, d))  // halved to fit: the lesson must say why
    CHECK(contains(out,
                   fmt::format("fa1 runs with Br = {}, not the rule's {}", Br1, std::min(Bc1, d))));
  CHECK(fa2_row[1] == fmt::format("{}", fa2.Br));
  CHECK(fa2_row[2] == fmt::format("{}", fa2.Bc));
  CHECK(fa1_row[3] == fmt::format("Q, O, l, m x Tc = {}", Tc));
  CHECK(fa2_row[3] == fmt::format("K, V x Tr = {}", Tr));
  CHECK(fa1_row[6] == flashlab::sim::format_bytes(fa1));
  CHECK(fa2_row[6] == flashlab::sim::format_bytes(fa2_bytes));
  CHECK(fa1_row[7] == fmt::format("{:.2f}x", fa1 / fa2_bytes));
  CHECK(fa2_row[7] == "1.00x");
  CHECK(contains(
      out, fa1 < fa2_bytes
               ? fmt::format("Here fa1 moves fewer HBM bytes than fa2 ({:.2f}x)", fa1 / fa2_bytes)
               : fmt::format("Here fa1 moves {:.2f}x the HBM bytes of fa2", fa1 / fa2_bytes)));
}

TEST_CASE("lesson 5: fa1's bytes depend on Bc alone, as the lesson says of its halving") {
  using flashlab::sim::Algorithm;
  for (const flashlab::cpu::Index N : {97, 1023, 4096}) {
    CAPTURE(N);
    flashlab::sim::Problem p{.N = N, .d = 64, .sram_bytes = 64 * h200_sram()};
    p.tiles = flashlab::cpu::TileSizes{64, 456};
    const auto wide = flashlab::sim::count(Algorithm::fa1, p).bytes_total();
    p.tiles = flashlab::cpu::TileSizes{16, 456};
    CHECK(flashlab::sim::count(Algorithm::fa1, p).bytes_total() == wide);
    p.tiles = flashlab::cpu::TileSizes{16, 228};  // more KV tiles once N > 228: more bytes
    const auto shorter = flashlab::sim::count(Algorithm::fa1, p).bytes_total();
    if (N > 228)
      CHECK(shorter > wide);
    else
      CHECK(shorter == wide);
  }
}

TEST_CASE("lesson 5: steps 2 to 4 state N, d and the SRAM they use") {
  const auto out = run_lesson(5).output;
  const std::string sram = flashlab::sim::format_bytes(double(h200_sram()));
  CHECK(contains(out, "d = 64, bf16, SRAM = " + sram + " (one H200 block's)"));
  CHECK(contains(out, "N = 8192, d = 64, bf16 (M = SRAM / 2 bytes)"));
  CHECK(contains(out, "N = 8192, bf16, fa1 with the paper's rule in an SRAM of " +
                          flashlab::sim::format_bytes(4.0 * double(h200_sram())) + " (4 times"));
}

TEST_CASE("lesson 7: split-K's per-tile merges against K and V, the same ratio at every N") {
  const auto out = run_lesson(7).output;
  // Per query tile of Br rows: (N / Bc) rounds of (W - 1) merges, each writing and reading
  // Br (d + 2) fp32 numbers; K and V are 2 N d bf16 numbers.
  constexpr double Br = 128, Bc = 64, d = 128, W = 4, fp32 = 4, bf16 = 2;
  const double ratio = (W - 1) * 2 * Br * (d + 2) * fp32 / (Bc * 2 * d * bf16);
  const double Bc_equal = (W - 1) * 2 * Br * (d + 2) * fp32 / (2 * d * bf16);
  const auto row = cells(line_starting(out, "128\t4\t"));
  REQUIRE(row.size() == 10);
  CHECK(row[4] == fmt::format("{:.1f}x", ratio));
  CHECK(row[5] == fmt::format("{}", std::floor(Bc_equal) + 1));
  CHECK(contains(out, fmt::format("W = 4 is {:.1f}x, as at N = 8192", ratio)));
}

TEST_CASE("the tour: FlashAttention-2 writes O and L to HBM, not m and l") {
  std::ostringstream out;
  run_tour(out);
  constexpr double N = 8192, fp32 = 4;
  CHECK(
      contains(out.str(), fmt::format("what it writes to HBM is\n   O and L: O, and per query row "
                                      "L = m + log l (fp32), {:.0f} KiB per head",
                                      N * fp32 / 1024)));
  CHECK_FALSE(contains(out.str(), "m and l (fp32)"));
  // The worked example's keys, numbered from 0 as every trace numbers them.
  CHECK(contains(out.str(), "keys 0-1"));
  CHECK(contains(out.str(), "keys 2-3"));
}

TEST_CASE("no lesson speaks of a source document the learner has never seen") {
  for (const auto& lesson : all_lessons()) {
    CAPTURE(lesson.number);
    const auto out = run_lesson(lesson.number).output;
    CHECK_FALSE(contains(out, "the seed"));
    CHECK_FALSE(contains(out, "seed's"));
  }
  // The lessons' texts and the docs name the FlashAttention papers instead.
  namespace fs = std::filesystem;
  int texts = 0;
  for (const char* folder : {FLASHLAB_LESSONS_DIR, FLASHLAB_DOCS_DIR})
    for (const auto& entry : fs::recursive_directory_iterator(folder)) {
      if (entry.path().extension() != ".md") continue;
      CAPTURE(entry.path().string());
      std::ifstream file(entry.path());
      std::stringstream text;
      text << file.rdbuf();
      CHECK_FALSE(contains(text.str(), "the seed"));
      CHECK_FALSE(contains(text.str(), "seed's"));
      ++texts;
    }
  CHECK(texts > 11);  // every lesson's README.md, at least
}

TEST_CASE("every lesson but the last points on to the one that follows it") {
  const auto lessons = all_lessons();
  REQUIRE(lessons.size() > 1);
  for (std::size_t i = 0; i + 1 < lessons.size(); ++i) {
    CAPTURE(lessons[i].number);
    const std::string out = run_lesson(lessons[i].number).output;
    const std::size_t at = out.rfind("Next: ");
    REQUIRE(at != std::string::npos);
    const std::string next = out.substr(at, out.find('\n', at) - at);
    CHECK(contains(next, fmt::format("lesson {}", lessons[i + 1].number)));
  }
}
