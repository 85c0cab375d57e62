// The `flashlab` command line as a whole: every subcommand registered, the arguments parsed,
// and every refusal turned into one line on stderr and the usage exit status. main() is
// run_cli(); the command line's fuzz target (tests/fuzz/) drives the same code.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace flashlab::app {

// The exit status of every refusal: a bad option, bad input, a file that could not be written.
inline constexpr int kUsageError = 2;

// Registers every subcommand on app.
void add_commands(CLI::App& app);

// CLI11 answers an unknown first word with "A subcommand is required"; this names the word
// and the commands there are instead. Empty when the first word is an option or a command.
std::string unknown_command(const CLI::App& app, int argc, const char* const* argv);

// Parses and runs; returns the exit status.
int run_cli(int argc, const char* const* argv);

// With parse_only, run_cli checks the arguments and runs no command (the fuzz target).
void set_parse_only(bool parse_only);
bool parse_only();

}  // namespace flashlab::app
