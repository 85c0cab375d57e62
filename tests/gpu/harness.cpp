#include "harness.hpp"
#include "host_tensors.hpp"

#include "flashlab/cpu/conditional_rescaling.hpp"
#include "flashlab/cpu/correctness.hpp"
#include "flashlab/cpu/dropout.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/gpu/kernel_info.hpp"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>

namespace flashlab::gpu::test {
namespace {

using cpu::Matrix;
// fp32 kernels are held to 2x naive fp32's error plus a summation order's slack over N_k
// terms of up to max|V| (flashlab/cpu/correctness.hpp): summing N_k terms in a different order
// than the CPU does moves the result by about sqrt(N_k) roundings, and naive fp32's own error
// can be near zero.

// The inputs of one case, on the host and on the device, and the call that uses them.
template <class In>
struct Prepared {
  Case c;
  std::mt19937_64 rng;
  HostTensor<In> Q, K, V;
  Geometry gO;
  DeviceBuffer dQ, dK, dV, dO, dL;
  flashlab_forward_params params{};

  Prepared(const Case& c_, uint64_t seed)
      : c(c_),
        rng(seed),
        Q(c.layout, c.batch, c.heads_q, c.n_q, c.d, &rng),
        K(c.layout, c.batch, c.heads_kv, c.n_k, c.d, &rng),
        V(c.layout, c.batch, c.heads_kv, c.n_k, c.d, &rng),
        gO(geometry(c.layout, c.batch, c.heads_q, c.n_q, c.d)),
        dQ(Q.data.size() * sizeof(In)),
        dK(K.data.size() * sizeof(In)),
        dV(V.data.size() * sizeof(In)),
        dO(gO.elems * sizeof(In)),
        dL(size_t(c.batch) * c.heads_q * c.n_q * sizeof(float)) {
    upload(dQ, Q);
    upload(dK, K);
    upload(dV, V);
    params.q = dQ.ptr;
    params.k = dK.ptr;
    params.v = dV.ptr;
    params.o = dO.ptr;
    params.lse = static_cast<float*>(dL.ptr);
    std::memcpy(params.q_stride, Q.g.stride, sizeof(params.q_stride));
    std::memcpy(params.k_stride, K.g.stride, sizeof(params.k_stride));
    std::memcpy(params.v_stride, V.g.stride, sizeof(params.v_stride));
    std::memcpy(params.o_stride, gO.stride, sizeof(params.o_stride));
    params.batch = c.batch;
    params.heads_q = c.heads_q;
    params.heads_kv = c.heads_kv;
    params.n_q = c.n_q;
    params.n_k = c.n_k;
    params.d = c.d;
    params.scale = c.scale;
    params.dtype = c.dtype;
    params.causal = c.causal;
    params.kernel = c.kernel;
    params.dropout_p = c.dropout_p;
    params.dropout_seed = c.dropout_seed;
    params.dropout_offset = c.dropout_offset;
  }

  static void upload(const DeviceBuffer& dst, const HostTensor<In>& t) {
    check_cuda(
        cudaMemcpy(dst.ptr, t.data.data(), t.data.size() * sizeof(In), cudaMemcpyHostToDevice),
        "upload");
  }

