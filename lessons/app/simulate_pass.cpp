// `flashlab simulate --pass backward|decode|fa3`: the GPU backward's, decode's and the Hopper
// forward kernel's mirrors.
//   flashlab simulate --pass backward --n 8192 --d 128 --heads 16 --kv-heads 4 --causal
//   flashlab simulate --pass decode --kv-len 32768 --batch 8 --heads 32 --kv-heads 8 --splits 16
//   flashlab simulate --pass decode --lengths 0,1,4096,339 --page-size 64
//   flashlab simulate --pass decode --kv-len 4096 --batch 8 --heads 32 --kv-heads 8 --splits 1..64
//   flashlab simulate --pass fa3 --n 8192 --d 128 --batch 2 --heads 16 --stages 3
#include "simulate_pass.hpp"

#include "commands.hpp"
#include "gpu_bridge/pass_kernels.hpp"

#include "flashlab/sim/kernel_pass.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <array>
#include <limits>

namespace flashlab::app {

namespace {

constexpr std::array<std::string_view, 4> kPassNames = {"forward", "backward", "decode", "fa3"};
// --stages is range-checked against the kernel's own limit by fa3_kernel_facts; this bound
// only keeps the number an integer the option parser can hold.
constexpr cpu::Index kMaxStagesOption = 1024;

// Which passes take an option; the options not named here are taken by every pass.
struct OptionPasses {
  std::string_view option;
  std::array<bool, 4> takes;  // forward, backward, decode, fa3
};
constexpr std::array kOptionPasses = {
    OptionPasses{"--sram", {true, false, false, false}},
    OptionPasses{"--l2", {true, false, false, false}},
    OptionPasses{"--algo", {true, false, false, false}},
    OptionPasses{"--br", {true, false, false, false}},
    OptionPasses{"--bc", {true, false, false, false}},
    OptionPasses{"--trace", {true, false, false, false}},
    OptionPasses{"--max-trace-bytes", {true, false, false, false}},
    OptionPasses{"--full", {true, false, false, false}},
    OptionPasses{"--n", {true, true, false, true}},
    OptionPasses{"--causal", {true, true, false, true}},
    OptionPasses{"--n-q", {false, true, true, true}},
    OptionPasses{"--batch", {false, true, true, true}},
    OptionPasses{"--heads", {false, true, true, true}},
    OptionPasses{"--kv-heads", {false, true, true, true}},
    OptionPasses{"--deterministic", {false, true, false, false}},
    OptionPasses{"--grid-model", {false, true, false, false}},
    OptionPasses{"--splits", {false, false, true, false}},
    OptionPasses{"--page-size", {false, false, true, false}},
    OptionPasses{"--kv-len", {false, false, true, false}},
    OptionPasses{"--lengths", {false, false, true, false}},
    OptionPasses{"--grid", {false, false, true, false}},
    OptionPasses{"--stages", {false, false, false, true}},
};

std::string passes_taking(const OptionPasses& o) {
  std::string out;
  for (std::size_t p = 0; p < kPassNames.size(); ++p)
    if (o.takes[p]) out += (out.empty() ? "--pass " : " or ") + std::string(kPassNames[p]);
  return out;
}

// "0,1,4096": cache lengths >= 0, at most sim::kMaxDecodeBatch of them.
std::vector<cpu::Index> parse_lengths(const std::string& text) {
  std::vector<cpu::Index> out;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    out.push_back(parse_integer("--lengths", std::string_view(text).substr(start, comma - start), 0,
                                sim::kMaxDecodeLength));
    if (out.size() > std::size_t(sim::kMaxDecodeBatch))
      throw cpu::InvalidArgument(
          fmt::format("--lengths gives more than {} sequences; give at most {}",
                      sim::kMaxDecodeBatch, sim::kMaxDecodeBatch));
    start = comma + 1;
  }
  return out;
}

cpu::Index kv_heads_of(const PassArgs& a) {
  const cpu::Index kv = a.kv_heads > 0 ? a.kv_heads : a.heads;
  if (kv > a.heads || a.heads % kv != 0)
    throw cpu::InvalidArgument(fmt::format(
        "--kv-heads {} does not divide --heads {}: each KV head serves the same number of "
        "query heads, so give a divisor of {} (1 for multi-query attention)",
        kv, a.heads, a.heads));
  return kv;
}

DecodeRun decode_run(const PassArgs& a, cpu::Index d, const std::string& dtype,
                     const sim::HardwareProfile& profile, const CLI::App* cmd) {
  if (cmd->count("--lengths") && cmd->count("--kv-len"))
    throw cpu::InvalidArgument(
        "give --kv-len (every sequence of --batch that long) or --lengths (one length per "
        "sequence), not both");
  if (cmd->count("--lengths") && cmd->count("--batch"))
    throw cpu::InvalidArgument("--lengths gives the batch (one length per sequence): drop --batch");
  DecodeRun run;
  run.lengths = a.lengths.empty() ? std::vector<cpu::Index>(std::size_t(a.batch), a.kv_len)
                                  : parse_lengths(a.lengths);
  run.kv_heads = kv_heads_of(a);
  run.group = a.heads / run.kv_heads;
  run.n_q = a.n_q > 0 ? a.n_q : 1;
  run.d = d;
  run.dtype = dtype;
  run.page_size = a.page_size;
  run.queue = a.grid == "queue";
  run.splits = decode_splits(run, profile);  // the kernel's rule, unless --splits says
  return run;
}

// --splits: one count, or a list ("1..64", "1,3,7") for a table over them.
std::vector<cpu::Index> splits_of(const std::string& text) {
  if (text.empty()) return {};
  std::vector<cpu::Index> out = parse_size_list("--splits", text);
  for (const cpu::Index s : out)
    if (s > sim::kMaxDecodeSplits)
      throw cpu::InvalidArgument(
          fmt::format("--splits {} is more than the decode kernel takes: give 1 to {}", s,
                      sim::kMaxDecodeSplits));
  return out;
}

// The decode's mirror at each split count: the grid and bytes that change with it.
void print_splits_table(const DecodeRun& base, const std::vector<cpu::Index>& splits, bool json,
                        const sim::HardwareProfile& profile) {
  auto rows = nlohmann::ordered_json::array();
  std::string text = fmt::format(
      "decode mirror over split counts on {} ({} SMs)\n{:>6} {:>8} {:>9} {:>6} {:>9} "
      "{:>14} {:>12} {:>12}\n",
      profile.name, profile.sm_count, "splits", "blocks", "with keys", "waves", "busy SMs",
      "partial state", "HBM total", "bound");
  for (const cpu::Index s : splits) {
    DecodeRun run = base;
    run.splits = s;
    const PassPrediction p = predict(run);
    if (!p.report) throw cpu::InvalidArgument(p.why_not);
    const sim::Launch& split = p.report->launches.front();  // the split kernel or the queue
    const sim::Bytes state = p.report->tensor("partial state").written;
    const double bound = sim::roofline(*p.report, profile).seconds();
    rows.push_back({{"splits", s},
                    {"blocks", split.blocks},
                    {"working_blocks", split.working},
                    {"waves", split.waves(profile.sm_count)},
                    {"busy_sms", split.busy_sms(profile.sm_count)},
                    {"partial_state_bytes_written", state},
                    {"bytes_total", p.report->bytes_total()},
                    {"bound_seconds", bound}});
    text += fmt::format("{:>6} {:>8} {:>9} {:>6} {:>9} {:>14} {:>12} {:>9.1f} us\n", s,
                        split.blocks, split.working, split.waves(profile.sm_count),
                        split.busy_sms(profile.sm_count), sim::format_bytes(double(state)),
                        sim::format_bytes(double(p.report->bytes_total())), bound * 1e6);
  }
  if (json)
    fmt::print("{}\n", rows.dump(2));
  else
    fmt::print("{}", text);
}

}  // namespace

