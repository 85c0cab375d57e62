// The backward's host call: validate, resolve the defaults, split the workspace, and enqueue
// the kernels in order on the caller's stream:
//   preprocess (D, zeroed accumulator) -> main (dK, dV; dQ's atomics) -> convert (dQ)
// or, deterministic:
//   preprocess (D) -> main (dK, dV) -> dQ kernel (dQ in a fixed order).
// The main kernel is v3 (06_fa3_backward.cu, wgmma) where fa3_backward::takes the call, v2
// (04_fa2_backward.cu, mma.sync) otherwise: deterministic mode, dropout, a row stride of 0.
#include "flashlab/gpu/backward.hpp"

#include "../kernels/launch_backward.hpp"
#include "device_pointers.hpp"
#include "flashlab/gpu/kernel_info.hpp"

#include <cmath>

namespace flashlab::gpu {
namespace {

Strides strides_of(const int64_t* s) { return {s[0], s[1], s[2]}; }

BackwardProblem make_problem(const flashlab_backward_params& p) {
  BackwardProblem bp;
  Problem& f = bp.fwd;
  f.q = p.q;
  f.k = p.k;
  f.v = p.v;
  f.o = const_cast<void*>(p.o);       // read only: the forward's output is the backward's input
  f.lse = const_cast<float*>(p.lse);  // read only here
  f.q_stride = strides_of(p.q_stride);
  f.k_stride = strides_of(p.k_stride);
  f.v_stride = strides_of(p.v_stride);
  f.o_stride = strides_of(p.o_stride);
  f.batch = int(p.batch);
  f.heads_q = int(p.heads_q);
  f.heads_kv = int(p.heads_kv);
  f.n_q = int(p.n_q);
  f.n_k = int(p.n_k);
  f.d = int(p.d);
  f.group_size = int(p.heads_q / p.heads_kv);
  const bool default_scale = p.scale == 0.0 || std::isnan(p.scale);
  f.scale = float(default_scale ? 1.0 / std::sqrt(double(p.d)) : p.scale);
  f.causal = p.causal != FLASHLAB_CAUSAL_NONE;
  f.causal_offset = p.causal == FLASHLAB_CAUSAL_BOTTOM_RIGHT ? int(p.n_k - p.n_q) : 0;
  f.dtype = flashlab_dtype(p.dtype);
  // Validation checked that the offset fits the Philox counter's 32-bit word.
  f.dropout = make_dropout_rule(p.dropout_p, p.dropout_seed, uint32_t(p.dropout_offset));
  bp.dout = p.dout;
  bp.dq = p.dq;
  bp.dk = p.dk;
  bp.dv = p.dv;
  bp.dout_stride = strides_of(p.dout_stride);
  bp.dq_stride = strides_of(p.dq_stride);
  bp.dk_stride = strides_of(p.dk_stride);
  bp.dv_stride = strides_of(p.dv_stride);
  bp.deterministic = p.deterministic != 0;
  // The workspace's parts (fa2_backward::workspace_bytes): D, then the dQ accumulator.
  auto* base = static_cast<unsigned char*>(p.workspace);
  bp.d_rows = reinterpret_cast<float*>(base + fa2_backward::d_offset_bytes());
  bp.dq_accum = bp.deterministic
                    ? nullptr
                    : reinterpret_cast<float*>(
                          base + fa2_backward::dq_accum_offset_bytes(p.batch, p.heads_q, p.n_q));
  return bp;
}

// fa3_backward::takes, on the call's parameters: TMA cannot describe a row stride of 0.
bool runs_on_v3(const BackwardProblem& bp) {
  const Problem& f = bp.fwd;
  const bool row_stride_zero = (f.n_q > 1 && (f.q_stride.row == 0 || bp.dout_stride.row == 0)) ||
                               (f.n_k > 1 && (f.k_stride.row == 0 || f.v_stride.row == 0));
  return fa3_backward::takes(bp.deterministic, f.dropout.enabled, row_stride_zero);
}

}  // namespace

void backward(const flashlab_backward_params& params) {
  validate_backward(params);
  check_device_pointers(params);
  const BackwardProblem problem = make_problem(params);
  const auto stream = static_cast<cudaStream_t>(params.stream);
  launch_backward_preprocess(problem, stream);
  if (runs_on_v3(problem))
    launch_fa3_backward(problem, stream);
  else
    launch_fa2_backward(problem, stream);
  if (problem.deterministic)
    launch_fa2_backward_dq(problem, stream);
  else
    launch_backward_convert_dq(problem, stream);
}

}  // namespace flashlab::gpu
