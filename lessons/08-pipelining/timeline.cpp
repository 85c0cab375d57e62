// The timeline model of timeline.hpp: the schedule of one block as 06_fa3.cu issues it, and
// the list scheduler that runs it.
#include "timeline.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

namespace flashlab::app::timeline {

std::string_view to_string(Unit unit) {
  switch (unit) {
    case Unit::copy: return "copy (TMA)";
    case Unit::tensor: return "tensor cores";
    case Unit::exp: return "exp unit";
  }
  return "?";
}

char letter(Kind kind) {
  switch (kind) {
    case Kind::load_k: return 'K';
    case Kind::load_v: return 'V';
    case Kind::S: return 'S';
    case Kind::softmax: return 'E';
    case Kind::PV: return 'P';
  }
  return '?';
}

std::string describe(const Switches& s) {
  return fmt::format("WS {}, {} stage{}, ping-pong {}, intra {}", s.warp_specialized ? "on" : "off",
                     s.stages, s.stages == 1 ? "" : "s", s.ping_pong ? "on" : "off",
                     s.intra_overlap ? "on" : "off");
}

void run(std::vector<Task>& tasks) {
  constexpr int kPrograms = kProducer + 1;
  std::vector<int> queue[kPrograms];  // each program's tasks, in program order
  for (std::size_t k = 0; k < tasks.size(); ++k) {
    const Task& t = tasks[k];
    if (t.program < 0 || t.program >= kPrograms)
      throw cpu::InvalidArgument(fmt::format("task {} belongs to program {}: programs are 0 to {}",
                                             k, t.program, kPrograms - 1));
    for (const auto* deps : {&t.after, &t.turn})
      for (const int dep : *deps)
        if (dep < 0 || std::size_t(dep) >= tasks.size() || std::size_t(dep) == k)
          throw cpu::InvalidArgument(
              fmt::format("task {} depends on task {}, which is not another task of the {}", k, dep,
                          tasks.size()));
    queue[t.program].push_back(int(k));
  }
  std::vector<bool> done(tasks.size(), false);
  std::size_t next[kPrograms] = {0, 0, 0};
  double ready_at[kPrograms] = {};  // when each program may issue its next task
  double free_at[kUnits] = {0, 0, 0};
  for (std::size_t scheduled = 0; scheduled < tasks.size(); ++scheduled) {
    int best = -1;
    double best_issue = std::numeric_limits<double>::infinity();
    for (int p = 0; p < kPrograms; ++p) {  // the earliest issue among the programs' next tasks
      if (next[p] == queue[p].size()) continue;
      const Task& t = tasks[std::size_t(queue[p][next[p]])];
      double issue = ready_at[p];
      bool ready = true;
      for (const int dep : t.after) {
        ready = ready && done[std::size_t(dep)];
        issue = std::max(issue, tasks[std::size_t(dep)].end);
      }
      for (const int dep : t.turn) {
        ready = ready && done[std::size_t(dep)];
        issue = std::max(issue, tasks[std::size_t(dep)].issue);
      }
      if (ready && issue < best_issue) best = p, best_issue = issue;
    }
    if (best < 0)
      throw cpu::InvalidArgument(
          "no program can go on: every next task waits for a task that waits in turn");
    Task& t = tasks[std::size_t(queue[best][next[best]++])];
    t.issue = best_issue;
    t.start = std::max(best_issue, free_at[int(t.unit)]);
    t.end = t.start + t.seconds;
    free_at[int(t.unit)] = t.end;
    done[std::size_t(&t - tasks.data())] = true;
    // The products and the loads are asynchronous; the softmax occupies the program's threads.
    ready_at[best] = t.kind == Kind::softmax ? t.end : t.issue;
  }
}

namespace {

Unit unit_of(Kind kind) {
  switch (kind) {
    case Kind::load_k:
    case Kind::load_v: return Unit::copy;
    case Kind::softmax: return Unit::exp;
    case Kind::S:
    case Kind::PV: break;
  }
  return Unit::tensor;
}

// Builds the tasks of every program first, then their dependencies, by (kind, group, tile).
class Builder {
 public:
  explicit Builder(const StageTimes& t) : t_(t) {}

  int add(Kind kind, int program, int group, Index tile) {
    const double s = kind == Kind::load_k || kind == Kind::load_v ? t_.load
                     : kind == Kind::softmax                      ? t_.softmax
                                                                  : t_.mma;
    tasks_.push_back({kind, unit_of(kind), program, group, tile, s, {}, {}});
    const int id = int(tasks_.size()) - 1;
    index_[{int(kind), group, tile}] = id;
    return id;
  }
  // The task's index, or -1 when it does not exist (before the first tile, past the last).
  int find(Kind kind, int group, Index tile) const {
    const auto it = index_.find({int(kind), group, tile});
    return it == index_.end() ? -1 : it->second;
  }
  void after(int task, std::initializer_list<int> deps) {
    push(tasks_[std::size_t(task)].after, deps);
  }
  void turn(int task, std::initializer_list<int> deps) {
    push(tasks_[std::size_t(task)].turn, deps);
  }
  std::vector<Task> take() { return std::move(tasks_); }

