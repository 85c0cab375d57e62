// Lesson 16's numbers against independent computations: the schedule's table from
// (r - s) mod P, the causal work per rank from the closed forms, the slice bytes from
// 2 n d heads bf16, and the N per rank printed for each link checked by the simulator at
// that N and one step below; for the backward, its errors, its link bytes from
// (P - 1) 2 n d (2 + 4) heads, and its N per rank checked the same way.
#include "flashlab/gpu/kernel_info.hpp"
#include "gpu_bridge/pass_kernels.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/ring.hpp"
#include "flashlab/sim/ring_backward.hpp"
#include "flashlab/sim/units.hpp"
#include "kit/lesson_registry.hpp"

#include <doctest/doctest.h>

#include <regex>
#include <sstream>

using namespace flashlab::app;

namespace {
std::string run_ring_lesson() {
  std::ostringstream out;
  std::istringstream in;
  LessonContext ctx(out, in, Style::plain(), false);
  find_lesson(16).run(ctx);
  return out.str();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Table cells are separated by tabs in plain text and by spaces on a terminal: one space.
std::string squeezed(const std::string& text) {
  return std::regex_replace(text, std::regex("[ \\t]+"), " ");
}
}  // namespace

TEST_CASE("lesson 16: the ring is exact, its schedule and its work as the closed forms say") {
  const std::string out = run_ring_lesson();
  // Step 1: every error printed in fp64 is below 1e-12 (num() prints e.g. "3.33e-16").
  const std::regex error_row(R"(\n\s*(\d+)\s+(contiguous|zigzag)\s+(\S+)\s+(\S+)[ \t]*(?=\n))");
  int rows = 0;
  for (std::sregex_iterator it(out.begin(), out.end(), error_row), end; it != end; ++it) {
    CHECK(std::stod((*it)[3]) < 1e-12);
    CHECK(std::stod((*it)[4]) < 1e-12);
    ++rows;
  }
  CHECK(rows == 10);  // P = 1, 2, 3, 4, 8, two layouts each
  // Step 2: P = 4, N = 16; contiguous slices of 4 rows; at step s rank r holds (r - s) mod 4.
  for (int s = 0; s < 4; ++s) {
    std::string row = std::to_string(s);
    for (int r = 0; r < 4; ++r) {
      const int src = ((r - s) % 4 + 4) % 4;
      row += fmt::format(" KV {} ({}-{})", src, 4 * src, 4 * src + 3);
    }
    CAPTURE(row);
    CHECK(contains(squeezed(out), row));
  }
  // Step 3: N = 4096, P = 4, tiles of 64: contiguous T = 16, zigzag t = 8.
  const int P = 4, T = 16, t = 8;
  for (int r = 0; r < P; ++r) {
    const int contiguous = r * T * T + T * (T + 1) / 2, zigzag = (2 * P - 1) * t * t + t * (t + 1);
    CHECK(std::regex_search(
        out, std::regex(fmt::format(R"(\n\s*{}\s+{}\s+{}\s*\n)", r, contiguous, zigzag))));
  }
  const double ratio = double((P - 1) * T * T + T * (T + 1) / 2) / (T * (T + 1) / 2);
  CHECK(contains(
      out, fmt::format("max/min work: contiguous {}, zigzag 1.", flashlab::app::num(ratio, 4))));
}

TEST_CASE("lesson 16: the slice sent and the N per rank from which each link hides") {
  const std::string out = run_ring_lesson();
  for (long n : {1024L, 4096L, 16384L, 131072L})  // K and V, 16 heads, d = 128, bf16
    CHECK(contains(squeezed(out),
                   fmt::format("\n{} {}", n, flashlab::sim::format_bytes(2.0 * n * 128 * 2 * 16))));
  const auto& h200 = flashlab::sim::find_profile("h200");
  const auto fa2 = flashlab::gpu::kernel_config(FLASHLAB_KERNEL_FA2, 128, FLASHLAB_BF16);
  for (const char* link : {"nvlink-h200", "ib-ndr"}) {
    for (bool causal : {false, true}) {
      const std::regex line(
          fmt::format(R"({}\s+{}\s*: the link hides at every N per rank from (\d+))", link,
                      causal ? "causal" : "non-causal"));
      std::smatch m;
      REQUIRE(std::regex_search(out, m, line));
      const long n = std::stol(m[1]);
      flashlab::sim::RingProblem p{
          .ranks = 8,
          .n_per_rank = n,
          .d = 128,
          .heads = 16,
          .causal = causal ? flashlab::cpu::Causal::top_left : flashlab::cpu::Causal::none,
          .layout = flashlab::cpu::RingLayout::zigzag,
          .tiles = {fa2.Br, fa2.Bc}};
      const auto& l = flashlab::sim::find_link(link);
      CAPTURE(link);
      CAPTURE(n);
      CHECK(flashlab::sim::simulate_ring(p, h200, l).link_hidden());
      p.n_per_rank = n - 2;
      CHECK_FALSE(flashlab::sim::simulate_ring(p, h200, l).link_hidden());
      // "From" means at every larger N: the next few bands of Br rows a chunk hide too.
      int misses = 0;
      for (long next = n; next <= n + 1024; next += 2) {
        p.n_per_rank = next;
        misses += !flashlab::sim::simulate_ring(p, h200, l).link_hidden();
      }
      CHECK(misses == 0);
      // Never above the matrix term's closed form: 4 n^2 d flops (half when causal) per
      // step against 4 n d bytes on the link.
      CHECK(n <= (causal ? 2 : 1) * h200.matrix_flops_per_s / l.bytes_per_s + 2);
    }
  }
}

TEST_CASE("lesson 16: the ring's backward is exact, its bytes and hiding N as computed here") {
  const std::string out = run_ring_lesson();
  // Step 5: P, layout, then the relative errors of dQ, dK, dV, each below 1e-12.
  const std::regex gradient_row(
      R"(\n\s*(\d+)\s+(contiguous|zigzag)\s+(\S+)\s+(\S+)\s+(\S+)[ \t]*(?=\n))");
  int rows = 0;
  for (std::sregex_iterator it(out.begin(), out.end(), gradient_row), end; it != end; ++it) {
    for (int column : {3, 4, 5}) CHECK(std::stod((*it)[column]) < 1e-12);
    ++rows;
  }
  CHECK(rows == 10);  // P = 1, 2, 3, 4, 8, two layouts each
  // Step 6: per link over the run, P = 8, 16 heads, d = 128: the forward's K and V in bf16,
  // the backward's with fp32 dK and dV beside them.
  for (long n : {1024L, 4096L, 16384L, 131072L}) {
    const double forward = 7.0 * 2 * n * 128 * 2 * 16, backward = 7.0 * 2 * n * 128 * (2 + 4) * 16;
    CHECK(contains(squeezed(out), fmt::format("\n{} {} {}", n, flashlab::sim::format_bytes(forward),
                                              flashlab::sim::format_bytes(backward))));
  }
  // The facts the lesson takes: the backward the library runs, from the bridge.
  const flashlab::sim::BackwardKernelFacts facts =
      *flashlab::app::backward_kernel_facts(128, flashlab::sim::DType::bf16, false).facts;
  const auto& h200 = flashlab::sim::find_profile("h200");
  int sooner = 0, same = 0, later = 0;
  for (const char* link : {"nvlink-h200", "ib-ndr"}) {
    for (bool causal : {false, true}) {
      const std::regex line(fmt::format(
          R"({}\s+{}\s*: the backward's link hides at every N per rank from (\d+) \(forward: (\d+)\))",
          link, causal ? "causal" : "non-causal"));
      std::smatch m;
      REQUIRE(std::regex_search(out, m, line));
      const long n = std::stol(m[1]), n_forward = std::stol(m[2]);
      flashlab::sim::RingProblem p{
          .ranks = 8,
          .n_per_rank = n,
          .d = 128,
          .heads = 16,
          .causal = causal ? flashlab::cpu::Causal::top_left : flashlab::cpu::Causal::none,
          .layout = flashlab::cpu::RingLayout::zigzag};
      const auto& l = flashlab::sim::find_link(link);
      CAPTURE(std::string(link));
      CAPTURE(n);
      CHECK(flashlab::sim::simulate_ring_backward(p, facts, h200, l).link_hidden());
      if (n > 2) {  // 2 is the smallest N per rank of the zigzag layout: nothing below it
        p.n_per_rank = n - 2;
        CHECK_FALSE(flashlab::sim::simulate_ring_backward(p, facts, h200, l).link_hidden());
      }
      int misses = 0;  // and at every larger N of the next thousand
      for (long next = n; next <= n + 1024; next += 2) {
        p.n_per_rank = next;
        misses += !flashlab::sim::simulate_ring_backward(p, facts, h200, l).link_hidden();
      }
      CHECK(misses == 0);
      ++(n < n_forward ? sooner : n == n_forward ? same : later);
      // Never above the matrix term's bound: 10 n^2 d FLOPs a step (half when causal)
      // against at most 2 n d (2 + 4) bytes on the link.
      CHECK(n <= (causal ? 2.4 : 1.2) * h200.matrix_flops_per_s / l.bytes_per_s + 2);
    }
  }
  // The lesson's summary counts the cases as the lines above say.
  CHECK(contains(out, fmt::format("a smaller N in {} of these 4 cases, the same N in {}, a "
                                  "larger N in {}.",
                                  sooner, same, later)));
}
