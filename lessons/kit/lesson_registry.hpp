// The lessons, in order: what each teaches, where its text lives, and its program.
// Each lessons/NN-topic/lesson.cpp defines run_lesson_NN; the list in lessons/registry.cpp,
// compiled with the lessons, is the only place that knows them all.
#pragma once

#include "kit/lesson_context.hpp"

#include <span>
#include <stdexcept>
#include <string_view>

namespace flashlab::app {

struct LessonInfo {
  int number = 0;
  std::string_view folder;   // lessons/<folder>/README.md holds the text
  std::string_view title;
  std::string_view teaches;  // one line for `flashlab lessons`
  void (*run)(LessonContext&) = nullptr;
};

std::span<const LessonInfo> all_lessons();

// Thrown for a lesson number that does not exist; what() lists the ones that do.
struct UnknownLesson : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

const LessonInfo& find_lesson(int number);

}  // namespace flashlab::app
