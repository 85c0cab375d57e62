// The host API's one call: validate, resolve the defaults, hand the problem to a kernel.
#include "flashlab/gpu/forward.hpp"

#include "../kernels/launch.hpp"
#include "device_pointers.hpp"
#include "flashlab/cpu/philox_rule.hpp"

#include <cmath>

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

}  // namespace

void forward(const flashlab_forward_params& params) {
  validate(params);
  check_device_pointers(params);
  const Problem problem = make_problem(params);
  const auto stream = static_cast<cudaStream_t>(params.stream);
  switch (params.kernel) {
    case FLASHLAB_KERNEL_NAIVE: launch_naive(problem, stream); break;
    case FLASHLAB_KERNEL_SCALAR: launch_scalar(problem, stream); break;
    case FLASHLAB_KERNEL_FA2: launch_fa2(problem, stream); break;
  }
}

}  // namespace flashlab::gpu
