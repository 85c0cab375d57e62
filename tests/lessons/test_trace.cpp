// The per-tile trace against what is known without it: the 49/15 example's closed form,
// the tile counts of a causal mask, the byte counts implied by the tile shapes, and the
// fp64 naive attention of the same inputs.
#include "traces/tile_trace.hpp"
#include "traces/trace_print.hpp"

#include "flashlab/cpu/naive.hpp"
#include "flashlab/sim/simulate.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

using namespace flashlab;
using app::Index;

namespace {

Index ceil_div(Index a, Index b) { return (a + b - 1) / b; }

// fp32 rounding over a handful of terms of size ~ 1: a few ulps of 1.
constexpr double kFp32Tolerance = 1e-5;

}  // namespace

TEST_CASE("the 49/15 trace: alpha = 1/4, l = 1.875, u = 6.125, O = 49/15") {
  const auto t = app::trace_worked_example(2);
  REQUIRE(t.tiles.size() == 2);
  // Tile A: weights exp(S - log 2) = 1/2, 1; tile B raises the base to log 8.
  CHECK(t.tiles[0].m[0] == doctest::Approx(std::log(2.0)));
  CHECK(t.tiles[0].l[0] == doctest::Approx(0.5 + 1.0));
  CHECK(t.tiles[1].alpha[0] == doctest::Approx(std::exp(std::log(2.0) - std::log(8.0))));
  CHECK(t.tiles[1].l[0] == doctest::Approx(1.5 / 4 + 1.5));
  CHECK(t.tiles[1].U(0, 0) == doctest::Approx(2.5 / 4 + 5.5));
  const double O = t.query_tiles[0].O(0, 0);
  CHECK(std::abs(O - 49.0 / 15.0) <= 4 * std::numeric_limits<double>::epsilon());
  CHECK(t.query_tiles[0].L[0] == doctest::Approx(std::log(15.0)));  // log(1 + 2 + 4 + 8)
}

TEST_CASE("the 49/15 trace one key at a time doubles the max each step") {
  const auto t = app::trace_worked_example(1);
  REQUIRE(t.tiles.size() == 4);
  CHECK(t.tiles[0].alpha[0] == 0.0);  // the empty state contributes nothing
  for (int k = 1; k < 4; ++k) CHECK(t.tiles[k].alpha[0] == doctest::Approx(0.5));
  CHECK(t.query_tiles[0].O(0, 0) == doctest::Approx(49.0 / 15.0).epsilon(1e-15));
}

TEST_CASE("tile counts of the 24-token trace, with and without the causal mask") {
  for (Index Bc : {4, 8, 5}) {
    CAPTURE(Bc);
    const Index Br = 4, N = 24, Tr = ceil_div(N, Br), Tc = ceil_div(N, Bc);
    app::TraceSetup s{.N = N, .d = 4, .tiles = {Br, Bc}};
    const auto full = app::trace_random(s);
    CHECK(full.counts.computed == Tr * Tc);
    CHECK(full.counts.skipped == 0);
    CHECK(full.tiles.size() == static_cast<std::size_t>(Tr * Tc));
    s.causal = cpu::Causal::top_left;
    const auto causal = app::trace_random(s);
    // A tile (i, j) is computed exactly when its first key j Bc is <= its last query row.
    Index computed = 0, partial = 0;
    for (Index i = 0; i < Tr; ++i)
      for (Index j = 0; j < Tc; ++j) {
        const Index last_row = std::min(N, (i + 1) * Br) - 1, last_key = std::min(N, (j + 1) * Bc) - 1;
        if (j * Bc > last_row) continue;
        ++computed;
        if (last_key > i * Br) ++partial;  // some key lies after the tile's first row
      }
    CHECK(causal.counts.computed == computed);
    CHECK(causal.counts.partial == partial);
    CHECK(causal.counts.skipped == Tr * Tc - computed);
  }
}

TEST_CASE("trace bytes from the simulator equal the bytes the tile shapes imply") {
  for (const auto causal : {cpu::Causal::none, cpu::Causal::top_left}) {
    const app::TraceSetup s{.N = 97, .d = 5, .tiles = {8, 12}, .causal = causal, .seed = 3};
    const auto t = app::trace_random(s);
    constexpr Index kFp32 = 4;
    for (const auto& q : t.query_tiles) {
      CHECK(q.read == q.rows * s.d * kFp32);                // Q_i
      CHECK(q.written == q.rows * s.d * kFp32 + q.rows * kFp32);  // O_i and L_i
    }
    for (const auto& r : t.tiles)
      CHECK(r.read == (r.kind == cpu::TileKind::skipped ? 0 : 2 * r.cols * s.d * kFp32));
    CHECK(t.bytes_source.find("simulator") != std::string::npos);
  }
}

TEST_CASE("the trace's O and L are attention's, and its last state is O = U / l") {
  for (const auto causal : {cpu::Causal::none, cpu::Causal::top_left}) {
    const app::TraceSetup s{.N = 113, .d = 59, .tiles = {16, 24}, .causal = causal, .seed = 11};
    const auto t = app::trace_random(s);
    const auto in = app::random_inputs(s);
    cpu::AttentionOptions options;
    options.causal = causal;
    const auto exact = cpu::naive_attention<double>(in.Q.cast<double>(), in.K.cast<double>(),
                                                    in.V.cast<double>(), options);
    for (const auto& q : t.query_tiles) {
      CHECK((q.O - exact.O.middleRows(q.q0, q.rows)).cwiseAbs().maxCoeff() < kFp32Tolerance);
      const auto tiles = t.tiles_of(q.i);
      const app::TileRecord* last = nullptr;  // the last computed tile holds the final state
      for (const auto* r : tiles)
        if (r->kind != cpu::TileKind::skipped) last = r;
      REQUIRE(last != nullptr);
      for (Index r = 0; r < q.rows; ++r) {
        CHECK(q.L[r] == doctest::Approx(exact.L[q.q0 + r]).epsilon(kFp32Tolerance));
        CHECK((last->U.row(r) / last->l[r] - q.O.row(r)).cwiseAbs().maxCoeff() < kFp32Tolerance);
      }
    }
  }
}

