// The host API's one call: validate, resolve the defaults, hand the problem to a kernel.
#include "flashlab/gpu/forward.hpp"

#include "../kernels/launch.hpp"
#include "device_pointers.hpp"
#include "flashlab/cpu/philox_rule.hpp"
#include "flashlab/gpu/kernel_info.hpp"
#include "flashlab/gpu/tile_schedule.hpp"

#include <cuda_runtime_api.h>

#include <cmath>
#include <string>

namespace flashlab::gpu {
namespace {

Strides strides_of(const int64_t* s) { return {s[0], s[1], s[2]}; }

}  // namespace

DropoutRule make_dropout_rule(double p, uint64_t seed, uint32_t offset) {
  DropoutRule rule;
  rule.enabled = p > 0;
  rule.threshold = cpu::dropout_threshold(p);
  rule.keep_scale = float(cpu::dropout_keep_scale(p));
  rule.key0 = uint32_t(seed);
  rule.key1 = uint32_t(seed >> 32);
  rule.offset = offset;
  return rule;
}

namespace {

Problem make_problem(const flashlab_forward_params& p) {
  Problem problem;
  problem.q = p.q;
  problem.k = p.k;
  problem.v = p.v;
  problem.o = p.o;
  problem.lse = p.lse;
  problem.q_stride = strides_of(p.q_stride);
  problem.k_stride = strides_of(p.k_stride);
  problem.v_stride = strides_of(p.v_stride);
  problem.o_stride = strides_of(p.o_stride);
  problem.batch = int(p.batch);
  problem.heads_q = int(p.heads_q);
  problem.heads_kv = int(p.heads_kv);
  problem.n_q = int(p.n_q);
  problem.n_k = int(p.n_k);
  problem.d = int(p.d);
  problem.group_size = int(p.heads_q / p.heads_kv);
  const bool default_scale = p.scale == 0.0 || std::isnan(p.scale);
  problem.scale = float(default_scale ? 1.0 / std::sqrt(double(p.d)) : p.scale);
  problem.causal = p.causal != FLASHLAB_CAUSAL_NONE;
  problem.causal_offset = p.causal == FLASHLAB_CAUSAL_BOTTOM_RIGHT ? int(p.n_k - p.n_q) : 0;
  problem.dtype = flashlab_dtype(p.dtype);
  problem.dropout = make_dropout_rule(p.dropout_p, p.dropout_seed, p.dropout_offset);
  return problem;
}

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw Error(FLASHLAB_ERROR_CUDA, std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                                         cudaGetErrorString(err) + ")");
}

bool is_flag(int32_t x) { return x == 0 || x == 1; }

void check_fa3_options(const flashlab_forward_params& params, const flashlab_fa3_options& o) {
  if (params.kernel != FLASHLAB_KERNEL_FA3)
    throw Error(FLASHLAB_ERROR_BAD_ARGUMENT,
                "fa3 options were given for kernel = " + std::to_string(params.kernel) +
                    ": they are for FLASHLAB_KERNEL_FA3 (" + std::to_string(FLASHLAB_KERNEL_FA3) +
                    ") only; call flashlab_forward for the other kernels");
  if (!is_flag(o.warp_specialized) || !is_flag(o.intra_overlap) ||
      !is_flag(o.conditional_rescale) || !is_flag(o.software_exp2) || !is_flag(o.overlap_items))
    throw Error(FLASHLAB_ERROR_BAD_ARGUMENT,
                "fa3 options warp_specialized = " + std::to_string(o.warp_specialized) +
                    ", intra_overlap = " + std::to_string(o.intra_overlap) +
                    ", conditional_rescale = " + std::to_string(o.conditional_rescale) +
                    ", software_exp2 = " + std::to_string(o.software_exp2) +
                    ", overlap_items = " + std::to_string(o.overlap_items) +
                    ": each must be 0 (off) or 1 (on)");
  if (!is_flag(o.ping_pong) && o.ping_pong != FLASHLAB_FA3_AUTO)
    throw Error(FLASHLAB_ERROR_BAD_ARGUMENT,
                "fa3 option ping_pong = " + std::to_string(o.ping_pong) +
                    ": it must be 0 (off), 1 (on) or FLASHLAB_FA3_AUTO (" +
                    std::to_string(FLASHLAB_FA3_AUTO) + ": the default for the head dimension)");
  if (!fa3::is_kv_l2_share(o.kv_l2_share))
    throw Error(FLASHLAB_ERROR_BAD_ARGUMENT,
                "fa3 option kv_l2_share = " + std::to_string(o.kv_l2_share) +
                    ": it must be a share of the L2 in percent, 1 to " +
                    std::to_string(fa3::kMaxKvL2Share) + ", or FLASHLAB_FA3_AUTO (" +
                    std::to_string(FLASHLAB_FA3_AUTO) +
                    ": the kernel's own, fa3::auto_kv_l2_share)");
  if (!fa3::is_grid(o.grid))
    throw Error(FLASHLAB_ERROR_BAD_ARGUMENT,
                "fa3 option grid = " + std::to_string(o.grid) + " is unknown: it must be " +
                    std::to_string(FLASHLAB_FA3_GRID_PER_TILE) + " (one block per tile), " +
                    std::to_string(FLASHLAB_FA3_GRID_PERSISTENT) + " (persistent), " +
                    std::to_string(FLASHLAB_FA3_GRID_AUTO) +
                    " (the work queue under the causal mask and at d = 64, else persistent up to " +
                    std::to_string(fa3::kAutoPersistentMaxTiles) + " query tiles a head) or " +
                    std::to_string(FLASHLAB_FA3_GRID_QUEUE) + " (persistent, from a work queue)");
  if (o.grid == FLASHLAB_FA3_GRID_QUEUE && o.warp_specialized == 0)
    throw Error(FLASHLAB_ERROR_UNSUPPORTED,
                "fa3 option grid = " + std::to_string(FLASHLAB_FA3_GRID_QUEUE) +
                    " (a work queue) needs warp_specialized = 1: the producer warp takes the "
                    "tiles from the queue and hands them to the consumers");
  if (o.rescale_counts != nullptr && o.conditional_rescale == 0)
    throw Error(FLASHLAB_ERROR_BAD_ARGUMENT,
                "fa3 option rescale_counts was given with conditional_rescale = 0: the counts "
                "are the conditional rule's; set conditional_rescale = 1 (its rescaled + "
                "skipped counts are the rescales the standard rule performs)");
  if (o.rescale_counts != nullptr) {
    if (reinterpret_cast<uintptr_t>(o.rescale_counts) % alignof(int64_t) != 0)
      throw Error(FLASHLAB_ERROR_MISALIGNED,
                  "fa3 option rescale_counts is not aligned to 8 bytes: give device memory "
                  "for FLASHLAB_RESCALE_COUNTS int64 values (cudaMalloc's pointers are)");
    check_device_pointer("fa3 option rescale_counts", o.rescale_counts);
  }
  if ((o.stages < 1 || o.stages > fa3::kMaxStages) && o.stages != FLASHLAB_FA3_AUTO)
    throw Error(FLASHLAB_ERROR_BAD_ARGUMENT,
                "fa3 option stages = " + std::to_string(o.stages) + ": it must be in [1, " +
                    std::to_string(fa3::kMaxStages) + "] or FLASHLAB_FA3_AUTO (" +
                    std::to_string(FLASHLAB_FA3_AUTO) + ": the default for the head dimension)");
  const int stages = fa3::resolve_options(params.d, o).stages;
  const int most = fa3::max_stages(params.d, flashlab_dtype(params.dtype));
  if (stages > most)
    throw Error(FLASHLAB_ERROR_BAD_ARGUMENT,
                "fa3 option stages = " + std::to_string(stages) + ": at d = " +
                    std::to_string(params.d) + " a block's SRAM holds 1 to " +
                    std::to_string(most) + " stages of K and V");
  const int64_t need = fa3::sram_bytes(params.d, flashlab_dtype(params.dtype), stages);
  int device = 0, have = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&have, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  if (need > have)
    throw Error(FLASHLAB_ERROR_UNSUPPORTED,
                "fa3 with stages = " + std::to_string(stages) +
                    " at d = " + std::to_string(params.d) + " needs " + std::to_string(need) +
                    " bytes of shared memory per block; this device gives " + std::to_string(have) +
                    ": use fewer stages");
}

// params are validated; the device pointers are checked here.
void run(const flashlab_forward_params& params, const flashlab_fa3_options& fa3_options) {
  check_device_pointers(params);
  const Problem problem = make_problem(params);
  const auto stream = static_cast<cudaStream_t>(params.stream);
  switch (params.kernel) {
    case FLASHLAB_KERNEL_NAIVE: launch_naive(problem, stream); break;
    case FLASHLAB_KERNEL_SCALAR: launch_scalar(problem, stream); break;
    case FLASHLAB_KERNEL_FA2: launch_fa2(problem, stream); break;
    case FLASHLAB_KERNEL_FA3: launch_fa3(problem, fa3_options, stream); break;
  }
}

}  // namespace

flashlab_fa3_options default_fa3_options() { return fa3::default_options(); }

void forward(const flashlab_forward_params& params) {
  validate(params);
  run(params, fa3::resolve_options(params.d, default_fa3_options()));
}

void forward_fa3(const flashlab_forward_params& params, const flashlab_fa3_options& options) {
  validate(params);
  check_fa3_options(params, options);
  run(params, fa3::resolve_options(params.d, options));
}

}  // namespace flashlab::gpu
