"""The simulator from Python against the `flashlab` program on the same problems: simulate()
equals `flashlab simulate --json` field for field, the traces equal `flashlab trace --json`
record for record (the 49/15 example and a random causal one), and the profiles are the
ones the reports' bounds use."""
import json
import math
from fractions import Fraction

import numpy as np
import pytest

import flashlab
from conftest import cli_json_lines, run_cli


def as_plain(x):
    """A namespace tree as dicts and lists, to compare with parsed JSON."""
    if hasattr(x, "__dict__"):
        return {k: as_plain(v) for k, v in vars(x).items()}
    if isinstance(x, list):
        return [as_plain(v) for v in x]
    return x


@pytest.mark.parametrize("algorithm,n,d,dtype,cli_options,options", [
    ("fa2", 8192, 128, "bf16", [], {}),
    ("fa1", 1023, 64, "fp16", ["--causal"], {"causal": "top-left"}),
    ("naive", 97, 111, "fp32", [], {}),
    ("naive-kernel", 2048, 64, "bf16", [], {}),
    ("fa2", 4096, 128, "bf16", ["--l2", "60MiB", "--br", "128", "--bc", "64"],
     {"l2": "60MiB", "br": 128, "bc": 64}),
    ("fa2", 1000, 64, "fp32", ["--sram", "96KiB", "--profile", "a100"],
     {"sram": "96KiB", "profile": "a100"}),
])
def test_simulate_equals_the_cli_report(algorithm, n, d, dtype, cli_options, options):
    cli = json.loads(run_cli("simulate", "--algo", algorithm, "--n", str(n), "--d", str(d),
                             "--dtype", dtype, "--json", *cli_options))
    assert len(cli) == 1
    report = flashlab.simulate(algorithm, N=n, d=d, dtype=dtype, **options)
    assert as_plain(report) == cli[0]
    # The parts a learner reads, as attributes.
    assert report.bytes.total == sum(t.bytes_read + t.bytes_written for t in report.tensors)
    assert report.peak_sram_bytes <= report.inputs.sram_bytes
    assert report.bound.binds in ("matrix", "exp", "memory")


def test_profiles_are_the_ones_the_bounds_use():
    profiles = flashlab.profiles()
    names = [p.name for p in profiles]
    assert len(set(names)) == len(names) >= 4
    for p in profiles:
        report = flashlab.simulate("fa2", N=4096, d=128, profile=p.name)
        assert report.inputs.sram_bytes == p.sram_per_sm  # the default SRAM is the profile's
        assert report.bound.memory_s == pytest.approx(report.bytes.total / p.hbm_bytes_per_s)
        assert report.bound.matrix_s == pytest.approx(
            report.ops.matrix_flops / p.matrix_flops_per_s)
        assert p.sm_count > 0 and p.l2_bytes > 0 and p.description


def test_fa2_moves_fewer_bytes_than_naive_and_scales_as_the_paper_says():
    naive = [flashlab.simulate("naive", N=n, d=64).bytes.total for n in (2048, 4096)]
    fa2 = [flashlab.simulate("fa2", N=n, d=64).bytes.total for n in (2048, 4096)]
    assert fa2[0] < naive[0] and fa2[1] < naive[1]
    # FA2 reads K and V once per query tile: Theta(N^2 d^2 / M), so doubling N about
    # quadruples its bytes; naive's N^2 term dominates likewise.
    assert 3.5 < fa2[1] / fa2[0] < 4.1


def assert_record_equals(record, event, skip=("event", "hbm_read", "hbm_written")):
    for key, want in event.items():
        if key in skip:
            continue
        got = getattr(record, key)
        if isinstance(got, np.ndarray):
            want = np.array(want, dtype=object)
            want = np.vectorize(lambda x: float(x), otypes=[float])(want)  # "-inf" too
            np.testing.assert_array_equal(got, want.astype(np.float64).reshape(got.shape),
                                          err_msg=key)
        else:
            assert got == want, key


