#include "flashlab/sim/dtype.hpp"

#include "flashlab/cpu/types.hpp"

#include <string>

namespace flashlab::sim {

std::string_view to_string(DType t) {
  switch (t) {
    case DType::fp32: return "fp32";
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  for (DType t : {DType::fp32, DType::bf16, DType::fp16})
    if (name == to_string(t)) return t;
  throw cpu::InvalidArgument("unknown dtype '" + std::string(name) +
                             "': the simulator knows fp32, bf16 and fp16");
}

}  // namespace flashlab::sim
