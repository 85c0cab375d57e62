// `flashlab check N`: runs the student's exercise N (lessons/exercises/student/) against the
// reference and reports each case. Exit status 0 when every case passes, 1 otherwise.
#include "checker.hpp"
#include "commands.hpp"
#include "terminal.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <iostream>

namespace flashlab::app {

namespace {

constexpr int kCheckFailed = 1;

int report(const exercises::CheckReport& r, const Style& style) {
  const auto& info = exercises::find_exercise(r.exercise);
  std::cout << fmt::format("Checking exercise {} ({}) in {}\n\n", r.exercise, info.title, info.file);
  if (!r.not_written.empty()) {
    std::cout << paint(style, Tone::bad, "NOT WRITTEN YET") << "  " << r.not_written << "\n"
              << "Open the file above, replace the throw with your code, rebuild and check again.\n";
    return kCheckFailed;
  }
  std::size_t passed = 0;
  for (const auto& c : r.cases) {
    passed += c.passed;
    std::cout << (c.passed ? paint(style, Tone::good, "PASS") : paint(style, Tone::bad, "FAIL"))
              << "  " << c.name << "\n";
    if (!c.passed) std::cout << "      " << c.detail << "\n";
  }
  std::cout << fmt::format("\n{} of {} cases passed.{}\n", passed, r.cases.size(),
                           r.passed() ? " Well done." : "");
  return r.passed() ? 0 : kCheckFailed;
}

}  // namespace

void add_check_command(CLI::App& app) {
  static int number = 0;
  static bool no_colour = false;
  auto* cmd = app.add_subcommand("check", "Check your answer to exercise N against the reference");
  cmd->add_option("N", number, "The exercise: 1, 2, 3, 6 or 10")->required();
  cmd->add_flag("--no-color", no_colour, "Plain text even on a terminal");
  cmd->callback([] {
    const auto r = exercises::check_exercise(number, exercises::linked_exercises());
    const int status = report(r, Style::for_stdout(no_colour));
    if (status != 0) {
      std::cout.flush();
      std::exit(status);
    }
  });
}

}  // namespace flashlab::app
