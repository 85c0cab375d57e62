#include "decode_harness.hpp"

#include "flashlab/cpu/decode.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/gpu/kernel_info.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

namespace flashlab::gpu::test {
namespace {

using cpu::Matrix;
constexpr uint8_t kPoison = 0xff;  // all-ones bytes are a NaN in fp32, fp16 and bf16
constexpr int kCapacityRound = 256;
constexpr int kSparePages = 3;  // pages no sequence owns, NaN-filled: reading one shows
constexpr int kTablePad = 1;    // the block table's rows are one entry longer than needed

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

void* device_alloc(size_t bytes) {
  void* ptr = nullptr;
  check_cuda(cudaMalloc(&ptr, std::max<size_t>(bytes, 16)), "cudaMalloc");
  return ptr;
}

template <class T>
void upload(void* dst, const std::vector<T>& src) {
  check_cuda(cudaMemcpy(dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
}

template <class T>
std::vector<T> download(const void* src, size_t count) {
  std::vector<T> out(count);
  check_cuda(cudaMemcpy(out.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost), "download");
  return out;
}

}  // namespace

bool DecodeBits::operator==(const DecodeBits& other) const {
  return o == other.o &&
         std::memcmp(lse.data(), other.lse.data(), lse.size() * sizeof(float)) == 0 &&
         lse.size() == other.lse.size();
}

std::string DecodeCase::describe() const {
  std::string lens_text;
  for (int len : lens) {
    if (!lens_text.empty()) lens_text += ',';
    lens_text += std::to_string(len);
  }
  return std::string(dtype_name(dtype)) + " Hq=" + std::to_string(heads_q) +
         " Hkv=" + std::to_string(heads_kv) + " N_q=" + std::to_string(n_q) +
         " d=" + std::to_string(d) + " lens={" + lens_text +
         "} capacity=" + std::to_string(capacity) + " page_size=" + std::to_string(page_size) +
         " splits=" + std::to_string(num_splits) + " grid=" + std::to_string(grid);
}

struct DecodeRun::Impl {
  DecodeCase c;
  int batch = 0;
  int64_t q_elems = 0, cache_elems = 0;
  std::vector<uint16_t> hQ, hK, hV;  // contiguous host copies: Q (B, Hq, N_q, d), K and V
                                     // (B, Hkv, capacity, d), rows past a length NaN
  std::vector<void*> owned;
  flashlab_decode_params p{};
  bool have_refs = false;
  std::vector<double> ref_o, ref_l, naive_o;  // (B, Hq, N_q, d) and (B, Hq, N_q)

  void* alloc(size_t bytes) {
    owned.push_back(device_alloc(bytes));
    return owned.back();
  }
  int64_t cache_at(int b, int h, int j, int k) const {
    return ((int64_t(b) * c.heads_kv + h) * c.capacity + j) * c.d + k;
  }
  template <class In>
  void fill(std::mt19937_64* rng);
  void build_paged(std::mt19937_64* rng);
  template <class In>
  void references();
};

template <class In>
void DecodeRun::Impl::fill(std::mt19937_64* rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  auto bits = [](In x) { return Eigen::numext::bit_cast<uint16_t>(x); };
  const uint16_t nan_bits = bits(In(std::numeric_limits<float>::quiet_NaN()));
  hQ.resize(q_elems);
  for (auto& x : hQ) x = bits(In(normal(*rng)));
  hK.assign(cache_elems, nan_bits);
  hV.assign(cache_elems, nan_bits);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < c.heads_kv; ++h)
      for (int j = 0; j < c.lens[b]; ++j)
        for (int k = 0; k < c.d; ++k) {
          hK[cache_at(b, h, j, k)] = bits(In(normal(*rng)));
          hV[cache_at(b, h, j, k)] = bits(In(normal(*rng)));
        }
}

// vLLM-style pages, (num_pages, page_size, Hkv, d), in a shuffled order: sequence b's page
// t is table[b][t], a random page; the spare pages and the table's padding hold NaN / -1.
void DecodeRun::Impl::build_paged(std::mt19937_64* rng) {
  const int ps = c.page_size, per_seq = c.capacity / ps;
  const int num_pages = batch * per_seq + kSparePages;
  std::vector<int32_t> order(num_pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), *rng);
  const int64_t table_stride = per_seq + kTablePad;
  std::vector<int32_t> table(size_t(batch) * table_stride, -1);
  const int64_t page_elems = int64_t(ps) * c.heads_kv * c.d;
  std::vector<uint16_t> pK(size_t(num_pages) * page_elems), pV(pK.size());
  const uint16_t nan_bits = 0xffff;  // all-ones: a NaN in fp16 and bf16
  std::fill(pK.begin(), pK.end(), nan_bits);
  std::fill(pV.begin(), pV.end(), nan_bits);
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < per_seq; ++t) {
      const int page = order[b * per_seq + t];
      table[b * table_stride + t] = page;
      for (int r = 0; r < ps; ++r)
        for (int h = 0; h < c.heads_kv; ++h)
          for (int k = 0; k < c.d; ++k) {
            const int64_t at = page * page_elems + (int64_t(r) * c.heads_kv + h) * c.d + k;
            pK[at] = hK[cache_at(b, h, t * ps + r, k)];
            pV[at] = hV[cache_at(b, h, t * ps + r, k)];
          }
    }
  void* dK = alloc(pK.size() * 2);
  void* dV = alloc(pV.size() * 2);
  void* dT = alloc(table.size() * 4);
  upload(dK, pK);
  upload(dV, pV);
  upload(dT, table);
  p.k_cache = dK;
  p.v_cache = dV;
  p.block_table = static_cast<const int32_t*>(dT);
  p.block_table_stride = table_stride;
  p.page_size = ps;
  p.num_pages = num_pages;
  const int64_t s[4] = {page_elems, c.d, int64_t(c.heads_kv) * c.d, 1};
  std::memcpy(p.k_stride, s, sizeof(s));
  std::memcpy(p.v_stride, s, sizeof(s));
}

