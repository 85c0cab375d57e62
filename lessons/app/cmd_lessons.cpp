// `flashlab lessons`: the list of lessons, each with what it teaches.
#include "commands.hpp"
#include "lesson_registry.hpp"
#include "terminal.hpp"

#include <fmt/core.h>

#include <iostream>

namespace flashlab::app {

void add_lessons_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("lessons", "List the lessons and what each one teaches");
  static bool no_colour = false;
  cmd->add_flag("--no-color", no_colour, "Plain text even on a terminal");
  cmd->callback([] {
    const Style style = Style::for_stdout(no_colour);
    Table table({"lesson", "title", "what it teaches"}, {false, true, true});
    for (const auto& lesson : all_lessons())
      table.add({fmt::format("{}", lesson.number), std::string(lesson.title),
                 std::string(lesson.teaches)});
    table.print(std::cout, style, 0);
    std::cout << "\nRun one with `flashlab lesson N` (add --step to pause after each step);\n"
                 "its text is lessons/<NN-topic>/README.md.\n";
  });
}

}  // namespace flashlab::app
