// A row of a stored forward `flashlab compare --sweep` CSV (bench/results/, read by
// results_csv) as the run that made it, and its shape in words for a failing check's context.
#pragma once

#include "gpu_bridge/kernels.hpp"

#include "flashlab/gpu/kernel_info.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <string>

namespace flashlab::test {

// The stored rows of fa3 under the mask were measured before its automatic order evened out
// its sections (tile_schedule.hpp, even_section_pairs): each ran the automatic share's plan
// with as many pairs a section as fit, which the share given explicitly plans.
inline std::int32_t fa3_filled_share(const app::KernelRun& run) {
  namespace fa3 = gpu::fa3;
  const std::int64_t tiles = (run.n + fa3::br(run.d) - 1) / fa3::br(run.d);
  const std::int32_t share = fa3::auto_kv_l2_share(true, run.d, tiles);
  return share != FLASHLAB_FA3_AUTO ? share : fa3::kv_l2_share_percent(true);
}

inline app::KernelRun stored_run(const std::map<std::string, std::string>& row) {
  app::KernelRun run{.kernel = row.at("kernel"),
                     .n = std::stoll(row.at("N")),
                     .d = std::stoll(row.at("d")),
                     .heads = std::stoll(row.at("heads")),
                     .causal = row.at("causal") == "1"};
  if (run.kernel == "fa3" && run.causal) run.fa3_kv_l2_share = fa3_filled_share(run);
  return run;
}

inline std::string shape_of(const app::KernelRun& run) {
  return fmt::format("{}, N = {}, d = {}, {} heads{}", run.kernel, run.n, run.d, run.heads,
                     run.causal ? ", causal" : "");
}

}  // namespace flashlab::test
