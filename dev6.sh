#!/usr/bin/env bash
cd bench/gpu
PYTHONUNBUFFERED=1 timeout 100 python3 bench.py --lib ../../build/gpu/libflashlab.so --head-dims 64 --seq-lens 1024 4096 16384 --impls fa3 fa3-noping fa3-3stages fa3-noping-3st cudnn --csv $OUT/d64.csv 2>&1 | grep -E "^d=|Error|error" 
