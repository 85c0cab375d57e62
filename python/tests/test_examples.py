"""The Python walkthrough (python/examples/walkthrough.py) runs headless and draws its plot."""
import os
import subprocess
import sys

import pytest

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "walkthrough.py")


def test_the_walkthrough_runs_and_writes_its_plot(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (Debian: "
                        "python3-matplotlib): the walkthrough plots with it")
    png = tmp_path / "sweep.png"
    env = dict(os.environ, MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, EXAMPLE, "--plot", str(png), "--max-n", "4096"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "49/15" in done.stdout and "O = U / l" in done.stdout
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
