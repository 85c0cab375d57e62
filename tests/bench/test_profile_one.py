"""bench/gpu/profile_one.py's refusal of two options that contradict each other, given before
torch or a GPU is needed: --first-read reads the dirty lines --dirty-l2 leaves out of the L2."""
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "gpu", "profile_one.py")


class ProfileOne(unittest.TestCase):
    def test_first_read_with_dirty_l2_refused(self):
        run = subprocess.run([sys.executable, SCRIPT, "--lib", "unused.so", "fa2", "--first-read",
                              "--dirty-l2"], capture_output=True, text=True)
        self.assertEqual(run.returncode, 2)
        self.assertIn("--first-read reads the dirty lines of --dirty-l2 out of the L2 before the "
                      "call: give one of them", run.stderr)


if __name__ == "__main__":
    unittest.main()
