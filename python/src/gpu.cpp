// flashlab._flashlab.gpu: the kernel table (flashlab/gpu/kernel_info.hpp, no CUDA needed) and
// the kernels through the C ABI of libflashlab.so (flashlab.h, backward.h, decode.h).
//
// The module never links CUDA: libflashlab.so is loaded with dlopen at the first GPU call,
// from $FLASHLAB_LIBRARY, else where this build put it, else by the loader's search. So
// `import flashlab` works on any machine, and a GPU call without the library says why.
//
// The calls take what the ABI takes, by the C structs' field names, as keyword arguments:
// device pointers as ints, strides in elements as 4-tuples, sizes, enums as ints, the
// stream as an int (cudaStream_t; 0 is the legacy default stream). flashlab.torch fills
// them from torch tensors. A bad status raises: ValueError for what the caller gave
// (shape, stride, alignment, argument, unsupported), RuntimeError for CUDA, cuBLAS and
// internal failures; the message is the library's, after its status name.
#include "bindings.hpp"

#include "flashlab/cpu/mask.hpp"
#include "flashlab/flashlab.h"
#include "flashlab/gpu/kernel_info.hpp"

#include <dlfcn.h>
#include <fmt/core.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace flashlab::python {

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

// The functions of the ABI, resolved once.
struct Library {
  void* handle = nullptr;
  std::string path, error;  // error: why it could not be loaded
  decltype(&flashlab_forward) forward = nullptr;
  decltype(&flashlab_last_error) last_error = nullptr;
  decltype(&flashlab_status_name) status_name = nullptr;
  decltype(&flashlab_abi_version) abi_version = nullptr;
  decltype(&flashlab_backward) backward = nullptr;
  decltype(&flashlab_backward_workspace_bytes) backward_workspace_bytes = nullptr;
  decltype(&flashlab_decode) decode = nullptr;
  decltype(&flashlab_decode_check) decode_check = nullptr;
  decltype(&flashlab_decode_num_splits) decode_num_splits = nullptr;
  decltype(&flashlab_decode_workspace_bytes) decode_workspace_bytes = nullptr;
};

std::vector<std::string> candidate_paths() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("FLASHLAB_LIBRARY"); env && *env) out.emplace_back(env);
#ifdef FLASHLAB_GPU_LIBRARY_BUILT_AT
  out.emplace_back(FLASHLAB_GPU_LIBRARY_BUILT_AT);
#endif
  out.emplace_back("libflashlab.so");
  return out;
}

template <class F>
bool resolve(Library& lib, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(lib.handle, name));
  if (!f)
    lib.error =
        fmt::format("{} has no symbol {}: it is not flashlab's GPU library", lib.path, name);
  return f != nullptr;
}

Library load() {
  Library lib;
  std::string tried;
  for (const std::string& path : candidate_paths()) {
    lib.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib.handle) {
      lib.path = path;
      break;
    }
    const char* why = dlerror();
    tried += fmt::format("\n  {}: {}", path, why ? why : "not loadable");
  }
  if (!lib.handle) {
    lib.error =
        "flashlab's GPU library (libflashlab.so) could not be loaded; it is built where "
        "nvcc exists (cmake --build --preset default --target flashlab_gpu), and "
        "FLASHLAB_LIBRARY may name it. Tried:" +
        tried;
    return lib;
  }
  if (!(resolve(lib, lib.forward, "flashlab_forward") &&
        resolve(lib, lib.last_error, "flashlab_last_error") &&
        resolve(lib, lib.status_name, "flashlab_status_name") &&
        resolve(lib, lib.abi_version, "flashlab_abi_version") &&
        resolve(lib, lib.backward, "flashlab_backward") &&
        resolve(lib, lib.backward_workspace_bytes, "flashlab_backward_workspace_bytes") &&
        resolve(lib, lib.decode, "flashlab_decode") &&
        resolve(lib, lib.decode_check, "flashlab_decode_check") &&
        resolve(lib, lib.decode_num_splits, "flashlab_decode_num_splits") &&
        resolve(lib, lib.decode_workspace_bytes, "flashlab_decode_workspace_bytes")))
    return lib;
  if (lib.abi_version() != FLASHLAB_ABI_VERSION)
    lib.error = fmt::format(
        "{} has ABI version {}; this module was built for version {}: "
        "rebuild one of them",
        lib.path, lib.abi_version(), FLASHLAB_ABI_VERSION);
  return lib;
}

