// bench_backward_block_log: the backward's main kernel (v3, gpu/kernels/06_fa3_backward.cu, the
// library's own source) as a GPU runs its grid, block by block: each block's SM, its start and
// end, and when it began each step (a step log: the (query head, query tile) pairs of its GQA
// group), for the grid model's replay (sim::GridSchedule::logged).
//
// Why: with GQA the grid model's DRAM reads depend on how far apart the blocks of a KV head
// walk the same query tiles (flashlab/sim/grid.hpp, "The backward's grids"): in lockstep,
// neighbouring blocks read a tile 2 (h + 1) steps apart in the group's h-th query head; with
// the blocks' paces drawn apart (the drift schedule) the model reads 30 to 50% less at 16 / 4
// and 16 / 2 past N = 10,240 (bench/gpu/NOTES.md, "The backward's blocks logged"). The log
// says which the GPU does: on an H100, in step at Nsight Compute's base clock, scattered at the
// card's own (block_log.py --clock-control none), where 16 / 2 reads a quarter less.
//
// The main kernel alone runs here, on random bf16 Q, K, V, O and dO, L set to ln N + 1 and D
// to 0 (the values do not change the work a step does), with the dQ accumulator zeroed before
// each call as the library's pre-kernel zeroes it (--accumulator kept: zeroed once, before the
// warm-up, and summed into by every call after). B = 1. The CSV has a row per block and call:
// N, d, dtype, heads, kv_heads, call, block (the grid model's: KV head x Tc + blockIdx.x),
// kv_head, tile (its KV tile), sm, start_ns, end_ns, causal; the step log a row per step a
// block began: N, heads, kv_heads, causal, call, block, step, start_ns.
// bench/gpu/block_log.py runs it under Nsight Compute.
//
//   bench_backward_block_log --heads 16 --kv-heads 2 --n 10240 --causal [--calls 2] --csv log.csv
//       [--steps-csv steps.csv]
#define FLASHLAB_BLOCK_LOG
#include "../../gpu/kernels/06_fa3_backward.cu"
#include "../../gpu/kernels/hopper/tma_host.cu"

#include "block_log_run.cuh"

#include <vector>

namespace {

// L = ln N + 1 and D = 0 on every row: finite exponentials, the same work.
__global__ void fill_rows(float* lse, float* d_rows, int64_t rows, float l) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows;
       i += int64_t(gridDim.x) * blockDim.x)
    lse[i] = l, d_rows[i] = 0.0f;
}

}  // namespace

