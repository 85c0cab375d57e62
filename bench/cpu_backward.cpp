// The CPU reference's multi-head backward, fp32: backward_multihead, which spreads over
// (batch, query head, KV tile) when there are fewer (batch, KV head) pairs than threads,
// against the spread over (batch, KV head) alone that it used before, in the same run. That
// one gives a thread a whole KV head, so with fewer KV heads in the batch than cores (MQA,
// one sequence) cores sit idle; the tile spread keeps them busy and gives bitwise the same
// gradients (checked here on every shape before timing). With enough pairs both take the
// same path and the ratio is 1 up to noise.
//
//   ./build/bench/bench_cpu_backward                  # the shapes of bench/RESULTS.md
//   ./build/bench/bench_cpu_backward --n 2048 --d 64 --heads 8 --kv-heads 1 --batch 1
#include "flashlab/cpu/backward_multihead.hpp"
#include "flashlab/cpu/parallel.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

using namespace flashlab::cpu;

namespace {

struct Shape {
  Index batch, heads, kv_heads, n, d;
};

HeadTensor<float> random_heads(Index batch, Index heads, Index rows, Index d,
                               std::mt19937_64& rng) {
  HeadTensor<float> X(batch, heads, rows, d);
  std::normal_distribution<float> normal;
  for (auto& x : X.data) x = normal(rng);
  return X;
}

// The earlier spread: one (batch, KV head) per item, its group's query heads in order.
MultiHeadGradients<float> backward_per_kv_head(
    const HeadTensor<float>& Q, const HeadTensor<float>& K, const HeadTensor<float>& V,
    const HeadTensor<float>& O, const HeadTensor<float>& L, const HeadTensor<float>& dO,
    const AttentionOptions& options) {
  MultiHeadGradients<float> out{HeadTensor<float>(Q.batch, Q.heads, Q.rows, Q.cols),
                                HeadTensor<float>(K.batch, K.heads, K.rows, K.cols),
                                HeadTensor<float>(V.batch, V.heads, V.rows, V.cols),
                                {}};
  const Index group = Q.heads / K.heads;
  parallel_for(Q.batch * K.heads, [&](Index item) {
    const Index b = item / K.heads, h_kv = item % K.heads;
    const Matrix<float> K_h = K.head(b, h_kv), V_h = V.head(b, h_kv);
    auto dK = out.dK.head(b, h_kv), dV = out.dV.head(b, h_kv);
    dK.setZero();
    dV.setZero();
    for (Index h = h_kv * group; h < (h_kv + 1) * group; ++h) {
      const Vector<float> L_h = L.head(b, h).col(0);
      const auto g = backward_kv_outer<float>(Q.head(b, h), K_h, V_h, O.head(b, h), L_h,
                                              dO.head(b, h), options);
      out.dQ.head(b, h) = g.dQ;
      dK += g.dK;
      dV += g.dV;
    }
  });
  return out;
}

template <class F>
double seconds_of(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run(const Shape& s, int repeats) {
  std::mt19937_64 rng(1);
  const auto Q = random_heads(s.batch, s.heads, s.n, s.d, rng);
  const auto dO = random_heads(s.batch, s.heads, s.n, s.d, rng);
  const auto K = random_heads(s.batch, s.kv_heads, s.n, s.d, rng);
  const auto V = random_heads(s.batch, s.kv_heads, s.n, s.d, rng);
  AttentionOptions options;
  options.tiles = {64, 64};
  const auto f = forward_multihead(Q, K, V, options);
  const auto tiles = backward_multihead(Q, K, V, f.O, f.L, dO, options);
  const auto heads = backward_per_kv_head(Q, K, V, f.O, f.L, dO, options);
  const bool same = tiles.dQ.data == heads.dQ.data && tiles.dK.data == heads.dK.data &&
                    tiles.dV.data == heads.dV.data;
  // The two alternate, so that both see the same load from the rest of the machine; the
  // fastest run of each is the one least disturbed by it.
  double t_heads = 1e300, t_tiles = 1e300;
  for (int r = 0; r < repeats; ++r) {
    t_heads = std::min(t_heads,
                       seconds_of([&] { backward_per_kv_head(Q, K, V, f.O, f.L, dO, options); }));
    t_tiles =
        std::min(t_tiles, seconds_of([&] { backward_multihead(Q, K, V, f.O, f.L, dO, options); }));
  }
  fmt::print("{:>5} {:>5} {:>8} {:>5} {:>4}  {:>14.1f}  {:>21.1f}  {:>7.2f}x  {}\n", s.batch,
             s.heads, s.kv_heads, s.n, s.d, t_heads * 1e3, t_tiles * 1e3, t_heads / t_tiles,
             same ? "bitwise equal" : "DIFFERENT");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CPU multi-head backward: (batch, KV head, KV tile) against (batch, KV head)"};
  Shape one{1, 8, 1, 2048, 64};
  int repeats = 5;
  app.add_option("--batch", one.batch, "sequences")->check(CLI::Range(1, 64));
  app.add_option("--heads", one.heads, "query heads")->check(CLI::Range(1, 64));
  app.add_option("--kv-heads", one.kv_heads, "KV heads (a divisor of --heads)")
      ->check(CLI::Range(1, 64));
  app.add_option("--n", one.n, "N_q = N_k")->check(CLI::Range(1, 16384));
  app.add_option("--d", one.d, "head dimension")->check(CLI::Range(1, 256));
  app.add_option("--repeats", repeats, "timed runs of each, alternating; the fastest shown")
      ->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  if (one.heads % one.kv_heads != 0) {
    fmt::print(stderr, "--kv-heads {} must divide --heads {}\n", one.kv_heads, one.heads);
    return 2;
  }
  fmt::print("fp32, tiles 64 x 64, {} OpenMP threads; times are the fastest of {} runs\n",
             omp_get_max_threads(), repeats);
  fmt::print("batch heads kv_heads     N    d  per KV head ms  backward_multihead ms  speed-up\n");
  const bool given = app.count("--batch") + app.count("--heads") + app.count("--kv-heads") +
                         app.count("--n") + app.count("--d") >
                     0;
  const std::vector<Shape> shapes =
      given
          ? std::vector<Shape>{one}
          : std::vector<Shape>{
                {1, 8, 1, 2048, 64}, {1, 4, 4, 1024, 64}, {2, 8, 2, 1024, 64}, {1, 1, 1, 4096, 64}};
  for (const Shape& s : shapes) run(s, repeats);
  return 0;
}
