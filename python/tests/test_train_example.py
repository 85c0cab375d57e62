"""The training example python/examples/train_char_model.py, where it needs no torch: its text
and vocabulary, the comparison of the curves that decides PASS or FAIL, the CSV, the
--plot-from mode, its argument checks, and its exits when torch or a GPU is missing (torch
replaced by a stand-in package, so these run the same on a machine that has torch). The
training itself runs on the GPU: bench/gpu/run_device.sh train.
"""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "python" / "examples" / "train_char_model.py"


def load_example():
    spec = importlib.util.spec_from_file_location("train_char_model", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ex = load_example()


@pytest.fixture
def rng():
    """Fresh inputs every run; FLASHLAB_SEED=<n> replays one."""
    seed = int(os.environ.get("FLASHLAB_SEED", np.random.SeedSequence().entropy % 2**32))
    print(f"FLASHLAB_SEED={seed}")
    return np.random.default_rng(seed)


def run_script(*args, env_path=None):
    env = dict(os.environ)
    if env_path is not None:
        env["PYTHONPATH"] = str(env_path)
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=120)


def test_importing_the_example_does_not_import_torch():
    code = (f"import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('m', {str(SCRIPT)!r})\n"
            f"spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
            f"print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_corpus_is_the_lesson_readmes_in_sorted_order():
    lessons = REPO / "lessons"
    text, files = ex.load_corpus(lessons)
    names = sorted(n for n in os.listdir(lessons) if (lessons / n / "README.md").is_file())
    assert [f.parent.name for f in files] == names
    assert len(names) > 1
    expected = "".join((lessons / n / "README.md").read_text(encoding="utf-8") for n in names)
    assert text == expected


def test_an_empty_lessons_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"no lesson texts under .*README\.md"):
        ex.load_corpus(tmp_path)


def test_the_vocabulary_is_every_character_sorted_and_round_trips():
    text, _ = ex.load_corpus(REPO / "lessons")
    vocab = ex.Vocabulary(text)
    ids = vocab.encode(text)
    assert vocab.decode(ids) == text
    assert len(vocab) == len(set(text))
    assert vocab.chars == sorted(vocab.chars)
    assert set(ids) == set(range(len(vocab)))  # every id is used: the text built it
    missing = next(chr(c) for c in range(0x100, 0x10000) if chr(c) not in vocab.ids)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        vocab.encode("a" + missing)


def test_unigram_entropy_is_the_entropy_of_the_character_frequencies(rng):
    ids = list(rng.integers(0, 30, size=1000))
    p = np.bincount(ids) / len(ids)
    p = p[p > 0]
    assert ex.unigram_entropy(ids) == pytest.approx(-(p * np.log(p)).sum(), rel=1e-12)
    assert ex.unigram_entropy([7] * 10) == 0.0


def test_the_held_out_part_is_the_tail(rng):
    ids = list(rng.integers(0, 50, size=int(rng.integers(2000, 3000))))
    fraction = float(rng.uniform(0.05, 0.3))
    train, val = ex.split_tail(ids, fraction, context=64)
    assert train + val == ids
    assert len(val) == int(len(ids) * fraction)


@pytest.mark.parametrize("fraction, context, message", [
    (0.0, 8, "strictly between 0 and 1"), (1.0, 8, "strictly between 0 and 1"),
    (0.01, 256, "held-out tail holds 10 characters, fewer than context \\+ 1 = 257"),
    (0.99, 256, "training part holds 10 characters"),
])
def test_a_split_that_cannot_hold_a_window_is_a_clear_error(fraction, context, message):
    with pytest.raises(ValueError, match=message):
        ex.split_tail(list(range(1000)), fraction, context)


def reference_centered_mean(values, window):
    """The smoothing written again with numpy, one slice per step."""
    half = window // 2
    return np.array([np.mean(values[max(0, i - half):i + half + 1]) for i in range(len(values))])


def test_centered_mean_is_the_mean_of_the_steps_around_each_step(rng):
    values = rng.normal(size=97)
    for window in (1, 2, 5, 20, 200):
        # A running sum and np.mean round differently: about 100 additions of O(1) values,
        # each off by up to eps |sum| ~ 1e-15, so 1e-12 absolute holds with room.
        np.testing.assert_allclose(ex.centered_mean(list(values), window),
                                   reference_centered_mean(values, window), rtol=0, atol=1e-12)


# The synthetic curves below fall from 4.5 to 1.0; a run that learned nothing stays at 4.6.
BASELINE = 3.4


def synthetic_curves(rng, steps=300, batch_noise=0.05):
    """A falling loss; each batch order adds its own noise. sdpa and flashlab share theirs
    (the same batches), flashlab adds a little rounding; the reordered run draws its own."""
    base = 3.5 * np.exp(-np.arange(steps) / 60.0) + 1.0
    shared = base + rng.normal(scale=batch_noise, size=steps)
    return {"sdpa": list(shared), "flashlab": list(shared + rng.normal(scale=1e-3, size=steps)),
            "sdpa_reordered": list(base + rng.normal(scale=batch_noise, size=steps))}


def smoothed_gaps(a, b, window):
    return np.abs(reference_centered_mean(np.array(a), window) -
                  reference_centered_mean(np.array(b), window))


