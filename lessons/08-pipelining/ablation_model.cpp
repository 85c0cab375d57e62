// Lesson 8's model at the measured shape: ablation_model.hpp.
#include "ablation_model.hpp"

#include "gpu_bridge/kernels.hpp"
#include "measured_ablation.hpp"

#include "flashlab/sim/grid.hpp"

#include <algorithm>

namespace flashlab::app::lesson08 {

namespace tl = timeline;

const sim::Fa3KernelFacts& facts() {
  static const sim::Fa3KernelFacts f =
      *fa3_kernel_facts(tl::kMeasuredShape.d, sim::DType::bf16).facts;
  return f;
}

double kv_dram_share(const sim::HardwareProfile& p) {
  const auto& f = facts();
  const auto& m = tl::kMeasuredShape;
  const sim::GridReport g = sim::run_grid({.N = m.N,
                                           .d = m.d,
                                           .dtype = sim::DType::bf16,
                                           .heads = m.batch * m.heads,
                                           .Br = f.Br,
                                           .Bc = f.Bc,
                                           .blocks_per_sm = 1,
                                           .sm_count = p.sm_count,
                                           .l2_bytes = p.l2_bytes,
                                           .l2_partitions = p.l2_partitions});
  const double from_dram = double(g.tensor("K").dram_read + g.tensor("V").dram_read);
  return from_dram / double(g.tensor("K").read + g.tensor("V").read);
}

tl::StageTimes stage_times(const sim::HardwareProfile& p, double dram_share) {
  const auto& f = facts();
  const double d = double(tl::kMeasuredShape.d), rows = double(f.Br / f.consumers);
  const double per_sm = 1.0 / p.sm_count;  // one block per SM, sharing the chip evenly
  const double tile_bytes = double(f.Bc) * d * double(sim::bytes_of(sim::DType::bf16));
  // Every byte crosses from the L2 to the SM; the share that misses comes from DRAM first.
  // The two streams overlap, so the slower one sets the pace.
  const double load = tile_bytes * std::max(dram_share / (p.hbm_bytes_per_s * per_sm),
                                            1.0 / (p.l2_bytes_per_s * per_sm));
  return {.load = load,
          .mma = 2.0 * rows * double(f.Bc) * d / (p.matrix_flops_per_s * per_sm),
          .softmax = rows * double(f.Bc) / (p.exp_per_s * per_sm)};
}

double predicted_tflops(const tl::Switches& s, const tl::StageTimes& t,
                        const sim::HardwareProfile& p) {
  const auto& f = facts();
  const auto& m = tl::kMeasuredShape;
  const Index tiles = (m.N + f.Bc - 1) / f.Bc;
  auto tasks = tl::schedule(s, t, tiles);
  tl::run(tasks);
  const double block_s = tl::summarise(tasks).seconds;
  const double block_flops = 4.0 * double(f.Br) * double(m.N) * double(m.d);
  // The grid's blocks run in waves of one per SM; the last wave's empty SMs are lost.
  const Index blocks = m.batch * m.heads * ((m.N + f.Br - 1) / f.Br);
  const Index waves = (blocks + p.sm_count - 1) / p.sm_count;
  const double busy = double(blocks) / double(waves * p.sm_count);
  return block_flops / block_s * p.sm_count * busy / 1e12;
}

}  // namespace flashlab::app::lesson08
