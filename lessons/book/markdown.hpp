// A lesson's text (Markdown) as HTML, through cmark-gfm (Debian's libcmark-gfm-dev), the
// CommonMark parser with GitHub's table extension: the lessons' texts use pipe tables.
// Raw HTML in the text is not passed through (cmark's safe default).
#pragma once

#include <string>
#include <string_view>

namespace flashlab::app::book {

std::string markdown_to_html(std::string_view markdown);

}  // namespace flashlab::app::book
