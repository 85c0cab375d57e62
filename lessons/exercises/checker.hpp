// `flashlab check N`: runs a student's exercise N against cpu_reference, case by case, and
// says which case failed, what was expected and what came back. Each case runs in a child
// process of its own (child_process.hpp): a crash, a hang or an exit of the student's code
// fails that case, says what the code did, and the other cases are still checked.
#pragma once

#include "child_process.hpp"
#include "exercises.hpp"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab::exercises {

// The functions under test. linked_exercises() takes whichever implementation the program
// was linked with: the student's skeletons in `flashlab`, the solutions or the deliberately
// wrong ones in the tests.
struct ExerciseSet {
  decltype(&stable_softmax) softmax = nullptr;
  decltype(&merge) merge_states = nullptr;
  decltype(&forward_query_tile) query_tile = nullptr;
  decltype(&compute_D) D = nullptr;
  decltype(&score_gradient) dS = nullptr;
  decltype(&decode_split_kv) decode = nullptr;
};

inline ExerciseSet linked_exercises() {
  return {&stable_softmax, &merge, &forward_query_tile, &compute_D, &score_gradient,
          &decode_split_kv};
}

struct ExerciseInfo {
  int number = 0;            // the lesson it belongs to
  std::string_view title;
  std::string_view file;     // the skeleton to edit, from the repository root
  std::string_view task;     // what to write, in a few lines
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
  std::string not_written;  // set when the skeleton still throws NotWrittenYet
  bool passed() const;
};

// Throws cpu::InvalidArgument for an exercise that does not exist or limits out of range.
CheckReport check_exercise(int number, const ExerciseSet& set, const CaseLimits& limits = {});

}  // namespace flashlab::exercises
