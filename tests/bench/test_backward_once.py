"""bench/gpu/backward_once.py's refusals, before it asks for torch or a GPU: a shape whose KV
heads do not divide its heads, or no keys."""
import os
import subprocess
import sys
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "gpu",
                      "backward_once.py")


class BackwardOnce(unittest.TestCase):
    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT, "--lib", "libflashlab.so"] + list(args),
                              capture_output=True, text=True)

    def test_refusals(self):
        run = self.run_script("--n", "1024", "--heads", "16", "--kv-heads", "3")
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("16 heads over 3: give N >= 1 and KV heads that divide the heads",
                      run.stderr)
        run = self.run_script("--n", "0")
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("N = 0", run.stderr)


if __name__ == "__main__":
    unittest.main()
