#!/usr/bin/env bash
# The GPU device script: on a machine with an NVIDIA GPU (sm_90, e.g. the H200), from the
# repository root, build flashlab's GPU library, its tests and the flashlab program, run the
# tests, run compute-sanitizer (memcheck, racecheck, synccheck) on a small case of every
# kernel (the backward's included), run `flashlab compare` and the GPU steps of lessons 6, 9
# and 10 through its GPU runner, run the Python module's tests on torch tensors (python), time
# every kernel against torch's SDPA backends (the forward, then the backward: bench-backward),
# read one forward of each with Nsight Compute, and train a small character model with
# torch's SDPA and with flashlab's attention (train), and run ring attention with P
# ranks emulated on the one GPU (ring).
#
#   bench/gpu/run_device.sh [steps...]   steps: build test python sanitize partitions cli
#                                        sweep bench bench-backward decode ablation ncu levels
#                                        train exercises ring profile stores (default: all but
#                                        profile and stores)
#
# Environment: OUT (where logs and CSVs go; default ./gpu-out), BUILD (build folder; default
# /tmp/flashlab-build), DEPS (a folder holding unpacked Debian packages of Eigen, doctest,
# CLI11, fmt, nlohmann-json, pybind11, for machines that lack them; default .deps/root), TEST_SHARDS
# (how many test processes, test_gpu's one case each and the six other programs, the test
# step runs at once; default 8),
# TEST_TIMEOUT (seconds before the test step stops one of them; default 900), TEST_CASES
# (the indices, in name order, of the test_gpu cases to run; default all), SANITIZE_TIMEOUT (the same for the
# sanitize step; default 1500), SEQ_LENS
# (the benchmark's N values).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
BUILD=${BUILD:-/tmp/flashlab-build}
DEPS=${DEPS:-$ROOT/.deps/root}
STEPS=${*:-build test python sanitize partitions cli sweep bench bench-backward decode ablation ncu levels train exercises ring}
# Into the SMs, the store and reduction sectors the L1 issued, out of the SMs, at the L2
# slices, at DRAM (lessons/gpu_bridge/ncu_bytes.hpp says which level each measures), and the
# kernel's time.
NCU_METRICS=l1tex__m_xbar2l1tex_read_bytes.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum,l1tex__m_l1tex2xbar_write_bytes.sum,lts__t_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
# Where DRAM bytes are read (the ncu, levels and stores steps): Nsight Compute's replay mode,
# and the name of the first read each profiled range starts with (--first-read) and the rows
# leave out, as bench/gpu/ncu_csv.py holds them (REPLAY, FIRST_READ_KERNEL; why: its comment).
ncu_csv_value() { python3 -c "import sys; sys.path.insert(0, '$ROOT/bench/gpu'); import ncu_csv; print($1)"; }
read -r -a NCU_REPLAY <<< "$(ncu_csv_value "' '.join(ncu_csv.REPLAY)")"
NCU_FIRST_READ_KERNEL=$(ncu_csv_value ncu_csv.FIRST_READ_KERNEL)
mkdir -p "$OUT"
status=0

step() { echo; echo "=== $1 ($(date -u +%H:%M:%S))"; }
want() { [[ " $STEPS " == *" $1 "* ]]; }
# Waits for the processes a step started in the background (`pids`, a label each in `labels`,
# a log each in `logs` where it keeps one) and prints each one's outcome: $1 for a clean exit,
# else FAILED, why (exit code, or stopped by `timeout -s KILL` after $limit seconds) and the
# log's tail; a failure sets status.
await_processes() {
  local i rc
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    rc=$?
    if (( rc == 0 )); then echo "$1: ${labels[$i]}"; continue; fi
    status=1
    if (( rc == 137 )); then echo "FAILED (stopped after $limit s): ${labels[$i]}"
    else echo "FAILED (exit $rc): ${labels[$i]}"; fi
    if [[ -n ${logs[$i]:-} ]]; then tail -20 "${logs[$i]}"; fi
  done
}

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
nvcc --version | tail -1
echo "commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)," \
     "$(git -C "$ROOT" status --short 2>/dev/null | wc -l) files differ from it"

