// `flashlab exercise [N]`: what exercise N asks for and where to write it; without N, the list.
#include "checker.hpp"
#include "commands.hpp"
#include "kit/terminal.hpp"

#include <fmt/core.h>

#include <iostream>
#include <climits>
#include <optional>

namespace flashlab::app {

namespace {

void show(const exercises::ExerciseInfo& e, const Style& style) {
  const bool kernel = e.kind == exercises::ExerciseKind::kernel;
  std::cout << paint(style, Tone::heading, fmt::format("Exercise {}: {}", e.number, e.title))
            << "\n\n"
            << e.task << "\n\n"
            << fmt::format(
                   "  the contract:  {}\n"
                   "  your file:     {}\n"
                   "  the lesson:    flashlab lesson {}\n"
                   "  when done:     cmake --build build --target flashlab && flashlab check {}\n",
                   e.contract, e.file, e.lesson, e.number);
  if (kernel)
    std::cout << "  runs on:       a CUDA GPU (fp32); the build compiles your kernel anywhere nvcc "
                 "is\n";
}

struct ExerciseArgs {
  std::optional<int> number;
  bool no_colour = false;
};

}  // namespace

void add_exercise_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("exercise", "Show an exercise: what to write and where");
  auto& args = arguments_of<ExerciseArgs>(cmd, [](const ExerciseArgs& a) {
    const Style style = Style::for_stdout(a.no_colour);
    if (a.number) return show(exercises::find_exercise(*a.number), style);
    Table t({"exercise", "lesson", "what to write", "file"}, {false, false, true, true});
    for (const auto& e : exercises::all_exercises())
      t.add({fmt::format("{}", e.number), fmt::format("{}", e.lesson), std::string(e.title),
             std::string(e.file)});
    t.print(std::cout, style, 0);
    std::cout << "\n`flashlab exercise N` shows one; `flashlab check N` checks your answer.\n";
  });
  cmd->add_option_function<std::string>(
      "N",
      [&args](const std::string& text) { args.number = int(parse_integer("N", text, 0, INT_MAX)); },
      "The exercise (its lesson's number); leave out to list them");
  add_no_color_flag(cmd, args.no_colour);
}

}  // namespace flashlab::app
