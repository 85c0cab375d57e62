// Count-only mode runs the same loops without the numbers: its counts are the full run's.
// And the trace accounts for every byte.
#include "helpers.hpp"

#include <nlohmann/json.hpp>

#include <doctest/doctest.h>

#include <sstream>

namespace flashlab::sim::test {

namespace {

void check_same_counts(const Report& a, const Report& b) {
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (std::size_t k = 0; k < a.tensors.size(); ++k) {
    CAPTURE(a.tensors[k].name);
    CHECK(a.tensors[k].name == b.tensors[k].name);
    CHECK(a.tensors[k].read == b.tensors[k].read);
    CHECK(a.tensors[k].written == b.tensors[k].written);
  }
  CHECK(a.ops.matrix_flops == b.ops.matrix_flops);
  CHECK(a.ops.exp == b.ops.exp);
  CHECK(a.ops.max == b.ops.max);
  CHECK(a.ops.sum == b.ops.sum);
  CHECK(a.ops.rescale == b.ops.rescale);
  CHECK(a.ops.divide == b.ops.divide);
  CHECK(a.peak_sram == b.peak_sram);
  CHECK(a.tile_counts.computed == b.tile_counts.computed);
  CHECK(a.tile_counts.partial == b.tile_counts.partial);
  CHECK(a.tile_counts.skipped == b.tile_counts.skipped);
}

}  // namespace

TEST_CASE("count-only and full runs report the same counts") {
  auto rng = fresh_rng();
  struct Shape { Index N, d; };
  for (const auto [N, d] : {Shape{1, 8}, Shape{97, 59}, Shape{1023, 16}}) {
    const auto Q = random_matrix<cpu::bf16>(N, d, rng), K = random_matrix<cpu::bf16>(N, d, rng),
               V = random_matrix<cpu::bf16>(N, d, rng);
    for (const cpu::Causal causal : {cpu::Causal::none, cpu::Causal::top_left}) {
      for (const Algorithm a : {Algorithm::naive, Algorithm::fa1, Algorithm::fa2}) {
        CAPTURE(N);
        CAPTURE(to_string(a));
        Problem p = problem(N, d, DType::bf16, 32 * kKiB, causal);
        check_same_counts(count(a, p), simulate<cpu::bf16>(a, p, Q, K, V).report);
        p.tiles = cpu::TileSizes{5, 11};
        check_same_counts(count(a, p), simulate<cpu::bf16>(a, p, Q, K, V).report);
      }
    }
  }
}

TEST_CASE("the trace: one event per step, and its bytes add up to the report's") {
  auto rng = fresh_rng();
  const Index N = 37, d = 8;
  const auto Q = random_matrix<float>(N, d, rng), K = random_matrix<float>(N, d, rng),
             V = random_matrix<float>(N, d, rng);
  for (const Algorithm a : {Algorithm::naive, Algorithm::fa1, Algorithm::fa2}) {
    Problem p = problem(N, d, DType::fp32, 16 * kKiB, cpu::Causal::top_left);
    p.tiles = cpu::TileSizes{8, 6};
    std::ostringstream lines;
    const JsonlTrace trace(lines);
    const auto sim = simulate<float>(a, p, Q, K, V, trace.sink());
    Bytes read = 0, written = 0;
    std::int64_t expected_step = 0, skips = 0;
    std::istringstream in(lines.str());
    for (std::string line; std::getline(in, line);) {
      const auto event = nlohmann::json::parse(line);
      CHECK(event["step"] == expected_step++);
      if (event["op"] == "load") read += event["bytes"].get<Bytes>();
      if (event["op"] == "store") written += event["bytes"].get<Bytes>();
      if (event["op"] == "skip") ++skips;
    }
    CAPTURE(to_string(a));
    CHECK(read == sim.report.bytes_read());
    CHECK(written == sim.report.bytes_written());
    CHECK(skips == sim.report.tile_counts.skipped);
  }
}

TEST_CASE("the trace's state after a query tile's last update finalises to that tile's O") {
  auto rng = fresh_rng();
  const Index N = 20, d = 4, Br = 8;
  const auto Q = random_matrix<float>(N, d, rng), K = random_matrix<float>(N, d, rng),
             V = random_matrix<float>(N, d, rng);
  Problem p = problem(N, d, DType::fp32, 16 * kKiB);
  p.tiles = cpu::TileSizes{Br, 6};
  std::vector<cpu::SoftmaxState<float>> last_state(ceil_div(N, Br));
  const auto sim = simulate<float>(Algorithm::fa2, p, Q, K, V, [&](const Event& e) {
    if (e.kind == EventKind::compute && e.state) last_state.at(e.tile.i) = *e.state;
  });
  for (Index i = 0; i < ceil_div(N, Br); ++i) {
    const Index rows = std::min(Br, N - i * Br);
    REQUIRE(last_state[i].rows() == rows);
    const auto O_i = cpu::finalize(last_state[i]).O;
    CHECK((O_i - sim.O.middleRows(i * Br, rows)).cwiseAbs().maxCoeff() == 0.0f);
  }
}

TEST_CASE("count-only mode with a trace lists every step, with no state") {
  const Index N = 50, d = 4;
  Problem p = problem(N, d, DType::bf16, 16 * kKiB, cpu::Causal::top_left);
  p.tiles = cpu::TileSizes{8, 8};
  std::int64_t events = 0, skips = 0, with_state = 0;
  const Report r = count(Algorithm::fa1, p, [&](const Event& e) {
    ++events;
    CHECK(e.times == 1);
    if (e.kind == EventKind::skip) ++skips;
    if (e.state) ++with_state;
  });
  CHECK(events > 0);
  CHECK(skips == r.tile_counts.skipped);
  CHECK(with_state == 0);
  check_same_counts(r, count(Algorithm::fa1, p));
}

}  // namespace flashlab::sim::test
