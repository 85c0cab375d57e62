// The simulator in one include: a GPU's memory hierarchy (HBM, optional L2, SRAM) on which
// naive attention, FlashAttention-1 and FlashAttention-2 run and every byte is counted, and
// beside them a mirror of a GPU kernel as built (naive-kernel), and the count-only mirrors
// of the GPU backward and decode passes (several kernels each).
//
//   #include "flashlab/sim/sim.hpp"
//   namespace sim = flashlab::sim;
//
//   sim::Problem p{.N = 8192, .d = 128, .dtype = sim::DType::bf16, .sram_bytes = 192 * 1024};
//   sim::Report r = sim::count(sim::Algorithm::fa2, p);   // the loops alone: fast at any N
//   r.bytes_total();  r.tensor("K").read;  r.tiles->tiles.Br;  r.peak_sram;
//   sim::roofline(r, sim::find_profile("h200")).binding();  // "memory", "matrix" or "exp"
//   fmt::print("{}", sim::format_table(std::vector{r}, &sim::find_profile("h200")));
//
//   // With the numbers: O through cpu_reference's algebra, and a trace of every step.
//   auto s = sim::simulate<cpu::bf16>(sim::Algorithm::fa1, p, Q, K, V,
//                                     [](const sim::Event& e) { /* e.kind, e.tile, e.bytes, e.state */ });
//
// What each header holds:
//   problem.hpp   Algorithm, Problem (N, d, dtype, causal, SRAM, tiles, L2, S and P dtypes,
//                 a kernel's passes over S and GEMM tiles), the block-size rule
//   simulate.hpp  count(), simulate(), estimate() (a run's cost, before it) and Progress
//   report.hpp    Report: bytes per tensor, totals, work, peak SRAM, tiles; to_json
//   trace.hpp     Event, TraceSink, JsonlTrace (JSON lines)
//   profiles.hpp  A100, H100, H200, B200 (SRAM per block, L2, ...) and the bound
//                 max(FLOPs/throughput, bytes/bandwidth)
//   table.hpp     the aligned text table of `flashlab simulate`
//   sweep.hpp     grids of N, d, SRAM to CSV and gnuplot plots
//   grid.hpp      a kernel's grid through one shared L2: DRAM bytes, the L2 crossover
//   backward_kernel.hpp, decode_kernel.hpp   the GPU backward's and decode's mirrors:
//                 count_backward_kernel(), count_decode_kernel() -> PassReport
//   kernel_pass.hpp  PassReport: launches and grids, bytes per tensor, work, the bound
//   machine.hpp   the HBM/SRAM machine the programs run on (OpCounts, TensorTraffic, SramOverflow)
//   units.hpp     "192KiB" <-> bytes;  dtype.hpp  fp32, bf16, fp16 and their sizes
#pragma once

#include "flashlab/sim/backward_kernel.hpp"
#include "flashlab/sim/decode_kernel.hpp"
#include "flashlab/sim/dtype.hpp"
#include "flashlab/sim/fa3_kernel.hpp"
#include "flashlab/sim/grid.hpp"
#include "flashlab/sim/kernel_pass.hpp"
#include "flashlab/sim/machine.hpp"
#include "flashlab/sim/problem.hpp"
#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/report.hpp"
#include "flashlab/sim/simulate.hpp"
#include "flashlab/sim/sweep.hpp"
#include "flashlab/sim/table.hpp"
#include "flashlab/sim/trace.hpp"
#include "flashlab/sim/units.hpp"
#include "flashlab/sim/warp_store.hpp"