if want build; then
  step "build"
  prefix=()
  if [[ -d $DEPS/usr ]]; then
    prefix=(-DCMAKE_PREFIX_PATH="$DEPS/usr"
            -DEigen3_DIR="$DEPS/usr/share/eigen3/cmake"
            -Ddoctest_DIR="$DEPS/usr/lib/cmake/doctest"
            -DCLI11_DIR="$DEPS/usr/share/cmake/CLI11"
            -Dfmt_DIR="$DEPS/usr/lib/x86_64-linux-gnu/cmake/fmt"
            -Dnlohmann_json_DIR="$DEPS/usr/share/cmake/nlohmann_json")
    [[ -d $DEPS/usr/lib/cmake/pybind11 ]] && prefix+=(-Dpybind11_DIR="$DEPS/usr/lib/cmake/pybind11")
  fi
  # pybind11 of the python3 that has torch, where it has one: it knows that Python's version
  # (Debian 12's pybind11 2.10 predates Python 3.12).
  if pybind11_cmake=$(python3 -m pybind11 --cmakedir 2> /dev/null); then
    prefix+=(-Dpybind11_DIR="$pybind11_cmake")
  fi
  # The Python module is built for the python3 that has torch (the python step's).
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DPython3_EXECUTABLE="$(command -v python3)" "${prefix[@]}" > "$BUILD.configure.log" 2>&1 || { tail -30 "$BUILD.configure.log"; exit 1; }
  cmake --build "$BUILD" -j "$(nproc)" --target flashlab_gpu test_gpu test_gpu_abi test_gpu_info \
        test_gpu_validate test_gpu_validate_decode test_gpu_hopper_tile test_gpu_exp2 flashlab \
        flashlab_gpu_runner bench_l2_partitions bench_l2_rows_in_flight bench_block_log \
        bench_scalar_block_log scalar_l1_vs_block_log || exit 1
  lib="$BUILD/gpu/libflashlab.so"
  # The compiler's resource report (registers, shared memory, stack) and, per kernel that
  # uses tensor cores, how many of each instruction that matters made it into the SASS.
  cuobjdump --dump-resource-usage "$lib" | grep -E "Function|REG" | cut -c1-200
  cuobjdump --dump-sass "$lib" | awk '/Function :/ {f = $3} /HMMA/ {h[f]++} /LDSM/ {m[f]++}
    /LDGSTS/ {g[f]++} /MUFU.EX2/ {e[f]++} /LDL|STL/ {s[f]++}
    END {for (f in h) printf "%s: HMMA %d LDSM %d LDGSTS %d MUFU.EX2 %d LDL/STL %d\n",
         f, h[f], m[f], g[f], e[f], s[f]}'
  # fa3 must run on Hopper's own units: HGMMA (wgmma) and UTMALDG (TMA loads) in every fa3
  # kernel, and no local memory (LDL/STL: spills or a register array indexed at run time).
  # One exception, printed but allowed: the conditional rule's counting kernel (Rescale 2,
  # `RescaleE2` in its name), an instrument that is never timed, spills at d = 128.
  # MUFU.EX2 is printed too: the software_exp2 kernels (`RescaleE0ELb1ELb1E`: software_exp2,
  # then kChainCode, the last two template arguments) have fewer, a quarter of the unmasked
  # tiles' exponentials being FMA-pipe code.
  cuobjdump --dump-sass "$lib" | awk '/Function :/ {f = $3} f ~ /fa3_kernel/ {
      if (!(f in n)) { n[f] = 1; kernels++ }; if (/HGMMA/) g[f]++; if (/UTMALDG/) t[f]++; if (/LDL|STL/) s[f]++
      if (/MUFU.EX2/) e[f]++ }
    END {bad = 0; for (f in n) { printf "%s: HGMMA %d UTMALDG %d LDL/STL %d MUFU.EX2 %d\n", f, g[f], t[f], s[f], e[f];
         if (!g[f] || !t[f] || (s[f] && f !~ /RescaleE2/)) bad = 1 }; if (!kernels) bad = 1; exit bad}' \
    || { echo "fa3 SASS check failed: HGMMA and UTMALDG expected, no LDL/STL"; status=1; }
  # Registers, printed for the log (not a check): per fa3 kernel, the FFMA reading three vector
  # registers and the main loop's same-bank source pairs (bench/gpu/sass_registers.py). Two
  # builds with the same instructions ran 4 to 8% apart (NOTES, "Same instructions, 4 to 8%
  # apart"); these counts are what the SASS can say about such a pair before it is timed.
  cuobjdump --dump-sass "$lib" | python3 "$ROOT/bench/gpu/sass_registers.py" --kernels fa3_kernel \
    | sed -E 's/^_ZN.*fa3_kernelI//' | tee "$OUT/fa3_registers.txt"
  # The backward's v3 likewise: HGMMA and UTMALDG in every instantiation, no local memory.
  cuobjdump --dump-sass "$lib" | awk '/Function :/ {f = $3} f ~ /fa3_backward_kernel/ {
      if (!(f in n)) { n[f] = 1; kernels++ }; if (/HGMMA/) g[f]++; if (/UTMALDG/) t[f]++; if (/LDL|STL/) s[f]++ }
    END {bad = 0; for (f in n) { printf "%s: HGMMA %d UTMALDG %d LDL/STL %d\n", f, g[f], t[f], s[f];
         if (!g[f] || !t[f] || s[f]) bad = 1 }; if (kernels != 4) bad = 1; exit bad}' \
    || { echo "backward v3 SASS check failed: 4 kernels, HGMMA and UTMALDG expected, no LDL/STL"; status=1; }
  # decode's split and queue kernels run on the tensor cores: HMMA (mma.sync) fed by LDSM
  # (ldmatrix) from K and V that LDGSTS (cp.async) brought into SRAM, and no local memory.
  cuobjdump --dump-sass "$lib" | awk '/Function :/ {f = $3} f ~ /decode_(split_kv|queue)_kernel/ {
      if (!(f in n)) { n[f] = 1; kernels++ }; if (/HMMA/) h[f]++; if (/LDSM/) m[f]++
      if (/LDGSTS/) a[f]++; if (/LDL|STL/) s[f]++ }
    END {bad = 0; for (f in n) { printf "%s: HMMA %d LDSM %d LDGSTS %d LDL/STL %d\n", f, h[f], m[f], a[f], s[f];
         if (!h[f] || !m[f] || !a[f] || s[f]) bad = 1 }; if (!kernels) bad = 1; exit bad}' \
    || { echo "decode SASS check failed: HMMA, LDSM and LDGSTS expected, no LDL/STL"; status=1; }
fi

