#include "commands.hpp"

#include <fmt/core.h>

#include <charconv>

namespace flashlab::app {

void refuse_empty_values(const CLI::App& cmd) {
  for (const CLI::Option* option : cmd.get_options()) {
    if (option->get_type_size_min() == 0 || option->count() == 0) continue;  // a flag, or absent
    const auto& values = option->results();
    if (std::any_of(values.begin(), values.end(), [](const std::string& v) { return v.empty(); }))
      throw CLI::ValidationError(option->get_name(),
                                 "an empty value: give one, or leave the option out for its "
                                 "default");
  }
}

void TileOptions::add_to(CLI::App* cmd) {
  br_option =
      add_integer_option<cpu::Index>(
          cmd, "--br", br, "query rows per tile Br (with --bc; without both, from the SRAM)", 1)
          ->default_str("");
  bc_option = add_integer_option<cpu::Index>(
                  cmd, "--bc", bc, "keys per tile Bc (with --br; without both, from the SRAM)", 1)
                  ->default_str("");
}

std::optional<cpu::TileSizes> TileOptions::tiles() const {
  if (br_option->count() != bc_option->count())
    throw cpu::InvalidArgument(
        "give both --br and --bc, or neither (then the paper's rule "
        "Bc = ceil(M/4d), Br = min(Bc, d) chooses them)");
  if (br_option->count() == 0) return std::nullopt;
  return cpu::TileSizes{br, bc};
}

void add_no_color_flag(CLI::App* cmd, bool& no_colour) {
  cmd->add_flag("--no-color", no_colour, "Plain text even on a terminal");
}

namespace {

template <class T>
bool read_decimal(std::string_view text, T& value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc{} && end == text.data() + text.size() && !text.empty();
}

}  // namespace

std::int64_t parse_integer(std::string_view flag, std::string_view text, std::int64_t min,
                           std::int64_t max) {
  std::int64_t value = 0;
  const bool digits =
      !text.empty() && text.find_first_not_of("-0123456789") == std::string_view::npos;
  if (!digits || !read_decimal(text, value) || value < min || value > max)
    throw CLI::ValidationError(
        std::string(flag),
        fmt::format("`{}` is not a whole number from {} to {}: give one in decimal, such as {}",
                    text, min, max, std::max<std::int64_t>(min, std::min<std::int64_t>(max, 64))));
  return value;
}

std::uint64_t parse_unsigned(std::string_view flag, std::string_view text) {
  std::uint64_t value = 0;
  const bool digits =
      !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
  if (!digits || !read_decimal(text, value))
    throw CLI::ValidationError(
        std::string(flag),
        fmt::format("`{}` is not a whole number from 0 to {}: give one in decimal, such as 42",
                    text, std::numeric_limits<std::uint64_t>::max()));
  return value;
}

std::string flag_message(std::string_view flag, std::string_view value, std::string_view what) {
  return fmt::format("{} {}: {}", flag, value, what);
}

std::vector<std::int64_t> parse_size_list(std::string_view flag, std::string_view list,
                                          std::int64_t max) {
  return parse_list<std::int64_t>(
      flag, list, [flag, max](std::string_view text) { return parse_integer(flag, text, 1, max); });
}

}  // namespace flashlab::app
