// The step-by-step trace: every load, store, compute and skipped tile as one event.
#pragma once

#include "flashlab/cpu/softmax_state.hpp"
#include "flashlab/sim/dtype.hpp"

#include <cstdint>
#include <functional>
#include <ostream>
#include <string_view>

namespace flashlab::sim {

// Where a step sits in a program's loops: query tile i and KV tile j, or -1 where the step
// belongs to no such tile (the naive program's whole-tensor operators, the initialisation).
struct TileCoord {
  cpu::Index i = -1;
  cpu::Index j = -1;
};

enum class EventKind { load, store, compute, skip };

std::string_view to_string(EventKind kind);

struct Event {
  std::int64_t step = 0;       // 0, 1, 2, ... in program order
  EventKind kind = EventKind::load;
  TileCoord tile;
  std::string_view tensor;     // the HBM tensor moved, or what was computed ("S", "update")
  Bytes bytes = 0;             // HBM bytes moved; 0 for compute and skip
  std::int64_t times = 1;      // > 1 only when count-only mode groups identical steps
  // The state (m, l, U) of query tile i after a compute step, when numerics run; else null.
  const cpu::SoftmaxState<float>* state = nullptr;
};

using TraceSink = std::function<void(const Event&)>;

// Writes each event as one line of JSON:
//   {"step":7,"op":"load","i":1,"j":0,"tensor":"K","bytes":16384}
// and, after a compute step whose state has at most max_state_elements entries in U,
// "m":[...],"l":[...],"U":[[...],...] (the state of the query tile's rows after the step).
// i or j is null where the step has no such tile.
class JsonlTrace {
 public:
  static constexpr std::int64_t kDefaultMaxStateElements = 1024;

  explicit JsonlTrace(std::ostream& out,
                      std::int64_t max_state_elements = kDefaultMaxStateElements);
  void operator()(const Event& event) const;
  TraceSink sink() const;  // a TraceSink that writes here; this object must outlive it

 private:
  std::ostream* out_;
  std::int64_t max_state_elements_;
};

}  // namespace flashlab::sim
