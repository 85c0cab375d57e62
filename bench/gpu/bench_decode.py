"""The decode benchmark: flashlab's split-KV decode against torch's SDPA decode (flash and
cuDNN backends) on the same tensors, in the same process; contiguous and paged caches.

  python3 bench.py --lib build/gpu/libflashlab.so --decode --csv decode.csv

ANCHORS.md's shape: bf16, d = 128, 32 query heads over 8 KV heads, one new token (N_q = 1).
Bandwidth = bytes of K and V read / time = 2 B Hkv L d 2 / t. L sweeps 1024 .. 131072 at
B = 8, and B sweeps 1 .. 64 at L = 32768 (with B L capped so K and V fit memory). The split
count the library chose is printed beside each point. `flashlab` runs with the library's
default L2 policy for K and V (kv_l2_policy = 0: evict-first for caches of at most a few
times the L2, decode::auto_kv_l2_policy), `plain` and `evict1st` the same kernel with each
policy forced (decode.h says why the hint can matter). Times are medians of
triton.testing.do_bench (which clears the L2 before every run, leaving it dirty), and, in
the columns marked clean, medians of CUDA events after a clean flush (timing.py says why:
at short caches the dirty flush's write-back is a tenth of the call); a point's
implementations timed in turns, each equally often in every place of the order and after every
other (timing.balanced_orders).
"""
import flashlab_ctypes as fl
import timing

D, HEADS_Q, HEADS_KV = 128, 32, 8
LENGTHS = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
BATCHES = [1, 2, 4, 8, 16, 32, 64]
BATCH_SWEEP_LEN = 32768
MAX_CACHE_TOKENS = 64 * 32768      # B L cap: 2 x 2M x 8 x 128 x 2 bytes = 8 GiB of K and V
PAGE_SIZES = [64, 256]
TORCH_DECODE_BACKENDS = ["flash", "cudnn"]


def kv_bytes(B, L):
    return 2 * B * HEADS_KV * L * D * 2


def torch_decode(torch, backend, q, k, v):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    kind = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
    F = torch.nn.functional

    def run():
        with sdpa_kernel(kind):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    return run


def to_pages(torch, x, page_size, order):
    """x (B, Hkv, L, d) into pages (num_pages, page_size, Hkv, d), sequence b's page t
    stored at page order[b * L / page_size + t]; returned as (num_pages, Hkv, page_size, d)."""
    B, H, L, d = x.shape
    per_seq = L // page_size
    pages = torch.empty(B * per_seq, page_size, H, d, device="cuda", dtype=x.dtype)
    pages[order.long()] = x.reshape(B, H, per_seq, page_size, d).permute(0, 2, 3, 1, 4).reshape(
        B * per_seq, page_size, H, d)
    return pages.transpose(1, 2)


def parse_points(ap, texts):
    """The (B, L) points of a script's --points ("B:L" each); a bad one stops the script with
    ap.error, saying what a point is."""
    try:
        points = [tuple(int(x) for x in text.split(":")) for text in texts]
    except ValueError:
        ap.error(f"--points {texts}: give B:L pairs, e.g. 8:4096")
    if any(len(p) != 2 or min(p) < 1 for p in points):
        ap.error(f"--points {texts}: give B:L pairs of positive integers, e.g. 8:4096")
    return points


def decode_generator(torch, B, L):
    """The random generator of the point (B, L), seeded by B and L so that every script reads
    the same inputs."""
    return torch.Generator(device="cuda").manual_seed(B * 7919 + L)


def decode_inputs(torch, B, L, gen=None):
    """One decode step's tensors at the benchmark's shape, B sequences of L keys: q, k, v
    (random, bf16, drawn from `gen`, the point's decode_generator by default), o, lse and the
    lengths."""
    gen = gen if gen is not None else decode_generator(torch, B, L)
    q = torch.randn(B, HEADS_Q, 1, D, device="cuda", dtype=torch.bfloat16, generator=gen)
    k, v = (torch.randn(B, HEADS_KV, L, D, device="cuda", dtype=torch.bfloat16, generator=gen)
            for _ in range(2))
    o = torch.empty_like(q)
    lse = torch.empty(B, HEADS_Q, 1, device="cuda", dtype=torch.float32)
    lens = torch.full((B,), L, device="cuda", dtype=torch.int32)
    return q, k, v, o, lse, lens


