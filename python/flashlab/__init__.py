"""flashlab from Python: one algorithm (FlashAttention), three executors.

    import numpy as np, flashlab
    q, k, v = (np.random.randn(97, 64) for _ in range(3))
    r = flashlab.forward(q, k, v, causal="top-left")     # the CPU reference: r.O, r.L, r.tiles
    rep = flashlab.simulate("fa2", N=8192, d=128)         # the simulator: rep.bytes.total, ...
    for tile in flashlab.trace_example():                 # the 49/15 example, tile by tile
        print(tile.j, tile.m, tile.l, tile.U)

The CPU reference (float64 or float32 numpy arrays; one head 2-d (N, d), several 4-d
(batch, heads, N, d) with GQA): forward, naive, backward, naive_backward, decode,
forward_conditional, dropout_multipliers. The simulator: simulate, trace, trace_example,
profiles. The GPU kernels on torch tensors: flashlab.torch (imported on its own, it needs torch
and a GPU); the kernel table without either: kernels(), kernel_info().

Everything here is computed by flashlab's C++ libraries (the extension flashlab._flashlab);
bad input raises TypeError (a wrong dtype) or ValueError (a wrong shape or value) with the
library's own message.
"""
from . import _flashlab

_cpu, _sim, _gpu = _flashlab.cpu, _flashlab.sim, _flashlab.gpu

# The CPU reference.
forward = _cpu.forward
naive = _cpu.naive
backward = _cpu.backward
naive_backward = _cpu.naive_backward
decode = _cpu.decode
forward_conditional = _cpu.forward_conditional
dropout_multipliers = _cpu.dropout_multipliers
CAUSAL = tuple(_cpu.CAUSAL)  # the causal alignments, as the reference names them

# The simulator.
simulate = _sim.simulate
profiles = _sim.profiles


class Trace:
    """A per-tile trace of the FlashAttention-2 forward. Iterating yields the KV-tile records
    in the order the forward ran them (query tile by query tile, KV tiles in sweep order),
    each with i, j, q0, k0, rows, cols, kind, tile_max, alpha, m, l, U and bytes_read;
    query_tiles holds each query tile's load, its O = U / l and L = m + log l."""

    def __init__(self, record):
        self._record = record

    def __iter__(self):
        return iter(self._record.tiles)

    def __len__(self):
        return len(self._record.tiles)

    def __getattr__(self, name):  # N_q, N_k, d, Br, Bc, causal, dtype, counts, query_tiles, ...
        return getattr(self._record, name)

    def __repr__(self):
        r = self._record
        return (f"Trace(N_q={r.N_q}, N_k={r.N_k}, d={r.d}, Br={r.Br}, Bc={r.Bc}, "
                f"causal={r.causal!r}, {len(r.tiles)} tiles)")


def trace(**setup):
    """The FlashAttention-2 forward on random inputs (fp32), tile by tile: N, d, br, bc, causal,
    seed as `flashlab trace` takes them."""
    return Trace(_sim.trace(**setup))


def trace_example(kv_tile=2):
    """The course's worked example in fp64: one query, four keys whose exponentiated scores are
    1, 2, 4, 8, values 1, 2, 3, 4, kv_tile keys per tile. Its O is 49/15."""
    return Trace(_sim.trace_example(kv_tile))


# The kernel table (no GPU needed).
KERNELS = tuple(_gpu.KERNELS)  # the ladder, simplest first


def kernels():
    """The GPU kernels by name, simplest first."""
    return list(KERNELS)


def kernel_info(name, d, dtype="bf16"):
    """What kernel `name` is for head dimension d and dtype ("fp32", "fp16", "bf16"): its
    tiles, threads, SRAM, and whether it takes (d, dtype), and if not, why."""
    if dtype not in _gpu.DTYPES:
        raise ValueError(f"dtype {dtype!r} is unknown: use one of {', '.join(_gpu.DTYPES)}")
    import types
    return types.SimpleNamespace(**_gpu.kernel_info(name, d, _gpu.DTYPES[dtype]))
