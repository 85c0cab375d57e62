// A timeline model of one SM running one block of the Hopper forward (gpu/kernels/06_fa3.cu):
// a query tile of Br rows held by consumer warpgroups of 64 rows each (two at d = 128, the
// lesson's measured shape; three at d = 64: schedule's `consumers`), the KV tiles
// streaming past through a ring of `stages` K buffers and `stages` V buffers. Tasks (load K_j,
// load V_j, S = Q K_j^T, softmax, U += W V_j) run on three units (the TMA copy engine, the
// tensor cores, the exp unit), each shared by the whole block.
//
// Programs, as in the kernel: each consumer warpgroup issues its own tasks in its own order;
// the producer (warp specialisation on) issues the loads, or consumer 0 issues them between
// its tiles (off). A task is issued once the task before it in its program was issued (the
// matrix products and the loads are asynchronous: the program goes on at once) or finished
// (the softmax runs on the program's own threads), once its inputs are ready and, for a load,
// once its buffer has been released by every consumer. Each unit runs the tasks in the order
// they are issued, one at a time. Ping-pong makes the consumers take turns issuing their
// products, round robin; intra-warpgroup overlap issues S_j before U += W_{j-1} V_{j-1} and lets the softmax
// of S_j run while that product is still on the tensor cores.
#pragma once

#include "flashlab/cpu/types.hpp"
#include "flashlab/gpu/kernel_info.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace flashlab::app::timeline {

using cpu::Index;

enum class Unit { copy, tensor, exp };
inline constexpr int kUnits = 3;
std::string_view to_string(Unit unit);

enum class Kind { load_k, load_v, S, softmax, PV };
char letter(Kind kind);  // K, V, S, E, P

inline constexpr int kConsumers = 2;     // consumer warpgroups at d = 128: schedule's default
inline constexpr int kMaxConsumers = 3;  // consumers are programs 0 .. consumers - 1
inline constexpr int kProducer = kMaxConsumers;  // the producer's program (warp specialisation)

struct Task {
  Kind kind;
  Unit unit;
  int program = 0;  // 0 .. consumers - 1: a consumer; kProducer: the producer
  int group = 0;    // the consumer whose rows it serves (loads: 0)
  Index tile = 0;   // the KV tile j
  double seconds = 0;
  std::vector<int> after;  // tasks that must have finished first (indices into the schedule)
  std::vector<int> turn;   // tasks that must have been issued first (ping-pong's turns)
  double issue = 0, start = 0, end = 0;  // filled in by run()
};

// Issues and runs the tasks as the header says, the programs' tasks in the order they appear
// in `tasks`. Throws cpu::InvalidArgument for a dependency on a missing task, or when no
// program can go on (a schedule that waits for itself).
void run(std::vector<Task>& tasks);

// The durations on one SM: of one K (or V) tile's load, and of one consumer's share of a
// product and of the softmax (its 64 rows).
struct StageTimes {
  double load = 0;     // K_j or V_j, (Bc, d)
  double mma = 0;      // S = Q K_j^T or U += W V_j for a consumer's rows
  double softmax = 0;  // the exps of a consumer's (64, Bc) scores
};

// FlashAttention-3's switches, as flashlab/fa3.h has them; the defaults are the kernel's at
// d = 128, the head dimension the lesson's model and its measured ablation take.
struct Switches {
  bool warp_specialized = true;
  Index stages = gpu::fa3::default_stages(128);
  bool ping_pong = gpu::fa3::default_ping_pong(128);
  bool intra_overlap = true;
};
std::string describe(const Switches& s);  // "WS on, 2 stages, ping-pong on, intra on"

// The tasks of one block of `consumers` consumer warpgroups over n KV tiles with these
// switches, not yet run. Throws cpu::InvalidArgument for fewer than one stage or one tile, or
// consumers outside 1 .. kMaxConsumers.
std::vector<Task> schedule(const Switches& s, const StageTimes& t, Index n_tiles,
                           int consumers = kConsumers);

struct Summary {
  double seconds = 0;               // when the last task ends
  double busy[kUnits] = {0, 0, 0};  // time each unit worked
};
Summary summarise(const std::vector<Task>& tasks);

// One line per unit, one character per `step` seconds: the task's letter (upper case for
// consumer 0 and the loads, lower case for the others) or '.' when idle; up to `width`.
std::vector<std::string> draw(const std::vector<Task>& tasks, double step, int width);

}  // namespace flashlab::app::timeline
