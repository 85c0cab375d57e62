// Each subcommand of `flashlab` lives in its own cmd_<name>.cpp and registers itself here.
#pragma once

#include "cli.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

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

// The parsed arguments of one subcommand. They are owned by the subcommand's callback,
// which the parser keeps for as long as it lives, so the options can bind to their fields;
// once parsing succeeds the callback hands them to `run`.
// (Under the command line's fuzz target, parse_only() in cli.hpp, nothing runs.)
template <class Args>
Args& arguments_of(CLI::App* cmd, std::function<void(const Args&)> run) {
  auto args = std::make_shared<Args>();
  cmd->callback([args, run = std::move(run)] {
    if (!parse_only()) run(*args);
  });
  return *args;
}

// --no-color, the same flag with the same words on every command that prints in colour.
void add_no_color_flag(CLI::App* cmd, bool& no_colour);

// A whole number in [min, max] written in decimal ("010" is ten, never octal; no sign on
// an unsigned value, no fraction, nothing after the digits); otherwise a message that names
// the flag, the text and the range. Parsing that refuses, never clamps.
std::int64_t parse_integer(std::string_view flag, std::string_view text, std::int64_t min,
                           std::int64_t max);
std::uint64_t parse_unsigned(std::string_view flag, std::string_view text);

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

}  // namespace flashlab::app