if want test; then
  step "GPU tests"
  # Each of test_gpu's cases in a process of its own (doctest's --first and --last on its
  # index in name order), TEST_SHARDS of them at once (default 8), the next starting as one
  # ends, and the other GPU test programs beside them: so that the suite takes about its
  # longest case's time over the processes rather than the sum of its cases' times (the
  # processes share the one GPU, which time-slices between them). A fault in a kernel (an
  # illegal instruction, an illegal address) is sticky, every later CUDA call of the process
  # failing too: here it spoils its own case only. Each process is stopped after TEST_TIMEOUT
  # seconds (default 900; a deadlocked kernel would hang it) and counted as failed; the
  # summary names every case that failed, with its log's tail.
  mkdir -p "$OUT/tests"
  shards=${TEST_SHARDS:-8}
  (( shards >= 1 )) || shards=1
  limit=${TEST_TIMEOUT:-900}
  names="$OUT/tests/cases.txt"
  "$BUILD/tests/gpu/test_gpu" -ltc -ob=name > "$names.raw" 2>&1
  listed=$?
  grep -v '^\[doctest\]\|^====' "$names.raw" > "$names"
  cases=$(wc -l < "$names")
  if (( listed != 0 || cases == 0 )); then
    echo "FAILED: test_gpu listed no case (exit $listed):"; tail -5 "$names.raw"
    status=1
    cases=0
  fi
  chosen=${TEST_CASES:-$(seq 1 "$cases")}
  for i in $chosen; do  # indices in name order, 1 to cases
    if ! [[ $i =~ ^[0-9]+$ ]] || (( i < 1 || i > cases )); then
      echo "FAILED: TEST_CASES holds $i; give indices from 1 to $cases (test_gpu -ltc -ob=name)"
      status=1
      chosen=""
    fi
  done
  exits="$OUT/tests/exits.txt"  # a line for each process as it ends: its label and exit code
  : > "$exits"
  # The CPU's cores shared between the processes: each one's OpenMP (the CPU references)
  # spinning on all of them would leave the others none.
  threads=$(( $(nproc) / shards > 1 ? $(nproc) / shards : 1 ))
  # Runs "$@" in the background, stopped after $limit s, its output in the log $1.log, its
  # label $1 and exit code appended to $exits; waits while `shards` processes (the six other
  # programs among them) run.
  launch() {
    local label=$1
    shift
    while (( $(jobs -rp | wc -l) >= shards )); do wait -n; done
    ( OMP_NUM_THREADS=$threads timeout -s KILL "$limit" "$@" > "$OUT/tests/$label.log" 2>&1
      echo "$label $?" >> "$exits" ) &
  }
  for t in test_gpu_hopper_tile test_gpu_exp2 test_gpu_abi test_gpu_info test_gpu_validate \
           test_gpu_validate_decode; do
    launch "$t" "$BUILD/tests/gpu/$t"
  done
  for i in $chosen; do
    launch "case_$i" "$BUILD/tests/gpu/test_gpu" -ob=name -f=$i -l=$i
  done
  wait
  failed=0
  while read -r label rc; do
    (( rc == 0 )) && continue
    failed=$((failed + 1))
    why="exit $rc"
    (( rc == 137 )) && why="stopped after $limit s"
    name=$label
    [[ $label == case_* ]] && name="test_gpu case ${label#case_}: $(sed -n "${label#case_}p" "$names")"
    echo "FAILED ($why): $name"
    grep -E "ERROR|CRASHED|logged:" "$OUT/tests/$label.log" | head -12
  done < <(sort -V "$exits") > "$OUT/tests.log"
  ran=$(wc -l < "$exits")
  asked=$(( $(wc -w <<< "$chosen") + 6 ))
  echo "GPU tests: $ran of $asked processes ran (test_gpu's cases ${TEST_CASES:+$TEST_CASES }of" \
       "$cases, and 6 programs), $failed failed" >> "$OUT/tests.log"
  (( failed == 0 && ran == asked )) || status=1
  cat "$OUT/tests.log"
fi

if want python; then
  step "the Python module: its pytest suite, flashlab.torch on the GPU included"
  # The module is left out of the configure step where pybind11 or Python's headers are
  # missing; the configure log says which.
  if ! cmake --build "$BUILD" -j "$(nproc)" --target flashlab_python flashlab_gpu flashlab \
       > "$BUILD.python.log" 2>&1; then
    status=1
    tail -20 "$BUILD.python.log"
    grep -i "flashlab: .*python\|pybind11" "$BUILD.configure.log"
  else
    pyenv=(PYTHONPATH="$BUILD/python" FLASHLAB_CLI="$BUILD/lessons/app/flashlab"
           FLASHLAB_LIBRARY="$BUILD/gpu/libflashlab.so" MPLBACKEND=Agg)
    # pytest from the carried Debian packages where this python3 has none.
    if ! python3 -c "import pytest" 2> /dev/null; then
      pyenv[0]="PYTHONPATH=$BUILD/python:$DEPS/usr/lib/python3/dist-packages"
    fi
    py_test() {  # a label, then pytest's arguments
      echo "--- $1"
      env "${pyenv[@]}" python3 -m pytest -q -rs -p no:cacheprovider \
        --continue-on-collection-errors "${@:2}" 2>&1 |
        tee -a "$OUT/python.log" | tail -25
      [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
    }
    # One process per test file (a crash in one hides no other's result), fa3 in a process
    # of its own, as in the GPU tests: a fault there ends the process's CUDA.
    for file in "$ROOT"/python/tests/test_*.py; do
      py_test "$(basename "$file"), fa3 left out" "$file" -k "not fa3"
    done
    py_test "fa3 through flashlab.torch" "$ROOT/python/tests/test_gpu.py" -k "fa3"
  fi
fi

if want sanitize; then
  step "compute-sanitizer: memcheck, racecheck, synccheck"
  # Each tool on each group of cases in a process of its own, all at once (the GPU time-slices
  # between them), so that a fault in one kernel hides no other's result and the step takes
  # about its longest process's time rather than the sum: every kernel's sanitizer cases with
  # fa3 left out (FLASHLAB_SKIP_FA3), fa3's one-tile test, the sanitizer cases again with fa3
  # in, the backward's v3 (wgmma, TMA, at both d and dtypes, GQA, ragged and causal) and the
  # decode kernels (paged and contiguous, bad lengths and page indices clamped, never read
  # out of bounds; determinism). Each is stopped after SANITIZE_TIMEOUT seconds (default
  # 1500) and counted as failed.
  mkdir -p "$OUT/sanitize"
  limit=${SANITIZE_TIMEOUT:-1500}
  tests="$BUILD/tests/gpu"
  not_v3='sanitizer: the backward v3*'
  pids=() labels=() logs=()
  for tool in memcheck racecheck synccheck; do
    for group in "fa3 left out" "fa3's one-tile test" "fa3 included" "backward v3" "decode"; do
      log="$OUT/sanitize/$tool.${group//[^a-z0-9]/_}.log"
      # One OpenMP thread each: fifteen processes' CPU references share the machine's cores.
      run=(env OMP_NUM_THREADS=1 timeout -s KILL "$limit" compute-sanitizer --tool "$tool"
           --error-exitcode 1)
      case $group in
        "fa3 left out")
          FLASHLAB_SKIP_FA3=1 "${run[@]}" "$tests/test_gpu" -tc='sanitizer*' -tce="$not_v3" \
            > "$log" 2>&1 & ;;
        "fa3's one-tile test") "${run[@]}" "$tests/test_gpu_hopper_tile" > "$log" 2>&1 & ;;
        "fa3 included")
          "${run[@]}" "$tests/test_gpu" -tc='sanitizer*' -tce="$not_v3" > "$log" 2>&1 & ;;
        "backward v3") "${run[@]}" "$tests/test_gpu" -tc="$not_v3" > "$log" 2>&1 & ;;
        "decode")  # the queue grid's own small case; its long sweeps run unsanitized
          ( "${run[@]}" "$tests/test_gpu" -tc='decode: *,decode is bitwise*' \
              -tce='decode: the queue grid*' &&
            "${run[@]}" "$tests/test_gpu" -tc='decode: the queue grid once*' ) > "$log" 2>&1 & ;;
      esac
      pids+=($!) labels+=("$tool ($group)") logs+=("$log")
    done
  done
  await_processes clean
  cat "${logs[@]}" > "$OUT/sanitizer.log"
fi

