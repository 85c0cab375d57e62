// Each subcommand of `flashlab` lives in its own cmd_<name>.cpp and registers itself here.
#pragma once

#include <CLI/CLI.hpp>

namespace flashlab::app {

void add_tour_command(CLI::App& app);

}  // namespace flashlab::app
