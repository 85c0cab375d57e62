#include "gpu_bridge/ncu_bytes.hpp"

#include "kit/process.hpp"

#include "flashlab/sim/warp_store.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <vector>

namespace flashlab::app {

namespace {

// "a,b,c": the metrics as ncu's --metrics takes them.
std::string metric_list() {
  std::string out;
  for (const NcuMetric& m : kNcuMetrics) {
    if (!out.empty()) out += ',';
    out += m.name;
  }
  return out;
}

// The fields of one CSV line whose fields are all quoted: "a","b,c","d".
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted)
      out.push_back(std::move(cur)), cur.clear();
    else
      cur += c;
  }
  out.push_back(cur);
  return out;
}

// The bytes one unit of a metric stands for: ncu's prefixes are decimal (Kbyte = 1000 bytes,
// Ksector = 1000 sectors), a sector is sim::kSectorBytes; nothing for a unit not of the kind.
std::optional<double> scale_of(const std::string& unit, NcuUnit kind) {
  const std::string base = kind == NcuUnit::bytes ? "byte" : "sector";
  const double one = kind == NcuUnit::bytes ? 1.0 : double(sim::kSectorBytes);
  if (unit == base) return one;
  if (unit == "K" + base) return one * 1e3;
  if (unit == "M" + base) return one * 1e6;
  if (unit == "G" + base) return one * 1e9;
  if (unit == "T" + base) return one * 1e12;
  return std::nullopt;
}

std::optional<double> number(std::string text) {
  std::erase(text, ',');  // thousands separators
  try {
    return std::stod(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<double> MeasuredBytes::merge_ratio() const {
  if (stores_issued <= 0) return std::nullopt;
  return sm_written / stores_issued;
}

std::optional<double> MeasuredBytes::coalescing() const {
  if (lrc_from_slices <= 0) return std::nullopt;
  return lrc_to_sms / lrc_from_slices;
}

std::string ncu_levels_text() {
  std::string out;
  for (const NcuMetric& m : kNcuMetrics) out += std::string("  ") + m.level + ": " + m.name + "\n";
  return out;
}

std::optional<std::string> find_ncu() {
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');)
      if (!dir.empty() && std::filesystem::exists(dir + "/ncu")) return dir + "/ncu";
  }
  const std::string cuda = "/usr/local/cuda/bin/ncu";
  if (std::filesystem::exists(cuda)) return cuda;
  return std::nullopt;
}

std::optional<MeasuredBytes> parse_ncu_csv(const std::string& csv, int skip_kernels) {
  std::stringstream lines(csv);
  std::vector<std::string> header;
  int name = -1, unit = -1, value = -1, id = -1;
  MeasuredBytes m;
  std::string last_id;
  int seen = 0;  // kernels met so far, in ncu's order
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '"') continue;  // ncu's own log lines start with ==PROF==
    const auto f = fields(line);
    if (header.empty()) {
      header = f;
      for (int k = 0; k < int(f.size()); ++k) {
        if (f[k] == "Metric Name") name = k;
        if (f[k] == "Metric Unit") unit = k;
        if (f[k] == "Metric Value") value = k;
        if (f[k] == "ID") id = k;
      }
      if (name < 0 || unit < 0 || value < 0) return std::nullopt;
      continue;
    }
    if (int(f.size()) <= std::max({name, unit, value})) continue;
    if (id >= 0 && f[id] != last_id) ++seen, last_id = f[id];
    if (skip_kernels > 0 && seen <= skip_kernels) continue;  // a kernel left out
    m.kernels = std::max(0, seen - skip_kernels);
    for (const NcuMetric& metric : kNcuMetrics) {
      if (f[name] != metric.name) continue;
      const auto s = scale_of(f[unit], metric.unit);
      const auto v = number(f[value]);
      if (!s || !v) return std::nullopt;
      m.*metric.field += *s * *v;
    }
  }
  if (header.empty() || (skip_kernels > 0 && m.kernels == 0)) return std::nullopt;
  return m;
}

namespace {
NcuClocks g_ncu_clocks = NcuClocks::own;
}  // namespace

void set_ncu_clocks(NcuClocks clocks) { g_ncu_clocks = clocks; }
NcuClocks ncu_clocks() { return g_ncu_clocks; }

const char* ncu_clock_control(NcuClocks clocks) {
  return clocks == NcuClocks::base ? "base" : "none";
}

const char* describe(NcuClocks clocks) {
  return clocks == NcuClocks::base ? "at Nsight Compute's base clock" : "at the card's own clocks";
}

std::optional<NcuClocks> parse_ncu_clocks(std::string_view text) {
  if (text == "own") return NcuClocks::own;
  if (text == "base") return NcuClocks::base;
  return std::nullopt;
}

NcuOutcome measure_with_ncu(const std::string& ncu, const std::vector<std::string>& command,
                            int setup_kernels) {
  // Base units: bytes and sectors as counted, not rescaled to Kbyte or Msector. Application
  // replay: the whole command runs again for each pass the metrics need (kNcuReplayMode).
  std::vector<std::string> argv{ncu,
                                "--csv",
                                "--clock-control",
                                ncu_clock_control(g_ncu_clocks),
                                "--print-units",
                                "base",
                                "--replay-mode",
                                kNcuReplayMode,
                                "--metrics",
                                metric_list()};
  argv.insert(argv.end(), command.begin(), command.end());
  const ProcessResult run = run_program(argv);
  if (!run.started) return {std::nullopt, run.message};
  const std::string& out = run.output;
  auto bytes = parse_ncu_csv(out, kNcuFirstKernels + setup_kernels);
  if (!run.succeeded() || !bytes || bytes->kernels == 0) {
    const auto tail = out.size() > 300 ? out.substr(out.size() - 300) : out;
    return {std::nullopt,
            "ncu gave no metrics (it may need permission to read the GPU's "
            "performance counters); its output ended: " +
                tail};
  }
  return {bytes, ""};
}

}  // namespace flashlab::app
