// Running another program (ncu, gnuplot) without a shell: its arguments go to it as they are,
// so no file name or option a user typed is ever read as a command.
#pragma once

#include <string>
#include <vector>

namespace flashlab::app {

struct ProcessResult {
  bool started = false;  // false: the program could not be run at all (message says why)
  int exit_status = -1;  // its exit status, or -1 when a signal ended it
  std::string output;    // what it printed (stdout and stderr together)
  std::string message;   // why it did not start, or which signal ended it
  bool succeeded() const { return started && exit_status == 0; }
};

// Runs argv[0] (looked up on PATH when it has no slash) with argv, stdin from /dev/null,
// and collects its output. When stdout_path is given, stdout goes to that file instead
// (opened for writing and truncated) and only stderr is collected.
ProcessResult run_program(const std::vector<std::string>& argv,
                          const std::string& stdout_path = "");

}  // namespace flashlab::app