Pass parse_pass(std::string_view name, bool takes_fa3) {
  for (std::size_t p = 0; p < kPassNames.size(); ++p)
    if (kPassNames[p] == name) return Pass(p);
  throw cpu::InvalidArgument(
      fmt::format("unknown pass '{}': --pass takes forward (the default), backward{}", name,
                  takes_fa3 ? ", decode or fa3" : " or decode"));
}

std::string_view to_string(Pass pass) { return kPassNames[std::size_t(pass)]; }

void add_pass_options(CLI::App* cmd, PassArgs& args) {
  const std::string passes = " (--pass backward or decode)";
  add_integer_option<cpu::Index>(cmd, "--n-q", args.n_q,
                                 "query rows: backward's and fa3's N_q (0: N), decode's per "
                                 "sequence (0: 1; at most " +
                                     std::to_string(sim::kMaxDecodeQueries) + ")",
                                 0, sim::kMaxDecodeLength);
  add_integer_option<cpu::Index>(cmd, "--batch", args.batch, "sequences" + passes, 1,
                                 sim::kMaxDecodeBatch);
  add_integer_option<cpu::Index>(cmd, "--heads", args.heads, "query heads" + passes, 1, kMaxHeads);
  add_integer_option<cpu::Index>(cmd, "--kv-heads", args.kv_heads,
                                 "KV heads, a divisor of --heads (0: as many as --heads)" + passes,
                                 0, kMaxHeads);
  cmd->add_flag("--deterministic", args.deterministic,
                "backward: dQ by its own kernel in a fixed order instead of fp32 atomics");
  cmd->add_flag("--grid-model", args.grid_model,
                "backward: each launch's blocks in waves through the profile's L2 as well, the "
                "DRAM bytes the grid model predicts (seconds; minutes at N >= 32768)");
  cmd->add_option("--splits", args.splits,
                  fmt::format("decode: splits of each cache, 1 to {} (default: the kernel's "
                              "rule), or a list for a table: 1..64, 1,3,7",
                              sim::kMaxDecodeSplits));
  add_integer_option<cpu::Index>(cmd, "--page-size", args.page_size,
                                 "decode: tokens per page of a paged cache (0: contiguous)", 0,
                                 sim::kMaxDecodeLength);
  add_integer_option<cpu::Index>(cmd, "--kv-len", args.kv_len,
                                 "decode: the cache length of every sequence of --batch", 0,
                                 sim::kMaxDecodeLength);
  cmd->add_option("--lengths", args.lengths,
                  "decode: one cache length per sequence, e.g. 0,1,4096 (instead of --kv-len)");
  cmd->add_option("--grid", args.grid,
                  "decode: splits (a block per split) or queue (persistent blocks taking pieces "
                  "that shrink along each cache from a queue; --splits is then the pieces)")
      ->check(CLI::IsMember({"splits", "queue"}))
      ->capture_default_str();
  add_integer_option<cpu::Index>(cmd, "--stages", args.stages,
                                 "fa3: K and V buffers of its ring (0: the kernel's default)", 0,
                                 kMaxStagesOption);
}