const Library& library() {
  static const Library lib = load();
  if (!lib.error.empty()) throw std::runtime_error(lib.error);
  return lib;
}

// Raises for a failed call: ValueError for what the caller gave, RuntimeError otherwise.
void check(const Library& lib, flashlab_status status) {
  if (status == FLASHLAB_OK) return;
  const std::string message = fmt::format("{}: {}", lib.status_name(status), lib.last_error());
  switch (status) {
    case FLASHLAB_ERROR_CUDA:
    case FLASHLAB_ERROR_CUBLAS:
    case FLASHLAB_ERROR_INTERNAL: throw std::runtime_error(message);
    default: throw py::value_error(message);
  }
}

// Reading the keyword arguments into a C struct, field by field.
class Fields {
 public:
  explicit Fields(const py::kwargs& kwargs) : kwargs_(kwargs) {}

  template <class T>
  void get(const char* name, T& out) {
    if (!kwargs_.contains(name)) return;  // left as the struct's zero
    used_.emplace_back(name);
    out = kwargs_[name].cast<T>();
  }
  template <class T>
  void pointer(const char* name, T*& out) {
    std::uintptr_t address = 0;
    get(name, address);
    out = reinterpret_cast<T*>(address);
  }
  void strides(const char* name, int64_t (&out)[4]) {
    if (!kwargs_.contains(name)) return;
    used_.emplace_back(name);
    const auto s = kwargs_[name].cast<std::vector<int64_t>>();
    if (s.size() != 4)
      throw py::value_error(fmt::format(
          "{} has {} entries: strides are (batch, head, row, column), 4 entries", name, s.size()));
    for (int i = 0; i < 4; ++i) out[i] = s[i];
  }
  // TypeError for a keyword that is no field: a misspelt one would otherwise be ignored.
  void check_all_used(const char* function) const {
    for (const auto& item : kwargs_) {
      const std::string key = item.first.cast<std::string>();
      bool known = false;
      for (const auto& u : used_) known = known || u == key;
      if (!known)
        throw py::type_error(
            fmt::format("{}() got the keyword `{}`, which is no field of its "
                        "parameters",
                        function, key));
    }
  }

 private:
  const py::kwargs& kwargs_;
  std::vector<std::string> used_;
};

flashlab_forward_params forward_params(const py::kwargs& kwargs) {
  flashlab_forward_params p{};
  Fields f(kwargs);
  f.pointer("q", p.q), f.pointer("k", p.k), f.pointer("v", p.v), f.pointer("o", p.o);
  f.pointer("lse", p.lse);
  f.strides("q_stride", p.q_stride), f.strides("k_stride", p.k_stride);
  f.strides("v_stride", p.v_stride), f.strides("o_stride", p.o_stride);
  f.get("batch", p.batch), f.get("heads_q", p.heads_q), f.get("heads_kv", p.heads_kv);
  f.get("n_q", p.n_q), f.get("n_k", p.n_k), f.get("d", p.d), f.get("scale", p.scale);
  f.get("dtype", p.dtype), f.get("causal", p.causal), f.get("kernel", p.kernel);
  f.get("dropout_p", p.dropout_p), f.get("dropout_seed", p.dropout_seed);
  f.get("dropout_offset", p.dropout_offset);
  f.pointer("stream", p.stream);
  f.check_all_used("forward");
  return p;
}

flashlab_backward_params backward_params(const py::kwargs& kwargs, const char* function) {
  flashlab_backward_params p{};
  Fields f(kwargs);
  f.pointer("q", p.q), f.pointer("k", p.k), f.pointer("v", p.v), f.pointer("o", p.o);
  f.pointer("dout", p.dout), f.pointer("lse", p.lse);
  f.pointer("dq", p.dq), f.pointer("dk", p.dk), f.pointer("dv", p.dv);
  f.strides("q_stride", p.q_stride), f.strides("k_stride", p.k_stride);
  f.strides("v_stride", p.v_stride), f.strides("o_stride", p.o_stride);
  f.strides("dout_stride", p.dout_stride), f.strides("dq_stride", p.dq_stride);
  f.strides("dk_stride", p.dk_stride), f.strides("dv_stride", p.dv_stride);
  f.get("batch", p.batch), f.get("heads_q", p.heads_q), f.get("heads_kv", p.heads_kv);
  f.get("n_q", p.n_q), f.get("n_k", p.n_k), f.get("d", p.d), f.get("scale", p.scale);
  f.get("dtype", p.dtype), f.get("causal", p.causal), f.get("deterministic", p.deterministic);
  f.get("dropout_p", p.dropout_p), f.get("dropout_seed", p.dropout_seed);
  f.get("dropout_offset", p.dropout_offset);
  f.pointer("workspace", p.workspace), f.get("workspace_bytes", p.workspace_bytes);
  f.pointer("stream", p.stream);
  f.check_all_used(function);
  return p;
}

