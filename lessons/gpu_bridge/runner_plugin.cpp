// The GPU runner plugin (libflashlab_gpu_runner.so, see runner_abi.h): copies host tensors
// to the device, calls flashlab_forward, flashlab_forward_fa3 (counting rescales),
// flashlab_backward and flashlab_decode (gpu/'s C ABI, as any other language would), times the
// calls with CUDA events and reads the outputs back. The only part of lessons/ that links CUDA.
#include "runner_abi.h"

#include "gpu_bridge/block_table.hpp"

#include "flashlab/cpu/types.hpp"
#include "flashlab/fa3.h"
#include "flashlab/flashlab.h"

#include <cuda_runtime.h>
#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

namespace {

using flashlab::cpu::Index;
template <class T>
using Matrix = flashlab::cpu::Matrix<T>;
using ConstMap = Eigen::Map<const Matrix<float>>;
using flashlab::app::BlockTable;
using flashlab::app::shuffled_block_table;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

// Device memory for `count` elements of T, freed with the object.
template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  std::size_t count = 0;
  explicit DeviceBuffer(std::size_t n) : count(n) {
    check(cudaMalloc(&ptr, std::max<std::size_t>(n, 1) * sizeof(T)), "cudaMalloc");
    check(cudaMemset(ptr, 0, n * sizeof(T)), "cudaMemset");
  }
  DeviceBuffer(const T* host, std::size_t n) : DeviceBuffer(n) {
    check(cudaMemcpy(ptr, host, n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr); }
  std::vector<T> read() const {
    std::vector<T> host(count);
    check(cudaMemcpy(host.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost),
          "cudaMemcpy to host");
    return host;
  }
};

// Host fp32 values rounded to T.
template <class T>
std::vector<T> rounded(const float* x, std::size_t n) {
  std::vector<T> out(n);
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(out.data(), Index(n)) =
      Eigen::Map<const Eigen::ArrayXf>(x, Index(n)).cast<T>();
  return out;
}
// A device copy of host fp32 values rounded to T.
template <class T>
DeviceBuffer<T> upload(const float* x, std::size_t n) {
  const std::vector<T> r = rounded<T>(x, n);
  return DeviceBuffer<T>(r.data(), n);
}
// Device values of T widened to fp32 into host memory.
template <class T>
void download(const DeviceBuffer<T>& d, float* out) {
  const std::vector<T> host = d.read();
  Eigen::Map<Eigen::ArrayXf>(out, Index(host.size())) =
      Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(host.data(), Index(host.size()))
          .template cast<float>();
}

// A device buffer holding `copies` copies of X rounded to T, row-major (rows, cols) each.
template <class T>
struct DeviceMatrix {
  void* ptr = nullptr;
  std::size_t bytes = 0;  // of one copy
  explicit DeviceMatrix(const Matrix<float>& X, int64_t copies = 1)
      : bytes(std::size_t(X.size()) * sizeof(T)) {
    const Matrix<T> rounded = X.cast<T>();
    check(cudaMalloc(&ptr, bytes * std::size_t(copies)), "cudaMalloc");
    for (int64_t c = 0; c < copies; ++c)
      check(cudaMemcpy(static_cast<char*>(ptr) + std::size_t(c) * bytes, rounded.data(), bytes,
                       cudaMemcpyHostToDevice),
            "cudaMemcpy to device");
  }
  DeviceMatrix(const DeviceMatrix&) = delete;
  ~DeviceMatrix() { cudaFree(ptr); }
  void read_into(float* out, Index rows, Index cols) const {
    Matrix<T> host(rows, cols);
    check(cudaMemcpy(host.data(), ptr, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    Eigen::Map<Matrix<float>>(out, rows, cols) = host.template cast<float>();
  }
};

// Contiguous (batch 1, heads, rows, d): the (batch, head, row, column) strides.
void contiguous(int64_t (&s)[4], int64_t heads, int64_t rows, int64_t d) {
  s[0] = heads * rows * d, s[1] = rows * d, s[2] = d, s[3] = 1;
}

// Throws flashlab_last_error()'s message when the library refused a call.
void library(flashlab_status status) {
  if (status != FLASHLAB_OK) throw std::invalid_argument(flashlab_last_error());
}

// Median milliseconds of `repeats` timed calls of launch() after `warmups` untimed ones;
// after_each(timed) runs once the call has finished, outside the timed span.
template <class Launch, class AfterEach>
double time_calls(int warmups, int repeats, Launch launch, AfterEach after_each) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> ms;
  try {
    for (int r = 0; r < warmups + repeats; ++r) {
      check(cudaEventRecord(start), "cudaEventRecord");
      launch();
      check(cudaEventRecord(stop), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float elapsed = 0;
      check(cudaEventElapsedTime(&elapsed, start, stop), "cudaEventElapsedTime");
      if (r >= warmups) ms.push_back(elapsed);
      after_each(r >= warmups);
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// fa3 with a share of the L2 for its order goes through flashlab_forward_fa3, every other
// call through flashlab_forward.
double time_forward(const flashlab_forward_params& p, const flashlab_runner_call& c) {
  if (c.fa3_kv_l2_share == FLASHLAB_FA3_AUTO)
    return time_calls(
        c.warmups, c.repeats, [&] { library(flashlab_forward(&p)); }, [](bool) {});
  if (c.kernel != FLASHLAB_KERNEL_FA3)
    throw std::invalid_argument(fmt::format("fa3_kv_l2_share = {} is fa3's; kernel {} takes -1",
                                            c.fa3_kv_l2_share, c.kernel));
  flashlab_fa3_options options{};
  library(flashlab_fa3_default_options(&options));
  options.kv_l2_share = c.fa3_kv_l2_share;
  return time_calls(
      c.warmups, c.repeats, [&] { library(flashlab_forward_fa3(&p, &options)); }, [](bool) {});
}

template <class T>
double run_typed(const flashlab_runner_call& c) {
  const ConstMap Q(c.q, c.n_q, c.d), K(c.k, c.n_k, c.d), V(c.v, c.n_k, c.d);
  DeviceMatrix<T> q(Q, c.heads), k(K, c.heads), v(V, c.heads),
      o(Matrix<float>::Zero(c.n_q, c.d), c.heads);
  // L is written as in a training forward (the backward pass needs it), so the bytes
  // measured are those of the full forward the simulator's mirrors count.
  DeviceMatrix<float> lse(Matrix<float>::Zero(c.n_q, 1), c.heads);
  flashlab_forward_params p{};
  p.q = q.ptr, p.k = k.ptr, p.v = v.ptr, p.o = o.ptr, p.lse = static_cast<float*>(lse.ptr);
  contiguous(p.q_stride, c.heads, c.n_q, c.d);
  contiguous(p.o_stride, c.heads, c.n_q, c.d);
  contiguous(p.k_stride, c.heads, c.n_k, c.d);
  contiguous(p.v_stride, c.heads, c.n_k, c.d);
  p.batch = 1, p.heads_q = c.heads, p.heads_kv = c.heads, p.n_q = c.n_q, p.n_k = c.n_k, p.d = c.d;
  p.scale = 0;  // the default 1 / sqrt(d)
  p.dtype = c.dtype, p.causal = c.causal, p.kernel = c.kernel;
  const double median = time_forward(p, c);
  o.read_into(c.o, c.n_q, c.d);
  return median;
}

double run(const flashlab_runner_call& c) {
  if (c.repeats < 1 || c.warmups < 0 || c.heads < 1)
    throw std::invalid_argument("repeats and heads must be >= 1, warmups >= 0");
  switch (c.dtype) {
    case FLASHLAB_FP32: return run_typed<float>(c);
    case FLASHLAB_FP16: return run_typed<flashlab::cpu::fp16>(c);
    case FLASHLAB_BF16: return run_typed<flashlab::cpu::bf16>(c);
  }
  throw std::invalid_argument(fmt::format("unknown dtype {}", c.dtype));
}

// The backward: the fa2 forward once (O and L, as training keeps them), then the timed
// backward calls; dQ, dK and dV of every timed run are compared with the first's bit for bit.
template <class T>
void run_backward_typed(const flashlab_runner_backward_call& c,
                        flashlab_runner_backward_result& r) {
  const auto q_count = std::size_t(c.heads_q * c.n_q * c.d),
             kv_count = std::size_t(c.heads_kv * c.n_k * c.d);
  const DeviceBuffer<T> q = upload<T>(c.q, q_count), k = upload<T>(c.k, kv_count),
                        v = upload<T>(c.v, kv_count), dout = upload<T>(c.dout, q_count);
  DeviceBuffer<T> o(q_count), dq(q_count), dk(kv_count), dv(kv_count);
  DeviceBuffer<float> lse(std::size_t(c.heads_q * c.n_q));

  flashlab_forward_params f{};
  f.q = q.ptr, f.k = k.ptr, f.v = v.ptr, f.o = o.ptr, f.lse = lse.ptr;
  contiguous(f.q_stride, c.heads_q, c.n_q, c.d);
  contiguous(f.o_stride, c.heads_q, c.n_q, c.d);
  contiguous(f.k_stride, c.heads_kv, c.n_k, c.d);
  contiguous(f.v_stride, c.heads_kv, c.n_k, c.d);
  f.batch = 1, f.heads_q = c.heads_q, f.heads_kv = c.heads_kv;
  f.n_q = c.n_q, f.n_k = c.n_k, f.d = c.d, f.scale = 0;
  f.dtype = c.dtype, f.causal = c.causal, f.kernel = FLASHLAB_KERNEL_FA2;
  library(flashlab_forward(&f));

  flashlab_backward_params b{};
  b.q = q.ptr, b.k = k.ptr, b.v = v.ptr, b.o = o.ptr, b.dout = dout.ptr, b.lse = lse.ptr;
  b.dq = dq.ptr, b.dk = dk.ptr, b.dv = dv.ptr;
  for (auto* s : {&b.q_stride, &b.o_stride, &b.dout_stride, &b.dq_stride})
    contiguous(*s, c.heads_q, c.n_q, c.d);
  for (auto* s : {&b.k_stride, &b.v_stride, &b.dk_stride, &b.dv_stride})
    contiguous(*s, c.heads_kv, c.n_k, c.d);
  b.batch = 1, b.heads_q = c.heads_q, b.heads_kv = c.heads_kv;
  b.n_q = c.n_q, b.n_k = c.n_k, b.d = c.d, b.scale = 0;
  b.dtype = c.dtype, b.causal = c.causal, b.deterministic = c.deterministic;
  library(flashlab_backward_workspace_bytes(&b, &r.workspace_bytes));
  DeviceBuffer<unsigned char> workspace{std::size_t(r.workspace_bytes)};
  b.workspace = workspace.ptr, b.workspace_bytes = r.workspace_bytes;

  std::vector<T> first_dq, first_dk, first_dv;
  bool bitwise = true;
  const auto same = [](const std::vector<T>& a, const std::vector<T>& x) {
    return std::memcmp(a.data(), x.data(), a.size() * sizeof(T)) == 0;
  };
  r.median_ms = time_calls(
      c.warmups, c.repeats, [&] { library(flashlab_backward(&b)); },
      [&](bool timed) {
        if (!timed) return;
        auto a = dq.read(), x = dk.read(), y = dv.read();
        if (first_dq.empty()) {
          first_dq = std::move(a), first_dk = std::move(x), first_dv = std::move(y);
        } else {
          bitwise = bitwise && same(first_dq, a) && same(first_dk, x) && same(first_dv, y);
        }
      });
  r.bitwise_repeats = bitwise ? 1 : 0;
  download(dq, c.dq), download(dk, c.dk), download(dv, c.dv);
}

void run_backward(const flashlab_runner_backward_call& c, flashlab_runner_backward_result& r) {
  if (c.repeats < 1 || c.warmups < 0 || c.heads_q < 1 || c.heads_kv < 1 ||
      c.heads_q % c.heads_kv != 0)
    throw std::invalid_argument(
        "repeats >= 1, warmups >= 0, and heads_kv >= 1 dividing heads_q are needed");
  switch (c.dtype) {
    case FLASHLAB_FP16: return run_backward_typed<flashlab::cpu::fp16>(c, r);
    case FLASHLAB_BF16: return run_backward_typed<flashlab::cpu::bf16>(c, r);
  }
  throw std::invalid_argument(
      fmt::format("the backward takes fp16 or bf16 (dtype {} or {}), not dtype {}",
                  int(FLASHLAB_FP16), int(FLASHLAB_BF16), c.dtype));
}

// The cache in the layout the kernel reads: contiguous (batch, heads_kv, max_seq_len, d),
// or pages (num_pages, heads_kv, page_size, d) placed through the block table.
template <class T>
DeviceBuffer<T> cache_on_device(const float* x, const flashlab_runner_decode_call& c,
                                const BlockTable* table) {
  const std::size_t count = std::size_t(c.batch * c.heads_kv * c.max_seq_len * c.d);
  if (!table) return upload<T>(x, count);
  const std::vector<T> paged = flashlab::app::to_pages(rounded<T>(x, count), c.batch, c.heads_kv,
                                                       c.max_seq_len, c.d, *table);
  return DeviceBuffer<T>(paged.data(), paged.size());
}

template <class T>
void run_decode_typed(const flashlab_runner_decode_call& c, flashlab_runner_decode_result& r) {
  const std::size_t q_count = std::size_t(c.batch * c.heads_q * c.n_q * c.d),
                    lse_count = std::size_t(c.batch * c.heads_q * c.n_q);
  std::optional<BlockTable> table;
  if (c.page_size > 0)
    table = shuffled_block_table(c.batch, c.max_seq_len, c.page_size, c.table_seed);
  const DeviceBuffer<T> q = upload<T>(c.q, q_count),
                        k = cache_on_device<T>(c.k, c, table ? &*table : nullptr),
                        v = cache_on_device<T>(c.v, c, table ? &*table : nullptr);
  const DeviceBuffer<int32_t> seq_lens(c.seq_lens, std::size_t(c.batch));
  std::optional<DeviceBuffer<int32_t>> block_table;
  if (table) block_table.emplace(table->table.data(), table->table.size());
  DeviceBuffer<T> o(q_count);
  DeviceBuffer<float> lse(lse_count);

  flashlab_decode_params p{};
  p.q = q.ptr, p.k_cache = k.ptr, p.v_cache = v.ptr, p.o = o.ptr, p.lse = lse.ptr;
  p.seq_lens = seq_lens.ptr;
  contiguous(p.q_stride, c.heads_q, c.n_q, c.d);
  contiguous(p.o_stride, c.heads_q, c.n_q, c.d);
  if (table) {
    p.block_table = block_table->ptr;
    contiguous(p.k_stride, c.heads_kv, table->page_size, c.d);  // dim0 is the page
    p.block_table_stride = table->pages_per_seq;
    p.page_size = table->page_size, p.num_pages = table->num_pages;
    p.max_seq_len = table->capacity();
  } else {
    contiguous(p.k_stride, c.heads_kv, c.max_seq_len, c.d);
    p.max_seq_len = c.max_seq_len;
  }
  std::copy(std::begin(p.k_stride), std::end(p.k_stride), std::begin(p.v_stride));
  p.batch = c.batch, p.heads_q = c.heads_q, p.heads_kv = c.heads_kv, p.n_q = c.n_q, p.d = c.d;
  p.scale = 0, p.dtype = c.dtype, p.grid = c.grid;

  for (int64_t i = 0; i < c.configs; ++i) {
    p.num_splits = c.splits[i];
    library(flashlab_decode_num_splits(&p, &c.splits_used[i]));
    int64_t bytes = 0;
    library(flashlab_decode_workspace_bytes(&p, &bytes));
    r.workspace_bytes = std::max(r.workspace_bytes, bytes);
    DeviceBuffer<unsigned char> workspace{std::size_t(bytes)};
    p.workspace = workspace.ptr, p.workspace_bytes = bytes;
    c.median_ms[i] = time_calls(
        c.warmups, c.repeats, [&] { library(flashlab_decode(&p)); }, [](bool) {});
    library(flashlab_decode_check(&p));
    download(o, c.o + std::size_t(i) * q_count);
    download(lse, c.lse + std::size_t(i) * lse_count);
  }
}

void run_decode(const flashlab_runner_decode_call& c, flashlab_runner_decode_result& r) {
  if (c.repeats < 1 || c.warmups < 0 || c.configs < 1 || c.batch < 1 || c.max_seq_len < 1 ||
      c.page_size < 0)
    throw std::invalid_argument(
        "repeats, configs, batch and max_seq_len must be >= 1, warmups and page_size >= 0");
  for (int64_t b = 0; b < c.batch; ++b)
    if (c.seq_lens[b] < 0 || c.seq_lens[b] > c.max_seq_len)
      throw std::invalid_argument(
          fmt::format("sequence {} has length {}: lengths must lie in [0, max_seq_len = {}]", b,
                      c.seq_lens[b], c.max_seq_len));
  switch (c.dtype) {
    case FLASHLAB_FP16: return run_decode_typed<flashlab::cpu::fp16>(c, r);
    case FLASHLAB_BF16: return run_decode_typed<flashlab::cpu::bf16>(c, r);
  }
  throw std::invalid_argument(
      fmt::format("decode takes fp16 or bf16 (dtype {} or {}), not dtype {}", int(FLASHLAB_FP16),
                  int(FLASHLAB_BF16), c.dtype));
}

static_assert(FLASHLAB_RUNNER_RESCALE_COUNTS == FLASHLAB_RESCALE_COUNTS &&
                  FLASHLAB_RESCALE_FIRST == 0 && FLASHLAB_RESCALE_RESCALED == 1 &&
                  FLASHLAB_RESCALE_SKIPPED == 2 && FLASHLAB_RESCALE_KEPT == 3,
              "runner_abi.h passes the counts in flashlab_rescale_count's order");

// fa3 once with conditional rescaling on, its counts read back. The counts are poisoned
// before the call, so a library that did not write them cannot pass for one that counted.
template <class T>
void run_rescale_typed(const flashlab_runner_rescale_call& c, flashlab_runner_rescale_result& r) {
  const DeviceBuffer<T> q = upload<T>(c.q, std::size_t(c.n_q * c.d)),
                        k = upload<T>(c.k, std::size_t(c.n_k * c.d)),
                        v = upload<T>(c.v, std::size_t(c.n_k * c.d));
  DeviceBuffer<T> o(std::size_t(c.n_q * c.d));
  DeviceBuffer<int64_t> counts(FLASHLAB_RESCALE_COUNTS);
  check(cudaMemset(counts.ptr, 0xff, FLASHLAB_RESCALE_COUNTS * sizeof(int64_t)), "cudaMemset");
  flashlab_forward_params p{};
  p.q = q.ptr, p.k = k.ptr, p.v = v.ptr, p.o = o.ptr;
  contiguous(p.q_stride, 1, c.n_q, c.d);
  contiguous(p.o_stride, 1, c.n_q, c.d);
  contiguous(p.k_stride, 1, c.n_k, c.d);
  contiguous(p.v_stride, 1, c.n_k, c.d);
  p.batch = 1, p.heads_q = 1, p.heads_kv = 1, p.n_q = c.n_q, p.n_k = c.n_k, p.d = c.d;
  p.scale = 0;  // the default 1 / sqrt(d)
  p.dtype = c.dtype, p.causal = c.causal, p.kernel = FLASHLAB_KERNEL_FA3;
  flashlab_fa3_options options{};
  library(flashlab_fa3_default_options(&options));
  options.conditional_rescale = 1;
  options.rescale_counts = counts.ptr;
  library(flashlab_forward_fa3(&p, &options));
  check(cudaDeviceSynchronize(), "the fa3 call");
  const std::vector<int64_t> host = counts.read();
  std::copy(host.begin(), host.end(), r.counts);
  download(o, c.o);
}

void run_rescale(const flashlab_runner_rescale_call& c, flashlab_runner_rescale_result& r) {
  if (c.n_q < 1 || c.n_k < 1 || c.d < 1)
    throw std::invalid_argument(
        fmt::format("n_q = {}, n_k = {}, d = {}: each must be >= 1", c.n_q, c.n_k, c.d));
  switch (c.dtype) {
    case FLASHLAB_FP16: return run_rescale_typed<flashlab::cpu::fp16>(c, r);
    case FLASHLAB_BF16: return run_rescale_typed<flashlab::cpu::bf16>(c, r);
  }
  throw std::invalid_argument(
      fmt::format("fa3 counts rescales in fp16 or bf16 (dtype {} or {}), not dtype {}",
                  int(FLASHLAB_FP16), int(FLASHLAB_BF16), c.dtype));
}

// text into a caller's buffer of `size` bytes, cut to fit and always terminated.
void copy_text(char* to, std::size_t size, const std::string& text) {
  if (size == 0) return;
  const std::size_t n = std::min(text.size(), size - 1);
  std::memcpy(to, text.data(), n);
  to[n] = '\0';
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int flashlab_runner_version(void) {
  return FLASHLAB_RUNNER_VERSION;
}

__attribute__((visibility("default"))) int flashlab_runner_device(char* description, size_t size) {
  int count = 0;
  std::string text;
  bool present = false;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    text =
        "no CUDA device is present (this flashlab was built with CUDA, but there is no GPU to run "
        "on)";
  } else {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    text = fmt::format("{} ({} SMs)", prop.name, prop.multiProcessorCount);
    present = true;
  }
  copy_text(description, size, text);
  return present ? 1 : 0;
}

__attribute__((visibility("default"))) void flashlab_runner_forward(
    const flashlab_runner_call* call, flashlab_runner_result* result) {
  *result = {};
  try {
    result->median_ms = run(*call);
    result->ran = 1;
  } catch (const std::exception& e) {
    copy_text(result->message, sizeof result->message, e.what());
  }
}

__attribute__((visibility("default"))) void flashlab_runner_backward(
    const flashlab_runner_backward_call* call, flashlab_runner_backward_result* result) {
  *result = {};
  try {
    run_backward(*call, *result);
    result->ran = 1;
  } catch (const std::exception& e) {
    copy_text(result->message, sizeof result->message, e.what());
  }
}

__attribute__((visibility("default"))) void flashlab_runner_decode(
    const flashlab_runner_decode_call* call, flashlab_runner_decode_result* result) {
  *result = {};
  try {
    run_decode(*call, *result);
    result->ran = 1;
  } catch (const std::exception& e) {
    copy_text(result->message, sizeof result->message, e.what());
  }
}

__attribute__((visibility("default"))) void flashlab_runner_rescale(
    const flashlab_runner_rescale_call* call, flashlab_runner_rescale_result* result) {
  *result = {};
  try {
    run_rescale(*call, *result);
    result->ran = 1;
  } catch (const std::exception& e) {
    copy_text(result->message, sizeof result->message, e.what());
  }
}

}  // extern "C"