def bench_point(torch, do_bench, flusher, lib, B, L, writer):
    gen = decode_generator(torch, B, L)  # the inputs, then the pages' order, from one stream
    q, k, v, o, lse, lens = decode_inputs(torch, B, L, gen)
    try:
        reference = torch_decode(torch, "cudnn", q, k, v)().float()
    except RuntimeError:  # cuDNN refuses the shape: the flash backend is the reference
        reference = torch_decode(torch, "flash", q, k, v)().float()
    # Every implementation is run once and checked against the reference, then all of them
    # timed in turns (timing.interleaved_medians, interleaved_clean_medians): none owes its
    # figure to its place. The paged caches stay in memory until then.
    fns, diffs, splits_of, kept = {}, {}, {}, []

    def record(name, fn, result, splits=""):
        try:
            out = fn()
            torch.cuda.synchronize()
            diffs[name] = ((result if result is not None else out).float() -
                           reference).abs().max().item()
        except RuntimeError as e:
            print(f"  {name}: {e}", flush=True)
            return
        fns[name], splits_of[name] = fn, splits

    params, workspace = lib.decode_params(q, k, v, o, lens, L, lse=lse)
    splits = lib.decode_num_splits(params)
    record("flashlab", lambda: lib.decode(params), o, splits)
    lib.decode_check(params)
    for name, policy in (("plain", fl.DECODE_L2_EVICT_NORMAL),
                         ("evict1st", fl.DECODE_L2_EVICT_FIRST)):
        pparams, pwork = lib.decode_params(q, k, v, o, lens, L, lse=lse, kv_l2_policy=policy)
        # pparams=pparams binds this policy's parameters now, not the loop's last ones.
        record(name, lambda pparams=pparams: lib.decode(pparams), o, splits)
        lib.decode_check(pparams)
        kept.append(pwork)
    for page_size in PAGE_SIZES:
        if L % page_size:
            continue
        per_seq = L // page_size
        order = torch.randperm(B * per_seq, device="cuda", generator=gen).to(torch.int32)
        pk, pv = to_pages(torch, k, page_size, order), to_pages(torch, v, page_size, order)
        table = order.reshape(B, per_seq)
        pparams, pwork = lib.decode_params(q, pk, pv, o, lens, L, lse=lse, block_table=table,
                                           page_size=page_size)
        record(f"paged{page_size}", (lambda pp: lambda: lib.decode(pp))(pparams), o, splits)
        lib.decode_check(pparams)
        kept.append((pk, pv, table, pwork))
    for backend in TORCH_DECODE_BACKENDS:
        record(backend, torch_decode(torch, backend, q, k, v), None)
    times = timing.interleaved_medians(do_bench, fns)
    clean = timing.interleaved_clean_medians(flusher, fns)
    tb_per_s = lambda t: kv_bytes(B, L) / (t * 1e-3) / 1e12  # noqa: E731
    rows = {name: (times[name], tb_per_s(times[name]), diffs[name], splits_of[name],
                   clean[name], tb_per_s(clean[name])) for name in fns}
    for name, (ms, tbs, diff, sp, ms_clean, tbs_clean) in rows.items():
        writer.writerow([B, L, name, sp, f"{ms:.4f}", f"{tbs:.3f}", f"{diff:.3e}",
                         f"{ms_clean:.4f}", f"{tbs_clean:.3f}"])
    del q, k, v, o, lse, reference, workspace, kept
    torch.cuda.empty_cache()
    return rows


def print_row(B, L, rows):
    tbs = lambda name, i=1: f"{rows[name][i]:6.2f}" if name in rows else f"{'-':>6}"  # noqa: E731
    sp = rows["flashlab"][3] if "flashlab" in rows else "-"
    print(f"{B:4d} {L:7d} {sp!s:>6} | {tbs('flashlab')} {tbs('plain')} {tbs('evict1st')} "
          f"{tbs('paged64')} {tbs('paged256')} | {tbs('flash')} {tbs('cudnn')} | "
          f"{tbs('flashlab', 5)} {tbs('plain', 5)} {tbs('evict1st', 5)} {tbs('cudnn', 5)}",
          flush=True)


def decode_points(lengths, batches):
    """The (B, L) points timed: every length at B = 8, then every batch at BATCH_SWEEP_LEN
    (B = 8 there only once), in that order."""
    points = [(8, L) for L in lengths]
    points += [(B, BATCH_SWEEP_LEN) for B in batches
               if B != 8 or BATCH_SWEEP_LEN not in lengths]
    return points


def run_decode_sweep(args):
    import csv
    import torch
    from triton.testing import do_bench
    lib = fl.Flashlab(args.lib)
    points = decode_points(args.decode_lengths, args.decode_batches)
    print("TB/s of K and V read (bf16, d = 128, 32 query heads over 8 KV heads, N_q = 1)")
    print(f"{'B':>4} {'L':>7} {'splits':>6} | {'flashl':>6} {'plain':>6} {'evict1':>6} "
          f"{'pg64':>6} {'pg256':>6} | {'flash':>6} {'cudnn':>6} | {'clean:':>6} {'plain':>6} "
          f"{'evict1':>6} {'cudnn':>6}")
    print(f"{'':>20} (do_bench){'':>47}(after a clean flush: flashlab, plain, evict1st, "
          f"cuDNN)")
    with open(args.csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["B", "L", "impl", "splits", "ms", "tb_per_s", "max_abs_diff_vs_cudnn",
                         "ms_clean", "tb_per_s_clean"])
        flusher = timing.CleanFlush(torch)
        for B, L in points:
            if B * L > MAX_CACHE_TOKENS:
                continue
            print_row(B, L, bench_point(torch, do_bench, flusher, lib, B, L, writer))
            f.flush()
