#!/usr/bin/python3
"""Fits the degree-3 polynomial p(f) ~ 2^f on [0, 1] of gpu/include/flashlab/gpu/exp2_software.hpp.

Minimax of the relative error (p(f) - 2^f) / 2^f on a grid of 2^16 + 1 points, as a linear
programme (minimise t subject to |p(f_i) - 2^f_i| <= t 2^f_i), with p(0) = 1 and p(1) = 2
fixed so that every integer x comes out exact and 2^x is continuous where f wraps from 1
to 0. The coefficients are then rounded to fp32, and their worst relative error is measured
again on a grid 16 times finer, in fp64 and in fp32 Horner (round-to-nearest after each
multiply and add: the device fuses them, which only rounds less). Prints the header's lines.
"""
import numpy as np
from scipy.optimize import linprog

GRID = 1 << 16


def fit():
    f = np.linspace(0.0, 1.0, GRID + 1)
    e = np.exp2(f)
    # p(f) = 1 + c1 f + c2 f^2 + c3 f^3 with c3 = 1 - c1 - c2 (p(1) = 2): unknowns c1, c2, t.
    a1, a2 = f - f**3, f**2 - f**3
    rest = 1.0 + f**3 - e  # p(f) - 2^f = c1 a1 + c2 a2 + rest
    ones = e  # |...| <= t 2^f
    A = np.vstack([np.column_stack([a1, a2, -ones]), np.column_stack([-a1, -a2, -ones])])
    b = np.concatenate([-rest, rest])
    res = linprog([0, 0, 1], A_ub=A, b_ub=b, bounds=[(None, None)] * 3, method="highs")
    assert res.success, res.message
    c1, c2, _ = res.x
    return np.array([1.0, c1, c2, 1.0 - c1 - c2])


def worst(c32):
    f = np.linspace(0.0, 1.0, 16 * GRID + 1)
    e = np.exp2(f)
    p64 = c32[0] + f * (c32[1] + f * (c32[2] + f * c32[3]))
    f32 = f.astype(np.float32)
    p32 = c32[3].astype(np.float32)
    for k in (2, 1, 0):
        p32 = (p32 * f32).astype(np.float32) + c32[k]
    # f as fp32 is rounded too: compare against 2^f32 for the fp32 evaluation.
    e32 = np.exp2(f32.astype(np.float64))
    return np.max(np.abs(p64 - e) / e), np.max(np.abs(p32.astype(np.float64) - e32) / e32)


c = fit()
c32 = c.astype(np.float32)
fit64, eval32 = worst(c32)
for k, v in enumerate(c32):
    print(f"c{k} = {float(v)!r}f  ({np.float32(v).view(np.uint32):#010x})")
print(f"worst relative error of the fp32 coefficients: fp64 evaluation {fit64:.4e}, "
      f"fp32 Horner {eval32:.4e}")
