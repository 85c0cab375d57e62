#include "flashlab/cpu/fp8_attention.hpp"

#include "flashlab/cpu/fp8.hpp"

#include <cmath>
#include <random>
#include <sstream>

namespace flashlab::cpu {

Matrix<float> E4m3Blocks::dequantised() const {
  Matrix<float> X = values;  // (rows, cols)
  for (Index r = 0; r < X.rows(); ++r) X.row(r) *= scales[static_cast<std::size_t>(r / block_rows)];
  return X;
}

E4m3Blocks quantise_e4m3(const Matrix<float>& X, Index block_rows) {
  if (block_rows < 1) {
    std::ostringstream why;
    why << "e4m3 block of " << block_rows << " rows: a block needs at least one row (use "
        << "the matrix's row count for one scale over the whole tensor)";
    throw InvalidArgument(why.str());
  }
  if (!X.allFinite())
    throw InvalidArgument(
        "e4m3 quantisation of a matrix with an inf or NaN entry: the scale "
        "(the block's largest magnitude / 448) must be finite");
  E4m3Blocks out{Matrix<float>(X.rows(), X.cols()), {}, block_rows};
  for (Index r0 = 0; r0 < X.rows(); r0 += block_rows) {
    const Index rows = std::min(block_rows, X.rows() - r0);
    const float amax = X.middleRows(r0, rows).cwiseAbs().maxCoeff();
    // The block's largest magnitude lands exactly on 448: the whole range is used.
    const float scale = amax > 0 ? amax / kE4m3Max : 1.0f;
    out.scales.push_back(scale);
    for (Index r = r0; r < r0 + rows; ++r)
      for (Index c = 0; c < X.cols(); ++c) out.values(r, c) = round_to_e4m3(X(r, c) / scale);
  }
  return out;
}

Matrix<double> random_hadamard(Index d, std::uint64_t seed) {
  if (d < 1 || (d & (d - 1)) != 0) {
    std::ostringstream why;
    why << "a Hadamard rotation of d = " << d
        << " channels: the Sylvester construction needs d to be a power of two (64, 128, 256)";
    throw InvalidArgument(why.str());
  }
  Matrix<double> H = Matrix<double>::Ones(1, 1);
  while (H.rows() < d) {  // H_2n = [[H_n, H_n], [H_n, -H_n]]
    const Index n = H.rows();
    Matrix<double> next(2 * n, 2 * n);
    next << H, H, H, -H;
    H = std::move(next);
  }
  std::mt19937_64 gen(seed);
  for (Index r = 0; r < d; ++r)
    if (gen() & 1) H.row(r) *= -1.0;  // diag(s) H: flip the signs of random rows
  return H / std::sqrt(static_cast<double>(d));
}

Matrix<float> fp8_attention(const Matrix<float>& Q_in, const Matrix<float>& K_in,
                            const Matrix<float>& V_in, const Fp8Options& fp8,
                            const AttentionOptions& options) {
  check_shapes(Q_in.rows(), Q_in.cols(), K_in.rows(), K_in.cols(), V_in.rows(), V_in.cols(),
               options);
  const Index n_q = Q_in.rows(), n_k = K_in.rows(), d = Q_in.cols();
  Matrix<float> Q = Q_in, K = K_in;  // (N_q, d), (N_k, d)
  if (fp8.incoherent) {
    const Matrix<double> M = random_hadamard(d, fp8.hadamard_seed);  // (d, d)
    Q = (Q_in.cast<double>() * M).cast<float>();
    K = (K_in.cast<double>() * M).cast<float>();
  }
  const bool blocks = fp8.scaling == Fp8Scaling::per_block;
  const auto Q8 = quantise_e4m3(Q, blocks ? fp8.tiles.Br : std::max<Index>(n_q, 1));
  const auto K8 = quantise_e4m3(K, blocks ? fp8.tiles.Bc : std::max<Index>(n_k, 1));
  const auto V8 = quantise_e4m3(V_in, blocks ? fp8.tiles.Bc : std::max<Index>(n_k, 1));
  const float scale = static_cast<float>(options.scale_for(d));

  // First product on e4m3 operands, fp32 accumulation, then the block scales: (N_q, N_k).
  Matrix<float> S = Q8.values * K8.values.transpose();
  for (Index r = 0; r < n_q; ++r)
    for (Index c = 0; c < n_k; ++c)
      S(r, c) *= Q8.scales[std::size_t(r / Q8.block_rows)] *
                 K8.scales[std::size_t(c / K8.block_rows)] * scale;

  Matrix<float> O = Matrix<float>::Zero(n_q, d);  // (N_q, d)
  if (n_k == 0) return O;
  for (Index r = 0; r < n_q; ++r) {
    const float m = S.row(r).maxCoeff();
    Eigen::RowVectorXf W = (S.row(r).array() - m).exp().matrix();  // (N_k), 0 < W <= 1
    const float l = W.sum();
    for (Index c = 0; c < n_k; ++c) W[c] = round_to_e4m3(W[c]);  // P's operand in e4m3
    // Second product per KV block, each with its V scale: O_r = sum_b sV_b (W8_b V8_b).
    for (Index k0 = 0; k0 < n_k; k0 += V8.block_rows) {
      const Index cols = std::min(V8.block_rows, n_k - k0);
      O.row(r) += V8.scales[std::size_t(k0 / V8.block_rows)] *
                  (W.segment(k0, cols) * V8.values.middleRows(k0, cols));
    }
    O.row(r) /= l;
  }
  return O;
}

}  // namespace flashlab::cpu
