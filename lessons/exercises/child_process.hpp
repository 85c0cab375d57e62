// Runs one case of a student's code in a child process, so that nothing the code does can take
// the checker down with it: a crash, a hang, a call to exit() or abort(), a runaway allocation
// or an exception of any type ends only that child, and the checker says what happened and
// goes on with the next case.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace flashlab::exercises {

// What one case of the student's code may use. The defaults are far above what a correct
// answer needs (every case takes milliseconds and a few MiB); the tests use short limits.
struct CaseLimits {
  double seconds = 5.0;                              // wall-clock time
  std::size_t memory_bytes = std::size_t{1} << 30;   // address space on top of the checker's own
};

// Throws cpu::InvalidArgument naming a limit out of range: seconds in (0, one day], memory > 0.
void validate(const CaseLimits& limits);

// How a case ended, told by the parent process.
struct CaseOutcome {
  enum class Verdict { passed, failed, not_written };
  Verdict verdict = Verdict::failed;
  std::string detail;  // failed: what differed, or what the code did; not_written: the skeleton's message
  std::string output;  // the last lines the code printed (stdout and stderr together), if any
};

// Runs body() in a child process under `limits`. body returns "" when the case passed, else
// what differed; it may also throw anything, crash, exit or never return. Throws
// std::system_error only when no child process can be started at all.
CaseOutcome run_in_child(const std::function<std::string()>& body, const CaseLimits& limits);

}  // namespace flashlab::exercises
