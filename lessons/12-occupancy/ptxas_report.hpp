// The compiler's resource report, read rather than restated: ptxas --resource-usage prints,
// for every kernel it compiles, its registers a thread, barriers, stack frame and spills. The
// build writes that report for the fa2 kernels (gpu/CMakeLists.txt, fa2_ptxas_report.txt);
// this parses it and names each fa2 instantiation by its template arguments.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashlab::app {

struct KernelResources {
  std::string name;  // demangled: "void flashlab::gpu::(anonymous namespace)::fa2_kernel<...>"
  int registers = 0;
  int barriers = 0;
  int stack_bytes = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
};

// Every "Compiling entry function" of the report with its "Used N registers" and
// "bytes stack frame" lines, in the report's order. Throws std::invalid_argument naming the
// line for an entry function whose figures are missing or malformed.
std::vector<KernelResources> parse_ptxas_report(std::string_view text);

// fa2_kernel<T, D, Bc, kDropout>'s template arguments, from a demangled name; nullopt for
// any other kernel.
struct Fa2Instance {
  std::string dtype;  // "bf16" or "fp16"
  int d = 0, Bc = 0;
  bool dropout = false;
};
std::optional<Fa2Instance> fa2_instance(const std::string& name);

// This build's report of the fa2 kernels: its text, or why there is none (a build without
// nvcc has none; a build with nvcc writes it when its gpu/ part is built).
struct ReportFile {
  std::string path;  // empty without nvcc
  std::optional<std::string> text;
  std::string why_missing;
};
ReportFile fa2_ptxas_report();

}  // namespace flashlab::app
