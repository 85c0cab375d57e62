// `flashlab lesson N [--step] [--no-color]`: runs lesson N's program.
#include "commands.hpp"
#include "kit/lesson_registry.hpp"

#include <charconv>
#include <iostream>

namespace flashlab::app {

namespace {

struct LessonArgs {
  std::string number;
  bool step = false;
  bool no_colour = false;
};

int parse_lesson_number(const std::string& text) {
  int number = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (error != std::errc{} || end != text.data() + text.size())
    throw UnknownLesson("`" + text +
                        "` is not a lesson number: give a whole number such as "
                        "`flashlab lesson 2`; `flashlab lessons` lists them");
  return number;
}

}  // namespace

void add_lesson_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("lesson", "Run one lesson's program (see `flashlab lessons`)");
  auto& args = arguments_of<LessonArgs>(cmd, [](const LessonArgs& args) {
    const LessonInfo& lesson = find_lesson(parse_lesson_number(args.number));
    LessonContext context(std::cout, std::cin, Style::for_stdout(args.no_colour), args.step);
    context.title(lesson.number, lesson.title);
    lesson.run(context);
    std::cout << "\n(The text of this lesson: lessons/" << lesson.folder << "/README.md)\n";
  });
  cmd->add_option("N", args.number, "The lesson's number")->required();
  cmd->add_flag("--step", args.step, "Pause after each step until Enter is pressed");
  add_no_color_flag(cmd, args.no_colour);
}

}  // namespace flashlab::app
