#include "backward_harness.hpp"

#include "host_tensors.hpp"

#include "flashlab/cpu/correctness.hpp"
#include "flashlab/cpu/dropout.hpp"
#include "flashlab/cpu/naive_backward.hpp"
#include "flashlab/gpu/kernel_info.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

namespace flashlab::gpu::test {
namespace {

using cpu::Index;

// The kernel sums in fp32 in other orders than the CPU (over d in D = rowsum(dO o O), over
// keys and query rows in the products), and its P comes from the GPU forward's L through
// ex2.approx. Where the naive low-precision backward's error is exactly 0 (N_k = 1: P = 1
// and dS = 0 exactly, so naive dQ = dK = 0), 3x of it allows nothing, while those fp32
// orders leave about sqrt(terms) roundings: a summation order's slack
// (flashlab/cpu/correctness.hpp) over d max(N_q, N_k) terms, times the largest reference
// gradient. At d = 128, N = 2049 that is about 6e-4 of a gradient of size 1, a tenth of bf16's
// rounding step there.

// Gradients of one case on the host, in their layouts.
template <class In>
struct Gradients {
  std::vector<In> dQ, dK, dV;
};

// Everything on the device for one case: inputs, the forward's O and LSE, the gradients,
// the workspace; and the call.
template <class In>
struct BackwardRun {
  BackwardCase c;
  std::mt19937_64 rng;
  HostTensor<In> Q, K, V, dO;
  Geometry gQ, gK;  // layouts of (Q, O, dO, dQ) and (K, V, dK, dV)
  DeviceBuffer bQ, bK, bV, bO, bdO, bL, bdQ, bdK, bdV;
  std::unique_ptr<DeviceBuffer> workspace;
  flashlab_backward_params params{};

  BackwardRun(const BackwardCase& c_, uint64_t seed)
      : c(c_),
        rng(seed),
        Q(c.layout, c.batch, c.heads_q, c.n_q, c.d, &rng),
        K(c.layout, c.batch, c.heads_kv, c.n_k, c.d, &rng),
        V(c.layout, c.batch, c.heads_kv, c.n_k, c.d, &rng),
        dO(c.layout, c.batch, c.heads_q, c.n_q, c.d, &rng),
        gQ(Q.g),
        gK(K.g),
        bQ(bytes(gQ)),
        bK(bytes(gK)),
        bV(bytes(gK)),
        bO(bytes(gQ)),
        bdO(bytes(gQ)),
        bL(size_t(c.batch) * c.heads_q * c.n_q * sizeof(float)),
        bdQ(bytes(gQ)),
        bdK(bytes(gK)),
        bdV(bytes(gK)) {
    upload(bQ, Q);
    upload(bK, K);
    upload(bV, V);
    upload(bdO, dO);
    run_forward();
    fill_params();
    int64_t need = 0;
    if (flashlab_backward_workspace_bytes(&params, &need) != FLASHLAB_OK)
      throw std::runtime_error(std::string("workspace bytes: ") + flashlab_last_error());
    workspace = std::make_unique<DeviceBuffer>(size_t(need));
    params.workspace = workspace->ptr;
    params.workspace_bytes = need;
  }

  static size_t bytes(const Geometry& g) { return size_t(g.elems) * sizeof(In); }

  static void upload(const DeviceBuffer& dst, const HostTensor<In>& t) {
    check_cuda(
        cudaMemcpy(dst.ptr, t.data.data(), t.data.size() * sizeof(In), cudaMemcpyHostToDevice),
        "upload");
  }

  // O and LSE as flashlab_forward writes them: the backward's inputs, as in training.
  void run_forward() {
    flashlab_forward_params f{};
    f.q = bQ.ptr;
    f.k = bK.ptr;
    f.v = bV.ptr;
    f.o = bO.ptr;
    f.lse = static_cast<float*>(bL.ptr);
    std::memcpy(f.q_stride, gQ.stride, sizeof(f.q_stride));
    std::memcpy(f.o_stride, gQ.stride, sizeof(f.o_stride));
    std::memcpy(f.k_stride, gK.stride, sizeof(f.k_stride));
    std::memcpy(f.v_stride, gK.stride, sizeof(f.v_stride));
    f.batch = c.batch;
    f.heads_q = c.heads_q;
    f.heads_kv = c.heads_kv;
    f.n_q = c.n_q;
    f.n_k = c.n_k;
    f.d = c.d;
    f.dtype = c.dtype;
    f.causal = c.causal;
    f.kernel = FLASHLAB_KERNEL_FA2;
    f.dropout_p = c.dropout_p;
    f.dropout_seed = c.dropout_seed;
    f.dropout_offset = c.dropout_offset;
    check_cuda(cudaMemset(bO.ptr, 0, bytes(gQ)), "clear O's padding");
    if (flashlab_forward(&f) != FLASHLAB_OK)
      throw std::runtime_error(std::string("flashlab_forward: ") + flashlab_last_error());
    check_cuda(cudaDeviceSynchronize(), "forward");
  }

