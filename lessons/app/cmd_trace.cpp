// `flashlab trace`: the FlashAttention-2 forward pass, tile by tile.
//   flashlab trace --example 49-15
//   flashlab trace --n 24 --d 4 --br 4 --bc 4 [--causal] [--seed S] [--json out.jsonl]
//                  [--html out.html] [--query-tile i]
#include "commands.hpp"
#include "output_file.hpp"
#include "traces/html_viewer.hpp"
#include "traces/tile_trace.hpp"
#include "traces/trace_print.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <optional>

namespace flashlab::app {

namespace {

constexpr std::string_view kWorkedExample = "49-15";
constexpr double kExact = 49.0 / 15.0;
constexpr int kAllDigits = 17;  // enough to tell fp64 values apart
constexpr std::int64_t kDefaultMaxFileBytes = 256ll << 20;

struct TraceArgs {
  std::string example;
  TraceSetup setup;
  bool causal = false;
  Index query_tile = -1;
  std::string json_path, html_path;
  std::int64_t max_file_bytes = kDefaultMaxFileBytes;
  bool no_colour = false;
};

void write_jsonl(const TileTrace& trace, OutputFile& out) {
  const auto events = to_json_events(trace);
  for (const auto& event : events) out.write(event.dump() + '\n');
  out.commit();
  std::cerr << fmt::format("flashlab: wrote {} events to {}\n", events.size(), out.path());
}

void write_html(const TraceArgs& a, OutputFile& out) {
  std::size_t sizes = 0;
  if (!a.example.empty()) {
    std::vector<TileTrace> traces;
    for (Index Bc : {1, 2, 4}) traces.push_back(trace_worked_example(Bc));
    sizes = traces.size();
    // The page opens on Bc = 2: the worked example's two tiles of two keys.
    out.write(viewer_html(traces, "The 49/15 example: one query, four keys", 1));
  } else {
    TraceSetup setup = a.setup;
    setup.causal = a.causal ? cpu::Causal::top_left : cpu::Causal::none;
    sizes = viewer_kv_tile_sizes(a.setup.tiles.Bc, a.setup.N).size();
    out.write(viewer_html(setup, fmt::format("FlashAttention-2 forward, {} tokens{}", a.setup.N,
                                             a.causal ? ", causal" : "")));
  }
  out.commit();
  std::cerr << fmt::format("flashlab: wrote the viewer to {} ({} KV tile sizes)\n", out.path(),
                           sizes);
}

TileTrace build(const TraceArgs& a) {
  if (!a.example.empty()) {
    if (a.example != kWorkedExample)
      throw cpu::InvalidArgument(
          fmt::format("unknown example `{}`: the one example is `{}` (exponentials 1, 2, 4, 8 over "
                      "V = 1, 2, 3, 4); or leave --example out and give --n, --d, --br, --bc",
                      a.example, kWorkedExample));
    return trace_worked_example();
  }
  TraceSetup setup = a.setup;
  setup.causal = a.causal ? cpu::Causal::top_left : cpu::Causal::none;
  return trace_random(setup);
}

// The output files, opened (and their paths checked) before any work is done.
struct Outputs {
  std::optional<OutputFile> json, html;
};

void open_outputs(const TraceArgs& a, Outputs& out) {
  check_distinct_outputs({{"--json", a.json_path}, {"--html", a.html_path}});
  const std::string raise = "--max-file-bytes";
  if (!a.json_path.empty()) out.json.emplace("--json", a.json_path, a.max_file_bytes, raise);
  if (!a.html_path.empty()) out.html.emplace("--html", a.html_path, a.max_file_bytes, raise);
  // The viewer's own limit, before the trace is printed (the worked example always fits).
  if (!a.html_path.empty() && a.example.empty()) check_viewer_size(a.setup.N, a.setup.d);
}

void run(const TraceArgs& a) {
  Outputs outputs;
  open_outputs(a, outputs);
  const TileTrace trace = build(a);
  if (a.query_tile >= static_cast<Index>(trace.query_tiles.size()))
    throw cpu::InvalidArgument(
        fmt::format("--query-tile {} does not exist: there are {} query tiles, "
                    "numbered 0 to {}",
                    a.query_tile, trace.query_tiles.size(), trace.query_tiles.size() - 1));
  TracePrintOptions options;
  options.only_query_tile = a.query_tile;
  if (!a.example.empty()) options.digits = kAllDigits;
  print_trace(std::cout, Style::for_stdout(a.no_colour), trace, options);
  if (!a.example.empty())
    std::cout << fmt::format("\n49/15 = {:.17g}; the trace's O differs from it by {:.3g}\n", kExact,
                             trace.query_tiles[0].O(0, 0) - kExact);
  if (outputs.json) write_jsonl(trace, *outputs.json);
  if (outputs.html) write_html(a, *outputs.html);
}

}  // namespace

void add_trace_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "trace", "Print the forward pass tile by tile: rowmax(S), alpha, m, l, U and bytes moved");
  auto& args = arguments_of<TraceArgs>(cmd, run);
  auto* example = cmd->add_option("--example", args.example,
                                  "A worked example instead of random inputs: 49-15");
  auto* n = add_integer_option<Index>(cmd, "--n", args.setup.N,
                                      "Sequence length N (queries and keys)", 1);
  auto* d = add_integer_option<Index>(cmd, "--d", args.setup.d, "Head dimension d", 1);
  auto* br = add_integer_option<Index>(cmd, "--br", args.setup.tiles.Br, "Query tile size Br", 1);
  auto* bc = add_integer_option<Index>(cmd, "--bc", args.setup.tiles.Bc, "KV tile size Bc", 1);
  auto* causal = cmd->add_flag("--causal", args.causal, "Causal mask (query i sees keys j <= i)");
  auto* seed = add_integer_option<std::uint64_t>(cmd, "--seed", args.setup.seed,
                                                 "Seed of the random inputs", 0);
  add_integer_option<Index>(cmd, "--query-tile", args.query_tile,
                            "Print this query tile only (numbered from 0)", 0)
      ->default_str("all");
  cmd->add_option("--json", args.json_path, "Also write the events, one JSON object per line");
  cmd->add_option("--html", args.html_path,
                  "Also write the tile-scan viewer: one self-contained HTML page");
  add_integer_option<std::int64_t>(cmd, "--max-file-bytes", args.max_file_bytes,
                                   "Refuse to write a --json or --html file larger than this", 1);
  add_no_color_flag(cmd, args.no_colour);
  // The worked example has its own inputs: the options of a random problem would be ignored.
  for (CLI::Option* random_only : {n, d, br, bc, causal, seed}) example->excludes(random_only);
}

}  // namespace flashlab::app
