#include "flashlab/sim/simulate.hpp"

#include "program.hpp"

#include <fmt/format.h>

#include <optional>

namespace flashlab::sim {

namespace {

template <class In>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<In, cpu::bf16>) return DType::bf16;
  else if constexpr (std::is_same_v<In, cpu::fp16>) return DType::fp16;
  else return DType::fp32;
}

// The three-operator programs: their library kernels' on-chip tiling is not modelled.
bool untiled(Algorithm algorithm) {
  return algorithm == Algorithm::naive || algorithm == Algorithm::naive_kernel;
}

template <class In>
Report run(Algorithm algorithm, const Problem& p, const TraceSink& trace, const Progress& progress,
           const detail::Inputs<In>* inputs, detail::Outputs* outputs) {
  check(p);
  if (p.queries() != p.N && algorithm != Algorithm::fa2)
    throw cpu::InvalidArgument(fmt::format(
        "N_q = {} with N = {} keys: the {} program takes as many queries as keys; give N_q = 0 "
        "(or N), or run fa2, whose program takes N_q != N",
        p.N_q, p.N, to_string(algorithm)));
  Report report;
  report.algorithm = algorithm;
  report.problem = p;
  if (!untiled(algorithm)) report.tiles = choose_tiles(algorithm, p);
  Machine machine(p.sram_bytes, p.l2_bytes, p.l2_replacement, p.l2_seed, p.l2_home_partitions,
                  p.l2_dirty_cap, p.l2_ways);
  machine.set_trace(trace);
  switch (algorithm) {
    case Algorithm::naive: detail::run_naive<In>(machine, p, inputs, outputs); break;
    case Algorithm::naive_kernel:
      detail::run_naive_kernel<In>(machine, p, inputs, outputs);
      break;
    case Algorithm::fa1:
      detail::run_fa1<In>(machine, p, report.tiles->tiles, inputs, outputs, progress);
      break;
    case Algorithm::fa2:
      detail::run_fa2<In>(machine, p, report.tiles->tiles, inputs, outputs, progress);
      break;
  }
  machine.finish();
  report.tensors = machine.traffic();
  report.ops = machine.ops();
  report.peak_sram = machine.peak_sram();
  report.tile_counts = machine.tiles();
  report.steps = machine.steps();
  return report;
}

// The tiled programs run their steps one after another, as one SM does. The products of
// one tile are too small to share among threads: Eigen's attempt to share each one costs more
// than the product (20x slower on a busy 2-core machine), so it is held to one thread
// while a program runs, and the caller's setting is restored afterwards.
class OneEigenThread {
 public:
  OneEigenThread() : saved_(Eigen::nbThreads()) { Eigen::setNbThreads(1); }
  ~OneEigenThread() { Eigen::setNbThreads(saved_); }
  OneEigenThread(const OneEigenThread&) = delete;
  OneEigenThread& operator=(const OneEigenThread&) = delete;

 private:
  int saved_;
};

// Q is (N_q, d), K and V (N, d).
void check_input(std::string_view name, cpu::Index rows, cpu::Index cols, const Problem& p) {
  const cpu::Index want = name == "Q" ? p.queries() : p.N;
  if (rows != want || cols != p.d)
    throw cpu::InvalidArgument(fmt::format(
        "{} is ({}, {}) but the problem says N_q = {}, N = {}, d = {}: Q must be (N_q, d), K "
        "and V (N, d)",
        name, rows, cols, p.queries(), p.N, p.d));
}

}  // namespace

Report count(Algorithm algorithm, const Problem& problem, const TraceSink& trace,
             const Progress& progress) {
  return run<float>(algorithm, problem, trace, progress, nullptr, nullptr);
}

Estimate estimate(Algorithm algorithm, const Problem& problem) {
  Problem grouped = problem;
  grouped.l2_bytes = 0;  // the L2 changes which bytes reach DRAM, not which steps run
  const Report r = count(algorithm, grouped);
  switch (algorithm) {
    case Algorithm::naive:
    case Algorithm::naive_kernel: return {r.steps, detail::naive_numerics_bytes(problem)};
    case Algorithm::fa1: return {r.steps, detail::fa1_numerics_bytes(problem)};
    case Algorithm::fa2:
      return {r.steps, detail::fa2_numerics_bytes(problem, r.tiles->tiles)};
  }
  return {r.steps, 0};
}

template <class In>
Simulation<In> simulate(Algorithm algorithm, const Problem& problem, const cpu::Matrix<In>& Q,
                        const cpu::Matrix<In>& K, const cpu::Matrix<In>& V,
                        const TraceSink& trace, const Progress& progress) {
  if (problem.dtype != dtype_of<In>())
    throw cpu::InvalidArgument(fmt::format(
        "the problem's dtype is {} but the inputs are {}: give inputs of the problem's dtype",
        to_string(problem.dtype), to_string(dtype_of<In>())));
  check_input("Q", Q.rows(), Q.cols(), problem);
  check_input("K", K.rows(), K.cols(), problem);
  check_input("V", V.rows(), V.cols(), problem);
  const detail::Inputs<In> inputs{Q, K, V};
  detail::Outputs outputs;
  std::optional<OneEigenThread> serial;  // the naive programs' large GEMMs keep the threads
  if (!untiled(algorithm)) serial.emplace();
  Report report = run<In>(algorithm, problem, trace, progress, &inputs, &outputs);
  return {std::move(report), std::move(outputs.O), std::move(outputs.L)};
}

template Simulation<float> simulate(Algorithm, const Problem&, const cpu::Matrix<float>&,
                                    const cpu::Matrix<float>&, const cpu::Matrix<float>&,
                                    const TraceSink&, const Progress&);
template Simulation<cpu::bf16> simulate(Algorithm, const Problem&, const cpu::Matrix<cpu::bf16>&,
                                        const cpu::Matrix<cpu::bf16>&,
                                        const cpu::Matrix<cpu::bf16>&, const TraceSink&,
                                        const Progress&);
template Simulation<cpu::fp16> simulate(Algorithm, const Problem&, const cpu::Matrix<cpu::fp16>&,
                                        const cpu::Matrix<cpu::fp16>&,
                                        const cpu::Matrix<cpu::fp16>&, const TraceSink&,
                                        const Progress&);

}  // namespace flashlab::sim
