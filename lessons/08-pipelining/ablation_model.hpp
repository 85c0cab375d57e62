// Lesson 8's model of the Hopper kernel at the measured ablation's shape: the per-tile times
// on one SM of a hardware profile, with K and V loads served by the L2 where the grid model
// says they are, and the TFLOP/s the timeline model predicts for a set of switches.
#pragma once

#include "timeline.hpp"

#include "flashlab/sim/fa3_kernel.hpp"
#include "flashlab/sim/profiles.hpp"

namespace flashlab::app::lesson08 {

// fa3's facts from the kernel table (gpu_bridge/kernels.hpp), at the measured shape's d, bf16.
const sim::Fa3KernelFacts& facts();

// The share of the K and V bytes the SMs load that reach DRAM: the grid model (sim::run_grid,
// lesson 5) of the measured shape (timeline::kMeasuredShape) with fa3's tiles, one block per SM.
double kv_dram_share(const sim::HardwareProfile& p);

// One SM's share of the profile (1 / sm_count of each rate):
//   load     Bc d b x max(dram_share / HBM, 1 / L2)  (every byte crosses the L2; the misses
//            also come from DRAM, and the two streams overlap)
//   mma      2 (Br / consumers) Bc d / matrix rate
//   softmax  (Br / consumers) Bc / exp rate
timeline::StageTimes stage_times(const sim::HardwareProfile& p, double dram_share);

// The whole chip's TFLOP/s (4 B H N^2 d per call) for a block of N / Bc tiles with these
// switches, times the share of the last wave's SMs that have a block.
double predicted_tflops(const timeline::Switches& s, const timeline::StageTimes& t,
                        const sim::HardwareProfile& p);

}  // namespace flashlab::app::lesson08
