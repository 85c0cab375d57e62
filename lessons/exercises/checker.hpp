// `flashlab check N`: runs a student's exercise N against cpu_reference, case by case, and
// says which case failed, what was expected and what came back. Each case runs in a child
// process of its own (child_process.hpp): a crash, a hang or an exit of the student's code
// fails that case, says what the code did, and the other cases are still checked.
// Exercises 1 to 10 are C++ functions on the CPU (exercises.hpp); exercises 21 to 23 are CUDA
// kernels (kernels/), run on the GPU where there is one (kernel_checker.hpp).
#pragma once

#include "child_process.hpp"
#include "exercises.hpp"
#include "kernel_plugin.hpp"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab::exercises {

// The functions and kernels under test. linked_exercises() takes whichever implementation the
// program was linked with: the student's skeletons in `flashlab`, the solutions or the
// deliberately wrong ones in the tests.
struct ExerciseSet {
  decltype(&stable_softmax) softmax = nullptr;
  decltype(&merge) merge_states = nullptr;
  decltype(&forward_query_tile) query_tile = nullptr;
  decltype(&compute_D) D = nullptr;
  decltype(&score_gradient) dS = nullptr;
  decltype(&decode_split_kv) decode = nullptr;
  // The plugin with the set's kernels (kernels/plugin_abi.h); "" where the build had no CUDA.
  std::string kernel_plugin;
};

inline ExerciseSet linked_exercises() {
  return {&stable_softmax, &merge, &forward_query_tile, &compute_D, &score_gradient,
          &decode_split_kv, linked_kernel_plugin()};
}

enum class ExerciseKind {
  cpu,     // a C++ function, checked on the CPU
  kernel,  // a CUDA kernel, compiled by the build and checked on a GPU
};

struct ExerciseInfo {
  int number = 0;  // what `flashlab check N` takes: the lesson's number for a CPU exercise;
                   // 21 and up for a kernel exercise
  int lesson = 0;  // the lesson it belongs to
  ExerciseKind kind = ExerciseKind::cpu;
  std::string_view title;
  std::string_view file;      // the skeleton to edit, from the repository root
  std::string_view contract;  // where its contract is written, from the repository root
  std::string_view task;      // what to write, in a few lines
};

std::span<const ExerciseInfo> all_exercises();
// Throws cpu::InvalidArgument naming the exercises that exist.
const ExerciseInfo& find_exercise(int number);

struct CaseResult {
  std::string name;
  bool passed = false;
  std::string detail;  // for a failure: expected vs got, a wrong shape, or what the code did
  std::string output;  // the last lines the student's code printed in this case, if any
};

struct CheckReport {
  int exercise = 0;
  std::vector<CaseResult> cases;
  std::string not_written;  // set when the skeleton still throws NotWrittenYet (or, for a
                            // kernel, still calls not_written_yet())
  std::string not_run;      // set when a kernel exercise could not run here: why (no GPU, ...)
  bool passed() const;
};

// Throws cpu::InvalidArgument for an exercise that does not exist or limits out of range. A
// kernel exercise's cases run with at least a minute each and no memory limit (CUDA's start-up
// needs both; kernel_checker.cpp).
CheckReport check_exercise(int number, const ExerciseSet& set, const CaseLimits& limits = {});

}  // namespace flashlab::exercises