  // Poisons O and L, runs the kernel, and returns O (in its layout) and L.
  std::pair<std::vector<In>, std::vector<float>> launch() {
    check_cuda(cudaMemset(dO.ptr, kPoison, gO.elems * sizeof(In)), "poison O");
    const size_t lse_count = size_t(c.batch) * c.heads_q * c.n_q;
    check_cuda(cudaMemset(dL.ptr, kPoison, lse_count * sizeof(float)), "poison L");
    const flashlab_status status =
        c.fa3 ? flashlab_forward_fa3(&params, &*c.fa3) : flashlab_forward(&params);
    if (status != FLASHLAB_OK)
      throw std::runtime_error(std::string("flashlab_forward: ") + flashlab_last_error());
    check_cuda(cudaDeviceSynchronize(), "kernel");
    std::vector<In> O(gO.elems);
    std::vector<float> L(lse_count);
    check_cuda(cudaMemcpy(O.data(), dO.ptr, O.size() * sizeof(In), cudaMemcpyDeviceToHost), "O");
    check_cuda(cudaMemcpy(L.data(), dL.ptr, L.size() * sizeof(float), cudaMemcpyDeviceToHost), "L");
    return {std::move(O), std::move(L)};
  }
};

template <class In>
double fp32_slack(const Case& c, const HostTensor<In>& V) {
  if constexpr (!std::is_same_v<In, float>) return 0.0;
  double v_max = 0;
  for (const In& x : V.data) v_max = std::max(v_max, std::abs(double(x)));
  return cpu::summation_order_slack(double(c.n_k), v_max);
}

// One (b, h) head's references: O and L of attention in fp64, and the error naive attention
// computed in the case's precision makes against them (ANCHORS.md's rule). They depend on the
// inputs alone, so a test that runs several switch settings on the same inputs computes them
// once (naive attention in bf16 or fp16 is most of a test's time).
struct HeadReference {
  cpu::NaiveResult<double> exact;
  double err_naive = 0;
};

template <class In>
HeadReference head_reference(const Prepared<In>& p, int b, int h) {
  const Case& c = p.c;
  const int hk = h / (c.heads_q / c.heads_kv);
  cpu::AttentionOptions options;
  options.causal = causal_of(c.causal);
  if (c.scale > 0) options.scale = c.scale;
  const Matrix<In> Q = p.Q.head(b, h, c.n_q);
  const Matrix<In> K = p.K.head(b, hk, c.n_k), V = p.V.head(b, hk, c.n_k);
  // The rule indexes the mask by the query head h, not the KV head it reads.
  const cpu::DropoutMask mask({c.dropout_p, c.dropout_seed, c.dropout_offset}, b, h);
  const cpu::DropoutMask* dropout = c.dropout_p > 0 ? &mask : nullptr;
  HeadReference r{cpu::naive_attention<double>(Q.template cast<double>(),
                                               K.template cast<double>(),
                                               V.template cast<double>(), options,
                                               cpu::SoftmaxKind::stable, dropout),
                  0.0};
  const auto low = cpu::naive_attention<In>(Q, K, V, options, cpu::SoftmaxKind::stable, dropout);
  for (int n = 0; n < c.n_q; ++n)
    for (int k = 0; k < c.d; ++k)
      r.err_naive = std::max(r.err_naive, std::abs(double(low.O(n, k)) - r.exact.O(n, k)));
  return r;
}

// Every (b, h) head's references, in (b, h) order.
template <class In>
std::vector<HeadReference> references(const Prepared<In>& p) {
  std::vector<HeadReference> out;
  for (int b = 0; b < p.c.batch; ++b)
    for (int h = 0; h < p.c.heads_q; ++h) out.push_back(head_reference(p, b, h));
  return out;
}

// Compares one (b, h) head of the kernel's output with its references.
template <class In>
void compare_head(const Prepared<In>& p, const HeadReference& r, const std::vector<In>& O,
                  const std::vector<float>& L, int b, int h, Outcome* out) {
  const Case& c = p.c;
  out->err_naive = std::max(out->err_naive, r.err_naive);
  for (int n = 0; n < c.n_q; ++n) {
    for (int k = 0; k < c.d; ++k) {
      const double o = double(O[p.gO.at(b, h, n, k)]);
      if (std::isnan(o))
        ++out->unwritten;
      else
        out->err = std::max(out->err, std::abs(o - r.exact.O(n, k)));
    }
    for (int k = c.d; c.layout == Layout::bhsd_padded && k < c.d + kRowPad; ++k)
      if (!std::isnan(double(O[p.gO.at(b, h, n, k)]))) ++out->padding_written;
    const double l = L[(size_t(b) * c.heads_q + h) * c.n_q + n];
    if (std::isinf(r.exact.L[n]))
      out->lse_inf_matches &= std::isinf(l) && l < 0;
    else if (std::isnan(l) || std::isinf(l))
      out->lse_inf_matches = false;
    else
      out->lse_err = std::max(out->lse_err, std::abs(l - r.exact.L[n]));
  }
}

// The kernel's output against the references, every head.
template <class In>
Outcome compare(const Prepared<In>& p, const std::vector<HeadReference>& refs,
                const std::vector<In>& O, const std::vector<float>& L) {
  Outcome out;
  for (int b = 0, i = 0; b < p.c.batch; ++b)
    for (int h = 0; h < p.c.heads_q; ++h, ++i) compare_head(p, refs[size_t(i)], O, L, b, h, &out);
  out.bound = cpu::kOutputErrorFactor * out.err_naive + fp32_slack(p.c, p.V);
  return out;
}

template <class In>
Outcome run_typed(const Case& c, uint64_t seed) {
  Prepared<In> p(c, seed);
  const auto [O, L] = p.launch();
  return compare(p, references(p), O, L);
}

template <class In>
std::vector<Outcome> run_each_typed(const Case& c, uint64_t seed,
                                    const std::vector<flashlab_fa3_options>& each) {
  Prepared<In> p(c, seed);
  const std::vector<HeadReference> refs = references(p);
  std::vector<Outcome> out;
  for (const flashlab_fa3_options& o : each) {
    p.c.fa3 = o;
    const auto [O, L] = p.launch();
    out.push_back(compare(p, refs, O, L));
  }
  return out;
}

template <class In>
std::vector<RawRun> repeated_typed(const Case& c, uint64_t seed, int runs) {
  Prepared<In> p(c, seed);
  std::vector<RawRun> result;
  for (int r = 0; r < runs; ++r) {
    auto [O, L] = p.launch();
    RawRun raw;
    raw.o.resize(O.size() * sizeof(In));
    std::memcpy(raw.o.data(), O.data(), raw.o.size());
    raw.lse = std::move(L);
    result.push_back(std::move(raw));
  }
  return result;
}

template <class In>
RescaleCounts rescale_counts_typed(const Case& c, uint64_t seed) {
  if (!c.fa3 || c.fa3->conditional_rescale != 1)
    throw std::invalid_argument(
        "run_rescale_counts: give fa3 options with conditional_rescale = 1");
  Case counting = c;
  DeviceBuffer counts(FLASHLAB_RESCALE_COUNTS * sizeof(int64_t));
  counting.fa3->rescale_counts = static_cast<int64_t*>(counts.ptr);
  check_cuda(cudaMemset(counts.ptr, kPoison, FLASHLAB_RESCALE_COUNTS * sizeof(int64_t)),
             "poison the counts");  // the library must zero them itself
  Prepared<In> p(counting, seed);
  const auto [O, L] = p.launch();
  RescaleCounts out;
  check_cuda(cudaMemcpy(out.gpu, counts.ptr, sizeof(out.gpu), cudaMemcpyDeviceToHost), "counts");
  cpu::AttentionOptions options;
  options.causal = causal_of(c.causal);
  if (c.scale > 0) options.scale = c.scale;
  options.tiles = {fa3::br(c.d), fa3::kBc};
  out.outcome = compare(p, references(p), O, L);
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads_q; ++h) {
      const int hk = h / (c.heads_q / c.heads_kv);
      const auto r = cpu::forward_conditional<In>(p.Q.head(b, h, c.n_q), p.K.head(b, hk, c.n_k),
                                                  p.V.head(b, hk, c.n_k), options);
      out.cpu[FLASHLAB_RESCALE_FIRST] += r.rescales.first;
      out.cpu[FLASHLAB_RESCALE_RESCALED] += r.rescales.rescaled;
      out.cpu[FLASHLAB_RESCALE_SKIPPED] += r.rescales.skipped;
      out.cpu[FLASHLAB_RESCALE_KEPT] += r.rescales.kept;
    }
  return out;
}

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::bshd: return "BSHD";
    case Layout::bhsd_padded: return "BHSD+pad";
    case Layout::bhsd: break;
  }
  return "BHSD";
}

}  // namespace

