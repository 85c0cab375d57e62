#include "cli.hpp"

#include "commands.hpp"
#include "output_file.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <exception>
#include <iostream>
#include <new>
#include <vector>

namespace flashlab::app {

namespace {

bool g_parse_only = false;

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

}  // namespace

void set_parse_only(bool parse_only) { g_parse_only = parse_only; }
bool parse_only() { return g_parse_only; }

void add_commands(CLI::App& app) {
  add_tour_command(app);
  add_lessons_command(app);
  add_lesson_command(app);
  add_trace_command(app);
  add_simulate_command(app);
  add_sweep_command(app);
  add_exercise_command(app);
  add_check_command(app);
  add_compare_command(app);
  add_book_command(app);
  add_ring_command(app);
}

std::string unknown_command(const CLI::App& app, int argc, const char* const* argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  const std::string word = argv[1];
  const auto names = command_names(app);
  for (const auto& name : names)
    if (name == word) return "";
  return fmt::format(
      "`{}` is not a flashlab command: the commands are {}; `flashlab --help` "
      "says what each does",
      word, fmt::join(names, ", "));
}

int run_cli(int argc, const char* const* argv) {
  CLI::App app{"flashlab: learn FlashAttention by running it three ways", "flashlab"};
  app.require_subcommand(1);
  add_commands(app);
  if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
    std::cerr << "flashlab: " << unknown << "\n";
    return kUsageError;
  }
  try {
    app.parse(argc, argv);
    flush_standard_streams();
  } catch (const CLI::ParseError& e) {  // --help is one too, with exit code 0
    return app.exit(e) == 0 ? 0 : kUsageError;
  } catch (const std::bad_alloc&) {
    std::cerr << "flashlab: out of memory: the request needs more memory than this machine "
                 "could give; try a smaller N or d\n";
    return kUsageError;
  } catch (const std::exception& e) {  // bad input reaching the library: one clear line
    std::cerr << "flashlab: " << e.what() << "\n";
    return kUsageError;
  }
  return 0;
}

}  // namespace flashlab::app
