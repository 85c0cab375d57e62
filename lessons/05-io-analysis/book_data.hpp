// What `flashlab book` takes from lesson 5: the HBM bytes of its sweep over N, each program
// with its own tile rule, as step 2 prints them.
#pragma once

#include "flashlab/sim/simulate.hpp"

#include <vector>

namespace flashlab::app {

struct IoSweepN {
  cpu::Index d = 0;
  sim::Bytes sram = 0;  // one H200 block's
  std::vector<cpu::Index> Ns;
  std::vector<sim::Algorithm> programs;    // naive, fa1, fa2
  std::vector<std::vector<double>> bytes;  // (programs, Ns): HBM bytes read + written
};

IoSweepN io_sweep_N();

}  // namespace flashlab::app
