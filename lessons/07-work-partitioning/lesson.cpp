// Lesson 7: FlashAttention-2's work partitioning inside a thread block. W warps share one
// query tile Q_i and each KV tile; they can split the keys (split-K, FlashAttention-1's
// "sliced K") or the query rows (split-Q, FlashAttention-2). Both are run here on real
// numbers through cpu_reference's update() and merge(), and the state that has to cross
// between warps is counted. (The simulator models HBM and SRAM, not warps: these counts
// are this lesson's own, from the shapes of the states the warps exchange.)
#include "07-work-partitioning/book_data.hpp"
#include "gpu_bridge/gpu_step.hpp"
#include "kit/lesson_context.hpp"
#include "traces/tile_trace.hpp"

#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/softmax_state.hpp"

#include <cmath>

namespace flashlab::app {

namespace {

using State = cpu::SoftmaxState<float>;
constexpr Bytes kFp32 = 4;
constexpr std::uint64_t kSeed = 7;

struct Exchange {
  Bytes bytes = 0;   // state written to shared memory by one warp and read by another
  Index merges = 0;  // merge() calls that combine two warps' states
};

// The bytes of a state (m, l, U) of `rows` rows: one write and one read through shared memory.
Bytes state_traffic(Index rows, Index d) { return 2 * rows * (d + 2) * kFp32; }

struct Setup {
  Index N, d, Br, Bc, W;
};

// Split-K: warp w takes keys [w Bc/W, (w+1) Bc/W) of every KV tile for all Br rows, keeping
// its own state; at the end the W states of each row are merged through shared memory.
cpu::Matrix<float> split_k(const TraceInputs& in, const Setup& s, Exchange& ex) {
  const float scale = 1.0f / std::sqrt(float(s.d));
  const cpu::Matrix<float> Q_i = in.Q.topRows(s.Br) * scale;  // (Br, d): query tile 0
  std::vector<State> warp(s.W, State::empty(s.Br, s.d));
  const Index slice = s.Bc / s.W;
  for (Index k0 = 0; k0 < s.N; k0 += s.Bc)
    for (Index w = 0; w < s.W; ++w) {
      const Index first = k0 + w * slice;
      const cpu::Matrix<float> S = Q_i * in.K.middleRows(first, slice).transpose();  // (Br, Bc/W)
      cpu::update<float, float>(warp[w], S, in.V.middleRows(first, slice));
    }
  State total = warp[0];
  for (Index w = 1; w < s.W; ++w) {
    total = cpu::merge(total, warp[w]);
    ex.bytes += state_traffic(s.Br, s.d);
    ++ex.merges;
  }
  return cpu::finalize(total).O;
}

// Split-Q: warp w owns rows [w Br/W, (w+1) Br/W) of the query tile and sweeps every key:
// its rows' state never leaves it. The warps still share each K_j, V_j tile.
cpu::Matrix<float> split_q(const TraceInputs& in, const Setup& s) {
  const float scale = 1.0f / std::sqrt(float(s.d));
  const Index rows = s.Br / s.W;
  cpu::Matrix<float> O(s.Br, s.d);
  for (Index w = 0; w < s.W; ++w) {
    const cpu::Matrix<float> Q_w = in.Q.middleRows(w * rows, rows) * scale;  // (Br/W, d)
    State state = State::empty(rows, s.d);
    for (Index k0 = 0; k0 < s.N; k0 += s.Bc) {
      const cpu::Matrix<float> S = Q_w * in.K.middleRows(k0, s.Bc).transpose();  // (Br/W, Bc)
      cpu::update<float, float>(state, S, in.V.middleRows(k0, s.Bc));
    }
    O.middleRows(w * rows, rows) = cpu::finalize(state).O;
  }
  return O;
}

}  // namespace

WarpSplitRun warp_split_run() {
  const Setup s{256, 64, 64, 64, 4};
  const auto in = random_inputs({.N = s.N, .d = s.d, .seed = kSeed});
  cpu::AttentionOptions options;
  options.tiles = {s.Br, s.Bc};
  const auto reference = cpu::forward_q_outer<float>(in.Q, in.K, in.V, options);
  const cpu::Matrix<float> O_ref = reference.O.topRows(s.Br);
  Exchange ex;
  const auto O_k = split_k(in, s, ex);
  const auto O_q = split_q(in, s);
  return {.N = s.N, .d = s.d, .Br = s.Br, .Bc = s.Bc, .W = s.W, .merges = ex.merges,
          .state_bytes = ex.bytes,
          .split_k_error = double((O_k - O_ref).cwiseAbs().maxCoeff()),
          .split_q_error = double((O_q - O_ref).cwiseAbs().maxCoeff())};
}

namespace {

void both_ways(LessonContext& ctx) {
  ctx.step("Two ways to share a tile between warps");
  const WarpSplitRun s = warp_split_run();
  ctx.print("A thread block of W = {} warps (32 threads each) computes query tile Q_0 ({} rows)\n"
            "against N = {} keys in KV tiles of Bc = {}, d = {}:\n"
            "  split-K: every warp sees all {} rows and a quarter of each KV tile's keys, so each\n"
            "           warp ends with a partial state of every row, to be merged;\n"
            "  split-Q: every warp owns {} rows and sees every key: its rows are finished when\n"
            "           its sweep ends.\n\n",
            s.W, s.Br, s.N, s.Bc, s.d, s.Br, s.Br / s.W);
  Table t({"split", "max |O - forward|", "warp-to-warp merges", "state bytes exchanged"}, {true});
  t.add({"split-K", num(s.split_k_error, 3), fmt::format("{}", s.merges),
         fmt::format("{}", s.state_bytes)});
  t.add({"split-Q", num(s.split_q_error, 3), "0", "0"});
  ctx.table(t);
  ctx.say("Both give the forward pass's O (merging is exact, lesson 2). Split-K pays for it:\n"
          "each merge writes a warp's (m, l, U) to shared memory and another warp reads it\n"
          "back, and the warps must wait for each other (a barrier) before reading.\n\n");
}

// Split-K's per-tile merges against K and V read once, per query tile: both are linear in N
// (Tc = N / Bc merge rounds; K and V have N rows), so their ratio is not.
struct MergeShare {
  double ratio;    // merge-per-tile state bytes / bytes of K and V
  Index Bc_below;  // the smallest Bc at which the merges exchange fewer bytes than K and V
};
MergeShare merge_share(Index N, Index d, Index W, Index Br, Index Bc, Bytes element) {
  const Bytes per_round = (W - 1) * state_traffic(Br, d);  // one merge round per KV tile
  const Bytes kv = 2 * N * d * element;                    // K and V, each read once
  const double ratio = double((N / Bc) * per_round) / double(kv);
  // (N / Bc) per_round < kv  <=>  Bc > per_round N / kv = per_round / (2 d element)
  const Index Bc_equal = per_round / (2 * d * element);
  return {ratio, Bc_equal + 1};
}

void costs(LessonContext& ctx) {
  ctx.step("What each split costs per query tile");
  constexpr Index kBr = 128, kN = 8192, kBc = 64;
  constexpr Bytes kBf16 = 2;
  ctx.print(
      "Counted from the shapes, per query tile of Br = {} rows, N = {}, Bc = {}, in\n"
      "bytes. FlashAttention-1 merged the warps' partial results after every KV tile;\n"
      "merging once at the end is the best split-K can do. Both keep Q_i in registers.\n"
      "`K, V` is what the query tile reads of K and V from HBM (bf16, once each).\n\n",
      kBr, kN, kBc);
  const Index Tc = kN / kBc;
  Table t({"d", "W", "split-K state, merge per tile", "K, V", "merges / (K, V)",
           "Bc for merges < K, V", "split-K state, merge at end", "split-Q state",
           "K, V smem reads per tile (K / Q)", "barriers per tile (K / Q)"});
  for (Index d : {64, 128}) {
    for (Index W : {4, 8}) {
      const Bytes per_merge_round = (W - 1) * state_traffic(kBr, d);
      const Bytes kv_tile = 2 * kBc * d * kBf16;  // K_j and V_j in shared memory
      const MergeShare share = merge_share(kN, d, W, kBr, kBc, kBf16);
      t.add({fmt::format("{}", d), fmt::format("{}", W), num(double(Tc * per_merge_round), 3),
             num(double(2 * kN * d * kBf16), 3), fmt::format("{:.1f}x", share.ratio),
             fmt::format("{}", share.Bc_below), num(double(per_merge_round), 3), "0",
             fmt::format("{} / {}", kv_tile, W * kv_tile), "2 / 1"});
    }
  }
  ctx.table(t);
  constexpr Index kOtherN = 1024;
  ctx.print(
      "Merging after every tile exchanges more state than the whole of K and V, and by the\n"
      "same factor at every N: both grow linearly in N (at N = {} the factor for d = 128,\n"
      "W = 4 is {:.1f}x, as at N = {}). Only longer KV tiles (fewer merge rounds) or fewer\n"
      "warps shrink it; the column before last says how long the tiles would have to be.\n\n",
      kOtherN, merge_share(kOtherN, 128, 4, kBr, kBc, kBf16).ratio, kN);
  ctx.say(
      "Split-Q exchanges no state and needs one barrier per KV tile (the shared K_j, V_j\n"
      "must be loaded before anyone reads them); split-K needs a second barrier to merge.\n"
      "Split-Q is not free: each of its W warps reads all of K_j and V_j from shared\n"
      "memory, where a split-K warp reads only its slice. Shared memory is fast enough for\n"
      "that trade to pay off on Ampere and Hopper; the FlashAttention-2 paper (Dao 2023)\n"
      "counts it, with fewer non-matrix operations (lesson 3's delayed normalisation), among\n"
      "the reasons for its speed-up over FlashAttention-1.\n\n");
}

}  // namespace

void run_lesson_07(LessonContext& ctx) {
  both_ways(ctx);
  costs(ctx);
  gpu_side_by_side(ctx, {.N = 4096, .d = 128, .kernels = {"scalar", "fa2"},
                         .what_it_shows = "fa2 (gpu/kernels/03_fa2.cu) is split-Q: each of its 4 warps "
                                          "owns 32 query rows, so no state crosses between warps. A "
                                          "split-K kernel to time beside it is not part of flashlab."});
  ctx.finish("lesson 8: FlashAttention-3's pipeline, loads and matrix products and softmax overlapped.");
}

}  // namespace flashlab::app
