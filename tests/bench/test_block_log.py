"""bench/gpu/block_log.py with stand-ins for Nsight Compute and the two programs (shell scripts
on PATH that print what the real ones print): the blocks of every shape in one CSV under one
header, a row of bytes per logged call in launch order (DRAM and into the SMs), the causal
mask passed on where a shape asks for it, the partitions written, and the errors for a bad
shape and for launches that do not match the logged calls."""
import csv
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "gpu", "block_log.py")


def executable(path, text):
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    os.chmod(path, 0o755)


class BlockLog(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        # ncu: runs the program (the arguments after --metrics X), then prints one metric line
        # per metric for each of LAUNCHES launches, the read bytes 1000 x heads + launch.
        executable(os.path.join(d, "ncu"), """\
            #!/bin/sh
            echo "$@" > "$(dirname "$0")/ncu-args"
            while [ "$1" != "--metrics" ]; do shift; done; metrics=$2; shift 2
            "$@" > /dev/null || exit 7
            heads=$3
            echo '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'
            i=0
            while [ $i -lt ${LAUNCHES:-2} ]; do
              echo "\\"$i\\",\\"fa2_kernel\\",\\"dram__bytes_read.sum\\",\\"byte\\",\\"$((1000 * heads + i))\\""
              echo "\\"$i\\",\\"fa2_kernel\\",\\"dram__bytes_write.sum\\",\\"byte\\",\\"1,024\\""
              echo "\\"$i\\",\\"fa2_kernel\\",\\"gpu__time_duration.sum\\",\\"ns\\",\\"5\\""
              echo "\\"$i\\",\\"fa2_kernel\\",\\"l1tex__m_xbar2l1tex_read_bytes.sum\\",\\"byte\\",\\"$((7000 + i))\\""
              case "$metrics" in *lts__t_sectors_op_red_lookup_miss.sum*)
                echo "\\"$i\\",\\"fa2_kernel\\",\\"lts__t_sectors_op_red_lookup_miss.sum\\",\\"sector\\",\\"2,00$i\\"";;
              esac
              i=$((i + 1))
            done
            """)
        # bench_block_log --heads H --n N --calls C --csv FILE [--causal]: two blocks a call;
        # its tile column 9 where it was asked for the mask, to show that it was.
        executable(os.path.join(d, "log"), """\
            #!/bin/sh
            # The head column: the --kv-heads given (last), to show it was passed on; else 0.
            tile=1; [ "$9" = "--causal" ] && tile=9
            kv=0; prev=
            for a in "$@"; do [ "$prev" = "--kv-heads" ] && kv=$a; prev=$a; done
            echo "N,d,dtype,heads,call,block,head,tile,sm,start_ns,end_ns" > "$8"
            c=0
            while [ $c -lt "$6" ]; do
              echo "$4,128,bf16,$2,$c,0,$kv,0,3,0,10" >> "$8"
              echo "$4,128,bf16,$2,$c,1,$kv,$tile,4,0,12" >> "$8"
              c=$((c + 1))
            done
            # --steps-csv FILE (after the others): two steps of block 0, the second at 5 + heads.
            steps=; prev=
            for a in "$@"; do [ "$prev" = "--steps-csv" ] && steps=$a; prev=$a; done
            if [ -n "$steps" ]; then
              echo "N,heads,causal,call,block,step,start_ns" > "$steps"
              echo "$4,$2,0,0,0,0,0" >> "$steps"
              echo "$4,$2,0,0,0,1,$((5 + $2))" >> "$steps"
            fi
            """)
        executable(os.path.join(d, "partitions"), """\
            #!/bin/sh
            echo "kind,per_sm,index,sm,reference,cycles_after_reference,cycles_again,partition" > "$2"
            """)
        self.env = dict(os.environ, PATH=d + os.pathsep + os.environ["PATH"])
        self.prefix = os.path.join(d, "out", "fa2-block-log")
        os.mkdir(os.path.dirname(self.prefix))

    def tearDown(self):
        self.dir.cleanup()

    def run_script(self, *shapes, launches=2, steps=False, extra=()):
        args = [sys.executable, SCRIPT, "--program", os.path.join(self.dir.name, "log"),
                "--partitions-program", os.path.join(self.dir.name, "partitions"),
                "--calls", "2", "--prefix", self.prefix] + (["--steps"] if steps else [])
        args += list(extra)
        for s in shapes:
            args += ["--shape", s]
        return subprocess.run(args, env=dict(self.env, LAUNCHES=str(launches)),
                              capture_output=True, text=True)

    def test_blocks_bytes_and_partitions(self):
        run = self.run_script("16:65536", "1:196608:causal")
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(self.prefix + ".csv") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 8)  # two shapes x two calls x two blocks, one header
        self.assertEqual([r["heads"] for r in rows], ["16"] * 4 + ["1"] * 4)
        self.assertEqual([r["tile"] for r in rows if r["block"] == "1"], ["1", "1", "9", "9"])
        with open(self.prefix + "-bytes.csv") as f:
            calls = [(r["heads"], r["N"], r["causal"], r["call"], r["dram_read_bytes"],
                      r["dram_written_bytes"], r["sm_read_bytes"]) for r in csv.DictReader(f)]
        self.assertEqual(calls, [("16", "65536", "0", "0", "16000", "1024", "7000"),
                                 ("16", "65536", "0", "1", "16001", "1024", "7001"),
                                 ("1", "196608", "1", "0", "1000", "1024", "7000"),
                                 ("1", "196608", "1", "1", "1001", "1024", "7001")])
        self.assertTrue(os.path.exists(self.prefix + "-l2-partitions.csv"))
        with open(self.prefix + "-ncu.txt") as f:
            self.assertTrue(f.readline().startswith('16,65536,0,"ID"'))

    def test_steps(self):
        # Without --steps no step log is asked for or written; with it, every shape's rows
        # under one header, the causal mask still passed on.
        run = self.run_script("16:65536")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertFalse(os.path.exists(self.prefix + "-steps.csv"))
        run = self.run_script("16:65536", "2:4096:causal", steps=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(self.prefix + "-steps.csv") as f:
            rows = [(r["N"], r["heads"], r["step"], r["start_ns"]) for r in csv.DictReader(f)]
        self.assertEqual(rows, [("65536", "16", "0", "0"), ("65536", "16", "1", "21"),
                                ("4096", "2", "0", "0"), ("4096", "2", "1", "7")])
        with open(self.prefix + ".csv") as f:
            tiles = [r["tile"] for r in csv.DictReader(f) if r["block"] == "1"]
        self.assertEqual(tiles, ["1", "1", "9", "9"])

    def test_gqa_shape(self):
        # HEADS/KV_HEADS passes --kv-heads on (the backward's program) and keys its bytes by
        # both; a plain shape's bytes say as many KV heads as heads.
        run = self.run_script("16/2:10240:causal", "16/4:10240:causal", "8:4096")
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(self.prefix + ".csv") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([r["head"] for r in rows], ["2"] * 4 + ["4"] * 4 + ["0"] * 4)
        self.assertEqual([r["tile"] for r in rows if r["block"] == "1"], ["9"] * 4 + ["1"] * 2)
        with open(self.prefix + "-bytes.csv") as f:
            calls = [(r["heads"], r["kv_heads"], r["N"], r["causal"], r["call"],
                      r["dram_read_bytes"]) for r in csv.DictReader(f)]
        self.assertEqual(calls, [("16", "2", "10240", "1", "0", "16000"),
                                 ("16", "2", "10240", "1", "1", "16001"),
                                 ("16", "4", "10240", "1", "0", "16000"),
                                 ("16", "4", "10240", "1", "1", "16001"),
                                 ("8", "8", "4096", "0", "0", "8000"),
                                 ("8", "8", "4096", "0", "1", "8001")])
        with open(self.prefix + "-ncu.txt") as f:
            self.assertTrue(f.readline().startswith('16/2,10240,1,"ID"'))

    def test_clock_control(self):
        # Nsight Compute's base clocks unless --clock-control none asks for the card's own.
        ncu_args = os.path.join(self.dir.name, "ncu-args")
        self.assertEqual(self.run_script("16:4096").returncode, 0)
        with open(ncu_args) as f:
            self.assertIn("--clock-control base", f.read())
        run = self.run_script("16:4096", extra=["--clock-control", "none"])
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(ncu_args) as f:
            self.assertIn("--clock-control none", f.read())
        run = self.run_script("16:4096", extra=["--clock-control", "boost"])
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("invalid choice", run.stderr)

    def test_by_operation(self):
        # --by-operation asks Nsight Compute for the L2's reduction misses and writes them a
        # call; without it neither the metric nor the column.
        ncu_args = os.path.join(self.dir.name, "ncu-args")
        self.assertEqual(self.run_script("16/4:10240:causal").returncode, 0)
        with open(ncu_args) as f:
            self.assertNotIn("op_red_lookup_miss", f.read())
        with open(self.prefix + "-bytes.csv") as f:
            self.assertNotIn("l2_reduction_miss_sectors", f.readline())
        run = self.run_script("16/4:10240:causal", extra=["--by-operation"])
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(ncu_args) as f:
            self.assertIn("lts__t_sectors_op_red_lookup_miss.sum", f.read())
        with open(self.prefix + "-bytes.csv") as f:
            calls = [(r["call"], r["dram_read_bytes"], r["l2_reduction_miss_sectors"])
                     for r in csv.DictReader(f)]
        self.assertEqual(calls, [("0", "16000", "2000"), ("1", "16001", "2001")])

    def test_by_operation_without_the_metric(self):
        # An ncu that does not give the reduction misses: a clear refusal, not a KeyError.
        ncu = os.path.join(self.dir.name, "ncu")
        with open(ncu) as f:
            text = f.read()
        with open(ncu, "w") as f:
            f.write(text.replace("*lts__t_sectors_op_red_lookup_miss.sum*)", "*no-such-metric*)"))
        run = self.run_script("16/4:10240:causal", extra=["--by-operation"])
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("gave no lts__t_sectors_op_red_lookup_miss.sum for --by-operation",
                      run.stderr)
        self.assertNotIn("KeyError", run.stderr)

    def test_launches_not_the_logged_calls(self):
        run = self.run_script("16:65536", launches=3)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("read 3 launches, not the 2 logged calls", run.stderr)

    def test_bad_shape(self):
        run = self.run_script("16x65536")
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("give HEADS:N or HEADS:N:causal", run.stderr)
        run = self.run_script("16:1024:masked")
        self.assertIn("give HEADS:N or HEADS:N:causal", run.stderr)
        run = self.run_script("0:1024")
        self.assertIn("heads and N are at least 1", run.stderr)
        run = self.run_script("16/3:1024")
        self.assertIn("KV heads divide the heads", run.stderr)
        run = self.run_script("16/x:1024")
        self.assertIn("HEADS/KV_HEADS for GQA", run.stderr)


if __name__ == "__main__":
    unittest.main()
