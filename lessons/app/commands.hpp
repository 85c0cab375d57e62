// Each subcommand of `flashlab` lives in its own cmd_<name>.cpp and registers itself here.
#pragma once

#include "cli.hpp"

#include "flashlab/cpu/options.hpp"
#include "flashlab/cpu/types.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace flashlab::app {

void add_tour_command(CLI::App& app);
void add_lessons_command(CLI::App& app);
void add_lesson_command(CLI::App& app);
void add_trace_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_exercise_command(CLI::App& app);
void add_check_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_book_command(CLI::App& app);
void add_ring_command(CLI::App& app);

// The parsed arguments of one subcommand. They are owned by the subcommand's callback,
// which the parser keeps for as long as it lives, so the options can bind to their fields;
// once parsing succeeds the callback hands them to `run`.
// (Under the command line's fuzz target, parse_only() in cli.hpp, nothing runs.)
// An option given an empty value (`--csv ''`) is refused rather than taken for its default.
// Throws CLI::ValidationError naming the option.
void refuse_empty_values(const CLI::App& cmd);

template <class Args>
Args& arguments_of(CLI::App* cmd, std::function<void(const Args&)> run) {
  auto args = std::make_shared<Args>();
  cmd->callback([cmd, args, run = std::move(run)] {
    refuse_empty_values(*cmd);
    if (!parse_only()) run(*args);
  });
  return *args;
}

// --no-color, the same flag with the same words on every command that prints in colour.
void add_no_color_flag(CLI::App* cmd, bool& no_colour);

// --br and --bc of simulate and sweep: both or neither. Unset, the paper's rule chooses the
// tiles from the SRAM, so --help shows no default.
struct TileOptions {
  cpu::Index br = 0, bc = 0;
  CLI::Option* br_option = nullptr;
  CLI::Option* bc_option = nullptr;

  void add_to(CLI::App* cmd);
  // The tiles given, or none; cpu::InvalidArgument when only one of the two is.
  std::optional<cpu::TileSizes> tiles() const;
};

// The most heads (query heads, and KV heads) the comparisons and simulations take: each head
// of compare's forward is a copy in memory of its own, and the mirrors' times grow with them.
inline constexpr std::int64_t kMaxHeads = 1024;

// A whole number in [min, max] written in decimal ("010" is ten, never octal; no sign on
// an unsigned value, no fraction, nothing after the digits); otherwise a message that names
// the flag, the text and the range. Parsing that refuses, never clamps.
std::int64_t parse_integer(std::string_view flag, std::string_view text, std::int64_t min,
                           std::int64_t max);
std::uint64_t parse_unsigned(std::string_view flag, std::string_view text);
// "--n 64..32: what was wrong" (for parse_list's messages).
std::string flag_message(std::string_view flag, std::string_view value, std::string_view what);

// A list of values for a sweep: "a,b,c", and "a..b" for a, 2a, 4a, ... up to b; items may be
// mixed ("96,128..512"). At most kMaxListValues (a doubling range of 64-bit sizes has at most
// 63), each value once (a value named twice would run its points twice); a range needs
// 1 <= a <= b. Throws cpu::InvalidArgument naming the flag.
inline constexpr std::size_t kMaxListValues = 64;
template <class T>
std::vector<T> parse_list(std::string_view flag, std::string_view list,
                          const std::function<T(std::string_view)>& parse_one);
// A list of sizes (whole numbers from 1 to max) in that form.
std::vector<std::int64_t> parse_size_list(std::string_view flag, std::string_view list,
                                          std::int64_t max = INT64_MAX);

// An integer option that goes through parse_integer (or parse_unsigned for a seed), with
// its default shown in --help.
template <class Int>
CLI::Option* add_integer_option(CLI::App* cmd, const std::string& name, Int& value,
                                const std::string& description, Int min,
                                Int max = std::numeric_limits<Int>::max()) {
  auto* option = cmd->add_option_function<std::string>(
      name,
      [&value, name, min, max](const std::string& text) {
        if constexpr (std::is_unsigned_v<Int>)
          value = Int(parse_unsigned(name, text));
        else
          value = Int(parse_integer(name, text, min, max));
      },
      description);
  return option->default_str(std::to_string(value));
}

template <class T>
std::vector<T> parse_list(std::string_view flag, std::string_view list,
                          const std::function<T(std::string_view)>& parse_one) {
  std::vector<T> out;
  const auto add = [&](T x) {
    if (out.size() == kMaxListValues)
      throw cpu::InvalidArgument(flag_message(
          flag, list,
          fmt::format("more than {0} values; a sweep takes at most {0} per list", kMaxListValues)));
    if (std::find(out.begin(), out.end(), x) != out.end())
      throw cpu::InvalidArgument(
          flag_message(flag, list, fmt::format("{} is named twice: name each value once", x)));
    out.push_back(x);
  };
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view item = list.substr(start, comma - start);
    const std::size_t dots = item.find("..");
    if (dots == std::string_view::npos) {
      add(parse_one(item));
    } else {
      const T from = parse_one(item.substr(0, dots)), to = parse_one(item.substr(dots + 2));
      if (from < 1 || to < from)
        throw cpu::InvalidArgument(flag_message(
            flag, item, "a range a..b doubles from a up to b, so it needs 1 <= a <= b"));
      for (T x = from;; x *= 2) {
        add(x);
        if (x > to / 2) break;  // the next doubling would pass b (or overflow)
      }
    }
    start = comma + 1;
  }
  return out;
}

}  // namespace flashlab::app
