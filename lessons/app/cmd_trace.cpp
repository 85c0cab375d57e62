// `flashlab trace`: the FlashAttention-2 forward pass, tile by tile.
//   flashlab trace --example 49-15
//   flashlab trace --n 24 --d 4 --br 4 --bc 4 [--causal] [--seed S] [--json out.jsonl]
//                  [--html out.html] [--query-tile i]
#include "commands.hpp"
#include "html_viewer.hpp"
#include "tile_trace.hpp"
#include "trace_print.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>

namespace flashlab::app {

namespace {

constexpr std::string_view kWorkedExample = "49-15";
constexpr double kExact = 49.0 / 15.0;
constexpr int kAllDigits = 17;  // enough to tell fp64 values apart

struct TraceArgs {
  std::string example;
  TraceSetup setup;
  bool causal = false;
  Index query_tile = -1;
  std::string json_path, html_path;
  bool no_colour = false;
};

void write_jsonl(const TileTrace& trace, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw cpu::InvalidArgument("cannot open `" + path + "` for writing (--json)");
  const auto events = to_json_events(trace);
  for (const auto& event : events) out << event.dump() << '\n';
  std::cerr << fmt::format("flashlab: wrote {} events to {}\n", events.size(), path);
}

void write_html(const TraceArgs& a, const std::string& path) {
  std::vector<TileTrace> traces;
  std::string title;
  std::size_t initial = 0;  // the page opens on the KV tile size asked for
  if (!a.example.empty()) {
    for (Index Bc : {1, 2, 4}) traces.push_back(trace_worked_example(Bc));
    initial = 1;  // Bc = 2: the seed's two tiles of two keys
    title = "The 49/15 example: one query, four keys";
  } else {
    check_viewer_size(a.setup.N, a.setup.d);
    TraceSetup setup = a.setup;
    setup.causal = a.causal ? cpu::Causal::top_left : cpu::Causal::none;
    for (Index Bc : viewer_kv_tile_sizes(a.setup.tiles.Bc, a.setup.N)) {
      if (Bc == a.setup.tiles.Bc) initial = traces.size();
      setup.tiles.Bc = Bc;
      traces.push_back(trace_random(setup));
    }
    title = fmt::format("FlashAttention-2 forward, {} tokens{}", a.setup.N, a.causal ? ", causal" : "");
  }
  std::ofstream out(path);
  if (!out) throw cpu::InvalidArgument("cannot open `" + path + "` for writing (--html)");
  out << viewer_html(traces, title, initial);
  std::cerr << fmt::format("flashlab: wrote the viewer to {} ({} KV tile sizes)\n", path, traces.size());
}

TileTrace build(const TraceArgs& a) {
  if (!a.example.empty()) {
    if (a.example != kWorkedExample)
      throw cpu::InvalidArgument(fmt::format(
          "unknown example `{}`: the one example is `{}` (exponentials 1, 2, 4, 8 over "
          "V = 1, 2, 3, 4); or leave --example out and give --n, --d, --br, --bc",
          a.example, kWorkedExample));
    return trace_worked_example();
  }
  TraceSetup setup = a.setup;
  setup.causal = a.causal ? cpu::Causal::top_left : cpu::Causal::none;
  return trace_random(setup);
}

void run(const TraceArgs& a) {
  const TileTrace trace = build(a);
  if (a.query_tile >= static_cast<Index>(trace.query_tiles.size()))
    throw cpu::InvalidArgument(fmt::format("--query-tile {} does not exist: there are {} query tiles, "
                                           "numbered 0 to {}",
                                           a.query_tile, trace.query_tiles.size(),
                                           trace.query_tiles.size() - 1));
  TracePrintOptions options;
  options.only_query_tile = a.query_tile;
  if (!a.example.empty()) options.digits = kAllDigits;
  print_trace(std::cout, Style::for_stdout(a.no_colour), trace, options);
  if (!a.example.empty())
    std::cout << fmt::format("\n49/15 = {:.17g}; the trace's O differs from it by {:.3g}\n",
                             kExact, trace.query_tiles[0].O(0, 0) - kExact);
  if (!a.json_path.empty()) write_jsonl(trace, a.json_path);
  if (!a.html_path.empty()) write_html(a, a.html_path);
}

}  // namespace

void add_trace_command(CLI::App& app) {
  static TraceArgs args;
  auto* cmd = app.add_subcommand(
      "trace", "Print the forward pass tile by tile: rowmax(S), alpha, m, l, U and bytes moved");
  cmd->add_option("--example", args.example, "A worked example instead of random inputs: 49-15");
  cmd->add_option("--n", args.setup.N, "Sequence length N (queries and keys)")->capture_default_str();
  cmd->add_option("--d", args.setup.d, "Head dimension d")->capture_default_str();
  cmd->add_option("--br", args.setup.tiles.Br, "Query tile size Br")->capture_default_str();
  cmd->add_option("--bc", args.setup.tiles.Bc, "KV tile size Bc")->capture_default_str();
  cmd->add_flag("--causal", args.causal, "Causal mask (query i sees keys j <= i)");
  cmd->add_option("--seed", args.setup.seed, "Seed of the random inputs")->capture_default_str();
  cmd->add_option("--query-tile", args.query_tile, "Print this query tile only");
  cmd->add_option("--json", args.json_path, "Also write the events, one JSON object per line");
  cmd->add_option("--html", args.html_path,
                  "Also write the tile-scan viewer: one self-contained HTML page");
  cmd->add_flag("--no-color", args.no_colour, "Plain text even on a terminal");
  cmd->callback([] { run(args); });
}

}  // namespace flashlab::app