def test_curves_that_share_their_batches_agree_within_the_noise_band(rng):
    train = synthetic_curves(rng)
    result = ex.compare(train, window=20, baseline=BASELINE)
    gap = smoothed_gaps(train["sdpa"], train["flashlab"], 20)
    band = smoothed_gaps(train["sdpa"], train["sdpa_reordered"], 20)
    assert result["max_abs_difference"] == pytest.approx(gap.max(), rel=1e-9)
    assert result["noise_band_max"] == pytest.approx(band.max(), rel=1e-9)
    assert result["mean_abs_difference"] == pytest.approx(gap.mean(), rel=1e-9)
    assert result["noise_band_mean"] == pytest.approx(band.mean(), rel=1e-9)
    assert result["first_step_difference"] == pytest.approx(
        abs(train["sdpa"][0] - train["flashlab"][0]), rel=1e-12)
    assert result["all_finite"] and all(result["learned"].values())
    assert result["pass"]


def test_a_curve_that_drifts_beyond_the_noise_band_fails(rng):
    train = synthetic_curves(rng)
    noise = ex.compare(train, window=20, baseline=BASELINE)["noise_band_max"]
    drift = 2 * noise * np.linspace(0.0, 1.0, len(train["sdpa"]))  # a slowly worse optimiser
    train["flashlab"] = list(np.array(train["flashlab"]) + drift)
    result = ex.compare(train, window=20, baseline=BASELINE)
    assert result["max_abs_difference"] > result["noise_band_max"]
    assert not result["pass"]


def test_a_nan_anywhere_fails(rng):
    train = synthetic_curves(rng)
    train["flashlab"][int(rng.integers(0, 300))] = float("nan")
    result = ex.compare(train, window=20, baseline=BASELINE)
    assert not result["all_finite"]
    assert not result["pass"]


def test_runs_that_did_not_learn_fail_even_when_they_agree(rng):
    flat = list(4.6 + rng.normal(scale=0.01, size=300))
    train = {run: list(flat) for run in ex.RUNS}
    train["sdpa_reordered"] = list(4.6 + rng.normal(scale=0.05, size=300))
    result = ex.compare(train, window=20, baseline=BASELINE)
    assert result["max_abs_difference"] <= result["noise_band_max"]
    assert not any(result["learned"].values())
    assert not result["pass"]


def test_the_csv_round_trips_and_plot_from_draws_it(rng, tmp_path):
    pytest.importorskip("matplotlib")
    train = synthetic_curves(rng, steps=53)
    val = {run: {s: float(rng.uniform(1, 5)) for s in (0, 25, 50, 52)} for run in train}
    csv_path = tmp_path / "losses.csv"
    ex.write_csv(csv_path, train, val)
    assert ex.read_csv(csv_path) == (train, val)
    out = run_script("--plot-from", csv_path, "--smooth", 5)
    assert out.returncode == 0, out.stderr
    png = tmp_path / "loss_curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert str(png) in out.stdout


def test_plot_from_a_missing_or_empty_csv_is_a_clear_error(tmp_path):
    out = run_script("--plot-from", tmp_path / "absent.csv")
    assert out.returncode == ex.EXIT_USAGE and "absent.csv" in out.stderr
    (tmp_path / "empty.csv").write_text("")
    out = run_script("--plot-from", tmp_path / "empty.csv")
    assert out.returncode == ex.EXIT_USAGE and "holds no loss rows" in out.stderr


def stand_in_torch(folder, body):
    """A package named torch that shadows any real one on PYTHONPATH."""
    (folder / "torch").mkdir()
    (folder / "torch" / "__init__.py").write_text(body)
    return folder


@pytest.mark.parametrize("body, missing", [
    ("raise ImportError('no torch in this test')", "torch is not installed"),
    ("class cuda:\n    @staticmethod\n    def is_available():\n        return False\n",
     "no CUDA GPU is visible to torch"),
])
def test_without_torch_or_a_gpu_it_says_what_is_missing(tmp_path, body, missing):
    path = stand_in_torch(tmp_path, body)
    out = run_script("--out", tmp_path / "out", env_path=path)
    assert out.returncode == ex.EXIT_MISSING
    assert f"cannot train: {missing}" in out.stderr
    out = run_script("--out", tmp_path / "out", "--skip-if-unavailable", env_path=path)
    assert out.returncode == 0
    assert f"SKIP: {missing}" in out.stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, message", [
    (["--heads", "3"], "H must divide d_model"),
    (["--heads", "8", "--kv-heads", "3"], "H_kv must divide H"),
    (["--steps", "0"], "--steps 0 must be at least 1"),
    (["--steps", "10", "--timing-warmup", "10"], "--timing-warmup 10 must lie in"),
])
def test_bad_arguments_are_refused_with_the_reason(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        ex.parse_args(argv)
    assert exit_info.value.code == ex.EXIT_USAGE
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--lessons", "{tmp}"], "no lesson texts under"),
    (["--context", "1000000"], "fewer than context + 1 = 1000001"),
    (["--val-fraction", "1.5"], "--val-fraction 1.5 must lie strictly between 0 and 1"),
])
def test_text_that_cannot_be_used_is_refused_before_training(tmp_path, capsys, argv, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert ex.main(argv + ["--out", str(tmp_path / "out")]) == ex.EXIT_USAGE
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