std::string Case::describe() const {
  static const char* kCausal[] = {"none", "top_left", "bottom_right"};
  // fa3's switches as the call runs them (FLASHLAB_FA3_AUTO resolved for d).
  const std::optional<flashlab_fa3_options> ran =
      fa3 ? std::optional(gpu::fa3::resolve_options(d, *fa3)) : std::nullopt;
  return std::string(find_kernel(kernel)->name) + " " +
         std::string(dtype_name(flashlab_dtype(dtype))) + " B=" + std::to_string(batch) +
         " Hq=" + std::to_string(heads_q) + " Hkv=" + std::to_string(heads_kv) +
         " N_q=" + std::to_string(n_q) + " N_k=" + std::to_string(n_k) + " d=" + std::to_string(d) +
         " causal=" + kCausal[causal] + " " + layout_name(layout) +
         (scale > 0 ? " scale=" + std::to_string(scale) : "") +
         (dropout_p > 0 ? " dropout p=" + std::to_string(dropout_p) +
                              " seed=" + std::to_string(dropout_seed) +
                              " offset=" + std::to_string(dropout_offset)
                        : "") +
         (ran ? " fa3{ws=" + std::to_string(ran->warp_specialized) + " stages=" +
                    std::to_string(ran->stages) + " ping_pong=" + std::to_string(ran->ping_pong) +
                    " intra_overlap=" + std::to_string(ran->intra_overlap) +
                    " conditional_rescale=" + std::to_string(ran->conditional_rescale) +
                    " grid=" + std::to_string(ran->grid) +
                    " software_exp2=" + std::to_string(ran->software_exp2) +
                    " overlap_items=" + std::to_string(ran->overlap_items) +
                    " kv_l2_share=" + std::to_string(ran->kv_l2_share) + "}"
              : "");
}