if want partitions; then
  step "where blocks land and which L2 partition each SM reads through (bench_l2_partitions)"
  # The simulator's H200 profile holds this placement (first_wave_partitions); the program
  # exits 3 if the latencies do not split the SMs into two sides both references agree on.
  # Then the room one side's reads have in the L2 (chains of 8 to 80 MiB from one SM), and
  # where the lines one SM writes are kept (chains of 8 to 64 MiB written by SM 0, walked), and
  # whether the lines SM 0 reads or writes take room on the other side (home copies).
  "$BUILD/bench/bench_l2_partitions" --csv "$OUT/l2_partitions.csv" \
    --room-csv "$OUT/l2_room.csv" --written-csv "$OUT/l2_written.csv" \
    --home-mib 0 8 16 24 32 40 48 --home-csv "$OUT/l2_home.csv" 2>&1 | tail -56
  (( PIPESTATUS[0] == 0 )) || status=1
  # The naive softmax's traffic under Nsight Compute (docs/IO-LEVELS.md, "Home copies"): its
  # rows in flight (k blocks an SM), P written or not, in lockstep, and one side of the L2 alone
  # (the sides just measured); naive_vs_measured --rows-in-flight sets the mirror beside it.
  python3 "$ROOT/bench/gpu/l2_rows_in_flight.py" --program "$BUILD/bench/bench_l2_rows_in_flight" \
    --csv "$OUT/rows_in_flight.csv" --partitions "$OUT/l2_partitions.csv" \
    --case 8:6144,8192,9216,10240,11264,12288,14336 --case 4:16384,20480,24576 \
    --case 8:9216,10240,12288:no-p --case 8:9216,10240,12288:lockstep \
    --case 8:10240,12288,14336,16384:side0 || status=1
  # fa2's blocks past the L2's crossover, logged (SM, start, end) under the DRAM counters, for
  # the grid model's replay (fa2_dram_vs_block_log; docs/IO-LEVELS.md, "Past the crossover").
  python3 "$ROOT/bench/gpu/block_log.py" --program "$BUILD/bench/bench_block_log" \
    --partitions-program "$BUILD/bench/bench_l2_partitions" --shape 16:65536 --shape 1:196608 \
    --shape 4:98304 --calls 2 --prefix "$OUT/fa2-block-log" || status=1
  # The scalar kernel's blocks at 16 heads, under the mask and not, logged under the SMs' read
  # counter with when each began each step (scalar_l1_vs_block_log replays the steps;
  # docs/IO-LEVELS.md, "The scalar kernel's heads catch up", and bench/gpu/NOTES.md, "The
  # scalar kernel's L1: not its carve-out").
  python3 "$ROOT/bench/gpu/block_log.py" --program "$BUILD/bench/bench_scalar_block_log" \
    --partitions-program "$BUILD/bench/bench_l2_partitions" --shape 16:4096:causal \
    --shape 16:8192 --shape 16:8192:causal --calls 2 --steps \
    --prefix "$OUT/scalar-block-log" || status=1
  "$BUILD/bench/simulator/scalar_l1_vs_block_log" --results "$OUT" || status=1
  # What the steps show: the front that waits for reads in flight, and blocks of a head on one
  # SM in step (bench/gpu/NOTES.md, "The scalar kernel's steps logged").
  for shape in "4096 1" "8192 0" "8192 1"; do
    read -r n causal <<< "$shape"
    python3 "$ROOT/bench/gpu/step_log_stats.py" --log "$OUT/scalar-block-log.csv" --n "$n" \
      --causal "$causal" || status=1
  done
fi

if want cli; then
  step "flashlab compare on the GPU (the runner loaded with dlopen), with Nsight Compute"
  "$BUILD/lessons/app/flashlab" compare --n 1024 --d 64 --causal --repeats 5 --no-color 2>&1 |
    tee "$OUT/compare.log" || status=1
  for n in 4096 8192; do
    "$BUILD/lessons/app/flashlab" compare --n $n --d 128 --repeats 3 --large --no-color 2>&1 |
      tee -a "$OUT/compare.log" || status=1
  done
  "$BUILD/lessons/app/flashlab" compare --n 4096 --n-q 1 --d 128 --repeats 5 --no-ncu --no-color 2>&1 |
    tee -a "$OUT/compare.log" || status=1
  # fa3's mirror beside the kernel, and the backward and decode passes: the simulator's
  # mirror of each, then the pass run on the GPU (its median time, the bytes ncu measured).
  "$BUILD/lessons/app/flashlab" compare --kernels fa2,fa3 --n 4096 --d 128 --heads 16 --no-color \
    2>&1 | tee -a "$OUT/compare.log" || status=1
  "$BUILD/lessons/app/flashlab" compare --pass backward --n 4096 --d 128 --heads 16 --kv-heads 4 \
    --causal --no-color 2>&1 | tee -a "$OUT/compare.log" || status=1
  for grid in splits queue; do
    "$BUILD/lessons/app/flashlab" compare --pass decode --n 32768 --n-q 1 --d 128 --batch 8 \
      --heads 32 --kv-heads 8 --grid $grid --no-color 2>&1 | tee -a "$OUT/compare.log" || status=1
  done
  # The lessons' GPU steps through the same runner: lesson 0's naive and fa2 side by side,
  # lesson 3's tiled forward as the scalar and fa2 kernels, lesson 4's causal skipping timed,
  # lesson 6's backward beside the reference (errors under the 3x rule, default and
  # deterministic mode, bytes measured by ncu), lesson 7's partitioning, lesson 9's
  # conditional rescales counted by fa3 beside the CPU reference's, and lesson 10's split-KV
  # decode (splits, paged caches, errors against the CPU reference).
  for n in 0 3 4 6 7 9 10; do
    step "flashlab lesson $n on the GPU"
    timeout 600 "$BUILD/lessons/app/flashlab" lesson $n --no-color < /dev/null 2>&1 |
      tee "$OUT/lesson$n.log" | sed -n '/On a GPU/,$p' || status=1
  done
  # Lesson 9's device counts must agree with the reference's (its `agree` column: yes).
  if [ "$(grep -c $'\tGPU fa3\t.*\tyes (within' "$OUT/lesson9.log")" != 2 ]; then
    echo "lesson 9: fa3's rescale counts did not agree with the CPU reference's (or did not run)"
    status=1
  fi
fi

