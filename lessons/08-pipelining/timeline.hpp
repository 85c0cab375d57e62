// A timeline model of one SM running FlashAttention's inner loop: tasks (load a KV tile,
// S = Q K^T, softmax, P V) on three units (the TMA copy engine, the tensor cores, the exp
// unit), each unit doing one task at a time in the order the tasks were issued, each task
// starting when its unit is free and its inputs are ready. Arrangements of the same tasks
// (sequential, loads overlapped, ping-pong, intra-warpgroup overlap) differ only in their
// dependencies and issue order, and the model says what time each predicts.
#pragma once

#include "flashlab/cpu/types.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace flashlab::app::timeline {

using cpu::Index;

enum class Unit { copy, tensor, exp };
inline constexpr int kUnits = 3;
std::string_view to_string(Unit unit);

enum class Kind { load, S, softmax, PV };
char letter(Kind kind);  // L, S, e, P

struct Task {
  Kind kind;
  Unit unit;
  int group = 0;             // the consumer warpgroup (0 or 1) whose query tile it serves
  Index tile = 0;            // the KV tile j
  double seconds = 0;
  std::vector<int> after;    // tasks that must finish first (indices into the schedule)
  double start = 0, end = 0; // filled in by run()
};

// Each unit runs its tasks in the order they appear; a task starts at
// max(its unit is free, every task in `after` has ended).
// Throws cpu::InvalidArgument for a dependency on a later or missing task.
void run(std::vector<Task>& tasks);

// The per-tile durations on one SM.
struct StageTimes {
  double load = 0;     // K_j and V_j into shared memory
  double mma = 0;      // one of the two products, S = Q_i K_j^T or P V_j
  double softmax = 0;  // the exps of one (Br, Bc) tile
};

enum class Arrangement {
  sequential,      // one warpgroup, nothing overlaps: load, S, softmax, PV, load, ...
  loads_overlapped,  // a producer warp loads K_{j+1}, V_{j+1} into a second buffer meanwhile
  ping_pong,       // two warpgroups, two query tiles sharing each K_j, V_j; the tensor cores
                   // alternate between them, so one's softmax hides under the other's GEMMs
  intra_overlap    // one warpgroup issues S_{j+1} before the softmax of tile j
};
std::string_view to_string(Arrangement a);
// How many query tiles an arrangement computes at once (2 for ping-pong).
int query_tiles(Arrangement a);

// Shared-memory buffers for K_j, V_j: a load into a buffer waits until the tile that held it
// before is no longer needed. The sequential arrangement always uses one.
inline constexpr Index kDoubleBuffer = 2;

// The tasks of n KV tiles in this arrangement, not yet run. Throws cpu::InvalidArgument for
// fewer than one buffer.
std::vector<Task> schedule(Arrangement a, const StageTimes& t, Index n_tiles,
                           Index buffers = kDoubleBuffer);

struct Summary {
  double seconds = 0;                  // when the last task ends
  double busy[kUnits] = {0, 0, 0};     // time each unit worked
};
Summary summarise(const std::vector<Task>& tasks);

// One line per unit, one character per `step` seconds: the task's letter (upper case for
// warpgroup 0, lower case for 1) or '.' when idle; up to `width` characters.
std::vector<std::string> draw(const std::vector<Task>& tasks, double step, int width);

}  // namespace flashlab::app::timeline
