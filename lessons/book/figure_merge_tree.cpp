// The merge-tree figure (lesson 10): split-KV decode cuts the cache into segments, computes
// each segment's state (m, l, U) alone, and merges the states pairwise, level by level
// (cpu_reference's balanced tree: (0, 1), (2, 3), ...; an odd one waits a level). Each node
// shows the keys it covers and its m and l; the root's output is compared with attention
// over the whole cache.
#include "10-decode/book_data.hpp"
#include "book/figures.hpp"
#include "book/svg_plot.hpp"

#include "kit/terminal.hpp"

#include "flashlab/cpu/decode.hpp"
#include "flashlab/cpu/naive.hpp"

#include <fmt/core.h>

namespace flashlab::app::book {

namespace {

constexpr cpu::Index kSplits = 8;
constexpr double kNodeWidth = 104, kNodeHeight = 48, kLevelHeight = 78, kGap = 8;

struct Node {
  cpu::SoftmaxState<double> state;
  cpu::Index k0 = 0, k1 = 0;  // keys [k0, k1)
  double x = 0;               // centre, in pixels
};

void draw(Svg& svg, const Node& n, double y, bool root) {
  svg.rect(n.x - kNodeWidth / 2, y, kNodeWidth, kNodeHeight, root ? "#e8f4ea" : "#eef3fa",
           root ? "#2e9a3e" : "#1f6fb4");
  svg.text({n.x, y + 14}, fmt::format("keys {}-{}", n.k0, n.k1 - 1), "middle", 10);
  svg.text({n.x, y + 28}, fmt::format("m = {}", num(n.state.m(0), 4)), "middle", 10);
  svg.text({n.x, y + 42}, fmt::format("l = {}", num(n.state.l(0), 4)), "middle", 10);
}

}  // namespace

Figure merge_tree_figure() {
  const auto [q, K, V] = decode_merge_example();
  const cpu::Index n_k = K.rows();
  std::vector<Node> level;
  for (cpu::Index s = 0; s < kSplits; ++s) {
    const cpu::Segment seg = cpu::kv_segment(s, kSplits, n_k);
    level.push_back({cpu::segment_state<double>(q, K, V, seg, {}), seg.k0, seg.k0 + seg.keys,
                     kGap + kNodeWidth / 2 + double(s) * (kNodeWidth + kGap)});
  }
  std::vector<std::vector<Node>> levels{level};
  while (level.size() > 1) {
    std::vector<Node> next;
    for (std::size_t i = 0; i + 1 < level.size(); i += 2)
      next.push_back({cpu::merge(level[i].state, level[i + 1].state), level[i].k0, level[i + 1].k1,
                      (level[i].x + level[i + 1].x) / 2});
    if (level.size() % 2 == 1) next.push_back(level.back());
    levels.push_back(next);
    level = std::move(next);
  }
  const double width = double(kSplits) * (kNodeWidth + kGap) + kGap;
  const double height = double(levels.size()) * kLevelHeight + 40;
  Svg svg(width, height, "the merge tree of split-KV decode");
  const auto y_of = [&](std::size_t depth) {  // the root at the top
    return 10 + double(levels.size() - 1 - depth) * kLevelHeight;
  };
  for (std::size_t depth = 1; depth < levels.size(); ++depth)  // edges first, under the boxes
    for (const Node& parent : levels[depth])
      for (const Node& child : levels[depth - 1])
        if (child.k0 >= parent.k0 && child.k1 <= parent.k1 &&
            (child.k0 != parent.k0 || child.k1 != parent.k1))
          svg.line({parent.x, y_of(depth) + kNodeHeight}, {child.x, y_of(depth - 1)}, kInk);
  for (std::size_t depth = 0; depth < levels.size(); ++depth)
    for (const Node& n : levels[depth]) draw(svg, n, y_of(depth), depth + 1 == levels.size());
  const auto root = cpu::finalize(levels.back().front().state);
  const auto exact = cpu::naive_attention<double>(q, K, V);
  const double error = (root.O - exact.O).cwiseAbs().maxCoeff();
  svg.text(
      {width / 2, height - 10},
      fmt::format("root: O = U / l, max |O - attention over all {} keys| = {}", n_k, num(error, 3)),
      "middle", 11);
  return {"merge-tree",
          fmt::format("One query against lesson 10's cache of {} keys (d = {}, fp64), cut into {} "
                      "segments whose states (m, l, U) are computed alone and merged pairwise, "
                      "as cpu_reference's balanced tree does. m is the largest score a node has "
                      "seen, l its sum of exp(score - m).",
                      n_k, K.cols(), kSplits),
          svg.str()};
}

}  // namespace flashlab::app::book
