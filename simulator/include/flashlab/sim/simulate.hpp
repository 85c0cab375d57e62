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

#include <cstdint>
#include <functional>

namespace flashlab::sim {

// Called by a tiled program after each iteration of its outer loop (or stretch of them
// booked at once) with the iterations done and their total, for long runs to show progress.
using Progress = std::function<void(std::int64_t done, std::int64_t total)>;

// The counts of one program without its numerics. The program runs its own loops and
// issues its own loads and stores; with no trace, consecutive inner steps that are alike
// (same tile kind and size) are booked together, so N = 1,048,576 takes milliseconds.
// With an L2, every step goes through it, until the L2 settles into a state that each
// outer iteration repeats; the remaining alike iterations are then booked at once, with
// exactly the counts that booking them one by one gives (N = 1,048,576: seconds).
// With a trace, every step is an event (and no state is attached: there are no numbers).
Report count(Algorithm algorithm, const Problem& problem, const TraceSink& trace = {},
             const Progress& progress = {});

// What a run would cost, known before it starts, so that a caller can refuse or ask first.
struct Estimate {
  // Loads, stores, computes and skips: the events a trace of the run would list (each one a
  // line of a JSON-lines trace), and the most steps a count-only run with an L2 books one
  // by one. Without an L2 and a trace, count() groups them and takes milliseconds.
  std::int64_t steps = 0;
  // Host memory that simulate() allocates for the numbers beyond the caller's Q, K, V: the
  // outputs and each program's working copies (the naive programs' S and P are N x N).
  Bytes numerics_bytes = 0;
};

// Runs the program count-only with its steps grouped (milliseconds at any N the problem
// allows) and reads the cost off it. Throws what count() throws for an invalid problem.
Estimate estimate(Algorithm algorithm, const Problem& problem);

template <class In>
struct Simulation {
  Report report{};
  cpu::Matrix<float> O{};  // (N, d) as stored in HBM: rounded to In (fa1 keeps it fp32)
  cpu::Vector<float> L{};  // (N) log-sum-exp; fa1 derives it from the l and m it keeps;
                           // empty for naive, whose three operators do not produce it
                           // (the naive kernel's softmax does)
};

// The program on real inputs Q, K, V (N, d) of the problem's dtype (In = float for fp32,
// cpu::bf16, cpu::fp16). Counts equal count()'s; O equals cpu_reference's up to rounding.
template <class In>
Simulation<In> simulate(Algorithm algorithm, const Problem& problem, const cpu::Matrix<In>& Q,
                        const cpu::Matrix<In>& K, const cpu::Matrix<In>& V,
                        const TraceSink& trace = {}, const Progress& progress = {});

}  // namespace flashlab::sim
