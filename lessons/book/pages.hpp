// The HTML of the book's pages: the index and one page per lesson, each a whole document
// with its style inline and nothing fetched from elsewhere (figures are inline SVG).
#pragma once

#include "book/figures.hpp"
#include "kit/lesson_record.hpp"
#include "kit/lesson_registry.hpp"

#include <span>
#include <string>
#include <vector>

namespace flashlab::app::book {

// The file name of a lesson's page and of its tile viewer, relative to the book's folder.
std::string lesson_page_name(int number);
std::string viewer_page_name(int number);
// A figure's standalone copy, relative to the book's folder.
std::string figure_file_name(const Figure& figure);

std::string index_page(std::span<const LessonInfo> lessons);

struct LessonPage {
  const LessonInfo* lesson = nullptr;
  const LessonInfo* previous = nullptr;  // null for the first
  const LessonInfo* next = nullptr;      // null for the last
  std::string text_html;                 // the lesson's README, rendered
  std::vector<LessonBlock> output;       // what its program printed
  std::vector<Figure> figures;
  bool viewer = false;  // a tile viewer page exists for it
};

std::string lesson_page(const LessonPage& page);

// What a lesson printed, as HTML: steps as headings, tables as tables, text as
// preformatted text (the lessons align their own lines).
std::string output_html(const std::vector<LessonBlock>& blocks);

}  // namespace flashlab::app::book