flashlab_decode_params decode_params(const py::kwargs& kwargs, const char* function) {
  flashlab_decode_params p{};
  Fields f(kwargs);
  f.pointer("q", p.q), f.pointer("k_cache", p.k_cache), f.pointer("v_cache", p.v_cache);
  f.pointer("o", p.o), f.pointer("lse", p.lse), f.pointer("seq_lens", p.seq_lens);
  f.pointer("block_table", p.block_table);
  f.strides("q_stride", p.q_stride), f.strides("k_stride", p.k_stride);
  f.strides("v_stride", p.v_stride), f.strides("o_stride", p.o_stride);
  f.get("block_table_stride", p.block_table_stride), f.get("page_size", p.page_size);
  f.get("num_pages", p.num_pages), f.get("batch", p.batch), f.get("heads_q", p.heads_q);
  f.get("heads_kv", p.heads_kv), f.get("n_q", p.n_q), f.get("max_seq_len", p.max_seq_len);
  f.get("d", p.d), f.get("scale", p.scale), f.get("dtype", p.dtype);
  f.get("num_splits", p.num_splits), f.get("kv_l2_policy", p.kv_l2_policy);
  f.get("grid", p.grid);
  f.pointer("workspace", p.workspace), f.get("workspace_bytes", p.workspace_bytes);
  f.pointer("stream", p.stream);
  f.check_all_used(function);
  return p;
}

// One kernel for (d, dtype), from the table: its facts, or why it does not take them.
py::dict kernel_info(const std::string& name, int64_t d, int32_t dtype) {
  const gpu::KernelRecord* record = gpu::find_kernel(name);
  if (!record) {
    std::string names;
    for (const auto& k : gpu::kKernels) names += (names.empty() ? "" : ", ") + std::string(k.name);
    throw py::value_error(fmt::format("unknown GPU kernel `{}`: the kernels are {}", name, names));
  }
  const gpu::KernelInfo info = gpu::kernel_info(record->id, d, dtype);
  std::vector<int64_t> head_dims(record->head_dims.values.begin(),
                                 record->head_dims.values.begin() + record->head_dims.count);
  std::vector<std::string> dtypes;
  for (flashlab_dtype t : gpu::kDtypes)
    if (record->dtypes.contains(t)) dtypes.emplace_back(gpu::dtype_name(t));
  const gpu::KernelConfig& c = info.config;
  return py::dict("name"_a = std::string(record->name), "id"_a = int(record->id),
                  "summary"_a = std::string(record->summary), "supported"_a = info.supported,
                  "reason"_a = info.reason, "head_dims"_a = head_dims,
                  "max_head_dim"_a = record->head_dims.largest(), "dtypes"_a = dtypes,
                  "dropout"_a = record->dropout, "Br"_a = c.Br, "Bc"_a = c.Bc,
                  "threads"_a = c.threads, "sram_bytes"_a = c.sram_bytes,
                  "blocks_per_sm"_a = c.blocks_per_sm, "kv_passes"_a = c.kv_passes,
                  "pointer_align_bytes"_a = c.pointer_align_bytes,
                  "stride_align_elements"_a = c.stride_align_elements);
}

}  // namespace

