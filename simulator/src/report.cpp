#include "flashlab/sim/report.hpp"

#include <nlohmann/json.hpp>

#include <numeric>
#include <stdexcept>
#include <string>

namespace flashlab::sim {

Bytes Report::bytes_read() const {
  return std::accumulate(tensors.begin(), tensors.end(), Bytes{0},
                         [](Bytes s, const TensorTraffic& t) { return s + t.read; });
}

Bytes Report::bytes_written() const {
  return std::accumulate(tensors.begin(), tensors.end(), Bytes{0},
                         [](Bytes s, const TensorTraffic& t) { return s + t.written; });
}

Bytes Report::dram_read() const {
  return std::accumulate(tensors.begin(), tensors.end(), Bytes{0},
                         [](Bytes s, const TensorTraffic& t) { return s + t.dram_read; });
}

Bytes Report::dram_written() const {
  return std::accumulate(tensors.begin(), tensors.end(), Bytes{0},
                         [](Bytes s, const TensorTraffic& t) { return s + t.dram_written; });
}

const TensorTraffic& Report::tensor(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return t;
  throw std::out_of_range("the " + std::string(to_string(algorithm)) +
                          " program has no HBM tensor named '" + std::string(name) + "'");
}

nlohmann::ordered_json to_json(const Report& r) {
  using json = nlohmann::ordered_json;
  const Problem& p = r.problem;
  json out = {
      {"algorithm", to_string(r.algorithm)},
      {"inputs",
       {{"N", p.N}, {"d", p.d}, {"dtype", to_string(p.dtype)},
        {"causal", std::string(cpu::to_string(p.causal))}, {"sram_bytes", p.sram_bytes},
        {"M", p.M()}, {"l2_bytes", p.l2_bytes}}},
  };
  if (r.tiles) {
    out["tiles"] = {{"Br", r.tiles->tiles.Br}, {"Bc", r.tiles->tiles.Bc},
                    {"how", r.tiles->how},
                    {"paper", {{"Br", r.tiles->paper.Br}, {"Bc", r.tiles->paper.Bc}}}};
  } else {
    out["tiles"] = nullptr;
  }
  if (r.algorithm == Algorithm::naive_kernel) {
    const auto tile = [](const GemmTile& t) { return json{{"m", t.m}, {"n", t.n}}; };
    out["kernel"] = {{"score_dtype", to_string(p.score_dtype)},
                     {"weight_dtype", to_string(p.weight_dtype.value_or(p.dtype))},
                     {"score_reads", p.score_reads},
                     {"softmax_rows_in_flight", p.softmax_rows_in_flight},
                     {"score_gemm_tile", tile(p.score_gemm)},
                     {"output_gemm_tile", tile(p.output_gemm)}};
  }
  json tensors = json::array();
  for (const auto& t : r.tensors) {
    tensors.push_back({{"name", t.name}, {"dtype", to_string(t.dtype)},
                       {"elements", t.elements}, {"bytes_read", t.read},
                       {"bytes_written", t.written}});
    if (p.l2_bytes > 0) {
      tensors.back()["dram_bytes_read"] = t.dram_read;
      tensors.back()["dram_bytes_written"] = t.dram_written;
    }
  }
  out["tensors"] = std::move(tensors);
  out["bytes"] = {{"read", r.bytes_read()}, {"written", r.bytes_written()},
                  {"total", r.bytes_total()}};
  if (p.l2_bytes > 0)
    out["dram_bytes"] = {{"read", r.dram_read()}, {"written", r.dram_written()},
                         {"total", r.dram_total()}};
  out["ops"] = {{"matrix_flops", r.ops.matrix_flops}, {"exp", r.ops.exp},
                {"max", r.ops.max},        {"sum", r.ops.sum},
                {"rescale", r.ops.rescale}, {"divide", r.ops.divide},
                {"non_matrix", r.ops.non_matrix()}};
  out["peak_sram_bytes"] = r.peak_sram;
  out["score_tiles"] = {{"computed", r.tile_counts.computed},
                        {"partial", r.tile_counts.partial},
                        {"skipped", r.tile_counts.skipped}};
  out["steps"] = r.steps;
  return out;
}

}  // namespace flashlab::sim
