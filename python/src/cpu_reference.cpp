// flashlab._flashlab.cpu: the CPU reference (cpu_reference/) on numpy arrays.
//
// One head is 2-d: q (N_q, d), k and v (N_k, d). Several are 4-d, (batch, heads, N, d), with
// grouped-query attention when k and v have fewer heads than q (query head h reads KV head
// h / (heads_q / heads_kv)). float64 in, float64 out; float32 in, computed and returned in
// fp32. Every result is a namespace whose fields carry the papers' names: O, L (the
// log-sum-exp m + log l), dQ, dK, dV, D = rowsum(dO * O), and the tile counts.
#include "bindings.hpp"
#include "convert.hpp"

#include "flashlab/cpu/backward.hpp"
#include "flashlab/cpu/backward_multihead.hpp"
#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/conditional_rescaling.hpp"
#include "flashlab/cpu/decode.hpp"
#include "flashlab/cpu/dropout.hpp"
#include "flashlab/cpu/forward.hpp"
#include "flashlab/cpu/multihead.hpp"
#include "flashlab/cpu/naive.hpp"
#include "flashlab/cpu/naive_backward.hpp"

#include <fmt/core.h>
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <array>
#include <optional>
#include <utility>
#include <vector>

namespace flashlab::python {

namespace {

using namespace pybind11::literals;

constexpr std::array kCausal = {cpu::Causal::none, cpu::Causal::top_left,
                                cpu::Causal::bottom_right};

// "none", "top-left" or "bottom-right", as cpu::to_string names them.
cpu::Causal parse_causal(const std::string& name) {
  std::vector<std::string> names;
  for (cpu::Causal c : kCausal) {
    if (cpu::to_string(c) == name) return c;
    names.emplace_back(cpu::to_string(c));
  }
  throw py::value_error(
      fmt::format("causal = '{}' is not an alignment: use '{}'", name, fmt::join(names, "', '")));
}

// The merge trees of cpu::MergeOrder, by the enum's own names.
constexpr std::array<std::pair<std::string_view, cpu::MergeOrder>, 3> kMergeOrders = {{
    {"left_to_right", cpu::MergeOrder::left_to_right},
    {"balanced_tree", cpu::MergeOrder::balanced_tree},
    {"random_tree", cpu::MergeOrder::random_tree},
}};

cpu::MergeOrder parse_merge_order(const std::string& name) {
  std::vector<std::string_view> names;
  for (const auto& [n, order] : kMergeOrders) {
    if (n == name) return order;
    names.push_back(n);
  }
  throw py::value_error(
      fmt::format("merge_order = '{}' is unknown: use '{}'", name, fmt::join(names, "', '")));
}

// The two loop orders of the tiled forward and backward, by the functions' names.
enum class Order { q_outer, kv_outer };
Order parse_order(const std::string& name) {
  if (name == "q_outer") return Order::q_outer;
  if (name == "kv_outer") return Order::kv_outer;
  throw py::value_error(fmt::format(
      "order = '{}' is unknown: use 'q_outer' (FlashAttention-2: query tiles outside) or "
      "'kv_outer' (FlashAttention-1 forward, FlashAttention-2 backward: KV tiles outside)",
      name));
}

cpu::RescaleVariant parse_variant(const std::string& name) {
  if (name == "correct") return cpu::RescaleVariant::correct;
  if (name == "base_without_rescale") return cpu::RescaleVariant::base_without_rescale;
  throw py::value_error(fmt::format(
      "variant = '{}' is unknown: use 'correct' or 'base_without_rescale' (wrong on purpose)",
      name));
}

// The options every call shares.
struct Common {
  std::string causal = "none";
  std::optional<double> scale;
  Index br = cpu::TileSizes{}.Br, bc = cpu::TileSizes{}.Bc;
  bool check_finite = false;

  cpu::AttentionOptions options() const {
    cpu::AttentionOptions o;
    o.causal = parse_causal(causal);
    o.scale = scale;
    o.tiles = {br, bc};
    o.check_finite = check_finite;
    return o;
  }
};

// Dropout (p, seed, offset); none at p = 0, where the mask would keep every weight at 1.
std::optional<cpu::Dropout> dropout_of(double p, std::uint64_t seed, std::uint32_t offset) {
  if (p == 0) return std::nullopt;
  cpu::Dropout d{p, seed, offset};
  cpu::check_dropout(d);
  return d;
}

// The mask one head's call draws from (the rule's batch 0, head 0), kept alive for the
// call; a null pointer without dropout.
class HeadMask {
 public:
  explicit HeadMask(const std::optional<cpu::Dropout>& dropout) {
    if (dropout) mask_.emplace(*dropout);
  }
  const cpu::DropoutMask* get() const { return mask_ ? &*mask_ : nullptr; }

