// `flashlab compare --pass backward|decode --sweep`: a GPU pass's bytes over a grid of N (the
// backward's keys, decode's cache length), d, heads and batch, as the simulator's mirror
// predicts them (into and out of the SMs; DRAM from a cold L2, sim::compulsory_dram) and, on
// a GPU with Nsight Compute, as measured over the pass's kernels, with measured / predicted per
// level; as a table, a CSV and a log-log plot against N. Without a GPU it prints the
// predictions and says the measured columns need one.
//   flashlab compare --pass backward --sweep n=1024..16384 --sweep heads=1,16 --d 128 --causal
//   flashlab compare --pass decode --sweep n=1024..131072 --sweep batch=1,8 --heads 32 --kv-heads 8
#pragma once

#include "compare_pass.hpp"
#include "compare_sweep.hpp"

#include <string>

namespace flashlab::app {

struct PassSweepRequest {
  Pass pass = Pass::backward;
  ComparePassArgs args;  // batch is the grid's
  CompareProblem base;   // n, d and heads are the grid's
  SweepGrid grid;
  std::string csv, plot;  // empty: not written
};

void run_compare_pass_sweep(const PassSweepRequest& request);

}  // namespace flashlab::app
