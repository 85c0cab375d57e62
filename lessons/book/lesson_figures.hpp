// Which lesson's page shows which figure, and which links a tile viewer: the one place
// that pairs the book's figures with the lessons.
#pragma once

#include "book/figures.hpp"
#include "book/measured_results.hpp"
#include "traces/tile_trace.hpp"

#include <optional>
#include <vector>

namespace flashlab::app::book {

struct LessonExtras {
  std::vector<Figure> figures;
  std::optional<TraceSetup> viewer;  // the problem a tile viewer page replays for the lesson
};

// Nothing for a lesson without figures (a lesson added later gets its page all the same).
LessonExtras extras_for_lesson(int number, const MeasuredResults& measured);

}  // namespace flashlab::app::book
