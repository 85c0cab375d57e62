#include "kit/terminal.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ostream>

namespace flashlab::app {

Style Style::for_stdout(bool no_colour) {
  const bool tty = isatty(STDOUT_FILENO) != 0;
  return {tty && !no_colour, tty};
}

namespace {

std::string_view code_of(Tone tone) {
  switch (tone) {
    case Tone::heading: return "\033[1;34m";
    case Tone::emphasis: return "\033[1m";
    case Tone::number: return "\033[36m";
    case Tone::good: return "\033[32m";
    case Tone::bad: return "\033[31m";
    case Tone::dim: return "\033[2m";
  }
  return "";
}

constexpr std::string_view kReset = "\033[0m";

// Columns on screen: UTF-8 continuation bytes (10xxxxxx) take no column of their own.
std::size_t display_width(std::string_view s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string pad(std::string_view s, std::size_t width, bool left) {
  const std::string fill(width - std::min(width, display_width(s)), ' ');
  return left ? std::string(s) + fill : fill + std::string(s);
}

}  // namespace

std::string paint(const Style& style, Tone tone, std::string_view text) {
  if (!style.colour) return std::string(text);
  return fmt::format("{}{}{}", code_of(tone), text, kReset);
}

Table::Table(std::vector<std::string> header, std::vector<bool> left_aligned)
    : header_(std::move(header)), left_(std::move(left_aligned)) {
  left_.resize(header_.size(), false);
}

void Table::add(std::vector<std::string> row) {
  row.resize(header_.size());
  rows_.push_back(std::move(row));
}

void Table::print(std::ostream& out, const Style& style, int indent) const {
  if (!style.align) {
    const auto line = [&](const std::vector<std::string>& cells) {
      for (std::size_t c = 0; c < cells.size(); ++c) out << (c ? "\t" : "") << cells[c];
      out << '\n';
    };
    line(header_);
    for (const auto& row : rows_) line(row);
    return;
  }
  std::vector<std::size_t> width(header_.size());
  for (std::size_t c = 0; c < header_.size(); ++c) {
    width[c] = display_width(header_[c]);
    for (const auto& row : rows_) width[c] = std::max(width[c], display_width(row[c]));
  }
  const std::string margin(static_cast<std::size_t>(indent), ' ');
  const auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string text = margin;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      if (c) text += "  ";
      text += pad(cells[c], width[c], left_[c]);
    }
    out << (header ? paint(style, Tone::emphasis, text) : text) << '\n';
  };
  line(header_, true);
  std::size_t total = 0;
  for (std::size_t w : width) total += w + 2;
  out << margin << std::string(total - 2, '-') << '\n';
  for (const auto& row : rows_) line(row, false);
}

std::string num(double x, int significant) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return fmt::format("{:.{}g}", x, significant);
}

std::string num_row(const std::vector<double>& xs, int significant, std::size_t keep) {
  std::string text;
  const bool abbreviate = xs.size() > 2 * keep;
  for (std::size_t k = 0; k < xs.size(); ++k) {
    if (abbreviate && k == keep) {
      text += " ...";
      k = xs.size() - keep;
    }
    if (!text.empty()) text += ' ';
    text += num(xs[k], significant);
  }
  return text;
}

}  // namespace flashlab::app
