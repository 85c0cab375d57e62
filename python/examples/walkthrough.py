"""A walk through flashlab from Python: the 49/15 example tile by tile, then a simulated sweep
of the HBM bytes of naive attention, FlashAttention-1 and FlashAttention-2 over N, plotted.

    PYTHONPATH=build/python python3 python/examples/walkthrough.py --plot sweep.png

Every number printed comes from flashlab's C++ libraries: the trace from the CPU reference's
forward pass, the bytes from the simulator.
"""
import argparse
import math
from fractions import Fraction

import flashlab


def worked_example():
    """One query, four keys whose exponentiated scores are 1, 2, 4, 8, values 1, 2, 3, 4,
    seen two keys at a time: the running state (m, l, U) after each tile, then O = U / l."""
    print("The 49/15 example: one query, KV tiles of two keys")
    trace = flashlab.trace_example(kv_tile=2)
    for tile in trace:  # in the order the forward ran them
        print(f"  KV tile {tile.j} (keys {tile.k0}-{tile.k0 + tile.cols - 1}): "
              f"rowmax(S) = {tile.tile_max[0]:.6f}  alpha = {tile.alpha[0]:.6f}  "
              f"m = {tile.m[0]:.6f}  l = {tile.l[0]:.6f}  U = {tile.U[0, 0]:.6f}  "
              f"({tile.bytes_read} bytes of K and V read)")
    o = trace.query_tiles[0].O[0, 0]
    # Weights exp(S - m) are relative to the base m: l exp(m) is the plain sum 1 + 2 + 4 + 8.
    last = list(trace)[-1]
    print(f"  l exp(m) = {last.l[0] * math.exp(last.m[0]):.6f}, the sum of the exponentials")
    print(f"  O = U / l = {o:.17g}; 49/15 = {float(Fraction(49, 15)):.17g}")
    return o


def sweep(n_values, d=64, dtype="bf16", profile="h200"):
    """The count-only programs over N: HBM bytes per algorithm."""
    algorithms = ["naive", "fa1", "fa2"]
    rows = {a: [flashlab.simulate(a, N=n, d=d, dtype=dtype, profile=profile)
                for n in n_values] for a in algorithms}
    print(f"\nHBM bytes, d = {d}, {dtype}, SRAM of the {profile}'s SM "
          f"({rows['fa2'][0].inputs.sram_bytes} bytes)")
    print("  N       " + "".join(f"{a:>16}" for a in algorithms) + "   fa2 binds on")
    for i, n in enumerate(n_values):
        print(f"  {n:<8}" + "".join(f"{rows[a][i].bytes.total:>16,}" for a in algorithms) +
              f"   {rows['fa2'][i].bound.binds}")
    return rows


def plot(n_values, rows, path):
    import matplotlib
    matplotlib.use("Agg")  # a file, no window
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for algorithm, reports in rows.items():
        ax.loglog(n_values, [r.bytes.total for r in reports], marker="o", label=algorithm)
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("HBM bytes read + written")
    ax.set_title("Simulated HBM traffic of one attention head")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    print(f"\nwrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", help="write the sweep's plot to this PNG file")
    parser.add_argument("--max-n", type=int, default=16384, help="largest N of the sweep")
    args = parser.parse_args()
    worked_example()
    n_values = [n for n in (2 ** e for e in range(9, 25)) if n <= args.max_n]
    rows = sweep(n_values)
    if args.plot:
        plot(n_values, rows, args.plot)


if __name__ == "__main__":
    main()
