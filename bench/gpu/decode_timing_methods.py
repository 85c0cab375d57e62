"""Decode timed four ways, to see what the timing method adds at short caches. flashlab's
decode (the automatic split count and forced ones), torch's flash and cuDNN decode, bf16,
d = 128, 32 query heads over 8 KV heads, one query row:
  do_bench   triton.testing.do_bench, as bench.py times (it empties the L2 before every
             call by writing 256 MB, which leaves the L2 full of dirty lines);
  dirty      CUDA events around each call after the same 256 MB write;
  clean      events around each call after the write and a read of another 256 MB (the L2
             then holds clean lines only, as Nsight Compute's cache control leaves it);
  loop       100 calls back to back, no flush (K and V of L >= 4096 exceed the 60 MiB L2).
TB/s = bytes of K and V / time.

  python3 bench/gpu/decode_timing_methods.py build/gpu/libflashlab.so [B:L ...]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashlab_ctypes as fl  # noqa: E402
import bench_decode as bd  # noqa: E402
import timing  # noqa: E402
import torch  # noqa: E402
from triton.testing import do_bench  # noqa: E402

lib = fl.Flashlab(sys.argv[1])
flusher = timing.CleanFlush(torch)

def loop(fn, reps=100):
    fn(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / reps

print("B L impl splits | do_bench_us dirty_us clean_us loop_us | TB/s(do_bench) TB/s(clean)")
points = [tuple(int(x) for x in a.split(":")) for a in sys.argv[2:]] or [(8, 1024), (8, 4096), (8, 32768), (1, 32768)]
for B, L in points:
    q, k, v, o, lse, lens = bd.decode_inputs(torch, B, L)
    fns = {}
    p, w = lib.decode_params(q, k, v, o, lens, L, lse=lse)
    auto = lib.decode_num_splits(p)
    fns[f"flashlab auto={auto}"] = (lambda p=p: lib.decode(p), auto)
    pe, we = lib.decode_params(q, k, v, o, lens, L, lse=lse,
                               kv_l2_policy=fl.DECODE_L2_EVICT_FIRST)
    fns[f"flashlab evict1st={auto}"] = (lambda pe=pe: lib.decode(pe), auto)
    keep = [w, we]
    for s in ((1, 2, 4, 8, 16, 32) if L < 65536 else ()):
        ps, ws = lib.decode_params(q, k, v, o, lens, L, lse=lse, num_splits=s)
        keep.append(ws)
        fns[f"flashlab s={s}"] = (lambda ps=ps: lib.decode(ps), s)
    for b in ("flash", "cudnn"):
        fns[b] = (bd.torch_decode(torch, b, q, k, v), "")
    for name, (fn, s) in fns.items():
        try:
            fn(); torch.cuda.synchronize()
            db = do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3
            de = flusher.median_ms(fn, clean=False) * 1e3
            cl, lp = flusher.median_ms(fn) * 1e3, loop(fn) * 1e3
        except RuntimeError as e:
            print(name, e); continue
        by = bd.kv_bytes(B, L)
        print(f"{B} {L} {name:20s} | {db:8.1f} {de:8.1f} {cl:8.1f} {lp:8.1f} | {by/db/1e6:5.2f} {by/cl/1e6:5.2f}", flush=True)
