// `flashlab exercise [N]`: what exercise N asks for and where to write it; without N, the list.
#include "checker.hpp"
#include "commands.hpp"
#include "terminal.hpp"

#include <fmt/core.h>

#include <iostream>
#include <optional>

namespace flashlab::app {

namespace {

void show(const exercises::ExerciseInfo& e, const Style& style) {
  std::cout << paint(style, Tone::heading, fmt::format("Exercise {}: {}", e.number, e.title))
            << "\n\n" << e.task << "\n\n"
            << fmt::format("  the contract:  lessons/exercises/exercises.hpp\n"
                           "  your file:     {}\n"
                           "  the lesson:    flashlab lesson {}\n"
                           "  when done:     cmake --build build --target flashlab && flashlab check {}\n",
                           e.file, e.number, e.number);
}

}  // namespace

void add_exercise_command(CLI::App& app) {
  static std::optional<int> number;
  static bool no_colour = false;
  auto* cmd = app.add_subcommand("exercise", "Show an exercise: what to write and where");
  cmd->add_option("N", number, "The exercise (its lesson's number); leave out to list them");
  cmd->add_flag("--no-color", no_colour, "Plain text even on a terminal");
  cmd->callback([] {
    const Style style = Style::for_stdout(no_colour);
    if (number) return show(exercises::find_exercise(*number), style);
    Table t({"exercise", "what to write", "file"}, {false, true, true});
    for (const auto& e : exercises::all_exercises())
      t.add({fmt::format("{}", e.number), std::string(e.title), std::string(e.file)});
    t.print(std::cout, style, 0);
    std::cout << "\n`flashlab exercise N` shows one; `flashlab check N` checks your answer.\n";
  });
}

}  // namespace flashlab::app
