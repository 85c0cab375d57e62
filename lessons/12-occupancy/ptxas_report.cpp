#include "12-occupancy/ptxas_report.hpp"

#include <cxxabi.h>
#include <fmt/core.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace flashlab::app {

namespace {

std::string demangle(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : mangled;
}

}  // namespace

std::vector<KernelResources> parse_ptxas_report(std::string_view text) {
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers(?:, used (\d+) barriers)?)");
  std::vector<KernelResources> out;
  bool have_frame = false, have_used = false;
  std::string last_entry_line;
  const auto close_entry = [&] {
    if (!out.empty() && !(have_frame && have_used))
      throw std::invalid_argument("the ptxas report gives no " +
                                  std::string(have_frame ? "register count" : "stack frame") +
                                  " for the entry function of the line: " + last_entry_line);
  };
  std::istringstream lines{std::string(text)};
  std::smatch m;
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, m, entry)) {
      close_entry();
      out.push_back({.name = demangle(m[1])});
      have_frame = have_used = false;
      last_entry_line = line;
    } else if (!out.empty() && !have_frame && std::regex_search(line, m, frame)) {
      out.back().stack_bytes = std::stoi(m[1]);
      out.back().spill_store_bytes = std::stoi(m[2]);
      out.back().spill_load_bytes = std::stoi(m[3]);
      have_frame = true;
    } else if (!out.empty() && !have_used && std::regex_search(line, m, used)) {
      out.back().registers = std::stoi(m[1]);
      out.back().barriers = m[2].matched ? std::stoi(m[2]) : 0;
      have_used = true;
    }
  }
  close_entry();
  return out;
}

std::optional<Fa2Instance> fa2_instance(const std::string& name) {
  static const std::regex args(R"(fa2_kernel<(__nv_bfloat16|__half), (\d+), (\d+), (true|false)>)");
  std::smatch m;
  if (!std::regex_search(name, m, args)) return std::nullopt;
  return Fa2Instance{.dtype = m[1] == "__half" ? "fp16" : "bf16",
                     .d = std::stoi(m[2]),
                     .Bc = std::stoi(m[3]),
                     .dropout = m[4] == "true"};
}

ReportFile fa2_ptxas_report() {
  ReportFile r;
#ifdef FLASHLAB_FA2_PTXAS_REPORT
  r.path = FLASHLAB_FA2_PTXAS_REPORT;
  std::ifstream in(r.path);
  if (!in) {
    r.why_missing = fmt::format(
        "this build has nvcc but has not written {} yet: build the target "
        "flashlab_fa2_ptxas_report (or all of gpu/)",
        r.path);
    return r;
  }
  std::ostringstream text;
  text << in.rdbuf();
  r.text = text.str();
#else
  r.why_missing =
      "this build found no nvcc, so the compiler never saw the kernels and there is no report "
      "of their registers (a build on a machine with the CUDA toolkit writes one)";
#endif
  return r;
}

}  // namespace flashlab::app
