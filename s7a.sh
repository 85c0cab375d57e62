#!/usr/bin/env bash
# Device call 1 of this stop: decode's L2 policy, fa3's quarter-L2 sections.
set -u
export DEPS=$PWD/.deps/root BUILD=/tmp/flashlab-build OUT=${OUT:-/tmp/out}
L=$OUT/log.txt
{
bench/gpu/run_device.sh build 2>&1 | grep -E "decode_split|error|Error|===|LDL" | head -40
T=$BUILD/tests/gpu
echo "=== tests $(date -u +%T)"
timeout 120 $T/test_gpu -tc='decode*' 2>&1 | tail -3
timeout 60 $T/test_gpu_validate_decode 2>&1 | tail -2
timeout 60 $T/test_gpu_info 2>&1 | tail -2
echo "=== memcheck decode policy $(date -u +%T)"
timeout 120 compute-sanitizer --tool memcheck $T/test_gpu -tc='decode: every kv_l2_policy*' 2>&1 | tail -3
echo "=== decode sweep $(date -u +%T)"
timeout 200 env PYTHONUNBUFFERED=1 python3 bench/gpu/bench.py --lib $BUILD/gpu/libflashlab.so --decode --csv $OUT/decode.csv 2>&1 | tail -20
echo "=== compare fa3 16 heads $(date -u +%T)"
timeout 120 $BUILD/lessons/app/flashlab compare --kernels fa2,fa3 --n 4096 --d 128 --heads 16 --no-color 2>&1 | tail -25
echo "=== fa3 bench $(date -u +%T)"
timeout 150 env PYTHONUNBUFFERED=1 python3 bench/gpu/bench.py --lib $BUILD/gpu/libflashlab.so --impls fa3 cudnn --head-dims 128 64 --causal 0 --seq-lens 2048 4096 8192 --csv $OUT/fa3.csv 2>&1 | tail -14
echo "=== end $(date -u +%T)"
} > $L 2>&1
cat $L