if want sweep; then
  step "flashlab compare --sweep: predicted against measured bytes over N, one head and 16"
  plot=()
  command -v gnuplot > /dev/null && plot=(--plot "$OUT/compare_sweep_h1.png")
  "$BUILD/lessons/app/flashlab" compare --sweep n=1024..32768 --sweep d=128 --no-color \
    --csv "$OUT/compare_sweep_h1.csv" "${plot[@]}" 2>&1 | tail -25 || status=1
  "$BUILD/lessons/app/flashlab" compare --sweep n=1024..16384 --sweep heads=16 --d 128 --no-color \
    --csv "$OUT/compare_sweep_h16.csv" 2>&1 | tail -20 || status=1
  # Under the causal mask (predicted before it was first measured:
  # results/2026-12-05-compare-sweep-causal-predicted.csv).
  "$BUILD/lessons/app/flashlab" compare --sweep n=1024..16384 --sweep heads=1,16 --sweep causal=yes \
    --d 128 --no-color --csv "$OUT/compare_sweep_causal.csv" 2>&1 | tail -42 || status=1
  # The L2 crossover (docs/IO-LEVELS.md): fa2, d = 128, B = 1, N far past where K and V of the
  # heads resident at once stop fitting the 60 MiB L2 (the run prints the predicted N per
  # heads). The CSV puts the grid model's DRAM read, write and left-dirty bytes beside
  # dram__bytes_read/write and lts__t_bytes for every row, and the predicted crossover N.
  # 64 heads at N = 262144: Q, K, V and O take 16 GiB; the kernel about 6 s per ncu pass. The
  # grid model, which now moves every line through hashed sets, takes hours of CPU at the
  # largest points (compare's estimate, about a second a GiB into the SMs, asks for --large).
  step "flashlab compare --sweep: DRAM bytes across the L2 crossover, fa2, 16, 32 and 64 heads"
  "$BUILD/lessons/app/flashlab" compare --kernels fa2 --d 128 --no-color --large \
    --sweep n=16384,32768,49152,65536,98304,131072,196608,262144 --sweep heads=16,32,64 \
    --csv "$OUT/compare_sweep_crossover.csv" 2>&1 | tail -32 || status=1
  # The passes (docs/IO-LEVELS.md, "The passes from a cold L2"): the backward (one head and 16,
  # causal at d = 128, GQA, and without the mask at d = 64) and decode (the ANCHORS shape's 32
  # query heads over 8 KV heads, B = 1 and 8, contiguous and paged), the mirrors' bytes into
  # and out of the SMs and their DRAM floor against Nsight Compute. The backward's grid model
  # is left out here (--no-grid-model: minutes of this machine's CPU at the longest N);
  # bench/simulator/backward_grid_vs_measured.py runs it beside the CSVs afterwards. The
  # backward's crossover: the points between those measured, where the grid model puts 15%
  # over the floor (results/2026-12-04-backward-grid-crossover-predicted.csv).
  step "flashlab compare --pass backward|decode --sweep: the passes' bytes over N"
  F="$BUILD/lessons/app/flashlab"
  "$F" compare --pass backward --sweep n=1024..16384 --sweep heads=1,16 --d 128 --causal \
    --no-grid-model --no-color --csv "$OUT/compare_sweep_backward_causal.csv" 2>&1 | tail -12 ||
    status=1
  "$F" compare --pass backward --sweep n=1024..16384 --heads 16 --kv-heads 4 --d 128 --causal \
    --no-grid-model --no-color --csv "$OUT/compare_sweep_backward_gqa.csv" 2>&1 | tail -7 || status=1
  "$F" compare --pass backward --sweep n=1024..16384 --sweep heads=1,16 --d 64 \
    --no-grid-model --no-color --csv "$OUT/compare_sweep_backward_d64.csv" 2>&1 | tail -12 || status=1
  "$F" compare --pass backward --sweep n=10240,12288,14336 --heads 16 --kv-heads 4 --d 128 \
    --causal --no-grid-model --no-color --csv "$OUT/compare_sweep_backward_gqa_crossover.csv" 2>&1 |
    tail -5 || status=1
  "$F" compare --pass backward --sweep n=40960,49152,57344 --heads 16 --d 128 --causal \
    --no-grid-model --no-color --csv "$OUT/compare_sweep_backward_crossover.csv" 2>&1 | tail -5 ||
    status=1
  # Queries and keys of different lengths (docs/IO-LEVELS.md, "Queries and keys of different
  # lengths"), bottom-right: the forward's kernels and the backward, one row each.
  for shape in "1024 4096" "4096 1024" "2048 16384"; do
    read -r nq nk <<< "$shape"
    "$F" compare --kernels scalar,fa2,fa3 --n "$nk" --n-q "$nq" --d 128 --heads 16 --causal \
      --repeats 3 --large --no-color 2>&1 | tee -a "$OUT/compare_nq.log" | grep -E "GPU|simulator" ||
      status=1
    "$F" compare --pass backward --n "$nk" --n-q "$nq" --d 128 --heads 16 --causal --no-color \
      2>&1 | tee -a "$OUT/compare_nq.log" | grep -E "GPU|simulator" || status=1
  done
  "$F" compare --pass decode --sweep n=1024..131072 --heads 32 --kv-heads 8 --d 128 \
    --no-color --csv "$OUT/compare_sweep_decode_b1.csv" 2>&1 | tail -10 || status=1
  "$F" compare --pass decode --sweep n=1024..65536 --batch 8 --heads 32 --kv-heads 8 --d 128 \
    --no-color --csv "$OUT/compare_sweep_decode_b8.csv" 2>&1 | tail -9 || status=1
  "$F" compare --pass decode --sweep n=4096,32768 --sweep batch=8,64 --heads 32 --kv-heads 8 \
    --d 128 --page-size 64 --no-color --csv "$OUT/compare_sweep_decode_paged.csv" 2>&1 |
    tail -6 || status=1
fi

if want bench; then
  step "timing against torch SDPA"
  # If the sweep fails (a fault in fa3 ends the process's CUDA context), it is run again
  # without fa3, so that the other kernels' figures still come out.
  PYTHONUNBUFFERED=1 python3 "$ROOT/bench/gpu/bench.py" --lib "$BUILD/gpu/libflashlab.so" \
    --csv "$OUT/bench.csv" ${SEQ_LENS:+--seq-lens $SEQ_LENS} || {
    status=1
    echo "--- the sweep failed: again without fa3 (bench_no_fa3.csv)"
    FLASHLAB_SKIP_FA3=1 PYTHONUNBUFFERED=1 python3 "$ROOT/bench/gpu/bench.py" \
      --lib "$BUILD/gpu/libflashlab.so" --csv "$OUT/bench_no_fa3.csv" \
      ${SEQ_LENS:+--seq-lens $SEQ_LENS}
  }
fi

if want bench-backward; then
  step "backward timing against torch SDPA (flash, cuDNN), and the autograd check"
  PYTHONUNBUFFERED=1 python3 "$ROOT/bench/gpu/check_autograd.py" --lib "$BUILD/gpu/libflashlab.so" \
    || status=1
  PYTHONUNBUFFERED=1 python3 "$ROOT/bench/gpu/bench.py" --lib "$BUILD/gpu/libflashlab.so" \
    --pass backward --csv "$OUT/bench_backward.csv" ${SEQ_LENS:+--seq-lens $SEQ_LENS} || status=1
fi

