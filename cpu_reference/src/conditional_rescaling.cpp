#include "flashlab/cpu/conditional_rescaling.hpp"

#include "flashlab/cpu/parallel.hpp"
#include "flashlab/cpu/score_tile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>
#include <numbers>
#include <sstream>
#include <string>
#include <tuple>

namespace flashlab::cpu {

namespace {
template <class Acc>
constexpr Acc minus_inf = -std::numeric_limits<Acc>::infinity();

}  // namespace

RescaleCounts& RescaleCounts::operator+=(const RescaleCounts& o) {
  first += o.first;
  rescaled += o.rescaled;
  skipped += o.skipped;
  kept += o.kept;
  return *this;
}

void RescaleCounts::add(RescaleAction action) {
  switch (action) {
    case RescaleAction::masked: break;
    case RescaleAction::first: ++first; break;
    case RescaleAction::rescaled: ++rescaled; break;
    case RescaleAction::skipped: ++skipped; break;
    case RescaleAction::kept: ++kept; break;
  }
}

double RescaleCounts::skipped_fraction() const {
  const Index standard = standard_rescales();
  return standard == 0 ? 0.0 : static_cast<double>(skipped) / static_cast<double>(standard);
}

RescaleAgreement compare_rescale_counts(const RescaleCounts& other,
                                        const RescaleCounts& reference) {
  constexpr Index kLeastSlack = 2, kGrowthsPerSlack = 100;  // 1% of the growths, at least 2
  RescaleAgreement a;
  a.slack = std::max(kLeastSlack, reference.standard_rescales() / kGrowthsPerSlack);
  const auto later = [](const RescaleCounts& c) { return c.rescaled + c.skipped + c.kept; };
  std::ostringstream why;
  if (other.first != reference.first)
    why << "first tiles differ (" << other.first << " against " << reference.first
        << "): the same shape must start the same rows";
  else if (later(other) != later(reference))
    why << "later updates differ (" << later(other) << " against " << later(reference)
        << "): the same shape must give every row the same tiles";
  for (const auto& [name, o, r] : {std::tuple{"rescaled", other.rescaled, reference.rescaled},
                                   std::tuple{"skipped", other.skipped, reference.skipped},
                                   std::tuple{"kept", other.kept, reference.kept}})
    if (why.tellp() == 0 && std::abs(o - r) > a.slack)
      why << name << " differs by " << std::abs(o - r) << " (" << o << " against " << r
          << "), more than the " << a.slack << " that rounding near the threshold explains";
  a.reason = why.str();
  a.agree = a.reason.empty();
  return a;
}

template <class Acc>
ConditionalState<Acc> ConditionalState<Acc>::empty(Index rows, Index d) {
  return {SoftmaxState<Acc>::empty(rows, d), Vector<Acc>::Constant(rows, minus_inf<Acc>)};
}

namespace {
// Which RescaleAction a row takes, given its base r, its running max and the tile's max.
template <class Acc>
RescaleAction choose_action(Acc r, Acc max_seen, Acc tile_max, Acc threshold_nat) {
  if (tile_max == minus_inf<Acc>) return RescaleAction::masked;
  if (r == minus_inf<Acc>) return RescaleAction::first;
  if (tile_max - r > threshold_nat) return RescaleAction::rescaled;
  if (tile_max > max_seen) return RescaleAction::skipped;
  return RescaleAction::kept;
}
}  // namespace

void check_rescale_variant(RescaleVariant variant) {
  if (variant != RescaleVariant::correct && variant != RescaleVariant::base_without_rescale)
    throw InvalidArgument("rescale variant " + std::to_string(static_cast<int>(variant)) +
                          " is not a RescaleVariant: use correct (0) or base_without_rescale (1)");
}

template <class Acc, class In>
RescaleStep<Acc> conditional_update(ConditionalState<Acc>& cs, const Matrix<Acc>& S,
                                    MatrixView<In> V, Acc threshold_nat,
                                    RescaleVariant variant) {
  check_rescale_variant(variant);
  SoftmaxState<Acc>& state = cs.state;  // state.m is the base r
  const Index rows = S.rows();
  RescaleStep<Acc> step{S.rowwise().maxCoeff(), Vector<Acc>::Ones(rows), Acc(0),
                        std::vector<RescaleAction>(static_cast<size_t>(rows))};
  Matrix<Acc> W = Matrix<Acc>::Zero(rows, S.cols());  // (rows, Bc) weights exp(S - r')

  for (Index row = 0; row < rows; ++row) {
    const Acc tile_max = step.tile_max[row];
    const RescaleAction action =
        choose_action(state.m[row], cs.max_seen[row], tile_max, threshold_nat);
    step.actions[static_cast<size_t>(row)] = action;
    if (action == RescaleAction::masked) continue;  // exp(-inf - (-inf)) would be NaN
    if (action == RescaleAction::first || action == RescaleAction::rescaled) {
      step.alpha[row] = std::exp(state.m[row] - tile_max);  // 0 for the first tile
      state.m[row] = tile_max;                                // the base moves to the max
    }
    cs.max_seen[row] = std::max(cs.max_seen[row], tile_max);
    W.row(row) = (S.row(row).array() - state.m[row]).exp();  // each weight <= exp(tau ln 2)
  }
  if (W.size() > 0) step.max_weight = W.maxCoeff();

  // The mistake the invariant forbids: the base has moved, but l and U are not told.
  const Vector<Acc> applied =
      variant == RescaleVariant::correct ? step.alpha : Vector<Acc>::Ones(rows);
  accumulate<Acc, In>(state, applied, std::move(W), V);
  return step;
}

template <class Acc, class In>
InvariantError invariant_error(const SoftmaxState<Acc>& state, const Matrix<Acc>& S_seen,
                               MatrixView<In> V_seen) {
  const Matrix<double> V64 = V_seen.template cast<double>();  // (n, d)
  const double v_max = V64.size() > 0 ? std::max(V64.cwiseAbs().maxCoeff(), 1e-300) : 1.0;
  const double inf = std::numeric_limits<double>::infinity();
  InvariantError worst;
  for (Index row = 0; row < state.rows(); ++row) {
    const double r = state.m[row];  // this row's base
    if (r == -inf) {  // nothing seen: the empty state, or a broken one
      const bool empty = state.l[row] == Acc(0) && state.U.row(row).isZero(0);
      if (!empty) worst = {inf, inf};
      continue;
    }
    double l_ref = 0;                                                 // l(r) in fp64
    Eigen::RowVectorXd U_ref = Eigen::RowVectorXd::Zero(V64.cols());  // (d) U(r) in fp64
    for (Index j = 0; j < S_seen.cols(); ++j) {
      if (S_seen(row, j) == minus_inf<Acc>) continue;  // masked: weight 0
      const double w = std::exp(static_cast<double>(S_seen(row, j)) - r);
      l_ref += w;
      U_ref += w * V64.row(j);
    }
    if (l_ref == 0) {
      worst = {inf, inf};
      continue;
    }
    const double l_err = std::abs(static_cast<double>(state.l[row]) - l_ref) / l_ref;
    const double U_err =
        (state.U.row(row).template cast<double>() - U_ref).cwiseAbs().maxCoeff() / (l_ref * v_max);
    worst.l = std::max(worst.l, l_err);
    worst.U = std::max(worst.U, U_err);
  }
  return worst;
}

template <class Acc>
void check_rescale_threshold(double tau_log2, Index n_k) {
  // l sums at most n_k weights of at most 2^tau: it stays finite while
  // tau + log2(n_k) < log2(largest finite Acc), i.e. below max_exponent.
  const double headroom = std::numeric_limits<Acc>::max_exponent -
                          std::log2(static_cast<double>(std::max<Index>(n_k, 1)));
  std::ostringstream why;
  if (!std::isfinite(tau_log2) || tau_log2 < 0) {
    why << "rescale threshold tau = " << tau_log2
        << " (log2 units) must be a finite number >= 0: 0 rescales at every growth of the "
           "max (the standard algorithm), FlashAttention-4 uses "
        << kFa4RescaleThresholdLog2;
  } else if (tau_log2 >= headroom) {
    why << "rescale threshold tau = " << tau_log2 << " is too large for N_k = " << n_k
        << " keys in this accumulator: weights up to 2^tau summed over N_k keys would "
           "overflow l; use tau < "
        << headroom;
  }
  if (!why.str().empty()) throw InvalidArgument(why.str());
}

namespace {
// One query tile, rows [q0, q0 + rows): the state stays on chip over every KV tile.
template <class In>
ConditionalResult<accum_t<In>> conditional_query_tile(MatrixView<In> Q_i, Index q0,
                                                      MatrixView<In> K, MatrixView<In> V,
                                                      Index n_q, const AttentionOptions& options,
                                                      const RescaleOptions& rescale) {
  using Acc = accum_t<In>;
  const Mask mask{options.causal, n_q, K.rows()};
  const Index rows = Q_i.rows(), d = Q_i.cols(), n_k = K.rows(), Bc = options.tiles.Bc;
  const Acc scale = static_cast<Acc>(options.scale_for(d));
  const Acc threshold_nat = static_cast<Acc>(rescale.tau_log2 * std::numbers::ln2);
  const Matrix<Acc> Q_i_scaled = Q_i.template cast<Acc>() * scale;  // (rows, d)

  auto cs = ConditionalState<Acc>::empty(rows, d);
  ConditionalResult<Acc> out;
  // Only for the invariant check: every score seen so far, masked ones -inf. (rows, N_k)
  Matrix<Acc> S_seen;
  if (rescale.verify_invariant) S_seen = Matrix<Acc>::Constant(rows, n_k, minus_inf<Acc>);

  for (Index j = 0; j < tile_count(n_k, Bc); ++j) {
    const Index k0 = j * Bc, cols = std::min(Bc, n_k - k0);
    const TileKind kind = mask.classify(q0, rows, k0, cols);
    count_tile(out.tiles, kind);
    if (kind == TileKind::skipped) continue;
    const Matrix<Acc> S =
        score_tile<In>(Q_i_scaled, K.middleRows(k0, cols), q0, k0, kind, mask, options);
    const auto step =
        conditional_update<Acc, In>(cs, S, V.middleRows(k0, cols), threshold_nat, rescale.variant);
    for (RescaleAction action : step.actions) out.rescales.add(action);
    out.max_weight = std::max(out.max_weight, step.max_weight);
    if (rescale.verify_invariant) {
      S_seen.middleCols(k0, cols) = S;
      const double error = invariant_error<Acc, In>(cs.state, S_seen, V).worst();
      out.invariant_error = std::max(out.invariant_error, error);
    }
  }
  auto [O, L] = finalize(cs.state);  // O = U(r) / l(r), L = r + log l(r): r cancels
  out.O = std::move(O);
  out.L = std::move(L);
  return out;
}
}  // namespace

template <class In>
ConditionalResult<accum_t<In>> forward_conditional(const Matrix<In>& Q, const Matrix<In>& K,
                                                   const Matrix<In>& V,
                                                   const AttentionOptions& options,
                                                   const RescaleOptions& rescale) {
  using Acc = accum_t<In>;
  check_shapes(Q.rows(), Q.cols(), K.rows(), K.cols(), V.rows(), V.cols(), options);
  check_rescale_threshold<Acc>(rescale.tau_log2, K.rows());
  check_rescale_variant(rescale.variant);  // here too: N_q = 0 never reaches an update
  const Index n_q = Q.rows(), Br = options.tiles.Br, Tr = tile_count(n_q, Br);
  std::vector<ConditionalResult<Acc>> tiles(static_cast<size_t>(Tr));

  parallel_for(Tr, [&](Index i) {  // query tiles are independent, as in forward_q_outer
    const Index q0 = i * Br, rows = std::min(Br, n_q - q0);
    tiles[static_cast<size_t>(i)] =
        conditional_query_tile<In>(Q.middleRows(q0, rows), q0, K, V, n_q, options, rescale);
  });

  ConditionalResult<Acc> out;
  out.O.resize(n_q, Q.cols());  // (N_q, d)
  out.L.resize(n_q);            // (N_q)
  for (Index i = 0; i < Tr; ++i) {
    const auto& tile = tiles[static_cast<size_t>(i)];
    out.O.middleRows(i * Br, tile.O.rows()) = tile.O;
    out.L.segment(i * Br, tile.L.size()) = tile.L;
    out.tiles += tile.tiles;
    out.rescales += tile.rescales;
    out.max_weight = std::max(out.max_weight, tile.max_weight);
    out.invariant_error = std::max(out.invariant_error, tile.invariant_error);
  }
  return out;
}

#define FLASHLAB_INSTANTIATE(Acc, In)                                                          \
  template RescaleStep<Acc> conditional_update(ConditionalState<Acc>&, const Matrix<Acc>&,    \
                                               MatrixView<In>, Acc, RescaleVariant);           \
  template InvariantError invariant_error(const SoftmaxState<Acc>&, const Matrix<Acc>&,       \
                                          MatrixView<In>);                                     \
  template ConditionalResult<Acc> forward_conditional(const Matrix<In>&, const Matrix<In>&,   \
                                                      const Matrix<In>&,                       \
                                                      const AttentionOptions&,                 \
                                                      const RescaleOptions&);
FLASHLAB_INSTANTIATE(double, double)
FLASHLAB_INSTANTIATE(float, float)
FLASHLAB_INSTANTIATE(float, bf16)
FLASHLAB_INSTANTIATE(float, fp16)
#undef FLASHLAB_INSTANTIATE

template struct ConditionalState<double>;
template struct ConditionalState<float>;
template void check_rescale_threshold<double>(double, Index);
template void check_rescale_threshold<float>(double, Index);

}  // namespace flashlab::cpu
