// Lesson 14: FlashAttention-3's FP8, emulated on the CPU. The e4m3 grid and its rounding,
// one scale per tile (block quantisation), the random Hadamard rotation that spreads outlier
// channels (incoherent processing), and the attention output's error against fp64 and
// against bf16, on inputs with and without outliers.
#include "kit/lesson_context.hpp"

#include "flashlab/cpu/fp8.hpp"
#include "flashlab/cpu/fp8_attention.hpp"
#include "flashlab/cpu/naive.hpp"

#include <cmath>
#include <random>

namespace flashlab::app {

namespace {

using cpu::Index;

constexpr Index kN = 1024, kD = 128;
constexpr cpu::TileSizes kTiles{128, 128};  // the scale blocks: FlashAttention-3's FP8 tiles
constexpr Index kOutlierChannels = 4;
constexpr float kOutlierGain = 10;       // outlier channels of Q and K, in standard deviations
constexpr float kQuietTileGain = 1e-4f;  // the first tile of tokens of Q, K, V is small
constexpr std::uint64_t kSeed = 14, kHadamardSeed = 3;
constexpr std::size_t kChannelSet = 1;  // input_sets()[1]: the outlier channels

std::string code_hex(std::uint8_t code) { return fmt::format("0x{:02X}", code); }

void the_grid(LessonContext& ctx) {
  ctx.step("The e4m3 grid");
  ctx.say(
      "FlashAttention-3 runs both products of attention on Hopper's FP8 tensor cores, twice\n"
      "the bf16 rate. Its operands are e4m3: a sign, 4 exponent bits (bias 7) and 3 mantissa\n"
      "bits. Each power-of-two interval holds 8 values, so neighbours are 1/8 of the\n"
      "interval's start apart and rounding to nearest errs by up to 2^-4 = 6.25% of the\n"
      "value (bf16 keeps 7 bits: 0.4%). The top exponent's last code is NaN and there is\n"
      "no infinity, which buys one more binade of range.\n\n");
  int finite = 0;
  for (int code = 0; code < 256; ++code)
    finite += !std::isnan(cpu::decode_e4m3(static_cast<std::uint8_t>(code)));
  Table t({"landmark", "code", "value"}, {true});
  for (const auto& [name, code] : {std::pair<std::string, std::uint8_t>{"largest", 0x7E},
                                   {"one", 0x38},
                                   {"smallest normal", 0x08},
                                   {"largest subnormal", 0x07},
                                   {"smallest subnormal", 0x01}})
    t.add({name, code_hex(code), num(cpu::decode_e4m3(code), 6)});
  ctx.table(t);
  ctx.print(
      "\n{} of the 256 codes are finite numbers (two are NaN).\n"
      "Rounding to the grid, nearest with ties to the even code, saturating at 448:\n\n",
      finite);
  Table r({"x", "code", "e4m3 value", "relative error"});
  for (const float x : {1.0625f, 1.1875f, 3.3f, 300.0f, 440.0f, 1000.0f, 0.02f, 0.0013f, 0.0009f}) {
    const float q = cpu::round_to_e4m3(x);
    r.add({num(x, 6), code_hex(cpu::encode_e4m3(x)), num(q, 6),
           q == 0 ? "-100%" : fmt::format("{:+.2f}%", 100.0 * (q - x) / x)});
  }
  ctx.table(r);
  ctx.say(
      "1.0625 and 1.1875 are ties: they go to the neighbour whose last mantissa bit is 0.\n"
      "1000 saturates to 448 instead of becoming NaN. Below 2^-6 the subnormals keep the\n"
      "spacing 2^-9, so the relative error grows until 2^-10 and less rounds to 0.\n\n");
}

struct Inputs {
  std::string name;
  cpu::Matrix<float> Q, K, V;
};

std::vector<Inputs> input_sets() {
  std::mt19937_64 gen(kSeed);
  std::normal_distribution<float> normal;
  const auto draw = [&] {
    cpu::Matrix<float> X(kN, kD);
    for (Index i = 0; i < X.size(); ++i) X.data()[i] = normal(gen);
    return X;
  };
  std::vector<Inputs> sets;
  sets.push_back({"N(0, 1)", draw(), draw(), draw()});
  Inputs channels{fmt::format("{} channels x{:.0f}", kOutlierChannels, kOutlierGain), draw(),
                  draw(), draw()};
  for (Index c = 0; c < kOutlierChannels; ++c) {  // the same channels of Q and K
    channels.Q.col(c * kD / kOutlierChannels) *= kOutlierGain;
    channels.K.col(c * kD / kOutlierChannels) *= kOutlierGain;
  }
  sets.push_back(std::move(channels));
  Inputs quiet{fmt::format("tokens 0-{} x{}", kTiles.Br - 1, num(kQuietTileGain)), draw(), draw(),
               draw()};
  for (auto* X : {&quiet.Q, &quiet.K, &quiet.V}) X->topRows(kTiles.Br) *= kQuietTileGain;
  sets.push_back(std::move(quiet));
  return sets;
}

double rms(const cpu::Matrix<double>& E) { return std::sqrt(E.squaredNorm() / double(E.size())); }

// The largest, over tiles of kTiles.Br rows, of RMS(approx - X) / RMS(X) on that tile.
double worst_tile_error(const cpu::Matrix<float>& X, const cpu::Matrix<float>& approx) {
  double worst = 0;
  for (Index r0 = 0; r0 < X.rows(); r0 += kTiles.Br) {
    const Index rows = std::min(kTiles.Br, X.rows() - r0);
    const cpu::Matrix<double> tile = X.middleRows(r0, rows).cast<double>();
    worst = std::max(worst, rms(approx.middleRows(r0, rows).cast<double>() - tile) / rms(tile));
  }
  return worst;
}

void scales(LessonContext& ctx) {
  ctx.step("One scale per tile, and the rotation");
  ctx.say(
      "e4m3 spans 448 down to 2^-9, so a tensor is stored as X ~ s * X8 with a scale s that\n"
      "maps the largest magnitude to 448. With one s for the whole tensor, the largest\n"
      "token sets the grid for all the others, and a tile of small values falls among the\n"
      "subnormals. FlashAttention-3 keeps one s per tile that the kernel loads (Br rows of\n"
      "Q, Bc rows of K and V) and multiplies the scales into S and O.\n"
      "For channels that are large in every token no row block helps. There the rotation\n"
      "does: M = diag(s) H / sqrt(d), H the Hadamard matrix of +-1 entries and s random\n"
      "signs, is orthogonal, so (Q M)(K M)^T = Q K^T, and a large channel becomes a\n"
      "1/sqrt(d) share in every channel (\"incoherent processing\").\n\n");
  const auto sets = input_sets();
  const cpu::Matrix<double> M = cpu::random_hadamard(kD, kHadamardSeed);
  Table t({"inputs", "Q", "max |Q| / RMS(Q)", "worst tile's error / its RMS"}, {true, true});
  for (const auto& in : sets) {
    for (const bool rotated : {false, true}) {
      const cpu::Matrix<float> Q = rotated ? (in.Q.cast<double>() * M).cast<float>() : in.Q;
      for (const auto scaling : {cpu::Fp8Scaling::per_tensor, cpu::Fp8Scaling::per_block}) {
        const auto q =
            cpu::quantise_e4m3(Q, scaling == cpu::Fp8Scaling::per_block ? kTiles.Br : kN);
        t.add({in.name,
               std::string(rotated ? "Q M" : "Q") +
                   (scaling == cpu::Fp8Scaling::per_block ? ", per tile" : ", per tensor"),
               num(Q.cwiseAbs().maxCoeff() / rms(Q.cast<double>()), 3),
               num(worst_tile_error(Q, q.dequantised()), 3)});
      }
    }
  }
  ctx.print(
      "N = {}, d = {}, tiles of {} rows. The error is the RMS of (dequantised - Q) over a\n"
      "tile of rows, relative to that tile's RMS; the worst tile is shown:\n\n",
      kN, kD, kTiles.Br);
  ctx.table(t);
  ctx.say(
      "The rotation shrinks max/RMS where channels stand out; each value still errs by up\n"
      "to 2^-4 of itself, so the relative error barely moves. What changes is how those\n"
      "errors add up in a score (step 3). The per-tile scale rescues the quiet tile: under\n"
      "one scale for the tensor its values fall among e4m3's subnormals (below 2^-6 of the\n"
      "scale), where fewer bits are left.\n\n");
}

// What step 4 reads off step 3's table, for the outlier channels: per-tensor FP8's RMS error
// over that of per-tile scales with the rotation, and the latter over bf16's.
struct ChannelErrors {
  double per_tensor_over_both = 0;
  double both_over_bf16 = 0;
};

ChannelErrors output_error(LessonContext& ctx) {
  ctx.step("The attention output's error");
  ctx.say(
      "Q, K and V in e4m3 with their scales; S accumulated in fp32; the weights\n"
      "W = exp(S - m) rounded to e4m3 for the second product, as FlashAttention-3 feeds\n"
      "P to the FP8 tensor cores; O accumulated in fp32. The reference is fp64 attention;\n"
      "the yardstick is attention in bf16 (inputs, S, P and O rounded to bf16).\n\n");
  Table t({"inputs", "precision", "RMS error", "max error", "RMS / bf16's"}, {true, true});
  ChannelErrors channels;
  const auto sets = input_sets();
  for (const auto& in : sets) {
    double per_tensor = 0;
    const cpu::Matrix<double> exact =
        cpu::naive_attention<double>(in.Q.cast<double>(), in.K.cast<double>(), in.V.cast<double>())
            .O;
    const cpu::Matrix<double> bf16 =
        cpu::naive_attention<cpu::bf16>(in.Q.cast<cpu::bf16>(), in.K.cast<cpu::bf16>(),
                                        in.V.cast<cpu::bf16>())
            .O.cast<double>();
    const double bf16_rms = rms(bf16 - exact);
    t.add({in.name, "bf16", num(bf16_rms, 3), num((bf16 - exact).cwiseAbs().maxCoeff(), 3), "1.0"});
    for (const bool incoherent : {false, true})
      for (const auto scaling : {cpu::Fp8Scaling::per_tensor, cpu::Fp8Scaling::per_block}) {
        const cpu::Matrix<double> O = cpu::fp8_attention(in.Q, in.K, in.V,
                                                         {.scaling = scaling,
                                                          .tiles = kTiles,
                                                          .incoherent = incoherent,
                                                          .hadamard_seed = kHadamardSeed})
                                          .cast<double>();
        const std::string name =
            std::string("e4m3, ") +
            (scaling == cpu::Fp8Scaling::per_block ? "per tile" : "per tensor") +
            (incoherent ? " + rotation" : "");
        t.add({in.name, name, num(rms(O - exact), 3), num((O - exact).cwiseAbs().maxCoeff(), 3),
               fmt::format("{:.1f}", rms(O - exact) / bf16_rms)});
        if (!incoherent && scaling == cpu::Fp8Scaling::per_tensor) per_tensor = rms(O - exact);
        if (&in == &sets[kChannelSet] && incoherent && scaling == cpu::Fp8Scaling::per_block)
          channels = {per_tensor / rms(O - exact), rms(O - exact) / bf16_rms};
      }
  }
  ctx.print("N = {}, d = {}, one head, not causal, scale tiles of {} x {}:\n\n", kN, kD, kTiles.Br,
            kTiles.Bc);
  ctx.table(t);
  return channels;
}

void reading(LessonContext& ctx, const ChannelErrors& channels) {
  ctx.step("Reading the table");
  ctx.print(
      "On N(0, 1) inputs FP8 costs ten times bf16's error whatever is done: 3 mantissa\n"
      "bits against 7. With outlier channels the rotation is what matters. A score is a\n"
      "sum of d products q_c k_c, and their rounding errors add up like a random walk,\n"
      "each in proportion to its product: the few large products of the outlier channels\n"
      "dominate. Rotated, the same score is a sum of products of even size, and its error\n"
      "falls: here per tiles with the rotation errs {:.1f} times less than per-tensor FP8,\n"
      "{:.1f} times bf16's own error (which suffers from the same large scores).\n"
      "FlashAttention-3 reports 2.6 times lower RMS error than per-tensor FP8 on its own\n"
      "inputs with outliers. The per-tile scale rescued the quiet tile's values in step 2,\n"
      "but the output hardly notices: small keys and values carry little of O.\n"
      "flashlab's kernels run bf16 and fp16 only, so this lesson has no GPU step: the\n"
      "emulation shows the numbers an FP8 kernel would produce.\n\n",
      channels.per_tensor_over_both, channels.both_over_bf16);
}

}  // namespace

void run_lesson_14(LessonContext& ctx) {
  the_grid(ctx);
  scales(ctx);
  reading(ctx, output_error(ctx));
  ctx.finish("lesson 15: FlashAttention-4's exponential on the FMA units, and tensor memory.");
}

}  // namespace flashlab::app
