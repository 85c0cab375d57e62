"""What the Python tests share: attention written out in numpy (the independent reference the
module is compared with), fresh random inputs, and the `flashlab` program (its path comes
from CTest as FLASHLAB_CLI) whose output the module must reproduce."""
import json
import os
import subprocess

import numpy as np
import pytest


def numpy_attention(q, k, v, causal="none", scale=None):
    """O = softmax(q k^T * scale) v and L = logsumexp of each row, in float64, one head.
    Causal: top-left lets query i see keys j <= i, bottom-right keys j <= i + N_k - N_q;
    a row that sees no key gets O = 0 and L = -inf, the library's convention."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    n_q, n_k = q.shape[0], k.shape[0]
    scale = 1.0 / np.sqrt(q.shape[1]) if scale is None else scale
    s = q @ k.T * scale
    if causal != "none":
        offset = n_k - n_q if causal == "bottom-right" else 0
        allowed = np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + offset
        s = np.where(allowed, s, -np.inf)
    m = s.max(axis=1, keepdims=True) if n_k else np.full((n_q, 1), -np.inf)
    seen = np.isfinite(m[:, 0])
    w = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    l = w.sum(axis=1, keepdims=True)
    o = np.where(seen[:, None], w @ v / np.where(l > 0, l, 1.0), 0.0)
    lse = np.where(seen, m[:, 0] + np.log(np.where(l[:, 0] > 0, l[:, 0], 1.0)), -np.inf)
    return o, lse


def numpy_gradients(q, k, v, do, causal="none", scale=None, z=None):
    """dQ, dK, dV of O = (P o Z) V by the chain rule written out with the whole of P."""
    q, k, v, do = (np.asarray(x, dtype=np.float64) for x in (q, k, v, do))
    n_q, n_k = q.shape[0], k.shape[0]
    scale = 1.0 / np.sqrt(q.shape[1]) if scale is None else scale
    _, lse = numpy_attention(q, k, v, causal, scale)
    s = q @ k.T * scale
    p = np.exp(s - lse[:, None])
    if causal != "none":
        offset = n_k - n_q if causal == "bottom-right" else 0
        p = np.where(np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + offset, p, 0.0)
    z = np.ones_like(p) if z is None else z
    dv = (p * z).T @ do
    dp = (do @ v.T) * z
    ds = p * (dp - (p * dp).sum(axis=1, keepdims=True))
    return ds @ k * scale, ds.T @ q * scale, dv


@pytest.fixture
def rng():
    """Fresh random inputs every run; the seed is printed (pytest shows it when a test fails)
    and FLASHLAB_SEED=<n> replays it, as for the C++ tests."""
    seed = int(os.environ.get("FLASHLAB_SEED", int.from_bytes(os.urandom(4), "little")))
    print(f"FLASHLAB_SEED={seed}")
    return np.random.default_rng(seed)


def cli_path():
    path = os.environ.get("FLASHLAB_CLI")
    if not path:
        pytest.fail("FLASHLAB_CLI is not set: run the tests through ctest (ctest -L python), "
                    "which names the `flashlab` program of the build")
    if not os.path.exists(path):
        pytest.fail(f"{path} does not exist: build the `flashlab` target "
                    f"(cmake --build --preset default --target flashlab)")
    return path


def run_cli(*args):
    """The `flashlab` program's standard output for these arguments."""
    done = subprocess.run([cli_path(), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def cli_json_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]
