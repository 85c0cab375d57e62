// Runs the `flashlab` program built beside the tests and captures what it prints.
#pragma once

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace flashlab::test {

struct Run {
  int status = -1;     // the exit status
  std::string output;  // stdout, and stderr when the command line redirects it
};

// args are appended to the program's path as they are: quote them in the caller if needed.
inline Run run_flashlab(const std::string& args) {
  Run run;
  const std::string command = std::string(FLASHLAB_BINARY) + " " + args;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return run;
  std::array<char, 4096> buffer{};
  while (const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe))
    run.output.append(buffer.data(), n);
  const int raw = pclose(pipe);
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return run;
}

}  // namespace flashlab::test