Outcome run_case(const Case& c, uint64_t seed) {
  switch (c.dtype) {
    case FLASHLAB_FP32: return run_typed<float>(c, seed);
    case FLASHLAB_FP16: return run_typed<cpu::fp16>(c, seed);
    case FLASHLAB_BF16: break;
  }
  return run_typed<cpu::bf16>(c, seed);
}

std::vector<Outcome> run_case_each(const Case& c, uint64_t seed,
                                   const std::vector<flashlab_fa3_options>& each) {
  if (c.kernel != FLASHLAB_KERNEL_FA3)
    throw std::invalid_argument("run_case_each: the options are fa3's; give an fa3 case");
  switch (c.dtype) {
    case FLASHLAB_FP32: return run_each_typed<float>(c, seed, each);
    case FLASHLAB_FP16: return run_each_typed<cpu::fp16>(c, seed, each);
    case FLASHLAB_BF16: break;
  }
  return run_each_typed<cpu::bf16>(c, seed, each);
}

std::vector<RawRun> run_repeated(const Case& c, uint64_t seed, int runs) {
  switch (c.dtype) {
    case FLASHLAB_FP32: return repeated_typed<float>(c, seed, runs);
    case FLASHLAB_FP16: return repeated_typed<cpu::fp16>(c, seed, runs);
    case FLASHLAB_BF16: break;
  }
  return repeated_typed<cpu::bf16>(c, seed, runs);
}

RescaleCounts run_rescale_counts(const Case& c, uint64_t seed) {
  if (c.dtype == FLASHLAB_FP16) return rescale_counts_typed<cpu::fp16>(c, seed);
  return rescale_counts_typed<cpu::bf16>(c, seed);
}

ValidCall::ValidCall(flashlab_kernel kernel, flashlab_dtype dtype, int d) {
  constexpr int kHeadsQ = 2, kN = 16;
  const size_t elem = size_t(dtype_bytes(dtype));
  const size_t bytes = size_t(kHeadsQ) * kN * d * elem;
  for (int i = 0; i < 5; ++i) {
    void* ptr = nullptr;
    check_cuda(cudaMalloc(&ptr, bytes), "cudaMalloc");
    owned.push_back(ptr);
  }
  params.q = owned[0];
  params.k = owned[1];
  params.v = owned[2];
  params.o = owned[3];
  params.lse = static_cast<float*>(owned[4]);
  const int64_t q_strides[4] = {int64_t(kHeadsQ) * kN * d, int64_t(kN) * d, d, 1};
  const int64_t kv_strides[4] = {int64_t(kN) * d, int64_t(kN) * d, d, 1};
  std::memcpy(params.q_stride, q_strides, sizeof(q_strides));
  std::memcpy(params.o_stride, q_strides, sizeof(q_strides));
  std::memcpy(params.k_stride, kv_strides, sizeof(kv_strides));
  std::memcpy(params.v_stride, kv_strides, sizeof(kv_strides));
  params.batch = 1;
  params.heads_q = kHeadsQ;
  params.heads_kv = 1;
  params.n_q = params.n_k = kN;
  params.d = d;
  params.dtype = dtype;
  params.kernel = kernel;
}

ValidCall::~ValidCall() {
  for (void* ptr : owned) cudaFree(ptr);
}

flashlab_status ValidCall::call(std::string* message) const {
  const flashlab_status status = flashlab_forward(&params);
  check_cuda(cudaDeviceSynchronize(), "ValidCall");
  *message = flashlab_last_error();
  return status;
}

}  // namespace flashlab::gpu::test