def compare_with_cli(trace, events):
    setup = events[0]
    assert setup["event"] == "setup"
    for key in ("N_q", "N_k", "d", "Br", "Bc", "causal", "dtype", "bytes_source", "numbering"):
        assert getattr(trace, key) == setup[key], key
    kv = [e for e in events if e["event"] == "kv_tile"]
    ends = [e for e in events if e["event"] == "query_tile_end"]
    starts = [e for e in events if e["event"] == "query_tile_start"]
    records = list(trace)  # in the order the forward ran them
    assert len(records) == len(kv) and len(trace.query_tiles) == len(ends) == len(starts)
    for record, event in zip(records, kv):
        assert_record_equals(record, event)
    for record, start, end in zip(trace.query_tiles, starts, ends):
        assert_record_equals(record, start)
        assert_record_equals(record, end)
    assert trace.total_read == ends[-1]["hbm_read"]
    assert trace.total_written == ends[-1]["hbm_written"]


def test_the_49_15_example_equals_the_cli_trace(tmp_path):
    path = tmp_path / "trace.jsonl"
    run_cli("trace", "--example", "49-15", "--json", str(path), "--no-color")
    trace = flashlab.trace_example()
    compare_with_cli(trace, cli_json_lines(path))
    # The worked example: exponentiated scores 1, 2, 4, 8 over values 1, 2, 3, 4.
    weights, values = [1, 2, 4, 8], [1, 2, 3, 4]
    exact = Fraction(sum(w * x for w, x in zip(weights, values)), sum(weights))
    assert exact == Fraction(49, 15)
    first, second = list(trace)
    assert (first.j, second.j) == (0, 1)
    # l holds the weights relative to the base m: l exp(m) is the plain sum of the first tile's.
    assert first.l[0] * math.exp(first.m[0]) == pytest.approx(sum(weights[:2]))
    assert second.alpha[0] < 1  # the second tile's max is larger: the state is rescaled
    assert trace.query_tiles[0].O[0, 0] == pytest.approx(float(exact), abs=1e-15)


def test_a_random_causal_trace_equals_the_cli_trace(tmp_path):
    path = tmp_path / "trace.jsonl"
    run_cli("trace", "--n", "13", "--d", "3", "--br", "4", "--bc", "3", "--causal", "--seed", "7",
            "--json", str(path), "--no-color")
    trace = flashlab.trace(N=13, d=3, br=4, bc=3, causal="top-left", seed=7)
    compare_with_cli(trace, cli_json_lines(path))
    kinds = {r.kind for r in trace}
    assert kinds == {"full", "partial", "skipped"}


def test_simulator_bad_input_is_a_value_error_with_the_library_message():
    with pytest.raises(ValueError, match="unknown algorithm 'fa3': the simulator runs naive"):
        flashlab.simulate("fa3")
    with pytest.raises(ValueError, match="unknown dtype 'bf8'"):
        flashlab.simulate("fa2", dtype="bf8")
    with pytest.raises(ValueError, match="N = 0: the sequence length must be between 1 and"):
        flashlab.simulate("fa2", N=0)
    with pytest.raises(ValueError, match="give both br and bc"):
        flashlab.simulate("fa2", br=64)
    with pytest.raises(ValueError, match="unknown hardware profile 'h300'"):
        flashlab.simulate("fa2", profile="h300")
    with pytest.raises(ValueError, match="'12 parsecs' is not a size in bytes"):
        flashlab.simulate("fa2", sram="12 parsecs")
    with pytest.raises(ValueError, match="causal = 'yes' is not an alignment"):
        flashlab.simulate("fa2", causal="yes")
    with pytest.raises(ValueError, match="SRAM overflow: sK"):
        flashlab.simulate("fa2", N=4096, d=128, br=512, bc=512)
    with pytest.raises(ValueError, match="a trace needs 1 <= N, d <= 4096"):
        flashlab.trace(N=4, d=0)