void check_pass_options(const CLI::App* cmd, Pass pass) {
  for (const OptionPasses& o : kOptionPasses)
    if (cmd->count(std::string(o.option)) > 0 && !o.takes[std::size_t(pass)])
      throw cpu::InvalidArgument(fmt::format("{} is not an option of --pass {}: it is for {}",
                                             o.option, to_string(pass), passes_taking(o)));
}

void simulate_pass(const CLI::App* cmd, Pass pass, const PassArgs& a, cpu::Index n, cpu::Index d,
                   const std::string& dtype, bool causal, bool json,
                   const sim::HardwareProfile& profile) {
  nlohmann::ordered_json inputs;
  PassPrediction p;
  if (pass == Pass::backward) {
    const BackwardRun run{a.batch, a.heads, kv_heads_of(a), n, a.n_q, d,
                          dtype,   causal,  a.deterministic};
    inputs = {{"batch", run.batch},
              {"heads_q", run.heads},
              {"heads_kv", run.key_value_heads()},
              {"N_q", run.queries()},
              {"N_k", run.n},
              {"d", run.d},
              {"dtype", run.dtype},
              {"causal", cpu::to_string(run.alignment())},
              {"deterministic", run.deterministic}};
    p = predict(run);
  } else if (pass == Pass::fa3) {
    const Fa3Facts f = fa3_kernel_facts(d, sim::parse_dtype(dtype), a.stages);
    if (!f.facts) throw cpu::InvalidArgument(f.why_not);
    const cpu::Index n_q = a.n_q > 0 ? a.n_q : n;
    const sim::Fa3Shape shape{.batch = a.batch,
                              .heads_q = a.heads,
                              .heads_kv = kv_heads_of(a),
                              .n_q = n_q,
                              .n_k = n,
                              .d = d,
                              .causal = !causal    ? cpu::Causal::none
                                        : n_q == n ? cpu::Causal::top_left
                                                   : cpu::Causal::bottom_right};
    inputs = {{"batch", shape.batch},
              {"heads_q", shape.heads_q},
              {"heads_kv", shape.heads_kv},
              {"N_q", shape.n_q},
              {"N_k", shape.n_k},
              {"d", shape.d},
              {"dtype", dtype},
              {"causal", cpu::to_string(shape.causal)},
              {"stages", f.facts->stages}};
    p = {"fa3", count_fa3_as_launched(shape, *f.facts), ""};
  } else {
    DecodeRun run = decode_run(a, d, dtype, profile, cmd);
    const std::vector<cpu::Index> splits = splits_of(a.splits);
    if (splits.size() > 1) return print_splits_table(run, splits, json, profile);
    if (splits.size() == 1) run.splits = splits.front();
    inputs = {{"lengths", run.lengths},
              {"heads_kv", run.kv_heads},
              {"group", run.group},
              {"n_q", run.n_q},
              {"d", run.d},
              {"dtype", run.dtype},
              {"splits", run.splits},
              {"grid", a.grid},
              {"page_size", run.page_size}};
    p = predict(run);
  }
  if (!p.report) throw cpu::InvalidArgument(p.why_not);
  // A block whose SRAM the profile's SM cannot hold does not launch there (fa3's 226 KiB on
  // an SM of 164 KiB): there would be nothing to predict.
  if (const sim::Bytes sram = p.report->peak_sram;
      sram + profile.sm.shared_reserved_per_block > profile.sm.shared_bytes)
    throw cpu::InvalidArgument(fmt::format(
        "--pass {}: its blocks take {} of SRAM each, and an SM of the {} profile holds {} in all "
        "({} of it kept for each block): they cannot launch there; choose a profile whose SM "
        "holds them, such as h200",
        to_string(pass), sim::format_bytes(double(sram)), profile.name,
        sim::format_bytes(double(profile.sm.shared_bytes)),
        sim::format_bytes(double(profile.sm.shared_reserved_per_block))));
  std::optional<std::vector<sim::LaunchDram>> grid;
  if (a.grid_model) grid = sim::predicted_dram(*p.report, profile);
  const std::vector<sim::LaunchDram>* grid_rows = grid ? &*grid : nullptr;
  if (json) {
    nlohmann::ordered_json out = {{"inputs", std::move(inputs)}};
    out.update(sim::to_json(*p.report, profile, grid_rows));
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print("{}", sim::format_pass_table(*p.report, profile, grid_rows));
  }
}

}  // namespace flashlab::app