 private:
  std::optional<cpu::DropoutMask> mask_;
};

py::object tile_counts(const cpu::TileCounts& t) {
  return namespace_of(
      py::dict("computed"_a = t.computed, "partial"_a = t.partial, "skipped"_a = t.skipped));
}

// Every input is 2-d (one head) or every input is 4-d; the dtype of q throughout.
int heads_layout(const std::vector<std::pair<const char*, const py::array*>>& inputs) {
  const py::array& q = *inputs.front().second;
  float_of(q, inputs.front().first);
  const int ndim = int(q.ndim());
  if (ndim != 2 && ndim != 4)
    check_ndim(q, inputs.front().first, 2, "(N, d) for one head, or 4-d (batch, heads, N, d)");
  for (const auto& [name, a] : inputs) {
    check_same_dtype(*a, name, q, inputs.front().first);
    check_ndim(*a, name, ndim, ndim == 2 ? "(N, d), like q" : "(batch, heads, N, d), like q");
  }
  return ndim;
}

template <class F>
py::object dispatch(const py::array& q, F&& f) {
  if (float_of(q, "q") == Float::f64) return f(double{});
  return f(float{});
}

py::object forward(const py::array& q, const py::array& k, const py::array& v,
                   const std::string& order, const Common& c, double dropout_p, std::uint64_t seed,
                   std::uint32_t offset) {
  const int ndim = heads_layout({{"q", &q}, {"k", &k}, {"v", &v}});
  const Order o = parse_order(order);
  const auto options = c.options();
  const auto dropout = dropout_of(dropout_p, seed, offset);
  return dispatch(q, [&](auto tag) -> py::object {
    using T = decltype(tag);
    if (ndim == 4) {
      if (o != Order::q_outer)
        throw py::value_error(
            "order = 'kv_outer' runs one head: give 2-d (N, d) inputs, or use order = "
            "'q_outer' for (batch, heads, N, d)");
      const auto Q = to_heads<T>(q), K = to_heads<T>(k), V = to_heads<T>(v);
      const cpu::MultiHeadResult<T> r =
          without_gil([&] { return cpu::forward_multihead<T>(Q, K, V, options, dropout); });
      return namespace_of(py::dict("O"_a = to_numpy(r.O), "L"_a = to_numpy(r.L, true),
                                   "tiles"_a = tile_counts(r.tiles)));
    }
    const auto Q = to_matrix<T>(q), K = to_matrix<T>(k), V = to_matrix<T>(v);
    const HeadMask mask(dropout);
    const cpu::DropoutMask* m = mask.get();
    const cpu::ForwardResult<T> r = without_gil([&] {
      return o == Order::q_outer ? cpu::forward_q_outer<T>(Q, K, V, options, {}, m)
                                 : cpu::forward_kv_outer<T>(Q, K, V, options, {}, m);
    });
    return namespace_of(
        py::dict("O"_a = to_numpy(r.O), "L"_a = to_numpy(r.L), "tiles"_a = tile_counts(r.tiles)));
  });
}

py::object naive(const py::array& q, const py::array& k, const py::array& v, const Common& c,
                 double dropout_p, std::uint64_t seed, std::uint32_t offset) {
  heads_layout({{"q", &q}, {"k", &k}, {"v", &v}});
  check_ndim(q, "q", 2, "(N_q, d): the naive attention runs one head");
  const auto options = c.options();
  const auto dropout = dropout_of(dropout_p, seed, offset);
  return dispatch(q, [&](auto tag) -> py::object {
    using T = decltype(tag);
    const HeadMask mask(dropout);
    const auto r = cpu::naive_attention<T>(to_matrix<T>(q), to_matrix<T>(k), to_matrix<T>(v),
                                           options, cpu::SoftmaxKind::stable, mask.get());
    return namespace_of(py::dict("S"_a = to_numpy(r.S), "P"_a = to_numpy(r.P),
                                 "O"_a = to_numpy(r.O), "L"_a = to_numpy(r.L)));
  });
}

py::object backward(const py::array& q, const py::array& k, const py::array& v, const py::array& o,
                    const py::array& lse, const py::array& dout, const std::string& order,
                    const Common& c, double dropout_p, std::uint64_t seed, std::uint32_t offset) {
  const int ndim = heads_layout({{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}, {"do", &dout}});
  check_same_dtype(lse, "lse", q, "q");
  check_ndim(
      lse, "lse", ndim - 1,
      ndim == 2 ? "(N_q), one entry per query row" : "(batch, heads_q, N_q), as forward returns L");
  const Order ord = parse_order(order);
  const auto options = c.options();
  const auto dropout = dropout_of(dropout_p, seed, offset);
  return dispatch(q, [&](auto tag) -> py::object {
    using T = decltype(tag);
    if (ndim == 4) {
      if (ord != Order::kv_outer)
        throw py::value_error(
            "order = 'q_outer' runs one head: give 2-d (N, d) inputs, or use order = "
            "'kv_outer' for (batch, heads, N, d)");
      // L as forward_multihead keeps it: (batch, heads_q, N_q, 1).
      const py::array lse4 =
          py::array(lse).reshape({lse.shape(0), lse.shape(1), lse.shape(2), py::ssize_t{1}});
      const auto Q = to_heads<T>(q), K = to_heads<T>(k), V = to_heads<T>(v), O = to_heads<T>(o),
                 L = to_heads<T>(lse4), dO = to_heads<T>(dout);
      const cpu::MultiHeadGradients<T> g = without_gil(
          [&] { return cpu::backward_multihead<T>(Q, K, V, O, L, dO, options, dropout); });
      return namespace_of(py::dict("dQ"_a = to_numpy(g.dQ), "dK"_a = to_numpy(g.dK),
                                   "dV"_a = to_numpy(g.dV), "tiles"_a = tile_counts(g.tiles)));
    }
    const auto Q = to_matrix<T>(q), K = to_matrix<T>(k), V = to_matrix<T>(v), O = to_matrix<T>(o),
               dO = to_matrix<T>(dout);
    const auto L = to_vector<T>(lse);
    const HeadMask mask(dropout);
    const cpu::DropoutMask* m = mask.get();
    const cpu::Gradients<T> g = without_gil([&] {
      return ord == Order::kv_outer ? cpu::backward_kv_outer<T>(Q, K, V, O, L, dO, options, m)
                                    : cpu::backward_q_outer<T>(Q, K, V, O, L, dO, options, m);
    });
    return namespace_of(py::dict("dQ"_a = to_numpy(g.dQ), "dK"_a = to_numpy(g.dK),
                                 "dV"_a = to_numpy(g.dV), "D"_a = to_numpy(g.D),
                                 "tiles"_a = tile_counts(g.tiles)));
  });
}

py::object naive_backward(const py::array& q, const py::array& k, const py::array& v,
                          const py::array& dout, const Common& c, double dropout_p,
                          std::uint64_t seed, std::uint32_t offset) {
  heads_layout({{"q", &q}, {"k", &k}, {"v", &v}, {"do", &dout}});
  check_ndim(q, "q", 2, "(N_q, d): the naive backward runs one head");
  const auto options = c.options();
  const auto dropout = dropout_of(dropout_p, seed, offset);
  return dispatch(q, [&](auto tag) -> py::object {
    using T = decltype(tag);
    const HeadMask mask(dropout);
    const auto g = cpu::naive_backward<T>(to_matrix<T>(q), to_matrix<T>(k), to_matrix<T>(v),
                                          to_matrix<T>(dout), options, mask.get());
    return namespace_of(py::dict("P"_a = to_numpy(g.P), "O"_a = to_numpy(g.O),
                                 "dP"_a = to_numpy(g.dP), "D"_a = to_numpy(g.D),
                                 "dQ"_a = to_numpy(g.dQ), "dK"_a = to_numpy(g.dK),
                                 "dV"_a = to_numpy(g.dV)));
  });
}

py::object decode(const py::array& q, const py::array& k, const py::array& v, Index splits,
                  const std::string& merge_order, std::uint64_t order_seed,
                  const std::optional<std::vector<Index>>& kv_lengths, const Common& c) {
  const int ndim = heads_layout({{"q", &q}, {"k", &k}, {"v", &v}});
  const cpu::DecodeOptions d{splits, parse_merge_order(merge_order), order_seed};
  const auto options = c.options();
  if (ndim == 2 && kv_lengths)
    throw py::value_error(
        "kv_lengths gives one length per batch entry: give 4-d (batch, heads, N, d) inputs");
  return dispatch(q, [&](auto tag) -> py::object {
    using T = decltype(tag);
    if (ndim == 4) {
      const auto r = cpu::decode_multihead<T>(to_heads<T>(q), to_heads<T>(k), to_heads<T>(v), d,
                                              options, kv_lengths);
      return namespace_of(py::dict("O"_a = to_numpy(r.O), "L"_a = to_numpy(r.L, true),
                                   "empty_segments"_a = r.empty_segments));
    }
    const auto r = cpu::decode<T>(to_matrix<T>(q), to_matrix<T>(k), to_matrix<T>(v), d, options);
    return namespace_of(py::dict("O"_a = to_numpy(r.O), "L"_a = to_numpy(r.L),
                                 "empty_segments"_a = r.empty_segments));
  });
}

py::object forward_conditional(const py::array& q, const py::array& k, const py::array& v,
                               double tau_log2, const std::string& variant, bool verify_invariant,
                               const Common& c) {
  heads_layout({{"q", &q}, {"k", &k}, {"v", &v}});
  check_ndim(q, "q", 2, "(N_q, d): conditional rescaling runs one head");
  const cpu::RescaleOptions rescale{tau_log2, parse_variant(variant), verify_invariant};
  const auto options = c.options();
  return dispatch(q, [&](auto tag) -> py::object {
    using T = decltype(tag);
    const auto r = cpu::forward_conditional<T>(to_matrix<T>(q), to_matrix<T>(k), to_matrix<T>(v),
                                               options, rescale);
    const auto& n = r.rescales;
    const py::object rescales = namespace_of(
        py::dict("first"_a = n.first, "rescaled"_a = n.rescaled, "skipped"_a = n.skipped,
                 "kept"_a = n.kept, "standard_rescales"_a = n.standard_rescales(),
                 "skipped_fraction"_a = n.skipped_fraction()));
    return namespace_of(py::dict("O"_a = to_numpy(r.O), "L"_a = to_numpy(r.L),
                                 "tiles"_a = tile_counts(r.tiles), "rescales"_a = rescales,
                                 "max_weight"_a = double(r.max_weight),
                                 "invariant_error"_a = r.invariant_error));
  });
}

py::array dropout_multipliers(double p, std::uint64_t seed, std::uint32_t offset, Index rows,
                              Index cols, Index batch, Index head, Index row0, Index col0) {
  const cpu::DropoutMask mask(cpu::Dropout{p, seed, offset}, batch, head);
  cpu::check_nonnegative(rows, "rows");
  cpu::check_nonnegative(cols, "cols");
  return to_numpy(mask.multipliers<double>(row0, rows, col0, cols));
}

// The keyword arguments every attention call takes, with the C++ defaults.
#define FLASHLAB_COMMON_ARGS                                                \
  py::arg("causal") = std::string("none"), py::arg("scale") = std::nullopt, \
  py::arg("br") = cpu::TileSizes{}.Br, py::arg("bc") = cpu::TileSizes{}.Bc, \
  py::arg("check_finite") = false
#define FLASHLAB_DROPOUT_ARGS                                     \
  py::arg("dropout_p") = 0.0, py::arg("seed") = std::uint64_t{0}, \
  py::arg("offset") = std::uint32_t(0)

Common common(std::string causal, std::optional<double> scale, Index br, Index bc,
              bool check_finite) {
  return Common{std::move(causal), scale, br, bc, check_finite};
}

}  // namespace

void bind_cpu_reference(py::module_& m) {
  m.doc() =
      "The CPU reference on numpy arrays: exact numerics (float64, or float32) of every "
      "algorithm flashlab teaches.";
  m.def(
      "forward",
      [](const py::array& q, const py::array& k, const py::array& v, const std::string& order,
         std::string causal, std::optional<double> scale, Index br, Index bc, bool check_finite,
         double p, std::uint64_t seed, std::uint32_t offset) {
        return forward(q, k, v, order, common(causal, scale, br, bc, check_finite), p, seed,
                       offset);
      },
      "q"_a, "k"_a, "v"_a, py::kw_only(), "order"_a = "q_outer", FLASHLAB_COMMON_ARGS,
      FLASHLAB_DROPOUT_ARGS,
      "The tiled forward: O and L = m + log l, and the score tiles computed, partial and "
      "skipped. order 'q_outer' is FlashAttention-2 (2-d or 4-d inputs, GQA), 'kv_outer' "
      "FlashAttention-1 (2-d).");
  m.def(
      "naive",
      [](const py::array& q, const py::array& k, const py::array& v, std::string causal,
         std::optional<double> scale, Index br, Index bc, bool check_finite, double p,
         std::uint64_t seed, std::uint32_t offset) {
        return naive(q, k, v, common(causal, scale, br, bc, check_finite), p, seed, offset);
      },
      "q"_a, "k"_a, "v"_a, py::kw_only(), FLASHLAB_COMMON_ARGS, FLASHLAB_DROPOUT_ARGS,
      "Three operators, S and P materialised: S, P (before dropout), O and L.");
  m.def(
      "backward",
      [](const py::array& q, const py::array& k, const py::array& v, const py::array& o,
         const py::array& lse, const py::array& dout, const std::string& order, std::string causal,
         std::optional<double> scale, Index br, Index bc, bool check_finite, double p,
         std::uint64_t seed, std::uint32_t offset) {
        return backward(q, k, v, o, lse, dout, order, common(causal, scale, br, bc, check_finite),
                        p, seed, offset);
      },
      "q"_a, "k"_a, "v"_a, "o"_a, "lse"_a, "do"_a, py::kw_only(), "order"_a = "kv_outer",
      FLASHLAB_COMMON_ARGS, FLASHLAB_DROPOUT_ARGS,
      "The backward with recomputation from L: dQ, dK, dV (and D = rowsum(dO * O) for one "
      "head). 4-d inputs sum dK and dV over the query heads that share a KV head.");
  m.def(
      "naive_backward",
      [](const py::array& q, const py::array& k, const py::array& v, const py::array& dout,
         std::string causal, std::optional<double> scale, Index br, Index bc, bool check_finite,
         double p, std::uint64_t seed, std::uint32_t offset) {
        return naive_backward(q, k, v, dout, common(causal, scale, br, bc, check_finite), p, seed,
                              offset);
      },
      "q"_a, "k"_a, "v"_a, "do"_a, py::kw_only(), FLASHLAB_COMMON_ARGS, FLASHLAB_DROPOUT_ARGS,
      "The backward of the three operators, P and dP materialised.");
  m.def(
      "decode",
      [](const py::array& q, const py::array& k, const py::array& v, Index splits,
         const std::string& merge_order, std::uint64_t order_seed,
         const std::optional<std::vector<Index>>& kv_lengths, std::string causal,
         std::optional<double> scale, Index br, Index bc, bool check_finite) {
        return decode(q, k, v, splits, merge_order, order_seed, kv_lengths,
                      common(causal, scale, br, bc, check_finite));
      },
      "q"_a, "k"_a, "v"_a, py::kw_only(), "splits"_a = cpu::DecodeOptions{}.splits,
      "merge_order"_a = "balanced_tree", "order_seed"_a = std::uint64_t{0},
      "kv_lengths"_a = std::nullopt, FLASHLAB_COMMON_ARGS,
      "Split-KV decode: the KV cut into `splits` segments, their states (m, l, U) merged in "
      "the given tree. 4-d inputs take GQA and kv_lengths (valid keys per batch entry).");
  m.def(
      "forward_conditional",
      [](const py::array& q, const py::array& k, const py::array& v, double tau_log2,
         const std::string& variant, bool verify_invariant, std::string causal,
         std::optional<double> scale, Index br, Index bc, bool check_finite) {
        return forward_conditional(q, k, v, tau_log2, variant, verify_invariant,
                                   common(causal, scale, br, bc, check_finite));
      },
      "q"_a, "k"_a, "v"_a, py::kw_only(), "tau_log2"_a = cpu::kFa4RescaleThresholdLog2,
      "variant"_a = "correct", "verify_invariant"_a = false, FLASHLAB_COMMON_ARGS,
      "FlashAttention-4's conditional rescaling: O, L and the counts of rescales performed "
      "(rescaled) and saved (skipped).");
  m.def("dropout_multipliers", &dropout_multipliers, "p"_a, "seed"_a, "offset"_a, "rows"_a,
        "cols"_a, py::kw_only(), "batch"_a = 0, "head"_a = 0, "row0"_a = 0, "col0"_a = 0,
        "Z (rows, cols) of one (batch, head): 0 where the Philox rule drops a weight, 1/(1 - p) "
        "where it keeps it.");
  std::vector<std::string> causal;
  for (cpu::Causal c : kCausal) causal.emplace_back(cpu::to_string(c));
  m.attr("CAUSAL") = causal;
}

}  // namespace flashlab::python
