// Every lesson's program, run in-process as `flashlab lesson N` runs it: it finishes, prints
// plain text when asked to, pauses between steps with --step, and prints the key numbers
// the lessons state (checked here against formulas, not against the program's own output).
#include "flashlab/gpu/kernel_info.hpp"
#include "kit/lesson_registry.hpp"

#include <doctest/doctest.h>

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

TEST_CASE("lesson 6: P at N = 8192 in bf16 for 32 heads; backward FLOPs 2.5x the forward") {
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
