#include "progress.hpp"

#include <fmt/core.h>

#include <unistd.h>

#include <cstdio>

namespace flashlab::app {

ProgressLine::ProgressLine(std::string what, std::int64_t estimated_steps,
                           std::int64_t worth_showing)
    : what_(std::move(what)),
      show_(estimated_steps >= worth_showing),
      terminal_(isatty(fileno(stderr)) != 0) {}

void ProgressLine::operator()(std::int64_t done, std::int64_t total) {
  if (!show_ || total <= 0) return;
  const int tenth = int(10 * double(done) / double(total));
  if (terminal_) {
    fmt::print(stderr, "\r{}: {}/{} ({:.0f}%)", what_, done, total,
               100.0 * double(done) / double(total));
    if (done >= total) fmt::print(stderr, "\n");
  } else if (tenth != last_tenth_) {
    fmt::print(stderr, "{}: {}% ({}/{})\n", what_, 10 * tenth, done, total);
  }
  last_tenth_ = tenth;
}

}  // namespace flashlab::app
