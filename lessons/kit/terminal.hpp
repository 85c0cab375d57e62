// How the `flashlab` command line prints: colour and aligned columns when a person is
// watching a terminal, plain tab-separated text when the output goes to a file or a pipe
// (so that scripts can cut columns and golden files never hold escape codes).
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab::app {

struct Style {
  bool colour = false;  // ANSI colours
  bool align = false;   // columns padded to a common width; otherwise separated by tabs

  // The style for standard output: both on when it is a terminal, unless no_colour.
  static Style for_stdout(bool no_colour);
  static Style plain() { return {}; }
};

enum class Tone { heading, emphasis, number, good, bad, dim };

// text wrapped in the escape codes of tone, or text unchanged when colour is off.
std::string paint(const Style& style, Tone tone, std::string_view text);

// A table whose cells are already formatted. Text columns align left, the others right.
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::vector<bool> left_aligned = {});
  void add(std::vector<std::string> row);
  // Aligned with a ruled header, indented by indent spaces, when style.align; otherwise one
  // line per row, cells joined by tabs.
  void print(std::ostream& out, const Style& style, int indent = 2) const;
  std::size_t rows() const { return rows_.size(); }
  // The cells, for a writer other than print() (the HTML of `flashlab book`).
  const std::vector<std::string>& header() const { return header_; }
  const std::vector<std::vector<std::string>>& cells() const { return rows_; }
  bool left_aligned(std::size_t column) const { return left_[column]; }

 private:
  std::vector<std::string> header_;
  std::vector<bool> left_;
  std::vector<std::vector<std::string>> rows_;
};

// "%.6g"-style numbers that read well in a table: -inf, inf and nan spelled out.
std::string num(double x, int significant = 6);
// A row of numbers, abbreviated to its first and last `keep` entries when longer than 2 keep.
std::string num_row(const std::vector<double>& xs, int significant = 4, std::size_t keep = 3);

}  // namespace flashlab::app
