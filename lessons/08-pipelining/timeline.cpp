#include "timeline.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

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
    case Kind::load: return 'L';
    case Kind::S: return 'S';
    case Kind::softmax: return 'E';
    case Kind::PV: return 'P';
  }
  return '?';
}

std::string_view to_string(Arrangement a) {
  switch (a) {
    case Arrangement::sequential: return "sequential";
    case Arrangement::loads_overlapped: return "loads overlapped";
    case Arrangement::ping_pong: return "ping-pong (2 warpgroups)";
    case Arrangement::intra_overlap: return "intra-warpgroup overlap";
  }
  return "?";
}

int query_tiles(Arrangement a) { return a == Arrangement::ping_pong ? 2 : 1; }

void run(std::vector<Task>& tasks) {
  double free_at[kUnits] = {0, 0, 0};
  for (std::size_t k = 0; k < tasks.size(); ++k) {
    Task& t = tasks[k];
    double ready = free_at[int(t.unit)];
    for (int dep : t.after) {
      if (dep < 0 || std::size_t(dep) >= k)
        throw cpu::InvalidArgument(fmt::format(
            "task {} depends on task {}: a task may only wait for tasks issued before it", k, dep));
      ready = std::max(ready, tasks[std::size_t(dep)].end);
    }
    t.start = ready;
    t.end = ready + t.seconds;
    free_at[int(t.unit)] = t.end;
  }
}

namespace {

// Builds a schedule, remembering where each (kind, group, tile) task went.
class Builder {
 public:
  explicit Builder(const StageTimes& t) : t_(t) {}

  int add(Kind kind, int group, Index tile, std::vector<int> after) {
    const Unit unit = kind == Kind::load ? Unit::copy : kind == Kind::softmax ? Unit::exp : Unit::tensor;
    const double s = kind == Kind::load ? t_.load : kind == Kind::softmax ? t_.softmax : t_.mma;
    after.erase(std::remove(after.begin(), after.end(), -1), after.end());
    tasks_.push_back({kind, unit, group, tile, s, std::move(after)});
    const int id = int(tasks_.size()) - 1;
    index_[key(kind, group, tile)] = id;
    return id;
  }
  // The task's index, or -1 when it does not exist (before the first tile).
  int find(Kind kind, int group, Index tile) const {
    if (tile < 0) return -1;
    const auto it = index_.find(key(kind, group, tile));
    return it == index_.end() ? -1 : it->second;
  }
  std::vector<Task> take() { return std::move(tasks_); }

 private:
  static Index key(Kind kind, int group, Index tile) { return (tile * 4 + Index(kind)) * 2 + group; }
  StageTimes t_;
  std::vector<Task> tasks_;
  std::map<Index, int> index_;
};

// The compute chain of one warpgroup for tile j: S after the load, softmax after S, PV
// after softmax; and, in order, after the previous tile's PV (U is updated in place).
void chain(Builder& b, int group, Index j) {
  const int S = b.add(Kind::S, group, j, {b.find(Kind::load, 0, j), b.find(Kind::PV, group, j - 1)});
  const int e = b.add(Kind::softmax, group, j, {S});
  b.add(Kind::PV, group, j, {e});
}

// A load may reuse a buffer once every warpgroup's PV of the tile that held it is done.
std::vector<int> buffer_free(const Builder& b, Index j, int groups, Index buffers) {
  std::vector<int> after;
  for (int g = 0; g < groups; ++g) after.push_back(b.find(Kind::PV, g, j - buffers));
  return after;
}

}  // namespace

std::vector<Task> schedule(Arrangement a, const StageTimes& t, Index n, Index buffers) {
  if (buffers < 1)
    throw cpu::InvalidArgument(fmt::format("a pipeline needs at least one buffer, got {}", buffers));
  Builder b(t);
  switch (a) {
    case Arrangement::sequential:
      for (Index j = 0; j < n; ++j) {
        b.add(Kind::load, 0, j, {b.find(Kind::PV, 0, j - 1)});  // one buffer, one thread of work
        chain(b, 0, j);
      }
      break;
    case Arrangement::loads_overlapped:
      for (Index j = 0; j < n; ++j) {
        b.add(Kind::load, 0, j, buffer_free(b, j, 1, buffers));
        chain(b, 0, j);
      }
      break;
    case Arrangement::ping_pong:
      for (Index j = 0; j < n; ++j) {
        const int load = b.add(Kind::load, 0, j, buffer_free(b, j, 2, buffers));
        // Tensor-core order S_0, S_1, PV_0, PV_1: warpgroup 1's S runs during warpgroup 0's
        // softmax, and 0's PV during 1's softmax.
        const int S0 = b.add(Kind::S, 0, j, {load, b.find(Kind::PV, 0, j - 1)});
        const int S1 = b.add(Kind::S, 1, j, {load, b.find(Kind::PV, 1, j - 1)});
        const int e0 = b.add(Kind::softmax, 0, j, {S0});
        const int e1 = b.add(Kind::softmax, 1, j, {S1});
        b.add(Kind::PV, 0, j, {e0});
        b.add(Kind::PV, 1, j, {e1});
      }
      break;
    case Arrangement::intra_overlap: {
      // S_{j+1} is issued before PV_j, so the tensor cores compute it during softmax_j.
      b.add(Kind::S, 0, 0, {b.add(Kind::load, 0, 0, {})});
      for (Index j = 0; j < n; ++j) {
        if (j + 1 < n) b.add(Kind::load, 0, j + 1, buffer_free(b, j + 1, 1, buffers));
        // softmax_j needs only S_j: the rescale of U by alpha waits for PV_j, after PV_{j-1}.
        const int e = b.add(Kind::softmax, 0, j, {b.find(Kind::S, 0, j)});
        if (j + 1 < n) b.add(Kind::S, 0, j + 1, {b.find(Kind::load, 0, j + 1)});
        b.add(Kind::PV, 0, j, {e});
      }
      break;
    }
  }
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
    const int first = int(std::floor(t.start / step + 0.5)), last = int(std::floor(t.end / step + 0.5));
    for (int c = first; c < last && c < width; ++c) {
      const char ch = letter(t.kind);
      lines[std::size_t(t.unit)][std::size_t(c)] = t.group == 0 ? ch : char(std::tolower(ch));
    }
  }
  return lines;
}

}  // namespace flashlab::app::timeline
