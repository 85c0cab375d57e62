// A row of a stored forward `flashlab compare --sweep` CSV (bench/results/, read by
// results_csv) as the run that made it, and its shape in words for a failing check's context.
#pragma once

#include "gpu_bridge/kernels.hpp"

#include <fmt/format.h>

#include <map>
#include <string>

namespace flashlab::test {

inline app::KernelRun stored_run(const std::map<std::string, std::string>& row) {
  return {.kernel = row.at("kernel"),
          .n = std::stoll(row.at("N")),
          .d = std::stoll(row.at("d")),
          .heads = std::stoll(row.at("heads")),
          .causal = row.at("causal") == "1"};
}

inline std::string shape_of(const app::KernelRun& run) {
  return fmt::format("{}, N = {}, d = {}, {} heads{}", run.kernel, run.n, run.d, run.heads,
                     run.causal ? ", causal" : "");
}

}  // namespace flashlab::test