  void fill_params() {
    params.q = bQ.ptr;
    params.k = bK.ptr;
    params.v = bV.ptr;
    params.o = bO.ptr;
    params.dout = bdO.ptr;
    params.lse = static_cast<const float*>(bL.ptr);
    params.dq = bdQ.ptr;
    params.dk = bdK.ptr;
    params.dv = bdV.ptr;
    for (int64_t* s : {params.q_stride, params.o_stride, params.dout_stride, params.dq_stride})
      std::memcpy(s, gQ.stride, sizeof(params.q_stride));
    for (int64_t* s : {params.k_stride, params.v_stride, params.dk_stride, params.dv_stride})
      std::memcpy(s, gK.stride, sizeof(params.k_stride));
    params.batch = c.batch;
    params.heads_q = c.heads_q;
    params.heads_kv = c.heads_kv;
    params.n_q = c.n_q;
    params.n_k = c.n_k;
    params.d = c.d;
    params.dtype = c.dtype;
    params.causal = c.causal;
    params.deterministic = c.deterministic ? 1 : 0;
    params.dropout_p = c.dropout_p;
    params.dropout_seed = c.dropout_seed;
    params.dropout_offset = c.dropout_offset;
  }

  // Poisons dQ, dK, dV (and the workspace), runs the backward, returns the gradients.
  Gradients<In> launch() {
    for (const DeviceBuffer* b : {&bdQ, &bdK, &bdV})
      check_cuda(cudaMemset(b->ptr, kPoison, b == &bdQ ? bytes(gQ) : bytes(gK)), "poison");
    check_cuda(cudaMemset(workspace->ptr, kPoison, size_t(params.workspace_bytes)),
               "poison the workspace");
    if (flashlab_backward(&params) != FLASHLAB_OK)
      throw std::runtime_error(std::string("flashlab_backward: ") + flashlab_last_error());
    check_cuda(cudaDeviceSynchronize(), "backward");
    Gradients<In> g{std::vector<In>(gQ.elems), std::vector<In>(gK.elems),
                    std::vector<In>(gK.elems)};
    check_cuda(cudaMemcpy(g.dQ.data(), bdQ.ptr, bytes(gQ), cudaMemcpyDeviceToHost), "dQ");
    check_cuda(cudaMemcpy(g.dK.data(), bdK.ptr, bytes(gK), cudaMemcpyDeviceToHost), "dK");
    check_cuda(cudaMemcpy(g.dV.data(), bdV.ptr, bytes(gK), cudaMemcpyDeviceToHost), "dV");
    return g;
  }
};

// Adds one (N, d) head of a kernel's gradient to `out`: its error against the fp64 matrix
// ref and the low-precision naive's, NaN left in it, and padding written.
template <class In>
void compare(const std::vector<In>& X, const Geometry& g, int b, int h, const Matrix<double>& ref,
             const Matrix<double>& naive, Layout layout, GradientOutcome* out) {
  for (Index n = 0; n < ref.rows(); ++n) {
    for (Index k = 0; k < ref.cols(); ++k) {
      const double x = double(X[g.at(b, h, int(n), int(k))]);
      if (std::isnan(x))
        ++out->unwritten;
      else
        out->err = std::max(out->err, std::abs(x - ref(n, k)));
      out->err_naive = std::max(out->err_naive, std::abs(naive(n, k) - ref(n, k)));
    }
    for (int k = int(ref.cols()); layout == Layout::bhsd_padded && k < ref.cols() + kRowPad; ++k)
      if (!std::isnan(double(X[g.at(b, h, int(n), k)]))) ++out->padding_written;
  }
}

template <class In>
BackwardOutcome run_typed(const BackwardCase& c, uint64_t seed) {
  BackwardRun<In> run(c, seed);
  const Gradients<In> got = run.launch();
  cpu::AttentionOptions options;
  options.causal = causal_of(c.causal);
  BackwardOutcome out;
  double largest = 0;  // the largest reference gradient, for the slack
  const int group = c.heads_q / c.heads_kv;
  for (int b = 0; b < c.batch; ++b)
    for (int hk = 0; hk < c.heads_kv; ++hk) {
      // dK, dV of a KV head: the sum over its group's query heads, in fp64 for both the
      // reference and the naive low-precision gradients (each already rounded to In).
      Matrix<double> dK_ref = Matrix<double>::Zero(c.n_k, c.d), dV_ref = dK_ref;
      Matrix<double> dK_low = dK_ref, dV_low = dK_ref;
      const Matrix<In> K = run.K.head(b, hk, c.n_k), V = run.V.head(b, hk, c.n_k);
      for (int h = hk * group; h < (hk + 1) * group; ++h) {
        const Matrix<In> Q = run.Q.head(b, h, c.n_q), dO = run.dO.head(b, h, c.n_q);
        // The mask of query head h: GQA's query heads of one KV head draw different masks.
        const cpu::Dropout rule{c.dropout_p, c.dropout_seed, c.dropout_offset};
        const cpu::DropoutMask mask(rule, b, h);
        const cpu::DropoutMask* dropout = c.dropout_p > 0 ? &mask : nullptr;
        const auto ref = cpu::naive_backward<double>(
            Q.template cast<double>(), K.template cast<double>(), V.template cast<double>(),
            dO.template cast<double>(), options, dropout);
        const auto low = cpu::naive_backward<In>(Q, K, V, dO, options, dropout);
        compare(got.dQ, run.gQ, b, h, ref.dQ, low.dQ.template cast<double>(), c.layout, &out.dq);
        dK_ref += ref.dK;
        dV_ref += ref.dV;
        dK_low += low.dK.template cast<double>();
        dV_low += low.dV.template cast<double>();
        largest = std::max(largest, ref.dQ.cwiseAbs().maxCoeff());
      }
      compare(got.dK, run.gK, b, hk, dK_ref, dK_low, c.layout, &out.dk);
      compare(got.dV, run.gK, b, hk, dV_ref, dV_low, c.layout, &out.dv);
      largest = std::max({largest, dK_ref.cwiseAbs().maxCoeff(), dV_ref.cwiseAbs().maxCoeff()});
    }
  const double slack =
      cpu::summation_order_slack(double(c.d) * double(std::max(c.n_q, c.n_k)), largest);
  for (GradientOutcome* g : {&out.dq, &out.dk, &out.dv})
    g->bound = cpu::kGradientErrorFactor * g->err_naive + slack;
  return out;
}

template <class In>
std::vector<std::vector<uint8_t>> repeated_typed(const BackwardCase& c, uint64_t seed, int runs) {
  BackwardRun<In> run(c, seed);
  std::vector<std::vector<uint8_t>> result;
  for (int r = 0; r < runs; ++r) {
    const Gradients<In> g = run.launch();
    std::vector<uint8_t> raw;
    for (const std::vector<In>* x : {&g.dQ, &g.dK, &g.dV}) {
      const auto* bytes = reinterpret_cast<const uint8_t*>(x->data());
      raw.insert(raw.end(), bytes, bytes + x->size() * sizeof(In));
    }
    result.push_back(std::move(raw));
  }
  return result;
}

}  // namespace

std::string BackwardCase::describe() const {
  static const char* kCausal[] = {"none", "top_left", "bottom_right"};
  static const char* kLayout[] = {"BHSD", "BSHD", "BHSD+pad"};
  return "backward " + std::string(dtype_name(dtype)) + " B=" + std::to_string(batch) +
         " Hq=" + std::to_string(heads_q) + " Hkv=" + std::to_string(heads_kv) +
         " N_q=" + std::to_string(n_q) + " N_k=" + std::to_string(n_k) + " d=" + std::to_string(d) +
         " causal=" + kCausal[causal] + " " + kLayout[int(layout)] +
         (deterministic ? " deterministic" : "") +
         (dropout_p > 0 || dropout_seed != 0 || dropout_offset != 0
              ? " dropout p=" + std::to_string(dropout_p) + " seed=" +
                    std::to_string(dropout_seed) + " offset=" + std::to_string(dropout_offset)
              : "");
}

BackwardOutcome run_backward_case(const BackwardCase& c, uint64_t seed) {
  if (c.dtype == FLASHLAB_FP16) return run_typed<cpu::fp16>(c, seed);
  return run_typed<cpu::bf16>(c, seed);
}

std::vector<std::vector<uint8_t>> run_backward_repeated(const BackwardCase& c, uint64_t seed,
                                                        int runs) {
  if (c.dtype == FLASHLAB_FP16) return repeated_typed<cpu::fp16>(c, seed, runs);
  return repeated_typed<cpu::bf16>(c, seed, runs);
}

}  // namespace flashlab::gpu::test
