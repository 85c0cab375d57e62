// `flashlab lessons`: the list of lessons, each with what it teaches.
#include "commands.hpp"
#include "kit/lesson_registry.hpp"
#include "kit/terminal.hpp"

#include <fmt/core.h>

#include <iostream>

namespace flashlab::app {

void add_lessons_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("lessons", "List the lessons and what each one teaches");
  auto& no_colour = arguments_of<bool>(cmd, [](const bool& no_colour) {
    const Style style = Style::for_stdout(no_colour);
    Table table({"lesson", "title", "what it teaches"}, {false, true, true});
    for (const auto& lesson : all_lessons())
      table.add({fmt::format("{}", lesson.number), std::string(lesson.title),
                 std::string(lesson.teaches)});
    table.print(std::cout, style, 0);
    std::cout << "\nRun one with `flashlab lesson N` (add --step to pause after each step);\n"
                 "its text is lessons/<NN-topic>/README.md.\n";
  });
  add_no_color_flag(cmd, no_colour);
}

}  // namespace flashlab::app
