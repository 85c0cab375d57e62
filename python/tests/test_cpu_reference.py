"""The CPU reference from Python against attention written out in numpy (conftest.py) and
against the library's own other algorithms on the same inputs: forward in both loop orders,
causal alignments, GQA, the log-sum-exp, backward, decode, conditional rescaling, dropout;
and every kind of bad input, with the library's message."""
import importlib.util
import subprocess
import sys

import numpy as np
import pytest

import flashlab
from conftest import numpy_attention, numpy_gradients

# fp64 results of tiled and untiled algorithms differ by rounding only: a few ulps of the
# largest term, far below this. float32 computes in fp32 (eps 1.2e-7): 1e-5 leaves room for
# sums over a thousand keys.
TOL = {np.float64: 1e-12, np.float32: 1e-5}
SIZES = [(1, 1), (17, 17), (97, 113), (113, 97), (1023, 17)]  # (N_q, N_k), N_q != N_k too


def inputs(rng, n_q, n_k, d, dtype=np.float64):
    return (rng.standard_normal((n_q, d)).astype(dtype),
            rng.standard_normal((n_k, d)).astype(dtype),
            rng.standard_normal((n_k, d)).astype(dtype))


@pytest.mark.parametrize("n_q,n_k", SIZES)
@pytest.mark.parametrize("causal", flashlab.CAUSAL)
@pytest.mark.parametrize("order", ["q_outer", "kv_outer"])
def test_forward_matches_numpy_and_naive(rng, n_q, n_k, causal, order):
    q, k, v = inputs(rng, n_q, n_k, 59)
    r = flashlab.forward(q, k, v, order=order, causal=causal, br=16, bc=32)
    o, lse = numpy_attention(q, k, v, causal)
    np.testing.assert_allclose(r.O, o, atol=TOL[np.float64], rtol=0)
    np.testing.assert_allclose(r.L, lse, atol=TOL[np.float64], rtol=0)
    naive = flashlab.naive(q, k, v, causal=causal)
    np.testing.assert_allclose(r.O, naive.O, atol=TOL[np.float64], rtol=0)
    assert r.O.shape == (n_q, 59) and r.L.shape == (n_q,)
    tiles = -(-n_q // 16) * -(-n_k // 32)  # Tr * Tc
    assert r.tiles.computed + r.tiles.skipped == tiles


def test_float32_is_computed_in_float32(rng):
    q, k, v = inputs(rng, 97, 113, 64, np.float32)
    r = flashlab.forward(q, k, v, causal="bottom-right")
    assert r.O.dtype == np.float32
    o, _ = numpy_attention(q, k, v, "bottom-right")
    np.testing.assert_allclose(r.O, o, atol=TOL[np.float32], rtol=0)


def test_float32_multihead_forward_backward_and_decode(rng):
    q = rng.standard_normal((2, 4, 31, 16))
    k, v = (rng.standard_normal((2, 2, 45, 16)) for _ in range(2))
    do = rng.standard_normal(q.shape)
    f64 = flashlab.forward(q, k, v, causal="bottom-right")
    g64 = flashlab.backward(q, k, v, f64.O, f64.L, do, causal="bottom-right")
    lo = [x.astype(np.float32) for x in (q, k, v, do)]
    f32 = flashlab.forward(*lo[:3], causal="bottom-right")
    g32 = flashlab.backward(*lo[:3], f32.O, f32.L, lo[3], causal="bottom-right")
    assert f32.O.dtype == g32.dK.dtype == np.float32
    np.testing.assert_allclose(f32.O, f64.O, atol=TOL[np.float32])
    for got, want in ((g32.dQ, g64.dQ), (g32.dK, g64.dK), (g32.dV, g64.dV)):
        np.testing.assert_allclose(got, want, atol=10 * TOL[np.float32])  # gradients: longer sums
    d32 = flashlab.decode(lo[0][:, :, -1:], lo[1], lo[2], splits=3)
    np.testing.assert_allclose(d32.O, f64.O[:, :, -1:], atol=TOL[np.float32])


def test_scale_is_applied(rng):
    q, k, v = inputs(rng, 17, 23, 8)
    r = flashlab.forward(q, k, v, scale=0.3)
    np.testing.assert_allclose(r.O, numpy_attention(q, k, v, scale=0.3)[0], atol=1e-12)


def test_causal_skips_whole_tiles(rng):
    q, k, v = inputs(rng, 128, 128, 16)
    full = flashlab.forward(q, k, v, br=32, bc=32)
    causal = flashlab.forward(q, k, v, causal="top-left", br=32, bc=32)
    assert full.tiles.skipped == 0
    assert causal.tiles.skipped > 0 and causal.tiles.partial > 0
    assert causal.tiles.computed + causal.tiles.skipped == full.tiles.computed


@pytest.mark.parametrize("heads_q,heads_kv", [(4, 4), (4, 2), (6, 1)])
def test_multihead_gqa_matches_each_head(rng, heads_q, heads_kv):
    batch, n_q, n_k, d = 2, 33, 47, 16
    q = rng.standard_normal((batch, heads_q, n_q, d))
    k = rng.standard_normal((batch, heads_kv, n_k, d))
    v = rng.standard_normal((batch, heads_kv, n_k, d))
    r = flashlab.forward(q, k, v, causal="bottom-right", br=8, bc=16)
    assert r.O.shape == (batch, heads_q, n_q, d) and r.L.shape == (batch, heads_q, n_q)
    group = heads_q // heads_kv
    for b in range(batch):
        for h in range(heads_q):
            o, lse = numpy_attention(q[b, h], k[b, h // group], v[b, h // group], "bottom-right")
            np.testing.assert_allclose(r.O[b, h], o, atol=1e-12)
            np.testing.assert_allclose(r.L[b, h], lse, atol=1e-12)


def test_strided_input_is_read_as_its_values(rng):
    q, k, v = inputs(rng, 40, 40, 16)
    qt = np.asfortranarray(q)  # same values, other strides
    np.testing.assert_array_equal(flashlab.forward(qt, k, v).O, flashlab.forward(q, k, v).O)


@pytest.mark.parametrize("n_q,n_k", [(1, 1), (97, 113), (113, 97)])
@pytest.mark.parametrize("causal", flashlab.CAUSAL)
@pytest.mark.parametrize("order", ["kv_outer", "q_outer"])
def test_backward_matches_numpy_and_naive(rng, n_q, n_k, causal, order):
    q, k, v = inputs(rng, n_q, n_k, 24)
    do = rng.standard_normal((n_q, 24))
    f = flashlab.forward(q, k, v, causal=causal)
    g = flashlab.backward(q, k, v, f.O, f.L, do, order=order, causal=causal, br=16, bc=16)
    expected = numpy_gradients(q, k, v, do, causal)
    for got, want in zip((g.dQ, g.dK, g.dV), expected):
        np.testing.assert_allclose(got, want, atol=1e-10, rtol=0)
    np.testing.assert_allclose(g.D, (do * f.O).sum(axis=1), atol=1e-12)
    naive = flashlab.naive_backward(q, k, v, do, causal=causal)
    np.testing.assert_allclose(g.dQ, naive.dQ, atol=1e-10)
    np.testing.assert_allclose(naive.D, g.D, atol=1e-10)


def test_multihead_backward_sums_over_the_group(rng):
    batch, heads_q, heads_kv, n, d = 2, 4, 2, 29, 8
    q = rng.standard_normal((batch, heads_q, n, d))
    k, v = (rng.standard_normal((batch, heads_kv, n, d)) for _ in range(2))
    do = rng.standard_normal(q.shape)
    f = flashlab.forward(q, k, v, causal="top-left")
    g = flashlab.backward(q, k, v, f.O, f.L, do, causal="top-left")
    group = heads_q // heads_kv
    for b in range(batch):
        dk = np.zeros((heads_kv, n, d))
        dv = np.zeros((heads_kv, n, d))
        for h in range(heads_q):
            dq_h, dk_h, dv_h = numpy_gradients(q[b, h], k[b, h // group], v[b, h // group],
                                               do[b, h], "top-left")
            np.testing.assert_allclose(g.dQ[b, h], dq_h, atol=1e-10)
            dk[h // group] += dk_h
            dv[h // group] += dv_h
        np.testing.assert_allclose(g.dK[b], dk, atol=1e-10)
        np.testing.assert_allclose(g.dV[b], dv, atol=1e-10)


@pytest.mark.parametrize("splits", [1, 2, 7, 97])
@pytest.mark.parametrize("merge_order", ["left_to_right", "balanced_tree", "random_tree"])
def test_decode_any_split_matches_forward(rng, splits, merge_order):
    q, k, v = inputs(rng, 3, 97, 32)
    r = flashlab.decode(q, k, v, splits=splits, merge_order=merge_order, order_seed=5,
                        causal="bottom-right", bc=8)
    o, lse = numpy_attention(q, k, v, "bottom-right")
    np.testing.assert_allclose(r.O, o, atol=1e-12)
    np.testing.assert_allclose(r.L, lse, atol=1e-12)


def test_decode_multihead_with_lengths(rng):
    batch, heads_q, heads_kv, n_cache, d = 3, 8, 2, 50, 16
    q = rng.standard_normal((batch, heads_q, 1, d))
    k, v = (rng.standard_normal((batch, heads_kv, n_cache, d)) for _ in range(2))
    lengths = [50, 17, 1]
    r = flashlab.decode(q, k, v, splits=4, kv_lengths=lengths)
    for b, n in enumerate(lengths):
        for h in range(heads_q):
            o, lse = numpy_attention(q[b, h], k[b, h // 4, :n], v[b, h // 4, :n])
            np.testing.assert_allclose(r.O[b, h], o, atol=1e-12)
            np.testing.assert_allclose(r.L[b, h], lse, atol=1e-12)


def test_conditional_rescaling_counts_and_output(rng):
    q, k, v = inputs(rng, 97, 1023, 16)
    r = flashlab.forward_conditional(q, k, v, bc=16, verify_invariant=True)
    np.testing.assert_allclose(r.O, numpy_attention(q, k, v)[0], atol=1e-12)
    n = r.rescales
    assert n.standard_rescales == n.rescaled + n.skipped
    assert n.skipped > 0  # N(0, 1) scores: the max grows, by far less than 8 ln 2
    assert n.skipped_fraction == pytest.approx(n.skipped / n.standard_rescales)
    assert n.first == 97  # every row's first valid tile sets its base
    assert r.max_weight <= 2.0 ** 8 and r.invariant_error < 1e-12
    standard = flashlab.forward_conditional(q, k, v, bc=16, tau_log2=0.0)
    assert standard.rescales.skipped == 0
    assert standard.rescales.rescaled == n.standard_rescales
    np.testing.assert_array_equal(standard.O, flashlab.forward(q, k, v, bc=16).O)


def test_conditional_rescaling_wrong_variant_is_caught(rng):
    q, k, v = inputs(rng, 8, 256, 8)
    q *= 8.0  # large scores: the max grows past the threshold, so the base moves
    wrong = flashlab.forward_conditional(q, k, v, bc=8, variant="base_without_rescale",
                                         verify_invariant=True)
    assert wrong.rescales.rescaled > 0
    assert wrong.invariant_error > 1e-3
    assert np.abs(wrong.O - numpy_attention(q, k, v)[0]).max() > 1e-3


def test_dropout_forward_and_backward_follow_the_mask(rng):
    n_q, n_k, d, p = 37, 53, 16, 0.25
    q, k, v = inputs(rng, n_q, n_k, d)
    do = rng.standard_normal((n_q, d))
    seed, offset = int(rng.integers(0, 2**63)), 3
    z = flashlab.dropout_multipliers(p, seed, offset, n_q, n_k)
    assert set(np.unique(z)) <= {0.0, 1.0 / (1.0 - p)}
    assert 0 < (z == 0).sum() < z.size
    f = flashlab.forward(q, k, v, dropout_p=p, seed=seed, offset=offset, br=16, bc=16)
    scale = 1.0 / np.sqrt(d)
    _, lse = numpy_attention(q, k, v)
    probabilities = np.exp(q @ k.T * scale - lse[:, None])
    np.testing.assert_allclose(f.O, (probabilities * z) @ v, atol=1e-12)
    np.testing.assert_allclose(f.L, lse, atol=1e-12)  # L stays that of the undropped scores
    naive = flashlab.naive(q, k, v, dropout_p=p, seed=seed, offset=offset)
    np.testing.assert_allclose(naive.O, f.O, atol=1e-12)
    g = flashlab.backward(q, k, v, f.O, f.L, do, dropout_p=p, seed=seed, offset=offset)
    for got, want in zip((g.dQ, g.dK, g.dV), numpy_gradients(q, k, v, do, z=z)):
        np.testing.assert_allclose(got, want, atol=1e-10)
    other = flashlab.dropout_multipliers(p, seed, offset + 1, n_q, n_k)
    assert (other != z).any()  # another offset, another mask


# Bad input: the type, the number of dimensions and the options are checked here; shapes
# and values by the library, whose message arrives untouched.
def test_wrong_dtype_is_a_type_error(rng):
    q, k, v = inputs(rng, 4, 4, 4)
    with pytest.raises(TypeError, match="int64.*float64"):
        flashlab.forward(q.astype(np.int64), k, v)
    with pytest.raises(TypeError, match="k has dtype float32 but q has float64"):
        flashlab.forward(q, k.astype(np.float32), v)
    with pytest.raises(TypeError, match="float16"):
        flashlab.forward(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16))


def test_wrong_shape_is_a_value_error_with_the_library_message(rng):
    q, k, v = inputs(rng, 4, 5, 4)
    with pytest.raises(ValueError, match=r"q has shape \(4, 4, 1\): it must be 2-d"):
        flashlab.forward(q[..., None], k, v)
    with pytest.raises(ValueError, match="v has shape"):
        flashlab.forward(q, k, v[None, None])
    with pytest.raises(ValueError, match="K has d = 3 columns but Q has d = 4"):
        flashlab.forward(q, k[:, :3], v)
    with pytest.raises(ValueError, match="1 query heads cannot share 3 KV heads"):
        flashlab.forward(q.reshape(1, 1, 4, 4), k.reshape(1, 1, 5, 4)[:, [0, 0, 0]],
                         v.reshape(1, 1, 5, 4)[:, [0, 0, 0]])
    with pytest.raises(ValueError, match="lse has shape"):
        flashlab.backward(q, k, v, q, np.zeros((4, 1)), q)


def test_bad_values_are_value_errors_with_the_library_message(rng):
    q, k, v = inputs(rng, 4, 5, 4)
    with pytest.raises(ValueError, match="causal = 'diagonal' is not an alignment"):
        flashlab.forward(q, k, v, causal="diagonal")
    with pytest.raises(ValueError, match="order = 'sideways' is unknown"):
        flashlab.forward(q, k, v, order="sideways")
    with pytest.raises(ValueError, match="softmax scale -1 is not a positive finite number"):
        flashlab.forward(q, k, v, scale=-1.0)
    with pytest.raises(ValueError, match="tile sizes Br = 0, Bc = 64"):
        flashlab.forward(q, k, v, br=0)
    with pytest.raises(ValueError, match="split count n_splits = 6 for a KV of N_k = 5 keys"):
        flashlab.decode(q, k, v, splits=6)
    with pytest.raises(ValueError, match="merge_order = 'sorted' is unknown"):
        flashlab.decode(q, k, v, merge_order="sorted")
    with pytest.raises(ValueError, match="kv_lengths gives one length per batch entry"):
        flashlab.decode(q, k, v, kv_lengths=[3])
    for p, text in ((1.0, "1"), (-0.1, "-0.1"), (float("nan"), "nan")):
        with pytest.raises(ValueError, match=f"dropout probability p = {text} is outside"):
            flashlab.forward(q, k, v, dropout_p=p)
    with pytest.raises(ValueError, match="rescale threshold tau = -1"):
        flashlab.forward_conditional(q, k, v, tau_log2=-1.0)
    with pytest.raises(ValueError, match="variant = 'maybe' is unknown"):
        flashlab.forward_conditional(q, k, v, variant="maybe")
    with pytest.raises(ValueError, match="order = 'kv_outer' runs one head"):
        flashlab.forward(q[None, None], k[None, None], v[None, None], order="kv_outer")
    with pytest.raises(ValueError, match=r"score S\[0, 0\] = .* is not finite"):
        flashlab.forward(np.full((4, 4), np.inf), k, v, check_finite=True)
    with pytest.raises(ValueError, match="rows = -1: a size must be at least 0"):
        flashlab.dropout_multipliers(0.5, 1, 0, -1, 4)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="torch is not installed for this Python: the case needs it loaded first")
def test_library_errors_are_value_errors_after_torch_is_loaded():
    # torch loads its own C++ runtime first; the module's exceptions must still reach Python as
    # ValueError, not end the interpreter (a fresh process: the order of loading is the point).
    code = ("import torch, numpy as np, flashlab\n"
            "try:\n"
            "    flashlab.forward(np.zeros((4, 4)), np.zeros((5, 3)), np.zeros((5, 4)))\n"
            "except ValueError as e:\n"
            "    print('ValueError:', e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"exit status {run.returncode}; stderr: {run.stderr[-2000:]}"
    assert "ValueError: K has d = 3 columns but Q has d = 4" in run.stdout