if want ring; then
  # Ring attention (bench/gpu/ring_attention.py) with 2 and 4 ranks as streams of one GPU:
  # exact under the 2x rule against one-GPU attention, then timed against the kernel on the
  # whole problem. Both layouts causal, GQA non-causal, and an N that 2P does not divide.
  step "ring attention, P ranks emulated on one GPU"
  ring() { PYTHONUNBUFFERED=1 python3 "$ROOT/bench/gpu/ring_attention.py" \
             --lib "$BUILD/gpu/libflashlab.so" "$@" 2>&1 | tee -a "$OUT/ring.log"
           [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1; }
  for p in 2 4; do
    ring --emulate $p --n 8192 --causal --layout zigzag
    ring --emulate $p --n 8192 --causal --layout contiguous
    ring --emulate $p --n 8192 --heads 16 --heads-kv 4
    ring --emulate $p --n 4099 --d 64 --causal --layout zigzag --repeats 3
  done
  # The ring's backward after its forward (--backward): flashlab's backward on each pair,
  # dK and dV accumulators travelling with K and V; dQ, dK, dV under the 3x rule against
  # fp32 autograd, beside flashlab's backward on the whole problem.
  for p in 2 4; do
    ring --emulate $p --n 4096 --causal --layout zigzag --backward --repeats 3
    ring --emulate $p --n 4096 --causal --layout contiguous --backward --repeats 3
    ring --emulate $p --n 4096 --heads 16 --heads-kv 4 --backward --repeats 3
    ring --emulate $p --n 4099 --d 64 --causal --layout zigzag --backward --repeats 3
  done
fi

if want decode; then
  step "decode: split-KV against torch SDPA decode, contiguous and paged; a read of its bytes"
  PYTHONUNBUFFERED=1 python3 "$ROOT/bench/gpu/bench.py" --lib "$BUILD/gpu/libflashlab.so" \
    --decode --csv "$OUT/bench_decode.csv" || status=1
  # What a kernel that only reads the same K and V gets under the same timings: the decode's
  # ceiling at each cache (bench/gpu/NOTES.md, "What a read alone gets").
  PYTHONUNBUFFERED=1 python3 "$ROOT/bench/gpu/decode_read_ceiling.py" \
    "$BUILD/gpu/libflashlab.so" --csv "$OUT/decode_read_ceiling.csv" || status=1
fi

if want ablation; then
  step "fa3's switches one at a time (d = 128 and 64, N = 8192, bf16) against cuDNN"
  PYTHONUNBUFFERED=1 python3 "$ROOT/bench/gpu/bench.py" --lib "$BUILD/gpu/libflashlab.so" \
    --ablation --csv "$OUT/ablation.csv" || status=1
  PYTHONUNBUFFERED=1 python3 "$ROOT/bench/gpu/bench.py" --lib "$BUILD/gpu/libflashlab.so" \
    --ablation --ablation-d 64 --csv "$OUT/ablation64.csv" || status=1
  # One work item's phases (lesson 8, step 4): fa3's pipeline logged at N = 1024 and 8192
  # (d = 128) and N = 1024 causal (d = 64), read by pipeline_log.py.
  logs=()
  for shape in "16 16 1024 128" "2 16 8192 128" "16 32 1024 64 --causal"; do
    read -r b h n d causal <<< "$shape"
    log="$OUT/pipeline-log-d$d-n$n${causal:+-causal}.csv"
    "$BUILD/bench/bench_pipeline_log" --batch "$b" --heads "$h" --n "$n" --d "$d" $causal \
      --blocks 24 --csv "$log" || status=1
    logs+=("$log")
  done
  python3 "$ROOT/bench/gpu/pipeline_log.py" "${logs[@]}" --csv "$OUT/pipeline-phases.csv" ||
    status=1
fi

if want ncu; then
  step "Nsight Compute, one forward each"
  files=()
  for impl in naive scalar fa2 fa3 flash; do
    ncu --clock-control none --profile-from-start off "${NCU_REPLAY[@]}" --print-units base \
        --csv --metrics "$NCU_METRICS" python3 "$ROOT/bench/gpu/bench.py" \
        --lib "$BUILD/gpu/libflashlab.so" --ncu-one "$impl" --first-read > "$OUT/ncu_$impl.csv" 2>&1 \
      || { status=1; tail -5 "$OUT/ncu_$impl.csv"; }
    files+=("$OUT/ncu_$impl.csv")
  done
  python3 "$ROOT/bench/gpu/bench.py" --lib "$BUILD/gpu/libflashlab.so" \
    --summarize-ncu "${files[@]}" || status=1
  # The simulator's prediction for the same problem and tiles, where its CLI builds.
  if timeout 150 cmake --build "$BUILD" --target flashlab -j "$(nproc)" > "$BUILD.cli.log" 2>&1
  then
    echo "simulator (flashlab simulate, per (batch, head); multiply by H = 16):"
    "$BUILD/lessons/app/flashlab" simulate --n 8192 --d 128 --dtype bf16 --profile h200 \
      --algo fa2 --br 128 --bc 64 --json || true
    "$BUILD/lessons/app/flashlab" simulate --n 8192 --d 128 --dtype bf16 --profile h200 \
      --algo naive --json || true
  else
    echo "the simulator's CLI did not build here: the closed-form prediction above stands"
  fi
fi
if want levels; then
  # Which counter measures which level, by experiment: fa2's loads are known exactly, so the
  # bytes into the SMs must equal the model's; what sits below them at the L2 slices should
  # shrink as more blocks read the same K/V tiles at once (one head, GQA, MQA), if the
  # difference is Hopper merging simultaneous requests before the slices.
  # The naive kernel's cuBLAS GEMMs are named by the tile they use (nvjet_..._256x128_...):
  # its rows, one per launched kernel, say which tile read how many bytes.
  step "levels: bytes at the SMs, the L2 slices and DRAM, one metric set per kernel and shape"
  echo "impl,shape(B,Hq,Hkv,N,d),kernel,metric,value" > "$OUT/levels.csv"
  for run in fa2:1,1,1,4096,128 fa2:1,16,16,4096,128 fa2:1,16,4,4096,128 fa2:1,16,1,4096,128 \
             fa2:1,16,16,8192,128 fa2:1,16,1,8192,128 fa2:4,32,32,8192,128 \
             naive:1,1,1,4096,128 naive:1,1,1,8192,128 naive:1,16,16,4096,64 scalar:1,1,1,4096,128; do
    impl=${run%%:*} shape=${run#*:}
    ncu --clock-control none --profile-from-start off "${NCU_REPLAY[@]}" --print-units base \
        --csv --metrics "$NCU_METRICS" python3 "$ROOT/bench/gpu/bench.py" \
        --lib "$BUILD/gpu/libflashlab.so" --ncu-one "$impl" --shape "$shape" --first-read 2>&1 |
      awk -F'","' -v s="$shape" -v i="$impl" -v skip="$NCU_FIRST_READ_KERNEL" \
        '/^"[0-9]/ && $5 !~ skip {gsub(/"|,/, "", $15); gsub(/,/, ";", $5);
        print i ",\"" s "\"," $5 "," $13 "," $15}' >> "$OUT/levels.csv" || status=1
  done
  cat "$OUT/levels.csv"

  # Coalescing before the L2 slices (docs/IO-LEVELS.md, "What the L2 slices count"): Hopper's
  # L2 Request Coalescer (LRC) merges the read requests of several SMs for the same sectors.
  # Its counters are listed first (their names as this ncu knows them), then its sectors to
  # the SMs and from the slices are read beside the SMs' bytes and the slices' reads, with
  # 1 to 1024 blocks reading each K/V tile at once (one head at N = 16384, 4, 16 and 64
  # heads, 64 query heads on one KV head) and fa3's persistent grid, one block per SM.
  step "levels: the L2 Request Coalescer (lrc__*) as more blocks read the same tile at once"
  ncu --query-metrics 2>/dev/null | awk '$1 ~ /^lrc__/' > "$OUT/lrc_metrics.txt"
  lrc=,lts__t_sectors_srcunit_tex_op_read.sum,lrc__xbar2gpc_sectors_op_read.sum
  lrc+=,lrc__lts2lrc_sectors_op_read.sum,lrc__request_sectors_op_read_coalescable.sum
  lrc+=,lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum
  echo "impl,shape(B,Hq,Hkv,N,d),kernel,metric,value" > "$OUT/levels_lrc.csv"
  for run in fa2:1,1,1,16384,128 fa2:1,4,4,8192,128 fa2:1,16,16,4096,128 fa2:1,64,64,2048,128 \
             fa2:1,64,1,2048,128 fa2:1,1,1,32768,128 fa3:1,1,1,16384,128 fa3:1,16,16,4096,128; do
    impl=${run%%:*} shape=${run#*:}
    ncu --clock-control none --profile-from-start off "${NCU_REPLAY[@]}" --print-units base \
        --csv --metrics "$NCU_METRICS$lrc" python3 "$ROOT/bench/gpu/bench.py" \
        --lib "$BUILD/gpu/libflashlab.so" --ncu-one "$impl" --shape "$shape" --first-read 2>&1 |
      awk -F'","' -v s="$shape" -v i="$impl" -v skip="$NCU_FIRST_READ_KERNEL" \
        '/^"[0-9]/ && $5 !~ skip {gsub(/"|,/, "", $15); gsub(/,/, ";", $5);
        print i ",\"" s "\"," $5 "," $13 "," $15}' >> "$OUT/levels_lrc.csv" || status=1
  done
  cat "$OUT/levels_lrc.csv"

  # Are decode's 2.3 MiB and the backward's fixed ~9 MiB of DRAM writes Nsight Compute's own
  # (its restores between replay passes)? The same calls with the two DRAM metrics alone and
  # with compare's nine, in kernel and application replay (bench/gpu/NOTES.md, 2026-12-05).
  step "levels: DRAM writes with one metric pass and with compare's, kernel and application replay"
  python3 "$ROOT/bench/gpu/ncu_replay_writes.py" --flashlab "$BUILD/lessons/app/flashlab" \
    --csv "$OUT/ncu_replay_writes.csv" || status=1

  # The first large read of a profiled process is charged about 2.3 MiB of DRAM writes not its
  # own (docs/IO-LEVELS.md, "Nsight Compute's first kernel"); compare runs a kernel of its own
  # first, reading twice the L2, and leaves it out. Checked here: the decode at B = 1, L =
  # 32768 should write about its states (0.3 MiB), not 2.3 MiB; a sum of 128 MiB after a first
  # one should write almost nothing.
  step "levels: compare's first kernel takes the first large read's DRAM writes"
  "$BUILD/lessons/app/flashlab" compare --pass decode --batch 1 --heads 32 --kv-heads 8 \
    --n 32768 --d 128 --no-color > "$OUT/decode_first_kernel.txt" 2>&1 || status=1
  grep "GPU decode" "$OUT/decode_first_kernel.txt"
  python3 "$ROOT/bench/gpu/ncu_read_writes.py" --csv "$OUT/sums_first_kernel.csv" --mib 128 \
    --fill randn --dtype bfloat16 --cache-control all || status=1
fi
if want stores; then
  # Bytes out of the SMs, store by store: the requests and sectors the L1 sends on for global
  # stores and reductions, beside l1tex__m_l1tex2xbar_write_bytes and the slices' writes, one
  # call of each kernel that writes O or its gradients (fa2 through SRAM in whole rows, fa3
  # through TMA or its fragments, the backward's fragments, the decode's states).
  # The SASS order of each kernel's global stores (STG, RED) follows: whether a warp's two
  # half-sector stores to one sector leave back to back, which the L1 can merge.
  step "stores: sectors out of the SMs per kernel, and the SASS order of their stores"
  store_metrics=l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
  store_metrics+=,l1tex__t_requests_pipe_lsu_mem_global_op_red.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum
  store_metrics+=,l1tex__m_l1tex2xbar_write_bytes.sum,lts__t_sectors_srcunit_tex_op_write.sum
  store_metrics+=,lts__t_sectors_srcunit_tex_op_red.sum,smsp__sass_inst_executed_op_global_st.sum
  store_metrics+=,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
  echo "what,options,kernel,metric,value" > "$OUT/stores.csv"
  for run in "fa2:--heads 1 --n 4096" "fa2:--heads 16 --n 4096" "fa2:--heads 1 --n 1024 --d 64 --causal" \
             "fa3:--heads 1 --n 4096" "fa3:--heads 16 --n 8192" "fa3:--heads 1 --n 1024 --d 64 --causal" \
             "backward:--heads 16 --n 4096" "backward:--heads 16 --n 4096 --d 64" \
             "decode:--length 32768" "decode:--length 4096"; do
    what=${run%%:*} options=${run#*:}
    # shellcheck disable=SC2086  # the options split into words on purpose
    ncu --profile-from-start off "${NCU_REPLAY[@]}" --print-units base --csv \
        --metrics "$store_metrics" python3 "$ROOT/bench/gpu/profile_one.py" \
        --lib "$BUILD/gpu/libflashlab.so" "$what" --first-read $options 2>&1 |
      awk -F'","' -v w="$what" -v o="$options" -v skip="$NCU_FIRST_READ_KERNEL" \
        '/^"[0-9]/ && $5 !~ skip {gsub(/"|,/, "", $15); gsub(/,/, ";", $5);
        print w ",\"" o "\"," $5 "," $13 "," $15}' >> "$OUT/stores.csv" || status=1
  done
  cat "$OUT/stores.csv"
  cuobjdump --dump-sass "$BUILD/gpu/libflashlab.so" | awk '/Function :/ {f = $3; keep = (f ~ /fa2_kernel|fa3_kernel|decode_split_kv_kernel|decode_combine|fa3_backward_kernel|fa2_backward_kernel/)}
    keep && (/Function :/ || /STG|REDG|RED\.|ATOMG|BAR|EXIT|BRA/)' > "$OUT/stores_sass.txt"
  wc -l "$OUT/stores_sass.txt"
fi
if want profile; then
  # Nsight Compute's full sections for one call of the kernels whose speed is being worked on
  # (fa3's forward, the backward, the decode): warp states, pipe use, and stall samples per
  # SASS instruction (the source page, and its sums by class of instruction), written as text
  # to read off-line.
  for run in fa3:fa3_kernel backward:fa3_backward_kernel decode:decode_split_kv_kernel; do
    what=${run%%:*} kernel=${run#*:}
    step "profile: $what ($kernel)"
    ncu --profile-from-start off --set full --import-source yes -f -o "$BUILD.prof_$what" \
        python3 "$ROOT/bench/gpu/profile_one.py" --lib "$BUILD/gpu/libflashlab.so" "$what" \
        > "$BUILD.prof_$what.log" 2>&1 || { status=1; tail -5 "$BUILD.prof_$what.log"; continue; }
    ncu -i "$BUILD.prof_$what.ncu-rep" --page details --kernel-name "regex:$kernel" \
        > "$OUT/prof_$what.txt" 2>&1 || status=1
    ncu -i "$BUILD.prof_$what.ncu-rep" --page source --csv --print-source sass \
        --kernel-name "regex:$kernel" > "$OUT/prof_${what}_sass.csv" 2>&1 || status=1
    # Where its warps wait, by class of instruction (bench/gpu/stall_classes.py).
    python3 "$ROOT/bench/gpu/stall_classes.py" "$OUT/prof_${what}_sass.csv" --top 8 \
        > "$OUT/prof_${what}_stall_classes.txt" 2>&1 || status=1
    grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occ" \
        "$OUT/prof_$what.txt" | head -12
  done
fi

if want train; then
  # python/examples/train_char_model.py: 300 steps three times (torch's SDPA; flashlab's
  # attention from the same weights and batches; SDPA with another batch order, the noise
  # band), about 0.6 PFLOP in all. PASS when flashlab's smoothed loss curve stays as close to
  # SDPA's as the reordered run does. Twice: 4 heads of d = 128, then 8 query heads of d = 64
  # over 2 K/V heads (GQA), each writing losses.csv, summary.json and loss_curves.png under
  # $OUT/train_<shape>. It needs flashlab's Python module (target flashlab_python, in
  # $BUILD/python) and libflashlab.so.
  step "train: a character model with torch's SDPA and with flashlab's attention"
  if cmake --build "$BUILD" -j "$(nproc)" --target flashlab_python flashlab_gpu \
       > "$BUILD.train.log" 2>&1; then
    for shape in "d128:--heads 4" "d64_gqa:--heads 8 --kv-heads 2"; do
      echo "--- ${shape#*:}"
      # shellcheck disable=SC2086  # the options split into words on purpose
      PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 timeout 300 \
        python3 "$ROOT/python/examples/train_char_model.py" --flashlab-path "$BUILD/python" \
        --steps 300 ${shape#*:} --out "$OUT/train_${shape%%:*}" 2>&1 |
        tee "$OUT/train_${shape%%:*}.log"
      [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
    done
  else
    status=1
    tail -20 "$BUILD.train.log"
    echo "flashlab's Python module did not build (see $BUILD.train.log): no training run"
  fi
fi

if want exercises; then
  step "the kernel exercises (21, 22, 23): the checker on the GPU, solutions and wrong kernels"
  cmake --build "$BUILD" -j "$(nproc)" --target test_exercises_solutions test_exercises_wrong \
        test_kernel_checker kernel_case flashlab || exit 1
  # The solutions pass every case; each wrong kernel fails where it should, with its message
  # checked (tests/lessons/test_kernel_checker.cpp); the checker itself through CPU stand-ins.
  for t in test_exercises_solutions test_exercises_wrong test_kernel_checker; do
    echo "--- $t"
    "$BUILD/tests/lessons/$t" 2>&1 | tee -a "$OUT/exercises.log" | tail -3
    [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
  done
  # The students' skeletons, through the command: not written yet, said so on the GPU.
  for n in 21 22 23; do
    "$BUILD/lessons/app/flashlab" check $n --no-color > "$OUT/exercise_check_$n.log" 2>&1
    grep -q "NOT WRITTEN YET" "$OUT/exercise_check_$n.log" && echo "flashlab check $n: not written yet, as it should" ||
      { echo "flashlab check $n did not say NOT WRITTEN YET:"; cat "$OUT/exercise_check_$n.log"; status=1; }
  done
  # One case of each solution in a process of its own (kernel_case: nothing forked), under the
  # sanitizers: all clean. Then exercise 22 with the barrier after the compute left out: a race
  # racecheck must report.
  solutions="$BUILD/lessons/exercises/libflashlab_exercise_solution_kernels.so"
  race="$BUILD/tests/lessons/libflashlab_exercise_race_kernels.so"
  for tool in memcheck racecheck synccheck; do
    for n in 21 22 23; do
      compute-sanitizer --tool $tool --error-exitcode 1 "$BUILD/tests/lessons/kernel_case" \
        "$solutions" $n > "$BUILD.exercise$n.$tool.log" 2>&1 \
        && echo "$tool, exercise $n's solution: clean" || { status=1; tail -20 "$BUILD.exercise$n.$tool.log"; }
      cat "$BUILD.exercise$n.$tool.log" >> "$OUT/exercises_sanitizer.log"
    done
  done
  compute-sanitizer --tool racecheck --error-exitcode 1 "$BUILD/tests/lessons/kernel_case" \
    "$race" 22 > "$BUILD.exercise22.race.log" 2>&1
  race_status=$?
  cat "$BUILD.exercise22.race.log" >> "$OUT/exercises_sanitizer.log"
  grep -E "hazard|RACECHECK SUMMARY" "$BUILD.exercise22.race.log" | tail -3
  if [[ $race_status -ne 0 ]] && grep -qE "RACECHECK SUMMARY: [1-9][0-9]* hazard" "$BUILD.exercise22.race.log"; then
    echo "racecheck, exercise 22 without its second barrier: the race is reported, as it should"
  else
    echo "racecheck did not report the race of exercise 22 without its second barrier"
    status=1
  fi
fi
exit $status
