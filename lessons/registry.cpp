#include "kit/lesson_registry.hpp"

#include <fmt/core.h>

#include <array>

namespace flashlab::app {

void run_lesson_00(LessonContext&);
void run_lesson_01(LessonContext&);
void run_lesson_02(LessonContext&);
void run_lesson_03(LessonContext&);
void run_lesson_04(LessonContext&);
void run_lesson_05(LessonContext&);
void run_lesson_06(LessonContext&);
void run_lesson_07(LessonContext&);
void run_lesson_08(LessonContext&);
void run_lesson_09(LessonContext&);
void run_lesson_10(LessonContext&);
void run_lesson_11(LessonContext&);
void run_lesson_12(LessonContext&);
// The numerical chapters: dropout, FP8, FlashAttention-4's exponential.
void run_lesson_13(LessonContext&);
void run_lesson_14(LessonContext&);
void run_lesson_15(LessonContext&);
void run_lesson_16(LessonContext&);

namespace {

constexpr std::array kLessons{
    LessonInfo{0, "00-attention-cost", "Attention and its cost",
               "the three operators, the N x N intermediates S and P, the HBM traffic they cause",
               run_lesson_00},
    LessonInfo{1, "01-stable-softmax", "Stable softmax",
               "why exp overflows, and how subtracting the row max fixes it for free",
               run_lesson_01},
    LessonInfo{2, "02-online-softmax", "Online softmax and merging states",
               "the state (m, l, U), the 49/15 example step by step, the general merge",
               run_lesson_02},
    LessonInfo{3, "03-tiled-forward", "The tiled forward pass",
               "the 24-token example: the state after every tile, Bc = 4 vs 8, HBM bytes",
               run_lesson_03},
    LessonInfo{4, "04-causal-masking", "Causal masking",
               "skipped tiles, the diagonal, wholly masked rows, rows with no key at all",
               run_lesson_04},
    LessonInfo{5, "05-io-analysis", "The IO analysis",
               "naive vs FA1 vs FA2 bytes over sweeps, the N^2 d^2 / M law, the roofline on an H200",
               run_lesson_05},
    LessonInfo{6, "06-backward", "Backward and recomputation",
               "P rebuilt from L, D = rowsum(dO o O), the tiled backward, memory saved vs FLOPs added",
               run_lesson_06},
    LessonInfo{7, "07-work-partitioning", "FlashAttention-2's work partitioning",
               "split-K vs split-Q across the warps of a block: same O, the state exchanged counted",
               run_lesson_07},
    LessonInfo{8, "08-pipelining", "FlashAttention-3's pipeline",
               "a timeline model of the Hopper kernel's block, each idea off alone, beside the H200",
               run_lesson_08},
    LessonInfo{9, "09-conditional-rescaling", "FlashAttention-4's conditional rescaling",
               "the base-independence invariant, rescales skipped on real inputs, the bug to avoid",
               run_lesson_09},
    LessonInfo{10, "10-decode", "Decode and split-KV",
               "why one query needs splitting, the exact tree merge, bytes per token",
               run_lesson_10},
    LessonInfo{11, "11-fa2-kernel", "Inside the fa2 kernel",
               "03_fa2.cu's SRAM layout and swizzle, bank conflicts, mma fragments, cp.async",
               run_lesson_11},
    LessonInfo{12, "12-occupancy", "Registers, occupancy and the grid",
               "255 registers, 2 blocks per SM, what that costs; blocks over query tiles",
               run_lesson_12},
    LessonInfo{13, "13-dropout", "Dropout without a stored mask",
               "the Philox rule, the bytes a mask would cost, the backward's replay, E[O] kept",
               run_lesson_13},
    LessonInfo{14, "14-fp8", "FlashAttention-3's FP8",
               "the e4m3 grid, one scale per tile, the Hadamard rotation, errors against bf16",
               run_lesson_14},
    LessonInfo{15, "15-fa4-exponential", "FlashAttention-4's exponential and tensor memory",
               "2^x as a polynomial on the FMA units, the share moved off the MUFU, TMEM, 2-CTA",
               run_lesson_15},
    LessonInfo{16, "16-ring-attention", "Attention across GPUs",
               "the ring of K/V slices, states merged across devices, zigzag balance, link overlap",
               run_lesson_16},
};

}  // namespace

std::span<const LessonInfo> all_lessons() { return kLessons; }

const LessonInfo& find_lesson(int number) {
  for (const auto& lesson : kLessons)
    if (lesson.number == number) return lesson;
  throw UnknownLesson(fmt::format(
      "there is no lesson {}: the lessons are numbered {} to {}; `flashlab lessons` lists them",
      number, kLessons.front().number, kLessons.back().number));
}

}  // namespace flashlab::app
