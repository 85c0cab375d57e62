// Standard attention as a framework runs it (the paper's Algorithm 0): three operators,
// each reading its inputs from HBM and writing its output back.
//   1. S = Q K^T / sqrt(d)    reads Q, K (2Nd)      writes S (N^2)
//   2. P = softmax(S)         reads S (N^2)         writes P (N^2)
//   3. O = P V                reads P, V (N^2 + Nd) writes O (Nd)
// In elements, 4N^2 + 4Nd. Each operand is counted once, as the paper counts it: a real
// GEMM tiles its output and re-reads operand tiles (mostly from the L2), which this model
// leaves out, so the baseline is if anything flattered. Under a causal mask the operators
// still materialise the whole of S and P; the masked scores are set to -inf in operator 2.
#include "program.hpp"

#include "flashlab/cpu/checked.hpp"
#include "flashlab/cpu/naive.hpp"

namespace flashlab::sim::detail {

Bytes naive_numerics_bytes(const Problem& p) {
  // cpu::naive_attention's S and P (N, N), its O (N, d) and L (N), and O handed out, in fp32.
  const Index floats = cpu::checked_add(cpu::checked_product({2, p.N, p.N}, "naive's S and P"),
                                        cpu::checked_product({p.N, 2 * p.d + 1}, "naive's O"),
                                        "naive's numbers");
  return cpu::checked_mul(floats, bytes_of(kAccumulator), "naive's numbers");
}

template <class In>
void run_naive(Machine& machine, const Problem& p, const Inputs<In>* in, Outputs* out) {
  const Index N = p.N, d = p.d;
  const auto gQ = machine.add_tensor("Q", N, d, p.dtype);
  const auto gK = machine.add_tensor("K", N, d, p.dtype);
  const auto gV = machine.add_tensor("V", N, d, p.dtype);
  const auto gS = machine.add_tensor("S", N, N, p.dtype);
  const auto gP = machine.add_tensor("P", N, N, p.dtype);
  const auto gO = machine.add_tensor("O", N, d, p.dtype);

  machine.read_through(gQ);
  machine.read_through(gK);
  machine.compute("S = Q K^T", score_ops(N, N, d), {}, std::nullopt);
  machine.write_through(gS);

  machine.read_through(gS);
  machine.compute("P = softmax(S)", softmax_ops(N, N), {}, std::nullopt);
  machine.write_through(gP);

  machine.read_through(gP);
  machine.read_through(gV);
  machine.compute("O = P V", score_ops(N, d, N), {}, std::nullopt);
  machine.write_through(gO);

  if (in) {  // the three operators' numbers are cpu_reference's naive attention, as is
    cpu::AttentionOptions options;
    options.causal = p.causal;
    const auto result = cpu::naive_attention<In>(in->Q, in->K, in->V, options);
    out->O = result.O.template cast<float>();
    out->L.resize(0);
  }
}

template void run_naive<float>(Machine&, const Problem&, const Inputs<float>*, Outputs*);
template void run_naive<cpu::bf16>(Machine&, const Problem&, const Inputs<cpu::bf16>*,
                                   Outputs*);
template void run_naive<cpu::fp16>(Machine&, const Problem&, const Inputs<cpu::fp16>*,
                                   Outputs*);

}  // namespace flashlab::sim::detail
