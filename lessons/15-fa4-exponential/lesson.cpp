// Lesson 15: FlashAttention-4's other ideas for Blackwell, computed where they can be: why
// the exponential became a bottleneck (matrix against exp rate per SM), 2^x as a polynomial
// on the FMA units and its accuracy in fp32 and bf16, the share of exponentials worth moving
// off the special-function unit, the registers that tensor memory frees, and the shared
// memory reads that the 2-CTA products of the backward save.
#include "kit/lesson_context.hpp"

#include "flashlab/cpu/exp2_poly.hpp"
#include "flashlab/sim/profiles.hpp"

#include <bit>
#include <cmath>

namespace flashlab::app {

namespace {

using cpu::Index;

constexpr double kD = 128;  // the head dimension of every step

// A profile's clock, recovered from its exp rate: exp/s = 16 per clock per SM x SMs x clock.
double clock_hz(const sim::HardwareProfile& hw) {
  return hw.exp_per_s / (sim::kExpPerClockPerSm * hw.sm_count);
}
double matrix_flops_per_clock_per_sm(const sim::HardwareProfile& hw) {
  return hw.matrix_flops_per_s / (hw.sm_count * clock_hz(hw));
}

void the_bottleneck(LessonContext& ctx) {
  ctx.step("Why the exponential became the bottleneck");
  ctx.print(
      "Per score S_ij a forward pass does 4d matrix FLOPs (2d in Q K^T, 2d in P V) and one\n"
      "exponential. Per SM and per clock the special-function unit (MUFU) computes {:.0f}\n"
      "exponentials and the FMA units {:.0f} fp32 multiply-adds (the CUDA Programming\n"
      "Guide's throughput table, the same on Hopper and Blackwell); the tensor cores'\n"
      "rate is the profile's, divided by its SMs and clock. d = {:.0f}:\n\n",
      sim::kExpPerClockPerSm, sim::kFp32FmaPerClockPerSm, kD);
  Table t({"GPU", "matrix FLOPs / clock / SM", "clocks per score: matrix", "clocks per score: exp",
           "exp / matrix"},
          {true});
  for (const char* name : {"h100", "b200"}) {
    const auto& hw = sim::find_profile(name);
    const double matrix = 4 * kD / matrix_flops_per_clock_per_sm(hw),
                 exp = 1 / sim::kExpPerClockPerSm;
    t.add({std::string(hw.name), num(matrix_flops_per_clock_per_sm(hw), 4), num(matrix, 3),
           num(exp, 3), fmt::format("{:.2f}", exp / matrix)});
  }
  ctx.table(t);
  ctx.say(
      "Blackwell doubled the tensor cores' rate per SM and kept the exponential's: at\n"
      "d = 128 the exponentials now take as long as both products. Overlapping softmax\n"
      "with the matmuls (lesson 8) hides it at best exactly, with no room to spare: it has\n"
      "to get cheaper.\n\n");
}

void the_polynomial(LessonContext& ctx) {
  ctx.step("2^x on the FMA units");
  ctx.say(
      "The softmax needs exp(S - m) = 2^((S - m) log2 e) with S - m <= 0. Range reduction\n"
      "(Cody and Waite) writes x = j + f, j = floor(x), f in [0, 1):\n"
      "  2^x = 2^j * 2^f,   2^f ~ p(f) = 1 + c1 f + c2 f^2 + c3 f^3   (Horner: 3 FMAs)\n"
      "and 2^j is free: j is added to the exponent field of p's bits (an integer add of\n"
      "j << 23). The coefficients below are fitted here by least squares of the relative\n"
      "error on [0, 1], with p(0) = 1 so that x = 0, the row max's own weight, is exact.\n\n");
  const auto c3 = cpu::fit_exp2_polynomial(3);
  ctx.print("Degree 3: c1 = {}, c2 = {}, c3 = {}.\n", num(c3[1], 8), num(c3[2], 8), num(c3[3], 8));
  constexpr float x = -2.3f;
  const float j = std::floor(x), f = x - j;
  const float p = std::fma(std::fma(std::fma(c3[3], f, c3[2]), f, c3[1]), f, c3[0]);
  ctx.print(
      "x = {}: j = {}, f = {}, p(f) = {} (bits 0x{:08X}); adding j << 23 gives 0x{:08X} = {}\n"
      "against 2^x = {}.\n\n",
      num(x, 4), num(j), num(f, 8), num(p, 8), std::bit_cast<std::uint32_t>(p),
      std::bit_cast<std::uint32_t>(cpu::exp2_polynomial(x, c3)),
      num(cpu::exp2_polynomial(x, c3), 8), num(std::exp2(double(x)), 8));
}

struct Accuracy {
  double relative = 0;         // max |p(f) - 2^f| / 2^f over [0, 1], in fp64
  std::int64_t ulps = 0;       // max fp32 ulps from std::exp2 rounded to fp32
  double bf16_differs = 0;     // share of x whose bf16 rounding differs from the exact one's
  std::int64_t bf16_ulps = 0;  // max distance after both are rounded to bf16, in bf16 ulps
};

// Over the softmax's range: every x = -126 i / 2^20 and every x = -i / 2^20 in [-1, 0].
Accuracy accuracy(const std::vector<float>& c) {
  constexpr int kSteps = 1 << 20;
  constexpr std::int64_t kFloatUlpsPerBf16Ulp = 1 << 16;  // bf16 keeps float's top 16 bits
  Accuracy a;
  for (int i = 0; i <= kSteps; ++i) {
    const double f = double(i) / kSteps;
    double poly = 0;
    for (auto k = c.rbegin(); k != c.rend(); ++k) poly = poly * f + *k;
    a.relative = std::max(a.relative, std::fabs(poly - std::exp2(f)) / std::exp2(f));
  }
  std::int64_t differ = 0, total = 0;
  for (const double span : {126.0, 1.0})
    for (int i = 0; i <= kSteps; ++i, ++total) {
      const float x = static_cast<float>(-span * i / kSteps);
      const float got = cpu::exp2_polynomial(x, c), want = float(std::exp2(double(x)));
      a.ulps = std::max(a.ulps, cpu::ulp_distance(got, want));
      const float got16 = float(cpu::bf16(got)), want16 = float(cpu::bf16(want));
      differ += got16 != want16;
      a.bf16_ulps = std::max(a.bf16_ulps, cpu::ulp_distance(got16, want16) / kFloatUlpsPerBf16Ulp);
    }
  a.bf16_differs = double(differ) / double(total);
  return a;
}

void how_accurate(LessonContext& ctx) {
  ctx.step("How accurate, in fp32 and after rounding to bf16");
  ctx.say(
      "Against std::exp2 (fp64, rounded to fp32), over x in [-126, 0] in steps of 126/2^20\n"
      "and over [-1, 0] in steps of 2^-20. Then both results are rounded to bf16, as P is\n"
      "before the P V product:\n\n");
  Table t({"degree", "max relative error", "max fp32 ulps", "bf16 results that differ",
           "max bf16 ulps"});
  Accuracy cubic;
  for (int degree = 1; degree <= 5; ++degree) {
    const auto a = accuracy(cpu::fit_exp2_polynomial(degree));
    if (degree == 3) cubic = a;
    t.add({fmt::format("{}", degree), num(a.relative, 3), fmt::format("{}", a.ulps),
           fmt::format("{:.3f}%", 100 * a.bf16_differs), fmt::format("{}", a.bf16_ulps)});
  }
  ctx.table(t);
  ctx.print(
      "In fp32 the degree-3 polynomial is off by up to {} ulps: no replacement for exp2f.\n"
      "But P is rounded to bf16 (7 mantissa bits) before the second product, and there\n"
      "it gives the exact exponential's bf16 value for {:.1f}% of these x and is never more\n"
      "than {} bf16 ulp off: a rounding that fell the other way.\n\n",
      cubic.ulps, 100 * (1 - cubic.bf16_differs), cubic.bf16_ulps);
}

// FMA-unit instructions per score that the softmax issues anyway: x * scale - m * scale (one
// FFMA) and l += W (one FADD).
constexpr double kSoftmaxFmaOpsPerScore = 2;
// FMA-unit instructions of one emulated exponential beyond Horner's: floor(x) and f = x - j.
constexpr double kRangeReductionOps = 2;

void the_share(LessonContext& ctx) {
  ctx.step("How many exponentials to move off the MUFU");
  const double R = sim::kFp32FmaPerClockPerSm / sim::kExpPerClockPerSm;
  ctx.print(
      "A share s of the exponentials on the FMA units, the rest on the MUFU. Per score:\n"
      "  MUFU: (1 - s) / {0:.0f} clocks;  FMA units: (b + s c) / {1:.0f} clocks,\n"
      "b = {2:.0f} FMA-unit operations the softmax does anyway, c = degree + {3:.0f} per\n"
      "emulated exponential (Horner's FMAs, the floor, the subtraction; the integer add\n"
      "runs on the integer units). The two pipes run side by side, so the softmax takes\n"
      "the longer of the two; they balance at s = (R - b) / (R + c), R = {1:.0f}/{0:.0f} = "
      "{4:.0f}.\n\n",
      sim::kExpPerClockPerSm, sim::kFp32FmaPerClockPerSm, kSoftmaxFmaOpsPerScore,
      kRangeReductionOps, R);
  const auto& b200 = sim::find_profile("b200");
  const double matrix = 4 * kD / matrix_flops_per_clock_per_sm(b200);
  Table t({"degree", "c", "share s", "clocks per score", "speed-up of exp", "vs matrix on b200"});
  t.add({"(all on MUFU)", "-", "0%", num(1 / sim::kExpPerClockPerSm, 3), "1.00x",
         fmt::format("{:.2f}", 1 / sim::kExpPerClockPerSm / matrix)});
  for (int degree = 2; degree <= 5; ++degree) {
    const double c = degree + kRangeReductionOps;
    const double s = (R - kSoftmaxFmaOpsPerScore) / (R + c);
    const double clocks = (1 - s) / sim::kExpPerClockPerSm;
    t.add({fmt::format("{}", degree), num(c), fmt::format("{:.0f}%", 100 * s), num(clocks, 3),
           fmt::format("{:.2f}x", 1 / sim::kExpPerClockPerSm / clocks),
           fmt::format("{:.2f}", clocks / matrix)});
  }
  ctx.table(t);
  ctx.say(
      "The model's share is an upper bound: the FMA units also convert P to bf16, rescale\n"
      "and keep other work, and the polynomial's registers compete with the tiles'.\n"
      "FlashAttention-4 emulates a smaller share and tunes it; the point stands: a few\n"
      "exponentials in every row moved to the FMA units bring the softmax back under the\n"
      "matrix time.\n\n");
}

void tensor_memory(LessonContext& ctx) {
  ctx.step("Tensor memory: the accumulators leave the registers");
  ctx.print(
      "On Hopper the tensor cores' accumulators live in registers: a warpgroup (128\n"
      "threads) that owns Br rows of S (Br x Bc) and of U (Br x d), fp32, holds\n"
      "Br Bc / 128 + Br d / 128 registers per thread for them, out of {}.\n\n",
      sim::kMaxRegistersPerThread);
  constexpr double kThreads = 128, kBc = 128;
  Table t({"rows per warpgroup", "d", "S registers", "U registers", "S + U", "U bytes per thread"});
  for (const double Br : {64.0, 128.0})
    for (const double d : {64.0, 128.0, 256.0}) {
      const double s = Br * kBc / kThreads, u = Br * d / kThreads;
      t.add({num(Br), num(d), num(s), num(u), ctx.emph(num(s + u)), num(4 * u)});
    }
  ctx.table(t);
  const double tmem_kib = double(sim::kTensorMemoryLanes) * sim::kTensorMemoryColumns * 4 / 1024;
  ctx.print(
      "\nWhere S + U exceeds {} the tile cannot be held at all; well before that the\n"
      "compiler spills. Blackwell's tensor memory ({} lanes x {} columns of 32 bits = {} KiB\n"
      "per SM) takes the accumulators instead: a 128-row tile of S uses Bc columns and\n"
      "one of U d columns. FlashAttention-4 keeps two query tiles of 128 rows, each with\n"
      "S and U at Bc = d = 128: 2 x (128 + 128) = {} columns, all of it. The registers go\n"
      "to the softmax, and a separate warpgroup rescales U in tensor memory.\n\n",
      sim::kMaxRegistersPerThread, sim::kTensorMemoryLanes, sim::kTensorMemoryColumns, tmem_kib,
      2 * (128 + 128));
}

void two_cta(LessonContext& ctx) {
  ctx.step("The 2-CTA backward: operands read once for two SMs");
  ctx.say(
      "Blackwell lets the two thread blocks (CTAs) of a pair of SMs issue one product\n"
      "together: M = 256 rows, each CTA holding 128 rows of A and half of B's columns in\n"
      "its shared memory. Each SM then reads its A and half of B, not all of B.\n"
      "FlashAttention-4 pairs CTAs this way in its backward pass, where five products per\n"
      "tile pull on shared memory, and regroups the gradient tiles so that fewer dQ partial\n"
      "sums go through global atomic adds. Per SM, one 128 x 128 x K product step with\n"
      "K = 128, bf16:\n\n");
  const auto& b200 = sim::find_profile("b200");
  constexpr double M = 128, N = 128, K = 128, kBf16 = 2;
  const double flops = 2 * M * N * K, mma_clocks = flops / matrix_flops_per_clock_per_sm(b200);
  Table t({"product", "A bytes", "B bytes", "shared memory clocks", "tensor core clocks"}, {true});
  for (const bool pair : {false, true}) {
    const double a = M * K * kBf16, b = (pair ? N / 2 : N) * K * kBf16;
    t.add({pair ? "2-CTA (M = 256 over two SMs)" : "one CTA (M = 128)", num(a), num(b),
           num((a + b) / sim::kSharedMemoryBytesPerClockPerSm, 4), num(mma_clocks, 4)});
  }
  ctx.table(t);
  ctx.print(
      "\nShared memory serves {:.0f} bytes per clock per SM. Alone, the product's operands\n"
      "take as long to read as the tensor cores take to multiply them; paired, a quarter\n"
      "less, which leaves shared memory room for the backward's other reads.\n\n",
      sim::kSharedMemoryBytesPerClockPerSm);
}

void no_gpu(LessonContext& ctx) {
  ctx.step("On a GPU");
  ctx.say(
      "These are Blackwell features (tcgen05, tensor memory, CTA pairs); flashlab's kernels\n"
      "target Hopper, so this lesson runs on the CPU and the profiles' figures only.\n\n");
}

}  // namespace

void run_lesson_15(LessonContext& ctx) {
  the_bottleneck(ctx);
  the_polynomial(ctx);
  how_accurate(ctx);
  the_share(ctx);
  tensor_memory(ctx);
  two_cta(ctx);
  no_gpu(ctx);
  ctx.finish("lesson 16: attention across GPUs, the merge of lesson 2 over a ring.");
}

}  // namespace flashlab::app