TEST_CASE("the simulator's state after each tile equals the trace's") {
  const app::TraceSetup s{.N = 24, .d = 4, .tiles = {4, 8}, .seed = 5};
  const auto t = app::trace_random(s);
  const auto in = app::random_inputs(s);
  const sim::Problem p{.N = s.N, .d = s.d, .dtype = sim::DType::fp32, .tiles = s.tiles};
  std::size_t compared = 0;
  sim::simulate<float>(sim::Algorithm::fa2, p, in.Q, in.K, in.V, [&](const sim::Event& e) {
    if (e.kind != sim::EventKind::compute || !e.state || e.tile.j < 0) return;
    for (const auto& r : t.tiles)
      if (r.i == e.tile.i && r.j == e.tile.j) {
        CHECK((e.state->U.cast<double>() - r.U).cwiseAbs().maxCoeff() < kFp32Tolerance);
        ++compared;
      }
  });
  CHECK(compared == t.tiles.size());
}

TEST_CASE("a wholly masked row keeps its state and shows rowmax -inf") {
  const auto t = app::trace_random(
      {.N = 24, .d = 4, .tiles = {8, 4}, .causal = cpu::Causal::top_left});
  const auto tiles = t.tiles_of(0);
  REQUIRE(tiles.size() == 6);
  const auto& before = *tiles[0];
  const auto& tile = *tiles[1];  // keys 4-7: rows 0-3 see none of them
  CHECK(tile.rows_skipped == 4);
  for (Index r = 0; r < 4; ++r) {
    CHECK(std::isinf(tile.tile_max[r]));
    CHECK(tile.l[r] == before.l[r]);
    CHECK(tile.m[r] == before.m[r]);
  }
}

TEST_CASE("JSON events: one per query tile start and end and per KV tile, totals running") {
  const auto t = app::trace_random({.N = 24, .d = 4, .tiles = {4, 8}, .causal = cpu::Causal::top_left});
  const auto events = app::to_json_events(t);
  CHECK(events.size() == 1 + 2 * t.query_tiles.size() + t.tiles.size());
  CHECK(events.front()["event"] == "setup");
  CHECK(events.back()["hbm_read"].get<app::Bytes>() == t.total_read());
  CHECK(events.back()["hbm_written"].get<app::Bytes>() == t.total_written());
  for (const auto& e : events)
    if (e["event"] == "kv_tile" && e["kind"] == "skipped") CHECK(e["bytes_read"] == 0);
}

TEST_CASE("bad trace setups are refused with what would be right") {
  CHECK_THROWS_WITH_AS(app::trace_random({.N = 0}), doctest::Contains("1 <= N, d <= 4096"),
                       cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(app::trace_random({.N = 8, .d = 5000}), doctest::Contains("got N = 8, d = 5000"),
                       cpu::InvalidArgument);
  CHECK_THROWS_WITH_AS(app::trace_random({.tiles = {0, 4}}), doctest::Contains("at least 1"),
                       cpu::InvalidArgument);
}

TEST_CASE("one numbering from 0: printed ranges, the printed trace and the JSON agree") {
  CHECK(app::index_range(0, 4) == "0-3");
  CHECK(app::index_range(20, 4) == "20-23");
  CHECK(app::index_range(7, 1) == "7");
  // N = 17 with Br = 4: a ragged last query tile, rows 16 alone.
  constexpr Index kN = 17, kBr = 4, kBc = 8;
  const auto t = app::trace_random({.N = kN, .d = 4, .tiles = {kBr, kBc}});
  std::ostringstream out;
  app::print_trace(out, app::Style::plain(), t);
  const std::string text = out.str();
  CHECK(text.find(std::string("Numbering: ") + std::string(app::kNumbering)) != std::string::npos);
  const Index last = ceil_div(kN, kBr) - 1;
  CHECK(text.find("Query tile i = 0: query rows 0-3") != std::string::npos);
  CHECK(text.find("Query tile i = " + std::to_string(last) + ": query rows " +
                  std::to_string(kN - 1) + " ") != std::string::npos);
  // The first KV tile line of query tile 0: tile 0, keys 0-7, first row 0.
  CHECK(text.find("\n0\t0-" + std::to_string(kBc - 1) + "\tfull\t0\t") != std::string::npos);
  // No row or key number past N - 1 anywhere: the last key tile ends at key N - 1.
  CHECK(text.find("16-" + std::to_string(kN)) == std::string::npos);
  CHECK(text.find("\t" + std::to_string(kN) + "\t") == std::string::npos);
  const auto events = app::to_json_events(t);
  CHECK(events.front()["numbering"] == std::string(app::kNumbering));
  for (const auto& e : events) {
    if (e["event"] == "query_tile_start") CHECK(e["q0"].get<Index>() == e["i"].get<Index>() * kBr);
    if (e["event"] == "kv_tile") CHECK(e["k0"].get<Index>() == e["j"].get<Index>() * kBc);
  }
}
