// Naive vs tiled attention forward on the CPU, fp32: time and peak memory.
//
//   ./build/bench/bench_cpu_forward                     # the table of bench/RESULTS.md
//   ./build/bench/bench_cpu_forward --n 4096 --d 64 --br 128 --bc 256
//
// Each measurement runs in a child process, so the peak resident memory the kernel reports
// for that child (ru_maxrss) belongs to that measurement alone. Eigen's own GEMM is timed
// in the same run as the peer: the tiled forward does two GEMMs per tile plus the softmax
// work, so GEMM's FLOP rate is the ceiling it is measured against.
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/naive.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <vector>

using namespace flashlab::cpu;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct Measurement {
  double seconds = 0;     // median over the repetitions
  double peak_gib = 0;    // peak resident memory of the child process
};

// Runs `work` (which returns its median time in seconds) in a child process.
template <class Work>
std::optional<Measurement> in_child(Work&& work) {
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const double seconds = work();
    if (write(fds[1], &seconds, sizeof seconds) != sizeof seconds) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  Measurement m;
  const bool got = read(fds[0], &m.seconds, sizeof m.seconds) == sizeof m.seconds;
  close(fds[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  m.peak_gib = usage.ru_maxrss * 1024.0 / kGiB;  // ru_maxrss is in KiB on Linux
  return m;
}

template <class F>
double median_seconds(int repetitions, F&& f) {
  std::vector<double> times;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

Matrix<float> random_input(Index rows, Index cols, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  Matrix<float> X(rows, cols);
  for (Index i = 0; i < X.size(); ++i) X.data()[i] = normal(rng);
  return X;
}

// Repetitions: many where a run takes a millisecond (the median then means something), a
// few up to N = 4096, one run where a run takes seconds.
int repetitions_for(Index n) { return n <= 1024 ? 21 : n <= 4096 ? 5 : 1; }

double gemm_gflops(Index n) {
  const auto m = in_child([n] {
    std::mt19937 rng(1);
    const Matrix<float> A = random_input(n, n, rng), B = random_input(n, n, rng);
    Matrix<float> C(n, n);
    return median_seconds(5, [&] { C.noalias() = A * B; });
  });
  return m ? 2.0 * n * n * n / m->seconds / 1e9 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Naive vs tiled attention forward on the CPU (fp32): time and peak memory"};
  std::vector<Index> sizes{1024, 4096, 16384, 65536}, dims{64, 128};
  Index Br = 128, Bc = 256;
  double limit_gib = 8.0;
  app.add_option("--n", sizes, "sequence lengths N")->check(CLI::PositiveNumber);
  app.add_option("--d", dims, "head dimensions d")->check(CLI::PositiveNumber);
  app.add_option("--br", Br, "query rows per tile")->check(CLI::PositiveNumber);
  app.add_option("--bc", Bc, "keys per tile")->check(CLI::PositiveNumber);
  app.add_option("--naive-limit-gib", limit_gib,
                 "refuse naive attention when S and P together would exceed this many GiB")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  // The peer is timed again beside every row, so that a machine whose load changes during
  // the run still compares each tiled figure with GEMM under the same conditions.
  const Index gemm_n = 2048;
  fmt::print("tiles Br = {}, Bc = {}; FLOPs = 4 N^2 d; time = median; GEMM = Eigen fp32 "
             "{}x{}x{}, timed beside each row\n\n", Br, Bc, gemm_n, gemm_n, gemm_n);
  fmt::print("| N | d | naive time | naive peak | tiled time | tiled peak | tiled GFLOP/s | GEMM GFLOP/s | of GEMM |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|\n");

  for (Index n : sizes)
    for (Index d : dims) {
      const double flops = 4.0 * n * n * d;
      const double intermediates_gib = 2.0 * n * n * sizeof(float) / kGiB;  // S and P
      std::string naive_time, naive_peak;
      if (intermediates_gib > limit_gib) {
        naive_time = fmt::format("refused: S and P need {:.0f} GiB", intermediates_gib);
        naive_peak = fmt::format("> {:.0f} GiB limit", limit_gib);
        fmt::print(stderr,
                   "naive attention at N = {} would hold S and P of {} x {} fp32 each, {:.1f} GiB "
                   "together, above the limit of {:.1f} GiB (--naive-limit-gib); the tiled path "
                   "needs memory linear in N\n",
                   n, n, n, intermediates_gib, limit_gib);
      } else if (const auto m = in_child([&] {
                   std::mt19937 rng(2);
                   const auto Q = random_input(n, d, rng), K = random_input(n, d, rng),
                              V = random_input(n, d, rng);
                   return median_seconds(repetitions_for(n), [&] { naive_attention(Q, K, V); });
                 })) {
        naive_time = fmt::format("{:.3f} s", m->seconds);
        naive_peak = fmt::format("{:.2f} GiB", m->peak_gib);
      } else {
        naive_time = naive_peak = "failed";
      }

      AttentionOptions options;
      options.tiles = {Br, Bc};
      const auto tiled = in_child([&] {
        std::mt19937 rng(2);
        const auto Q = random_input(n, d, rng), K = random_input(n, d, rng),
                   V = random_input(n, d, rng);
        return median_seconds(repetitions_for(n), [&] { forward_q_outer(Q, K, V, options); });
      });
      if (!tiled) {
        fmt::print("| {} | {} | {} | {} | failed | | | | |\n", n, d, naive_time, naive_peak);
        continue;
      }
      const double gflops = flops / tiled->seconds / 1e9;
      const double peer = gemm_gflops(gemm_n);
      fmt::print("| {} | {} | {} | {} | {:.3f} s | {:.3f} GiB | {:.1f} | {:.1f} | {:.0f}% |\n", n,
                 d, naive_time, naive_peak, tiled->seconds, tiled->peak_gib, gflops, peer,
                 100.0 * gflops / peer);
      std::fflush(stdout);
    }
  return 0;
}