// The fp64 reference decode (cpu::decode, one segment) and naive attention in In, per
// (b, h), on the first len keys, bottom-right causal over the N_q rows.
template <class In>
void DecodeRun::Impl::references() {
  const int group = c.heads_q / c.heads_kv;
  ref_o.assign(q_elems, 0.0);
  naive_o.assign(q_elems, 0.0);
  ref_l.assign(size_t(batch) * c.heads_q * c.n_q, -std::numeric_limits<double>::infinity());
  auto value = [](uint16_t raw) { return Eigen::numext::bit_cast<In>(raw); };
  cpu::AttentionOptions options;
  options.causal = cpu::Causal::bottom_right;
  for (int b = 0; b < batch; ++b) {
    const int len = c.lens[b];
    if (len == 0) continue;  // O = 0, L = -inf: the convention, nothing to compute
    for (int h = 0; h < c.heads_q; ++h) {
      const int hk = h / group;
      Matrix<In> Q(c.n_q, c.d), K(len, c.d), V(len, c.d);
      for (int i = 0; i < c.n_q; ++i)
        for (int k = 0; k < c.d; ++k)
          Q(i, k) = value(hQ[((int64_t(b) * c.heads_q + h) * c.n_q + i) * c.d + k]);
      for (int j = 0; j < len; ++j)
        for (int k = 0; k < c.d; ++k) {
          K(j, k) = value(hK[cache_at(b, hk, j, k)]);
          V(j, k) = value(hV[cache_at(b, hk, j, k)]);
        }
      cpu::DecodeOptions one;
      one.splits = 1;
      const auto ref = cpu::decode<double>(Q.template cast<double>(), K.template cast<double>(),
                                           V.template cast<double>(), one, options);
      const auto low = cpu::naive_attention<In>(Q, K, V, options);
      for (int i = 0; i < c.n_q; ++i) {
        const int64_t row = (int64_t(b) * c.heads_q + h) * c.n_q + i;
        ref_l[row] = ref.L[i];
        for (int k = 0; k < c.d; ++k) {
          ref_o[row * c.d + k] = ref.O(i, k);
          naive_o[row * c.d + k] = double(low.O(i, k));
        }
      }
    }
  }
}

