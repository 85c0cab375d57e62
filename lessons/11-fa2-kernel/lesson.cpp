// Lesson 11: inside the fa2 kernel (gpu/kernels/03_fa2.cu). Its SRAM as it carves it up (the
// sizes from kernel_info.hpp), the swizzle that places each 16-byte chunk (swizzle.hpp, the
// kernel's own index function) and the bank conflicts it removes (bank_conflicts.*), which
// lane holds which element of an mma.m16n8k16 and how ldmatrix delivers exactly that
// (fragments.*), and cp.async double buffering as a timeline (double_buffer.*).
#include "11-fa2-kernel/bank_conflicts.hpp"
#include "11-fa2-kernel/double_buffer.hpp"
#include "11-fa2-kernel/fragments.hpp"
#include "gpu_bridge/kernels.hpp"
#include "kit/lesson_context.hpp"

#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/gpu/swizzle.hpp"
#include "flashlab/sim/units.hpp"

namespace flashlab::app {

namespace {

constexpr int kHeadDims[] = {64, 128};
namespace swz = gpu::swizzle;

gpu::KernelConfig fa2_config(int d) {
  return gpu::kernel_config(FLASHLAB_KERNEL_FA2, d, FLASHLAB_BF16);
}

void sram_layout(LessonContext& ctx) {
  ctx.step("The SRAM of one block");
  ctx.say(
      "A block of fa2 owns Br query rows. Its shared memory holds the query tile sQ for the\n"
      "whole sweep and two buffers each of sK and sV: while the warps compute on one, the\n"
      "copies of the next tile fill the other (step 5). bf16, sizes from kernel_info.hpp:\n\n");
  Table t({"d", "Br", "Bc", "sQ (Br, d)", "sK (2, Bc, d)", "sV (2, Bc, d)", "total",
           "kernel_info says"});
  for (int d : kHeadDims) {
    const gpu::KernelConfig c = fa2_config(d);
    const std::int64_t elem = gpu::dtype_bytes(FLASHLAB_BF16);
    const std::int64_t q = c.Br * d * elem, kv = gpu::fa2::kBuffers * c.Bc * d * elem;
    t.add({fmt::format("{}", d), fmt::format("{}", c.Br), fmt::format("{}", c.Bc),
           sim::format_bytes(double(q)), sim::format_bytes(double(kv)),
           sim::format_bytes(double(kv)), sim::format_bytes(double(q + 2 * kv)),
           sim::format_bytes(double(c.sram_bytes))});
  }
  ctx.table(t);
  ctx.say(
      "S, W and U never touch SRAM: they live in registers (lesson 12 counts them). The\n"
      "second K, V buffer costs as much SRAM as the first, and is what lets loads overlap\n"
      "compute.\n\n");
}

void swizzle_map(LessonContext& ctx) {
  ctx.step("The swizzle: where each 16-byte chunk of a row is stored");
  ctx.print(
      "Rows of a tile are d x 2 bytes: 128 bytes at d = 64, 256 at d = 128, so row r and\n"
      "row r + 1 start on the same bank. ldmatrix reads one 16-byte chunk from each of 8\n"
      "rows; if they all read chunk c at chunk c, the 8 reads hit the same 4 banks. The\n"
      "kernel stores chunk c of row r at chunk c ^ (r % {}) (swizzle.hpp, the function the\n"
      "kernel calls). Stored position of the first {} chunks of rows 0 to 9:\n\n",
      swz::kSwizzleRows, swz::kSwizzleRows);
  std::vector<std::string> header{"row \\ chunk"};
  for (int c = 0; c < swz::kSwizzleRows; ++c) header.push_back(fmt::format("{}", c));
  header.push_back("banks of chunk 0");
  Table t(header, {true});
  for (int r = 0; r < swz::kSwizzleRows + 2; ++r) {
    std::vector<std::string> row{fmt::format("{}", r)};
    for (int c = 0; c < swz::kSwizzleRows; ++c)
      row.push_back(fmt::format("{}", swz::stored_chunk(r, c)));
    const int first = bank_of(std::int64_t(swz::stored_chunk(r, 0)) * swz::kChunkBytes);
    row.push_back(fmt::format("{}..{}", first, first + swz::kChunkBytes / kBankBytes - 1));
    t.add(row);
  }
  ctx.table(t);
  ctx.say(
      "Each column is a permutation of 0..7 over any 8 consecutive rows, so the 8 rows of\n"
      "an ldmatrix, all reading logical chunk c, read 8 different stored chunks: all 32\n"
      "banks once. The rows repeat every 8, and chunks 8..15 (d = 128) permute among\n"
      "themselves the same way.\n\n");
}

void bank_conflicts(LessonContext& ctx) {
  ctx.step("Bank conflicts counted, with and without the swizzle");
  ctx.print(
      "32 banks of 4 bytes: a wavefront serves one word from every bank, and a phase of\n"
      "8 lanes reading 16 bytes each needs one wavefront at best. Every SRAM access one\n"
      "warp makes for one KV tile, with the kernel's own lane addresses (bf16):\n\n");
  Table t({"d", "access", "instructions", "phases", "wavefronts swizzled", "without swizzle",
           "worst phase (swizzled / not)"},
          {false, true});
  for (int d : kHeadDims) {
    const gpu::KernelConfig c = fa2_config(d);
    int total_s = 0, total_p = 0;
    for (const AccessCount& a : fa2_sram_accesses(d, c.Br, c.Bc, c.threads)) {
      t.add({fmt::format("{}", d), a.what, fmt::format("{}", a.instructions),
             fmt::format("{}", a.phases), fmt::format("{}", a.wavefronts_swizzled),
             fmt::format("{}", a.wavefronts_plain),
             fmt::format("{} / {}", a.worst_swizzled, a.worst_plain)});
      total_s += a.wavefronts_swizzled;
      total_p += a.wavefronts_plain;
    }
    t.add({fmt::format("{}", d), "all", "", "", fmt::format("{}", total_s),
           fmt::format("{}", total_p), fmt::format("{:.1f}x", double(total_p) / total_s)});
  }
  ctx.table(t);
  ctx.say(
      "Without the swizzle every ldmatrix phase is an 8-way conflict: eight wavefronts\n"
      "where one would do. The cp.async copies write whole rows of consecutive chunks and\n"
      "need no help; the swizzle keeps them conflict-free too. (Padding each row by 16\n"
      "bytes would also spread the rows over the banks, at the price of SRAM: exercise 1.)\n\n");
}

void print_map(LessonContext& ctx, Fragment f, std::string_view title) {
  const auto owners = fragment_owners(f);
  ctx.print("{}; lane/register:\n\n", title);
  std::vector<std::string> header{"row"};
  for (int c = 0; c < fragment_cols(f); ++c) header.push_back(fmt::format("{}", c));
  Table t(header);
  for (int r = 0; r < fragment_rows(f); ++r) {
    std::vector<std::string> row{fmt::format("{}", r)};
    for (int c = 0; c < fragment_cols(f); ++c)
      row.push_back(fmt::format("{}/{}", owners[r][c].lane, owners[r][c].reg));
    t.add(row);
  }
  ctx.table(t);
}

void fragments(LessonContext& ctx) {
  ctx.step("Who holds what: mma.m16n8k16 fragments and ldmatrix");
  ctx.say(
      "One mma.sync.m16n8k16 is a warp-wide instruction: C (16 x 8, fp32) += A (16 x 16)\n"
      "B (16 x 8), each operand spread over the 32 lanes' registers as the PTX ISA lays it\n"
      "out (g = lane / 4, t = lane % 4). In fa2, A is Q (for S) or W (for U), B is K^T or V,\n"
      "C is S or U.\n\n");
  print_map(ctx, Fragment::A, "A (row m, column k), two 16-bit elements per register");
  print_map(ctx, Fragment::B, "B (row k, column n), two 16-bit elements per register");
  print_map(ctx, Fragment::C, "C (row m, column n), one fp32 per register");
  ctx.say(
      "C's layout is A's, half as wide: a row's elements sit in the same 4 lanes (a quad),\n"
      "which is why the kernel's row max and row sum take two shuffles, and why W, computed\n"
      "in C fragments, becomes the A operand of W V without leaving the registers.\n\n"
      "ldmatrix.x4 loads four 8 x 8 matrices: lanes 8i..8i+7 give the addresses of matrix\n"
      "i's rows, and lane l receives row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of each\n"
      "(with .trans, that element of the transpose). With the row addresses fa2 computes,\n"
      "that is exactly what each mma wants, element for element:\n\n");
  Table t({"operand", "k-slice", "elements", "where the mma wants them"}, {true});
  for (Operand op : {Operand::Q, Operand::K, Operand::V})
    for (int kk : {0, 1}) {
      const FeedCheck c = check_ldmatrix_feeds_mma(op, kk);
      t.add({std::string(operand_name(op)), fmt::format("{}", kk), fmt::format("{}", c.elements),
             fmt::format("{}", c.matching)});
    }
  ctx.table(t);
}

void double_buffering(LessonContext& ctx) {
  ctx.step("cp.async double buffering as a timeline");
  const auto& hw = target_profile();
  constexpr int kD = 128, kTiles = 6, kWidth = 72;
  const gpu::KernelConfig c = fa2_config(kD);
  const double tile_bytes = 2.0 * c.Bc * kD * double(gpu::dtype_bytes(FLASHLAB_BF16));
  const double tile_flops = 4.0 * c.Br * c.Bc * kD;  // S = Q K^T and U += W V
  // One block's share of the SM, which holds blocks_per_sm of them.
  const double share = 1.0 / (hw.sm_count * double(c.blocks_per_sm));
  const double load = tile_bytes / (hw.hbm_bytes_per_s * share);
  const double compute = tile_flops / (hw.matrix_flops_per_s * share);
  ctx.print(
      "At d = {} a KV tile is {} of K and V ({} keys) and {} matrix FLOPs for the\n"
      "block's {} rows. At one block's share of the H200 ({} blocks on each of {} SMs),\n"
      "copying it at HBM bandwidth takes {:.2f} us and computing it {:.2f} us (the\n"
      "profile's rates; most copies are served faster, by the L2, lesson 5). {} tiles:\n\n",
      kD, sim::format_bytes(tile_bytes), c.Bc, num(tile_flops, 3), c.Br, c.blocks_per_sm,
      hw.sm_count, load * 1e6, compute * 1e6, kTiles);
  Table t({"buffers", "", "timeline", "total"}, {false, true, true});
  const double one_buffer_end = buffered_timeline(kTiles, 1, load, compute).back().compute_end;
  for (int buffers : {1, 2}) {
    const auto spans = buffered_timeline(kTiles, buffers, load, compute);
    const auto rows = draw_timeline(spans, one_buffer_end, kWidth);
    const std::string total = fmt::format("{:.2f} us", spans.back().compute_end * 1e6);
    t.add({fmt::format("{}", buffers), "copy", rows[0], total});
    t.add({"", "compute", rows[1], ""});
  }
  ctx.table(t);
  const auto two = buffered_timeline(kTiles, 2, load, compute);
  ctx.print("Digits are tile numbers, both runs on one time scale. With one buffer the copies\n"
            "and the tensor cores take turns; with two, the copy of tile j + 1 is issued right\n"
            "after the barrier that starts tile j (buffer (j + 1) % 2 was tile j - 1's, and every\n"
            "warp is past it), so the slower of the two sets the pace: {:.2f} us a tile here\n"
            "instead of {:.2f}. The price is the second buffer's SRAM (step 1), which is part of\n"
            "why only two blocks fit on an SM (lesson 12).\n\n",
            (two[1].compute_start - two[0].compute_start) * 1e6, (load + compute) * 1e6);
}

}  // namespace

void run_lesson_11(LessonContext& ctx) {
  sram_layout(ctx);
  swizzle_map(ctx);
  bank_conflicts(ctx);
  fragments(ctx);
  double_buffering(ctx);
  ctx.finish("lesson 12: the registers this kernel holds, and how many of its blocks an SM runs.");
}

}  // namespace flashlab::app
