// `flashlab check N`: runs the student's exercise N (lessons/exercises/student/) against the
// reference and reports each case; for a kernel exercise (21 and up) on the GPU, or, where
// there is none, says that the kernel compiled and that running it needs one. Exit status 0
// when every case passes, 1 otherwise.
#include "checker.hpp"
#include "commands.hpp"
#include "kit/terminal.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

namespace flashlab::app {

namespace {

struct CheckArgs {
  int number = 0;
  bool no_colour = false;
};

constexpr int kCheckFailed = 1;

int report(const exercises::CheckReport& r, const Style& style) {
  const auto& info = exercises::find_exercise(r.exercise);
  std::cout << fmt::format("Checking exercise {} ({}) in {}\n\n", r.exercise, info.title,
                           info.file);
  if (!r.not_run.empty()) {
    std::cout << paint(style, Tone::bad, "NOT RUN") << "  " << r.not_run << "\n";
    return kCheckFailed;
  }
  if (!r.not_written.empty()) {
    std::cout
        << paint(style, Tone::bad, "NOT WRITTEN YET") << "  " << r.not_written << "\n"
        << "Open the file above, replace the throw with your code, rebuild and check again.\n";
    return kCheckFailed;
  }
  std::size_t passed = 0;
  for (const auto& c : r.cases) {
    passed += c.passed;
    std::cout << (c.passed ? paint(style, Tone::good, "PASS") : paint(style, Tone::bad, "FAIL"))
              << "  " << c.name << "\n";
    if (!c.passed) std::cout << "      " << c.detail << "\n";
    if (!c.passed && !c.output.empty()) {  // the last lines the student's code printed
      std::cout << "      it printed:\n";
      std::istringstream lines(c.output);
      for (std::string line; std::getline(lines, line);) std::cout << "      | " << line << "\n";
    }
  }
  std::cout << fmt::format("\n{} of {} cases passed.{}\n", passed, r.cases.size(),
                           r.passed() ? " Well done." : "");
  return r.passed() ? 0 : kCheckFailed;
}

}  // namespace

void add_check_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("check", "Check your answer to exercise N against the reference");
  auto& args = arguments_of<CheckArgs>(cmd, [](const CheckArgs& a) {
    const auto r = exercises::check_exercise(a.number, exercises::linked_exercises());
    const int status = report(r, Style::for_stdout(a.no_colour));
    if (status != 0) {
      std::cout.flush();
      std::exit(status);
    }
  });
  // The numbers as the exercises' table has them, each kind's in its order.
  std::string cpu, kernel;
  for (const exercises::ExerciseInfo& e : exercises::all_exercises()) {
    std::string& list = e.kind == exercises::ExerciseKind::cpu ? cpu : kernel;
    list += (list.empty() ? "" : ", ") + std::to_string(e.number);
  }
  add_integer_option(cmd, "N", args.number,
                     fmt::format("The exercise (`flashlab exercise` lists them): {} on the CPU, "
                                 "{} CUDA kernels",
                                 cpu, kernel),
                     0)
      ->required()
      ->default_str("");
  add_no_color_flag(cmd, args.no_colour);
}

}  // namespace flashlab::app
