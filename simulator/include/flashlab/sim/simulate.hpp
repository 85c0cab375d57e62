// Running the programs: count-only (the loops and transfers alone) or with the numerics
// on real inputs (the outputs computed through cpu_reference's algebra).
//
//   sim::Problem p{.N = 8192, .d = 128, .dtype = sim::DType::bf16};
//   sim::Report r = sim::count(sim::Algorithm::fa2, p);
//   r.bytes_total();   r.tensor("K").read;   r.peak_sram;
#pragma once

#include "flashlab/cpu/types.hpp"
#include "flashlab/sim/report.hpp"
#include "flashlab/sim/trace.hpp"

namespace flashlab::sim {

// The counts of one program without its numerics. The program runs its own loops and
// issues its own loads and stores; with no trace, consecutive inner steps that are alike
// (same tile kind and size) are booked together, so N = 1,048,576 takes milliseconds.
// With a trace, every step is an event (and no state is attached: there are no numbers).
Report count(Algorithm algorithm, const Problem& problem, const TraceSink& trace = {});

template <class In>
struct Simulation {
  Report report{};
  cpu::Matrix<float> O{};  // (N, d) as stored in HBM: rounded to In (fa1 keeps it fp32)
  cpu::Vector<float> L{};  // (N) log-sum-exp; fa1 derives it from the l and m it keeps;
                           // empty for naive, whose three operators do not produce it
};

// The program on real inputs Q, K, V (N, d) of the problem's dtype (In = float for fp32,
// cpu::bf16, cpu::fp16). Counts equal count()'s; O equals cpu_reference's up to rounding.
template <class In>
Simulation<In> simulate(Algorithm algorithm, const Problem& problem, const cpu::Matrix<In>& Q,
                        const cpu::Matrix<In>& K, const cpu::Matrix<In>& V,
                        const TraceSink& trace = {});

}  // namespace flashlab::sim