DecodeRun::DecodeRun(const DecodeCase& dc, uint64_t seed) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.c = dc;
  DecodeCase& c = m.c;
  m.batch = int(c.lens.size());
  if (c.capacity == 0) {
    const int longest = *std::max_element(c.lens.begin(), c.lens.end());
    c.capacity =
        std::max(kCapacityRound, (longest + kCapacityRound - 1) / kCapacityRound * kCapacityRound);
  }
  m.q_elems = int64_t(m.batch) * c.heads_q * c.n_q * c.d;
  m.cache_elems = int64_t(m.batch) * c.heads_kv * c.capacity * c.d;
  std::mt19937_64 rng(seed);
  if (c.dtype == FLASHLAB_FP16)
    m.fill<cpu::fp16>(&rng);
  else
    m.fill<cpu::bf16>(&rng);

  flashlab_decode_params& p = m.p;
  void* dQ = m.alloc(m.q_elems * 2);
  upload(dQ, m.hQ);
  p.q = dQ;
  p.o = m.alloc(m.q_elems * 2);
  p.lse = static_cast<float*>(m.alloc(size_t(m.batch) * c.heads_q * c.n_q * 4));
  const int64_t qs[4] = {int64_t(c.heads_q) * c.n_q * c.d, int64_t(c.n_q) * c.d, c.d, 1};
  std::memcpy(p.q_stride, qs, sizeof(qs));
  std::memcpy(p.o_stride, qs, sizeof(qs));
  std::vector<int32_t> lens(c.lens.begin(), c.lens.end());
  void* dL = m.alloc(lens.size() * 4);
  upload(dL, lens);
  p.seq_lens = static_cast<const int32_t*>(dL);
  if (c.page_size == 0) {
    void* dK = m.alloc(m.hK.size() * 2);
    void* dV = m.alloc(m.hV.size() * 2);
    upload(dK, m.hK);
    upload(dV, m.hV);
    p.k_cache = dK;
    p.v_cache = dV;
    const int64_t s[4] = {int64_t(c.heads_kv) * c.capacity * c.d, int64_t(c.capacity) * c.d, c.d,
                          1};
    std::memcpy(p.k_stride, s, sizeof(s));
    std::memcpy(p.v_stride, s, sizeof(s));
  } else {
    m.build_paged(&rng);
  }
  p.batch = m.batch;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.n_q = c.n_q;
  p.max_seq_len = c.capacity;
  p.d = c.d;
  p.dtype = c.dtype;
  p.grid = c.grid;
  p.workspace_bytes = decode::workspace_bytes(m.batch, c.heads_q, c.n_q, c.d, decode::kMaxSplits);
  p.workspace = m.alloc(size_t(p.workspace_bytes));
}

DecodeRun::~DecodeRun() {
  for (void* ptr : impl_->owned) cudaFree(ptr);
}

flashlab_decode_params& DecodeRun::params() { return impl_->p; }

DecodeBits DecodeRun::run(int num_splits) {
  Impl& m = *impl_;
  m.p.num_splits = num_splits;
  const size_t rows = size_t(m.batch) * m.c.heads_q * m.c.n_q;
  check_cuda(cudaMemset(m.p.o, kPoison, m.q_elems * 2), "poison O");
  check_cuda(cudaMemset(m.p.lse, kPoison, rows * 4), "poison LSE");
  if (flashlab_decode(&m.p) != FLASHLAB_OK)
    throw std::runtime_error(std::string("flashlab_decode: ") + flashlab_last_error());
  if (flashlab_decode_check(&m.p) != FLASHLAB_OK)
    throw std::runtime_error(std::string("flashlab_decode_check: ") + flashlab_last_error());
  check_cuda(cudaDeviceSynchronize(), "decode kernels");
  DecodeBits bits;
  bits.o = download<uint16_t>(m.p.o, m.q_elems);
  bits.lse = download<float>(m.p.lse, rows);
  return bits;
}

DecodeOutcome DecodeRun::run_and_compare(int num_splits) {
  Impl& m = *impl_;
  if (!m.have_refs) {
    if (m.c.dtype == FLASHLAB_FP16)
      m.references<cpu::fp16>();
    else
      m.references<cpu::bf16>();
    m.have_refs = true;
  }
  const DecodeBits bits = run(num_splits);
  DecodeOutcome out;
  int32_t splits = 0;
  if (flashlab_decode_num_splits(&m.p, &splits) != FLASHLAB_OK)
    throw std::runtime_error(std::string("flashlab_decode_num_splits: ") + flashlab_last_error());
  out.splits = splits;
  for (int64_t row = 0; row < int64_t(bits.lse.size()); ++row) {
    const bool empty = std::isinf(m.ref_l[row]);
    for (int k = 0; k < m.c.d; ++k) {
      const int64_t at = row * m.c.d + k;
      const double o = m.c.dtype == FLASHLAB_FP16
                           ? double(Eigen::numext::bit_cast<cpu::fp16>(bits.o[at]))
                           : double(Eigen::numext::bit_cast<cpu::bf16>(bits.o[at]));
      if (std::isnan(o))
        ++out.unwritten;
      else
        out.err = std::max(out.err, std::abs(o - m.ref_o[at]));
      if (empty && o != 0.0) out.empty_rows_zero = false;
      out.err_naive = std::max(out.err_naive, std::abs(m.naive_o[at] - m.ref_o[at]));
    }
    const double l = bits.lse[row];
    if (empty)
      out.lse_inf_matches &= std::isinf(l) && l < 0;
    else if (!std::isfinite(l))
      out.lse_inf_matches = false;
    else
      out.lse_err = std::max(out.lse_err, std::abs(l - m.ref_l[row]));
  }
  out.bound = 2.0 * out.err_naive;
  return out;
}

DecodeOutcome run_decode_case(const DecodeCase& c, uint64_t seed) {
  DecodeRun run(c, seed);
  return run.run_and_compare(c.num_splits);
}

}  // namespace flashlab::gpu::test