 private:
  static void push(std::vector<int>& to, std::initializer_list<int> deps) {
    for (const int d : deps)
      if (d >= 0) to.push_back(d);
  }
  StageTimes t_;
  std::vector<Task> tasks_;
  std::map<std::tuple<int, int, Index>, int> index_;
};

// Consumer g's program as 06_fa3.cu's consume() issues it. Section 0: S_0, its softmax.
// Section j (1 <= j <= n): U += W_{j-1} V_{j-1} and, while j < n, S_j (S_j first with
// intra-warpgroup overlap), then the softmax of S_j. Without a producer, consumer 0 refills
// the buffers it has just released: K_{j+stages} and V_{j-1+stages}.
void consumer_program(Builder& b, const Switches& s, int g, Index n) {
  const bool issues = !s.warp_specialized && g == 0;
  if (issues)
    for (Index j = 0; j < std::min(s.stages, n); ++j) {
      b.add(Kind::load_k, g, 0, j);
      b.add(Kind::load_v, g, 0, j);
    }
  b.add(Kind::S, g, g, 0);
  if (issues && s.stages < n) b.add(Kind::load_k, g, 0, s.stages);
  b.add(Kind::softmax, g, g, 0);
  for (Index j = 1; j <= n; ++j) {
    const bool has_next = j < n;
    if (s.intra_overlap && has_next) b.add(Kind::S, g, g, j);
    b.add(Kind::PV, g, g, j - 1);
    if (!s.intra_overlap && has_next) b.add(Kind::S, g, g, j);
    if (has_next) b.add(Kind::softmax, g, g, j);
    if (issues && has_next && j + s.stages < n) b.add(Kind::load_k, g, 0, j + s.stages);
    if (issues && j - 1 + s.stages < n) b.add(Kind::load_v, g, 0, j - 1 + s.stages);
  }
}

// What each task waits for.
void dependencies(Builder& b, const Switches& s, Index n, int consumers) {
  const Index st = s.stages;
  for (Index j = 0; j < n; ++j) {
    // A K buffer is released once S (and, without intra overlap, the product before it, which
    // the same wait covers) is done in every consumer; a V buffer once U += W V is.
    for (int g = 0; g < consumers; ++g) {
      b.after(b.find(Kind::load_k, 0, j), {b.find(Kind::S, g, j - st)});
      if (!s.intra_overlap) b.after(b.find(Kind::load_k, 0, j), {b.find(Kind::PV, g, j - st - 1)});
      b.after(b.find(Kind::load_v, 0, j), {b.find(Kind::PV, g, j - st)});
    }
  }
  for (int g = 0; g < consumers; ++g)
    for (Index j = 0; j < n; ++j) {
      const int S = b.find(Kind::S, g, j), e = b.find(Kind::softmax, g, j);
      const int pv = b.find(Kind::PV, g, j);
      b.after(S, {b.find(Kind::load_k, 0, j)});
      // Intra overlap: section j starts after the wait for U += W_{j-2} V_{j-2} (the rescale
      // of U by alpha needs it); without it, the softmax itself waited for that product.
      if (s.intra_overlap) b.after(S, {b.find(Kind::PV, g, j - 2)});
      b.after(e, {S});
      if (!s.intra_overlap) b.after(e, {b.find(Kind::PV, g, j - 1)});
      b.after(pv, {b.find(Kind::load_v, 0, j), e});
    }
  if (!s.ping_pong) return;
  // Turns, round robin: consumer g issues a section's products once consumer g - 1 has
  // issued its own of the same section, and consumer 0 once the last consumer has issued
  // those of the section before (consumer 0 goes first).
  const auto section_last = [&](int g, Index j) {  // the last product of section j
    const int pv = b.find(Kind::PV, g, j - 1), S = b.find(Kind::S, g, j);
    if (pv < 0 || S < 0) return std::max(pv, S);
    return s.intra_overlap ? pv : S;
  };
  const auto section_first = [&](int g, Index j) {
    const int pv = b.find(Kind::PV, g, j - 1), S = b.find(Kind::S, g, j);
    if (pv < 0 || S < 0) return std::max(pv, S);
    return s.intra_overlap ? S : pv;
  };
  for (Index j = 0; j <= n; ++j) {
    for (int g = 1; g < consumers; ++g) b.turn(section_first(g, j), {section_last(g - 1, j)});
    b.turn(section_first(0, j), {section_last(consumers - 1, j - 1)});
  }
}

}  // namespace

std::vector<Task> schedule(const Switches& s, const StageTimes& t, Index n, int consumers) {
  if (consumers < 1 || consumers > kMaxConsumers)
    throw cpu::InvalidArgument(fmt::format(
        "a block has 1 to {} consumer warpgroups, got {}", kMaxConsumers, consumers));
  if (s.stages < 1)
    throw cpu::InvalidArgument(
        fmt::format("a pipeline needs at least one stage, got {}", s.stages));
  if (n < 1)
    throw cpu::InvalidArgument(fmt::format("a block needs at least one KV tile, got {}", n));
  Builder b(t);
  if (s.warp_specialized)
    for (Index j = 0; j < n; ++j) {
      b.add(Kind::load_k, kProducer, 0, j);
      b.add(Kind::load_v, kProducer, 0, j);
    }
  for (int g = 0; g < consumers; ++g) consumer_program(b, s, g, n);
  dependencies(b, s, n, consumers);
  return b.take();
}

Summary summarise(const std::vector<Task>& tasks) {
  Summary s;
  for (const auto& t : tasks) {
    s.seconds = std::max(s.seconds, t.end);
    s.busy[int(t.unit)] += t.seconds;
  }
  return s;
}

std::vector<std::string> draw(const std::vector<Task>& tasks, double step, int width) {
  std::vector<std::string> lines(kUnits, std::string(std::size_t(width), '.'));
  for (const auto& t : tasks) {
    const int first = int(std::floor(t.start / step + 0.5));
    const int last = int(std::floor(t.end / step + 0.5));
    for (int c = first; c < last && c < width; ++c) {
      const char ch = letter(t.kind);
      lines[std::size_t(t.unit)][std::size_t(c)] = t.group == 0 ? ch : char(std::tolower(ch));
    }
  }
  return lines;
}

}  // namespace flashlab::app::timeline
