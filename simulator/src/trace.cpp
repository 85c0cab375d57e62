#include "flashlab/sim/trace.hpp"

#include <nlohmann/json.hpp>

namespace flashlab::sim {

std::string_view to_string(EventKind kind) {
  switch (kind) {
    case EventKind::load: return "load";
    case EventKind::store: return "store";
    case EventKind::compute: return "compute";
    case EventKind::skip: return "skip";
  }
  return "?";
}

namespace {

using json = nlohmann::ordered_json;

json tile_number(cpu::Index t) { return t < 0 ? json() : json(t); }

// JSON has no infinity: an m of -inf (a row that has seen no valid key yet) is written null.
json number(float x) { return std::isfinite(x) ? json(x) : json(); }

json vector_json(const cpu::Vector<float>& v) {
  auto out = json::array();
  for (cpu::Index r = 0; r < v.size(); ++r) out.push_back(number(v[r]));
  return out;
}

}  // namespace

JsonlTrace::JsonlTrace(std::ostream& out, std::int64_t max_state_elements)
    : out_(&out), max_state_elements_(max_state_elements) {}

void JsonlTrace::operator()(const Event& e) const {
  json line = {{"step", e.step},           {"op", to_string(e.kind)},
               {"i", tile_number(e.tile.i)}, {"j", tile_number(e.tile.j)},
               {"tensor", e.tensor},       {"bytes", e.bytes}};
  if (e.times != 1) line["times"] = e.times;
  if (e.state && e.state->U.size() <= max_state_elements_) {
    line["m"] = vector_json(e.state->m);
    line["l"] = vector_json(e.state->l);
    auto U = json::array();
    for (cpu::Index r = 0; r < e.state->U.rows(); ++r)
      U.push_back(vector_json(e.state->U.row(r).transpose()));
    line["U"] = std::move(U);
  }
  *out_ << line.dump() << '\n';
}

TraceSink JsonlTrace::sink() const {
  return [this](const Event& e) { (*this)(e); };
}

}  // namespace flashlab::sim
