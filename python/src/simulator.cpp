// flashlab._flashlab.sim: the simulator (simulator/) and the per-tile trace (lessons/traces/)
// as Python objects.
//   simulate(...)   one program count-only: the report `flashlab simulate --json` prints
//                   (bytes per tensor, totals, DRAM bytes past an L2, FLOPs, peak SRAM, tiles)
//                   and the bound of a hardware profile, as a namespace of attributes
//   trace(...)      the FlashAttention-2 forward tile by tile on random inputs, and
//   trace_example() the 49/15 worked example: the records `flashlab trace` prints
//   profiles()      the hardware profiles with their figures
// Every figure is the C++ libraries'; nothing here computes one.
#include "bindings.hpp"
#include "convert.hpp"

#include "flashlab/sim/dtype.hpp"
#include "flashlab/sim/problem.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/report.hpp"
#include "flashlab/sim/simulate.hpp"
#include "flashlab/sim/units.hpp"
#include "traces/tile_trace.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <variant>

namespace flashlab::python {

namespace {

using namespace pybind11::literals;

// A capacity as an int of bytes, or a string parse_capacity takes ("192KiB", "98304el").
using Capacity = std::variant<sim::Bytes, std::string>;

sim::Bytes capacity_of(const Capacity& c, sim::DType dtype) {
  if (const auto* text = std::get_if<std::string>(&c)) return sim::parse_capacity(*text, dtype);
  return std::get<sim::Bytes>(c);
}

cpu::Causal causal_of(const std::string& name) {
  for (cpu::Causal c : {cpu::Causal::none, cpu::Causal::top_left, cpu::Causal::bottom_right})
    if (cpu::to_string(c) == name) return c;
  throw py::value_error(fmt::format("causal = '{}' is not an alignment: use '{}', '{}' or '{}'",
                                    name, cpu::to_string(cpu::Causal::none),
                                    cpu::to_string(cpu::Causal::top_left),
                                    cpu::to_string(cpu::Causal::bottom_right)));
}

py::object simulate(const std::string& algorithm, Index N, Index d, const std::string& dtype,
                    const std::string& causal, const std::optional<Capacity>& sram,
                    const std::optional<Capacity>& l2, std::optional<Index> br,
                    std::optional<Index> bc, const std::string& profile) {
  const sim::HardwareProfile& hw = sim::find_profile(profile);
  sim::Problem p;
  p.N = N;
  p.d = d;
  p.dtype = sim::parse_dtype(dtype);
  p.causal = causal_of(causal);
  p.sram_bytes = sram ? capacity_of(*sram, p.dtype) : hw.sram_per_sm;
  if (l2) p.l2_bytes = capacity_of(*l2, p.dtype);
  if (br.has_value() != bc.has_value())
    throw py::value_error(
        "give both br and bc, or neither (then the paper's rule Bc = ceil(M/4d), "
        "Br = min(Bc, d) chooses them)");
  if (br) p.tiles = cpu::TileSizes{*br, *bc};
  sim::check(p);
  const sim::Algorithm a = sim::parse_algorithm(algorithm);
  const sim::Report r = without_gil([&] { return sim::count(a, p); });
  auto j = sim::to_json(r);
  const sim::Bound b = sim::roofline(r, hw);
  j["bound"] = {{"profile", hw.name},     {"seconds", b.seconds()}, {"binds", b.binding()},
                {"matrix_s", b.matrix_s}, {"exp_s", b.exp_s},       {"memory_s", b.memory_s}};
  return from_json(j);
}

py::array_t<double> vector_of(const std::vector<double>& xs) {
  py::array_t<double> out(py::ssize_t(xs.size()));
  std::copy(xs.begin(), xs.end(), out.mutable_data());
  return out;
}

// A TileTrace as Python: the setup's fields, query_tiles and tiles (in sweep order), with the
// field names of the trace's JSON events (`flashlab trace --json`).
py::object trace_of(const app::TileTrace& t) {
  py::list query_tiles, tiles;
  for (const auto& q : t.query_tiles)
    query_tiles.append(namespace_of(py::dict("i"_a = q.i, "q0"_a = q.q0, "rows"_a = q.rows,
                                             "bytes_read"_a = q.read, "bytes_written"_a = q.written,
                                             "O"_a = to_numpy(q.O), "L"_a = vector_of(q.L))));
  for (const auto& r : t.tiles)
    tiles.append(namespace_of(
        py::dict("i"_a = r.i, "j"_a = r.j, "q0"_a = r.q0, "k0"_a = r.k0, "rows"_a = r.rows,
                 "cols"_a = r.cols, "kind"_a = std::string(cpu::to_string(r.kind)),
                 "tile_max"_a = vector_of(r.tile_max), "alpha"_a = vector_of(r.alpha),
                 "m"_a = vector_of(r.m), "l"_a = vector_of(r.l), "U"_a = to_numpy(r.U),
                 "rows_skipped"_a = r.rows_skipped, "bytes_read"_a = r.read)));
  return namespace_of(py::dict(
      "N_q"_a = t.N_q, "N_k"_a = t.N_k, "d"_a = t.d, "Br"_a = t.tile_sizes.Br,
      "Bc"_a = t.tile_sizes.Bc, "causal"_a = std::string(cpu::to_string(t.causal)),
      "dtype"_a = t.dtype, "element_bytes"_a = t.element_bytes, "state_bytes"_a = t.state_bytes,
      "bytes_source"_a = t.bytes_source, "numbering"_a = std::string(app::kNumbering),
      "query_tiles"_a = query_tiles, "tiles"_a = tiles,
      "counts"_a =
          namespace_of(py::dict("computed"_a = t.counts.computed, "partial"_a = t.counts.partial,
                                "skipped"_a = t.counts.skipped)),
      "total_read"_a = t.total_read(), "total_written"_a = t.total_written()));
}

py::object trace(Index N, Index d, Index br, Index bc, const std::string& causal,
                 std::uint64_t seed) {
  app::TraceSetup setup;
  setup.N = N;
  setup.d = d;
  setup.tiles = {br, bc};
  setup.causal = causal_of(causal);
  setup.seed = seed;
  app::check_setup(setup);
  return trace_of(app::trace_random(setup));
}

py::list profiles() {
  py::list out;
  for (const sim::HardwareProfile& p : sim::profiles())
    out.append(namespace_of(py::dict(
        "name"_a = std::string(p.name), "description"_a = std::string(p.description),
        "sm_count"_a = p.sm_count, "sram_per_sm"_a = p.sram_per_sm, "l2_bytes"_a = p.l2_bytes,
        "l2_partitions"_a = p.l2_partitions, "hbm_bytes_per_s"_a = p.hbm_bytes_per_s,
        "matrix_flops_per_s"_a = p.matrix_flops_per_s, "exp_per_s"_a = p.exp_per_s)));
  return out;
}

}  // namespace

void bind_simulator(py::module_& m) {
  m.doc() = "The simulator: HBM and SRAM, every byte counted; per-tile traces; GPU profiles.";
  const app::TraceSetup defaults;
  m.def("simulate", &simulate, "algorithm"_a = "fa2", py::kw_only(), "N"_a = sim::Problem{}.N,
        "d"_a = sim::Problem{}.d, "dtype"_a = std::string(sim::to_string(sim::Problem{}.dtype)),
        "causal"_a = "none", "sram"_a = std::nullopt, "l2"_a = std::nullopt, "br"_a = std::nullopt,
        "bc"_a = std::nullopt, "profile"_a = "h200",
        "One program (naive, fa1, fa2, naive-kernel) counted: the report of `flashlab simulate "
        "--json`. sram defaults to the profile's SRAM per SM; an l2 adds DRAM bytes past it.");
  m.def("trace", &trace, py::kw_only(), "N"_a = defaults.N, "d"_a = defaults.d,
        "br"_a = defaults.tiles.Br, "bc"_a = defaults.tiles.Bc, "causal"_a = "none",
        "seed"_a = defaults.seed,
        "The FlashAttention-2 forward on random inputs, tile by tile (fp32), as `flashlab "
        "trace` prints it.");
  m.def(
      "trace_example", [](Index kv_tile) { return trace_of(app::trace_worked_example(kv_tile)); },
      "kv_tile"_a = 2,
      "The 49/15 worked example: one query, exponentiated scores 1, 2, 4, 8 over V = 1, 2, 3, "
      "4, in fp64; kv_tile keys per tile.");
  m.def("profiles", &profiles, "The hardware profiles (A100, H100, H200, B200) and their figures.");
}

}  // namespace flashlab::python
