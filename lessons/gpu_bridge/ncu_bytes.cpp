#include "gpu_bridge/ncu_bytes.hpp"

#include "kit/process.hpp"

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

// ncu's units are decimal: Kbyte = 1000 bytes.
std::optional<double> scale_of(const std::string& unit) {
  if (unit == "byte") return 1.0;
  if (unit == "Kbyte") return 1e3;
  if (unit == "Mbyte") return 1e6;
  if (unit == "Gbyte") return 1e9;
  if (unit == "Tbyte") return 1e12;
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

std::optional<MeasuredBytes> parse_ncu_csv(const std::string& csv) {
  std::stringstream lines(csv);
  std::vector<std::string> header;
  int name = -1, unit = -1, value = -1, id = -1;
  MeasuredBytes m;
  std::string last_id;
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
    const auto s = scale_of(f[unit]);
    const auto v = number(f[value]);
    if (!s || !v) return std::nullopt;
    const double bytes = *s * *v;
    for (const NcuMetric& metric : kNcuMetrics)
      if (f[name] == metric.name) m.*metric.field += bytes;
    if (id >= 0 && f[id] != last_id) ++m.kernels, last_id = f[id];
  }
  if (header.empty()) return std::nullopt;
  return m;
}

NcuOutcome measure_with_ncu(const std::string& ncu, const std::vector<std::string>& command,
                            const std::vector<std::string>& ncu_options) {
  std::vector<std::string> argv{ncu,    "--csv",     "--clock-control",
                                "none", "--metrics", metric_list()};
  argv.insert(argv.end(), ncu_options.begin(), ncu_options.end());
  argv.insert(argv.end(), command.begin(), command.end());
  const ProcessResult run = run_program(argv);
  if (!run.started) return {std::nullopt, run.message};
  const std::string& out = run.output;
  auto bytes = parse_ncu_csv(out);
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