int main(int argc, char** argv) {
  namespace gpu = flashlab::gpu;
  namespace bench = flashlab::bench;
  using bench::check_cuda;
  using bench::device_array;
  constexpr const char* kProgram = "bench_backward_block_log";
  CLI::App app{
      "the backward's main kernel block by block: each block's SM, start and end, and "
      "with --steps-csv when it began each step"};
  bench::LogOptions o;
  bench::add_log_options(app, o, /*gqa=*/true);
  std::string accumulator = "zeroed";
  app.add_option("--accumulator", accumulator,
                 "the dQ accumulator before each call: zeroed (as the library's pre-kernel does) "
                 "or kept")
      ->capture_default_str()
      ->check(CLI::IsMember({"zeroed", "kept"}));
  CLI11_PARSE(app, argc, argv);
  const int kv_heads = o.kv_heads > 0 ? o.kv_heads : o.heads;
  if (o.heads % kv_heads != 0) {
    std::fprintf(stderr, "%s: --kv-heads %d does not divide --heads %d: give a divisor\n", kProgram,
                 kv_heads, o.heads);
    return 1;
  }
  try {
    std::ofstream out, steps_out;
    bench::open_logs(o, out, steps_out);
    const int n = o.n, d = o.d;
    const int64_t q_elems = int64_t(o.heads) * n * d, kv_elems = int64_t(kv_heads) * n * d;
    const int64_t rows = int64_t(o.heads) * n;
    auto* q = device_array<__nv_bfloat16>(q_elems, "Q");
    auto* k = device_array<__nv_bfloat16>(kv_elems, "K");
    auto* v = device_array<__nv_bfloat16>(kv_elems, "V");
    auto* o_fwd = device_array<__nv_bfloat16>(q_elems, "O");
    auto* dout = device_array<__nv_bfloat16>(q_elems, "dO");
    auto* dk = device_array<__nv_bfloat16>(kv_elems, "dK");
    auto* dv = device_array<__nv_bfloat16>(kv_elems, "dV");
    auto* lse = device_array<float>(rows, "L");
    auto* d_rows = device_array<float>(rows, "D");
    auto* dq_accumulator = device_array<float>(q_elems, "the dQ accumulator");
    bench::fill<<<1024, 256>>>(q, q_elems, 1);
    bench::fill<<<1024, 256>>>(k, kv_elems, 2);
    bench::fill<<<1024, 256>>>(v, kv_elems, 3);
    bench::fill<<<1024, 256>>>(o_fwd, q_elems, 4);
    bench::fill<<<1024, 256>>>(dout, q_elems, 5);
    fill_rows<<<1024, 256>>>(lse, d_rows, rows, std::log(float(n)) + 1.0f);
    const auto zero_accumulator = [&] {
      check_cuda(cudaMemset(dq_accumulator, 0, std::size_t(q_elems) * sizeof(float)),
                 "the dQ accumulator");
    };
    zero_accumulator();
    check_cuda(cudaGetLastError(), "fill");

    gpu::BackwardProblem bp;
    gpu::Problem& p = bp.fwd;
    p.q = q, p.k = k, p.v = v, p.o = o_fwd, p.lse = lse;
    const gpu::Strides qs{int64_t(o.heads) * n * d, int64_t(n) * d, d};
    const gpu::Strides kvs{int64_t(kv_heads) * n * d, int64_t(n) * d, d};
    p.q_stride = p.o_stride = qs;
    p.k_stride = p.v_stride = kvs;
    p.batch = 1, p.heads_q = o.heads, p.heads_kv = kv_heads, p.group_size = o.heads / kv_heads;
    p.n_q = p.n_k = n, p.d = d;
    p.scale = 1.0f / std::sqrt(float(d));
    p.dtype = FLASHLAB_BF16;
    p.causal = o.causal;
    bp.dout = dout, bp.dk = dk, bp.dv = dv;
    bp.dout_stride = bp.dq_stride = qs;
    bp.dk_stride = bp.dv_stride = kvs;
    bp.d_rows = d_rows, bp.dq_accum = dq_accumulator;

    constexpr int64_t kBr = gpu::fa3_backward::kBr, kBc = gpu::fa3_backward::kBc;
    const int64_t tr = (n + kBr - 1) / kBr, tc = (n + kBc - 1) / kBc;
    // A block's steps: every (query head, query tile) pair of its group, at most.
    const bench::LogGrid grid{
        tc * kv_heads, o.steps_path.empty() ? 0u : uint32_t(p.group_size * tr), [&](int64_t b) {
          return std::pair{b / tc, b % tc};
        }};
    if (grid.step_capacity > 0) steps_out << "N,heads,kv_heads,causal,call,block,step,start_ns\n";
    out << "N,d,dtype,heads,kv_heads,call,block,kv_head,tile,sm,start_ns,end_ns,causal\n";
    bench::log_calls(
        o.calls, grid, [&] { gpu::launch_fa3_backward(bp, nullptr); }, out, steps_out,
        fmt::format("{},{},bf16,{},{}", n, d, o.heads, kv_heads), fmt::format("{}", int(o.causal)),
        fmt::format("{},{},{},{}", n, o.heads, kv_heads, int(o.causal)),
        accumulator == "zeroed" ? std::function<void()>(zero_accumulator) : [] {});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return 1;
  }
  return 0;
}