void bind_gpu(py::module_& m) {
  m.doc() = "The kernel table, and the GPU kernels through libflashlab.so's C ABI.";
  std::vector<std::string> names;
  for (const auto& k : gpu::kKernels) names.emplace_back(k.name);
  m.attr("KERNELS") = names;  // the ladder, simplest first
  py::dict ids, dtypes, causal;
  for (const auto& k : gpu::kKernels) ids[py::str(std::string(k.name))] = int(k.id);
  for (flashlab_dtype t : gpu::kDtypes) dtypes[py::str(std::string(gpu::dtype_name(t)))] = int(t);
  causal[py::str(std::string(cpu::to_string(cpu::Causal::none)))] = int(FLASHLAB_CAUSAL_NONE);
  causal[py::str(std::string(cpu::to_string(cpu::Causal::top_left)))] =
      int(FLASHLAB_CAUSAL_TOP_LEFT);
  causal[py::str(std::string(cpu::to_string(cpu::Causal::bottom_right)))] =
      int(FLASHLAB_CAUSAL_BOTTOM_RIGHT);
  m.attr("KERNEL_IDS") = ids;  // name -> flashlab_kernel
  m.attr("DTYPES") = dtypes;   // "fp32", "fp16", "bf16" -> flashlab_dtype
  m.attr("CAUSAL") = causal;   // the reference's names -> flashlab_causal
  py::dict grids;               // decode's grids (decode.h): "auto", "splits", "queue"
  grids["auto"] = int(FLASHLAB_DECODE_GRID_AUTO);
  grids["splits"] = int(FLASHLAB_DECODE_GRID_SPLITS);
  grids["queue"] = int(FLASHLAB_DECODE_GRID_QUEUE);
  m.attr("DECODE_GRIDS") = grids;
  m.attr("ABI_VERSION") = FLASHLAB_ABI_VERSION;
  m.def("kernel_info", &kernel_info, "name"_a, "d"_a, "dtype"_a,
        "What a kernel is for head dimension d and dtype (a flashlab_dtype): its facts, "
        "whether it takes them, and if not why.");
  m.def(
      "library",
      []() -> py::object {
        try {
          return py::str(library().path);
        } catch (const std::runtime_error&) {
          return py::none();
        }
      },
      "The path libflashlab.so was loaded from, or None where it cannot be loaded.");
  m.def(
      "library_error",
      []() -> std::string {
        try {
          library();
          return "";
        } catch (const std::runtime_error& e) {
          return e.what();
        }
      },
      "Why libflashlab.so cannot be loaded; empty when it can.");
  m.def(
      "forward",
      [](const py::kwargs& kwargs) {
        const auto p = forward_params(kwargs);
        const Library& lib = library();
        check(lib, lib.forward(&p));
      },
      "flashlab_forward: the fields of flashlab_forward_params as keywords.");
  m.def(
      "backward_workspace_bytes",
      [](const py::kwargs& kwargs) {
        const auto p = backward_params(kwargs, "backward_workspace_bytes");
        const Library& lib = library();
        int64_t bytes = 0;
        check(lib, lib.backward_workspace_bytes(&p, &bytes));
        return bytes;
      },
      "flashlab_backward_workspace_bytes for these flashlab_backward_params fields.");
  m.def(
      "backward",
      [](const py::kwargs& kwargs) {
        const auto p = backward_params(kwargs, "backward");
        const Library& lib = library();
        check(lib, lib.backward(&p));
      },
      "flashlab_backward: the fields of flashlab_backward_params as keywords.");
  m.def(
      "decode_workspace_bytes",
      [](const py::kwargs& kwargs) {
        const auto p = decode_params(kwargs, "decode_workspace_bytes");
        const Library& lib = library();
        int64_t bytes = 0;
        check(lib, lib.decode_workspace_bytes(&p, &bytes));
        return bytes;
      },
      "flashlab_decode_workspace_bytes for these flashlab_decode_params fields.");
  m.def(
      "decode_num_splits",
      [](const py::kwargs& kwargs) {
        const auto p = decode_params(kwargs, "decode_num_splits");
        const Library& lib = library();
        int32_t splits = 0;
        check(lib, lib.decode_num_splits(&p, &splits));
        return splits;
      },
      "flashlab_decode_num_splits: the split count decode would use.");
  m.def(
      "decode",
      [](const py::kwargs& kwargs) {
        const auto p = decode_params(kwargs, "decode");
        const Library& lib = library();
        check(lib, lib.decode(&p));
      },
      "flashlab_decode: the fields of flashlab_decode_params as keywords.");
  m.def(
      "decode_check",
      [](const py::kwargs& kwargs) {
        const auto p = decode_params(kwargs, "decode_check");
        const Library& lib = library();
        check(lib, lib.decode_check(&p));
      },
      "flashlab_decode_check: waits for the stream; raises if a length or page was bad.");
}

}  // namespace flashlab::python
