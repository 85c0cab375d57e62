// Progress of a long run, on stderr: a line rewritten in place on a terminal, or a line at
// every tenth of the way when stderr is a file or a pipe (a log of carriage returns helps
// no one). Short runs print nothing: only a run estimated at `worth_showing` steps or more.
#pragma once

#include <cstdint>
#include <string>

namespace flashlab::app {

class ProgressLine {
 public:
  ProgressLine(std::string what, std::int64_t estimated_steps,
               std::int64_t worth_showing = 1 << 22);
  // (done, total) of the run; total may differ from the estimate.
  void operator()(std::int64_t done, std::int64_t total);

 private:
  std::string what_;
  bool show_, terminal_;
  int last_tenth_ = -1;
};

}  // namespace flashlab::app
