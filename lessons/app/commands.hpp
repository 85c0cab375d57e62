// Each subcommand of `flashlab` lives in its own cmd_<name>.cpp and registers itself here.
#pragma once

#include <CLI/CLI.hpp>

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

}  // namespace flashlab::app
