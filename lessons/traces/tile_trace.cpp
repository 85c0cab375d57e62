#include "traces/tile_trace.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "flashlab/sim/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

namespace flashlab::app {

namespace {

// Large enough for any lesson, small enough that a trace still fits on a screen or a page.
constexpr Index kMaxTraceSize = 4096;
constexpr double kInputRange = 4.0;  // inputs uniform in [-2, 2): scores of a few units
constexpr int kMantissaBits = 53;    // a double's worth of random bits

std::vector<double> to_vector(const auto& v) {
  return std::vector<double>(v.data(), v.data() + v.size());
}

// The byte model of FlashAttention-2's order, derived from the tile shapes alone: Q_i read
// once, K_j and V_j read once per computed (query tile, KV tile) pair, O_i and L_i written
// once; skipped tiles move nothing. This is exactly the traffic the loop issues.
void add_shape_bytes(TileTrace& trace) {
  const Bytes e = trace.element_bytes, d = trace.d;
  for (auto& q : trace.query_tiles) {
    q.read = q.rows * d * e;
    q.written = q.rows * d * e + q.rows * trace.state_bytes;
  }
  for (auto& t : trace.tiles)
    t.read = t.kind == cpu::TileKind::skipped ? 0 : 2 * t.cols * d * e;
  trace.bytes_source = fmt::format(
      "computed from the tile shapes: {}-byte elements, Q_i read once, K_j and V_j once per "
      "computed tile, O_i and L_i written once", e);
}

// The bytes the simulator's FlashAttention-2 program moves on the same inputs, booked to
// the same tiles: K_j and V_j loads to tile (i, j); Q_i's load and O_i, L_i's stores, which
// the program issues outside the KV loop (j = -1), to query tile i.
void add_simulated_bytes(TileTrace& trace, const TraceInputs& in, const TraceSetup& setup) {
  constexpr sim::Bytes kTraceSram = sim::Bytes{1} << 30;  // ample: a trace is about values
  const sim::Problem problem{.N = setup.N, .d = setup.d, .dtype = sim::DType::fp32,
                             .causal = setup.causal, .sram_bytes = kTraceSram,
                             .tiles = setup.tiles};
  std::map<std::pair<Index, Index>, Bytes> read, written;
  sim::simulate<float>(sim::Algorithm::fa2, problem, in.Q, in.K, in.V, [&](const sim::Event& e) {
    if (e.kind == sim::EventKind::load) read[{e.tile.i, e.tile.j}] += e.bytes * e.times;
    if (e.kind == sim::EventKind::store) written[{e.tile.i, e.tile.j}] += e.bytes * e.times;
  });
  for (auto& q : trace.query_tiles) {
    q.read = read[{q.i, -1}];
    q.written = written[{q.i, -1}];
  }
  for (auto& t : trace.tiles) t.read = read[{t.i, t.j}];
  trace.bytes_source = "counted by the simulator's FlashAttention-2 program on the same inputs "
                       "(fp32, 4-byte elements)";
}

template <class Acc>
TileRecord record_of(const cpu::TileEvent<Acc>& e, const TileTrace& trace) {
  TileRecord r;
  r.i = e.i, r.j = e.j, r.q0 = e.q0, r.k0 = e.k0, r.kind = e.kind;
  r.rows = std::min(trace.tile_sizes.Br, trace.N_q - e.q0);
  r.cols = std::min(trace.tile_sizes.Bc, trace.N_k - e.k0);
  if (e.kind == cpu::TileKind::skipped) return r;
  r.tile_max = to_vector(e.step->tile_max);
  r.alpha = to_vector(e.step->alpha);
  r.m = to_vector(e.state->m);
  r.l = to_vector(e.state->l);
  r.U = e.state->U.template cast<double>();
  r.rows_skipped = e.step->rows_skipped;
  return r;
}

template <class In>
TileTrace trace_forward(const cpu::Matrix<In>& Q, const cpu::Matrix<In>& K,
                        const cpu::Matrix<In>& V, const cpu::AttentionOptions& options,
                        std::string dtype) {
  using Acc = cpu::accum_t<In>;
  TileTrace trace;
  trace.N_q = Q.rows(), trace.N_k = K.rows(), trace.d = Q.cols();
  trace.tile_sizes = options.tiles;
  trace.causal = options.causal;
  trace.dtype = std::move(dtype);
  trace.element_bytes = sizeof(In);
  trace.state_bytes = sizeof(Acc);
  const auto result = cpu::forward_q_outer<In>(
      Q, K, V, options, [&](const cpu::TileEvent<Acc>& e) { trace.tiles.push_back(record_of(e, trace)); });
  trace.counts = result.tiles;
  for (Index i = 0; i < cpu::tile_count(trace.N_q, options.tiles.Br); ++i) {
    QueryTileRecord q;
    q.i = i, q.q0 = i * options.tiles.Br, q.rows = std::min(options.tiles.Br, trace.N_q - q.q0);
    q.O = result.O.middleRows(q.q0, q.rows).template cast<double>();
    q.L = to_vector(result.L.segment(q.q0, q.rows));
    trace.query_tiles.push_back(std::move(q));
  }
  return trace;
}

}  // namespace

Bytes TileTrace::total_read() const {
  Bytes total = 0;
  for (const auto& q : query_tiles) total += q.read;
  for (const auto& t : tiles) total += t.read;
  return total;
}

Bytes TileTrace::total_written() const {
  Bytes total = 0;
  for (const auto& q : query_tiles) total += q.written;
  return total;
}

std::vector<const TileRecord*> TileTrace::tiles_of(Index i) const {
  std::vector<const TileRecord*> out;
  for (const auto& t : tiles)
    if (t.i == i) out.push_back(&t);
  return out;
}

void check_setup(const TraceSetup& s) {
  const auto in_range = [](Index x) { return x >= 1 && x <= kMaxTraceSize; };
  if (!in_range(s.N) || !in_range(s.d))
    throw cpu::InvalidArgument(fmt::format(
        "a trace needs 1 <= N, d <= {} (it prints every tile), got N = {}, d = {}; for large "
        "problems use `flashlab simulate`, which counts without printing",
        kMaxTraceSize, s.N, s.d));
  if (s.tiles.Br < 1 || s.tiles.Bc < 1)
    throw cpu::InvalidArgument(fmt::format(
        "tile sizes must be at least 1, got Br = {}, Bc = {}", s.tiles.Br, s.tiles.Bc));
  if (const double bytes = trace_bytes(s); bytes > kMaxTraceBytes)
    throw cpu::InvalidArgument(fmt::format(
        "a trace of N = {}, d = {} with Br = {}, Bc = {} would hold {:.0f} MiB of tile records, "
        "more than the {:.0f} MiB a trace may take; use larger tiles or a smaller N or d, or "
        "`flashlab simulate`, which counts without recording",
        s.N, s.d, s.tiles.Br, s.tiles.Bc, bytes / (1 << 20), kMaxTraceBytes / (1 << 20)));
}

double trace_bytes(const TraceSetup& s) {
  constexpr double kRecordOverhead = sizeof(TileRecord);  // the record and its vectors' headers
  constexpr double kNumbersPerRow = 4;                      // tile max, alpha, m, l
  const double rows = double(std::min(s.tiles.Br, s.N)), cols = double(std::min(s.tiles.Bc, s.N));
  const double Tr = std::ceil(double(s.N) / rows), Tc = std::ceil(double(s.N) / cols);
  return Tr * Tc * (kRecordOverhead + rows * (kNumbersPerRow + double(s.d)) * sizeof(double));
}

TraceInputs random_inputs(const TraceSetup& s) {
  std::mt19937_64 gen(s.seed);
  const auto draw = [&] {
    const double unit = static_cast<double>(gen() >> (64 - kMantissaBits)) *
                        std::ldexp(1.0, -kMantissaBits);  // [0, 1)
    return static_cast<float>(kInputRange * (unit - 0.5));
  };
  TraceInputs in{cpu::Matrix<float>(s.N, s.d), cpu::Matrix<float>(s.N, s.d),
                 cpu::Matrix<float>(s.N, s.d)};
  for (auto* X : {&in.Q, &in.K, &in.V})
    for (Index r = 0; r < s.N; ++r)
      for (Index c = 0; c < s.d; ++c) (*X)(r, c) = draw();
  return in;
}

TileTrace trace_random(const TraceSetup& setup) {
  check_setup(setup);
  const auto in = random_inputs(setup);
  cpu::AttentionOptions options;
  options.causal = setup.causal;
  options.tiles = setup.tiles;
  auto trace = trace_forward<float>(in.Q, in.K, in.V, options, "fp32");
  add_simulated_bytes(trace, in, setup);
  return trace;
}

TileTrace trace_worked_example(Index kv_tile) {
  constexpr Index kKeys = 4;
  cpu::Matrix<double> Q(1, 1), K(kKeys, 1), V(kKeys, 1);
  Q << 1.0;
  K << std::log(1.0), std::log(2.0), std::log(4.0), std::log(8.0);  // exp(S) = 1, 2, 4, 8
  V << 1, 2, 3, 4;
  cpu::AttentionOptions options;
  options.scale = 1.0;  // S = Q K^T exactly, so exp(S) is the list above
  options.tiles = {1, kv_tile};
  auto trace = trace_forward<double>(Q, K, V, options, "fp64");
  add_shape_bytes(trace);  // the simulator models fp32 and 16-bit types, not fp64
  return trace;
}

namespace {

nlohmann::json number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

nlohmann::json numbers(const std::vector<double>& xs) {
  auto out = nlohmann::json::array();
  for (double x : xs) out.push_back(number(x));
  return out;
}

nlohmann::json rows_of(const cpu::Matrix<double>& X) {
  auto out = nlohmann::json::array();
  for (Index r = 0; r < X.rows(); ++r) {
    const auto row = X.row(r);  // one block object: its begin() and end() must match
    out.push_back(numbers(std::vector<double>(row.begin(), row.end())));
  }
  return out;
}

}  // namespace

std::string index_range(Index first, Index count) {
  return count == 1 ? fmt::format("{}", first) : fmt::format("{}-{}", first, first + count - 1);
}

std::vector<nlohmann::json> to_json_events(const TileTrace& t) {
  std::vector<nlohmann::json> events;
  events.push_back({{"event", "setup"},
                    {"N_q", t.N_q},
                    {"N_k", t.N_k},
                    {"d", t.d},
                    {"Br", t.tile_sizes.Br},
                    {"Bc", t.tile_sizes.Bc},
                    {"causal", std::string(cpu::to_string(t.causal))},
                    {"dtype", t.dtype},
                    {"bytes_source", t.bytes_source},
                    {"numbering", std::string(kNumbering)}});
  Bytes read = 0, written = 0;  // running HBM totals, as the viewer's counters show them
  for (const auto& q : t.query_tiles) {
    read += q.read;
    events.push_back({{"event", "query_tile_start"}, {"i", q.i}, {"q0", q.q0}, {"rows", q.rows},
                      {"bytes_read", q.read}, {"hbm_read", read}, {"hbm_written", written}});
    for (const TileRecord* r : t.tiles_of(q.i)) {
      read += r->read;
      events.push_back({{"event", "kv_tile"}, {"i", r->i}, {"j", r->j}, {"q0", r->q0},
                        {"k0", r->k0}, {"rows", r->rows}, {"cols", r->cols},
                        {"kind", std::string(cpu::to_string(r->kind))},
                        {"tile_max", numbers(r->tile_max)}, {"alpha", numbers(r->alpha)},
                        {"m", numbers(r->m)}, {"l", numbers(r->l)}, {"U", rows_of(r->U)},
                        {"rows_skipped", r->rows_skipped}, {"bytes_read", r->read},
                        {"hbm_read", read}, {"hbm_written", written}});
    }
    written += q.written;
    events.push_back({{"event", "query_tile_end"}, {"i", q.i}, {"O", rows_of(q.O)},
                      {"L", numbers(q.L)}, {"bytes_written", q.written}, {"hbm_read", read},
                      {"hbm_written", written}});
  }
  return events;
}

}  // namespace flashlab::app
