// The IO figures of lesson 5, each a chart against N on logarithmic axes:
//   1. HBM bytes of naive, fa1 and fa2, each with its tile rule (lesson 5's sweep);
//   2. bytes into the SMs of the kernels as built, one head, d = 128: the simulator's
//      mirror of each kernel (lines) and Nsight Compute's measurement (points);
//   3. forward TFLOP/s at d = 128: the roofline's bound, with the H200's L2 in the model
//      (lines), and the measured speed (points). FLOPs are counted as 4 N^2 d per head.
#include "05-io-analysis/book_data.hpp"
#include "book/figures.hpp"
#include "book/svg_plot.hpp"
#include "gpu_bridge/kernels.hpp"

#include "kit/terminal.hpp"

#include "flashlab/sim/profiles.hpp"
#include "flashlab/sim/units.hpp"

#include <fmt/core.h>

#include <array>

namespace flashlab::app::book {

namespace {

constexpr double kWidth = 840, kHeight = 360;
constexpr double kLeft = 90, kRight = 580, kTop = 20, kBottom = 310;
constexpr cpu::Index kKernelD = 128;
const std::vector<std::string> kKernels{"naive", "fa2"};

std::string n_label(double N) { return fmt::format("{}", cpu::Index(N)); }

// Bytes in decimal units for an axis whose ticks are powers of ten: "10 MB", "1 GB".
std::string si_bytes(double v) {
  constexpr std::array<std::string_view, 5> kUnits{"B", "kB", "MB", "GB", "TB"};
  std::size_t u = 0;
  while (v >= 1000 && u + 1 < kUnits.size()) v /= 1000, ++u;
  return fmt::format("{:g} {}", v, kUnits[u]);
}

Figure lesson_sweep() {
  const IoSweepN s = io_sweep_N();
  std::vector<double> xs(s.Ns.begin(), s.Ns.end()), all;
  for (const auto& ys : s.bytes) all.insert(all.end(), ys.begin(), ys.end());
  Svg svg(kWidth, kHeight, "HBM bytes against N");
  Chart chart(svg, fit_scale(xs, kLeft, kRight, true), fit_scale(all, kBottom, kTop, true));
  chart.axes("N", "HBM bytes", n_label, si_bytes);
  std::vector<Chart::Entry> legend;
  for (std::size_t k = 0; k < s.programs.size(); ++k) {
    chart.line(xs, s.bytes[k], k);
    chart.points(xs, s.bytes[k], k);
    legend.push_back({std::string(sim::to_string(s.programs[k])), k});
  }
  chart.legend(legend);
  return {"io-bytes",
          fmt::format("HBM bytes read and written against N, d = {}, bf16, SRAM = {} (one H200 "
                      "block's), each program with its own tile rule: lesson 5's sweep, counted "
                      "by the simulator.",
                      s.d, sim::format_bytes(double(s.sram))),
          svg.str()};
}

Figure kernel_bytes(const MeasuredResults& measured) {
  std::vector<double> xs, all;
  for (cpu::Index N = 1024; N <= 32768; N *= 2) xs.push_back(double(N));
  std::vector<std::vector<double>> predicted;
  for (const auto& kernel : kKernels) {
    predicted.emplace_back();
    for (double N : xs)
      predicted.back().push_back(
          predict({.kernel = kernel, .n = cpu::Index(N), .d = kKernelD}).sm_read());
    all.insert(all.end(), predicted.back().begin(), predicted.back().end());
  }
  for (const auto& kernel : kKernels)
    for (const auto& p : select(measured.sm_read, kernel, kKernelD, false))
      if (p.heads == 1) all.push_back(p.value);
  Svg svg(kWidth, kHeight, "bytes into the SMs against N, predicted and measured");
  Chart chart(svg, fit_scale(xs, kLeft, kRight, true), fit_scale(all, kBottom, kTop, true));
  chart.axes("N", "bytes read into the SMs", n_label, si_bytes);
  std::vector<Chart::Entry> legend;
  for (std::size_t k = 0; k < kKernels.size(); ++k) {
    chart.line(xs, predicted[k], k);
    legend.push_back({kKernels[k] + ", the simulator's mirror", k});
    std::vector<double> mx, my;
    for (const auto& p : select(measured.sm_read, kKernels[k], kKernelD, false))
      if (p.heads == 1) mx.push_back(double(p.N)), my.push_back(p.value);
    if (mx.empty()) continue;
    chart.points(mx, my, k);
    legend.push_back({kKernels[k] + ", measured on an H200", k, false, true});
  }
  chart.legend(legend);
  const std::string source =
      measured.bytes_file.empty()
          ? fmt::format("no measured points: {} is not in this copy", kMeasuredBytesFile)
          : fmt::format("points: l1tex__m_xbar2l1tex_read_bytes from {}", measured.bytes_file);
  return {"io-kernel-bytes",
          fmt::format("Bytes read into the SMs by the naive and fa2 kernels as built, one head, "
                      "d = {}, bf16: lines from the simulator's mirror of each kernel (as "
                      "`flashlab compare` prints them), {}.",
                      kKernelD, source),
          svg.str()};
}

Figure speed(const MeasuredResults& measured) {
  const sim::HardwareProfile& hw = target_profile();
  std::vector<double> xs, all;
  for (cpu::Index N = 512; N <= 16384; N *= 2) xs.push_back(double(N));
  std::vector<std::vector<double>> bound;
  for (const auto& kernel : kKernels) {
    const sim::Algorithm a = kernel == "fa2" ? sim::Algorithm::fa2 : sim::Algorithm::naive;
    bound.emplace_back();
    for (double N : xs) {
      sim::Problem p{.N = cpu::Index(N),
                     .d = kKernelD,
                     .dtype = sim::DType::bf16,
                     .sram_bytes = hw.sram_per_sm};
      if (a == sim::Algorithm::fa2) p = fa2_kernel_problem(p);
      p.l2_bytes = hw.l2_bytes;
      const double flops = 4.0 * N * N * double(kKernelD);
      bound.back().push_back(flops / sim::roofline(sim::count(a, p), hw).seconds() / 1e12);
    }
    all.insert(all.end(), bound.back().begin(), bound.back().end());
  }
  for (const auto& kernel : kKernels)
    for (const auto& p : select(measured.tflops, kernel, kKernelD, false)) all.push_back(p.value);
  Svg svg(kWidth, kHeight, "TFLOP/s against N, bound and measured");
  Chart chart(svg, fit_scale(xs, kLeft, kRight, true), fit_scale(all, kBottom, kTop, true));
  chart.axes("N", "TFLOP/s", n_label, [](double v) { return num(v, 6); });
  std::vector<Chart::Entry> legend;
  for (std::size_t k = 0; k < kKernels.size(); ++k) {
    chart.line(xs, bound[k], k, true);
    legend.push_back({kKernels[k] + ", the roofline's bound", k, true});
    std::vector<double> mx, my;
    for (const auto& p : select(measured.tflops, kKernels[k], kKernelD, false))
      mx.push_back(double(p.N)), my.push_back(p.value);
    if (mx.empty()) continue;
    chart.line(mx, my, k);
    chart.points(mx, my, k);
    legend.push_back({kKernels[k] + ", measured on an H200", k, false, true});
  }
  chart.legend(legend);
  const std::string source =
      measured.speed_file.empty()
          ? fmt::format("no measured points: {} is not in this copy", kMeasuredSpeedFile)
          : fmt::format("points: CUDA-event medians at B = 16384 / N, H = 16 from {}",
                        measured.speed_file);
  return {"io-speed",
          fmt::format("Forward TFLOP/s, d = {}, bf16, non-causal: dashed, the bound max(FLOPs / "
                      "matrix throughput, exps / exp throughput, DRAM bytes / bandwidth) of the "
                      "simulator's {} profile with its L2; {}.",
                      kKernelD, hw.name, source),
          svg.str()};
}

}  // namespace

std::vector<Figure> io_sweep_figures(const MeasuredResults& measured) {
  return {lesson_sweep(), kernel_bytes(measured), speed(measured)};
}

}  // namespace flashlab::app::book
