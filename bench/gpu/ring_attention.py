"""Ring attention (context parallelism) with flashlab's forward kernel, for any number of GPUs.

The sequence is cut into P slices of Q, K and V, one per rank, in the layout of the CPU
reference (cpu_reference/include/flashlab/cpu/ring_schedule.hpp): contiguous (rank r holds
chunk r of P) or zigzag (chunks r and 2P - 1 - r of 2P, which balances causal work). At
each of P steps every rank runs flashlab's forward kernel on each pair (Q chunk it owns,
K/V chunk it holds), merges each call's (O, LSE) into its running state (m, l, U) in fp32,
exactly as cpu_reference/src/ring.cpp does, and passes the K/V slice it holds to rank
r + 1 while it computes. Causal pairs wholly in the future are skipped; a pair on the
diagonal (the same chunk of queries and keys) runs the causal kernel, TOP_LEFT (with
N_q = N_k the two alignments are one mask).

  # P ranks emulated on one GPU: each rank a CUDA stream, each link a copy on a stream
  python3 ring_attention.py --lib build/gpu/libflashlab.so --emulate 4 --n 16384 --causal
  # one rank per GPU, K/V slices passed by NCCL (torch.distributed)
  torchrun --nproc-per-node 2 ring_attention.py --lib build/gpu/libflashlab.so --n 65536 --causal
  # the backward too, P ranks emulated on one GPU
  python3 ring_attention.py --lib build/gpu/libflashlab.so --emulate 4 --n 16384 --causal --backward

Checks the result against the one-GPU attention under ANCHORS.md's rule (error against an
fp32 reference at most 2x that of naive bf16 attention), prints PASS or FAIL, then times the
ring (CUDA events, median) against flashlab's kernel on the whole problem on one GPU. With
--emulate the P ranks share one GPU, so the time measures what slicing and merging cost,
not what several GPUs gain.

--backward (with --emulate) runs the ring's backward after its forward, as
cpu_reference/src/ring_backward.cpp does: every rank keeps its rows of Q, dO, O and L (the
merged LSE of the forward) and runs flashlab's backward (flashlab_backward, which forms
D = rowsum(dO * O) from the O it is given) on each pair it holds; dQ stays on the rank
(fp32), and the dK, dV accumulators (fp32) follow their K/V slice round the ring: the owner
keeps its share of step 0, the accumulator is born on rank r + 1 at step 1 and comes home
after the last step. dQ, dK and dV are checked against an fp32 autograd reference under the
3x rule (ANCHORS.md), beside flashlab's backward on the whole problem on one GPU.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashlab_ctypes as fl  # noqa: E402

RULE = 2.0  # ANCHORS.md: forward error <= 2x the naive low-precision error
GRADIENT_RULE = 3.0  # ANCHORS.md: gradient error <= 3x the naive low-precision error
BACKWARD_FLOPS = 2.5  # ANCHORS.md: the backward counts 2.5x the forward's FLOPs
# The LSE leaves the kernel in fp32 and every merge adds a rounding or two of fp32 (2^-24
# relative, on values of size ~10): 1e-4 is far above that and far below any real mistake.
LSE_TOLERANCE = 1e-4


# --- The schedule, as cpu_reference/src/ring_schedule.cpp computes it -------------------
def chunk_of(c, chunks, n):
    """Chunk c of `chunks` near-equal chunks of n rows: (begin, rows)."""
    begin, end = c * n // chunks, (c + 1) * n // chunks
    return begin, end - begin


def rank_slice(rank, ranks, n, layout):
    """The chunks (begin, rows) that rank `rank` holds, in sequence order."""
    if layout == "contiguous":
        return [chunk_of(rank, ranks, n)]
    return [chunk_of(rank, 2 * ranks, n), chunk_of(2 * ranks - 1 - rank, 2 * ranks, n)]


def kv_source(rank, step, ranks):
    """The rank whose K/V slice rank `rank` holds at step `step`."""
    return (rank - step) % ranks


def sends_kv(step, ranks):
    """Whether every rank sends the K/V slice it holds during step `step`: while a later
    step needs it (cpu_reference/include/flashlab/cpu/ring_backward.hpp)."""
    return step + 1 < ranks


def sends_gradients(step, ranks):
    """Whether every rank sends the dK/dV accumulator it holds after step `step`: from step
    1 on (the owner keeps its share of step 0; the accumulator closed after the last step
    goes home to its owner)."""
    return 1 <= step < ranks


def accumulator_trips(ranks):
    """The backward's schedule without numbers: for each slice (by owner), the ranks that
    add a share into its travelling accumulator, in order, and the rank where it ends; and
    per rank the number of K/V slices and of accumulators it sends to rank + 1."""
    held = {}  # rank -> the owner of the accumulator it holds
    visits = {owner: [] for owner in range(ranks)}
    kv_sends, gradient_sends = [0] * ranks, [0] * ranks
    for step in range(ranks):
        for rank in range(ranks):
            source = kv_source(rank, step, ranks)
            if step >= 1:  # a share into the accumulator of the slice it holds
                if step >= 2 and held.get(rank) != source:
                    raise AssertionError(f"rank {rank} holds slice {source}'s K/V at step {step} "
                                         f"but the accumulator of {held.get(rank)}")
                held[rank] = source
                visits[source].append(rank)
        arrived = {}
        for rank in range(ranks):
            if sends_kv(step, ranks):
                kv_sends[rank] += 1
            if sends_gradients(step, ranks):
                gradient_sends[rank] += 1
                arrived[(rank + 1) % ranks] = held[rank]
        if sends_gradients(step, ranks):
            held = arrived
    ends = {owner: rank for rank, owner in held.items()} if ranks > 1 else {0: 0}
    return visits, ends, kv_sends, gradient_sends


def pair_kind(q_chunk, k_chunk, causal):
    """How one (Q chunk, K/V chunk) pair runs with N_q = N_k: None (wholly masked, skipped),
    fl.CAUSAL_NONE (every key before every query: the full kernel) or fl.CAUSAL_TOP_LEFT
    (the same rows of queries and keys: the diagonal)."""
    (q0, q_rows), (k0, k_rows) = q_chunk, k_chunk
    if not causal or k0 + k_rows - 1 <= q0:
        return fl.CAUSAL_NONE
    if k0 > q0 + q_rows - 1:
        return None
    if (q0, q_rows) == (k0, k_rows):
        return fl.CAUSAL_TOP_LEFT
    raise ValueError(f"chunks {q_chunk} and {k_chunk} cross the diagonal without being the same "
                     "rows: the layouts here never make such a pair")


def gather(torch, x, chunks):
    """The rows `chunks` of x (B, H, N, d), stacked: what one rank holds."""
    return torch.cat([x[:, :, b:b + r] for b, r in chunks], dim=2).contiguous()


# --- The running state (m, l, U) and its merge, as cpu_reference/src/ring.cpp -----------
class State:
    """The online-softmax state of a block of query rows, fp32: m, l (B, H, rows), U (B, H,
    rows, d). Empty: m = -inf, l = 0, U = 0."""

    def __init__(self, torch, shape, device):
        b, h, rows, d = shape
        self.m = torch.full((b, h, rows), float("-inf"), dtype=torch.float32, device=device)
        self.l = torch.zeros((b, h, rows), dtype=torch.float32, device=device)
        self.U = torch.zeros((b, h, rows, d), dtype=torch.float32, device=device)

    def merge_output(self, torch, o, lse):
        """merge(self, state_of(O, LSE)): (O, LSE) is the state with base LSE, sum 1, U = O;
        a row with LSE = -inf saw no key and is empty."""
        seen = lse != float("-inf")
        m_b = lse
        l_b = seen.to(torch.float32)
        U_b = torch.where(seen[..., None], o.float(), torch.zeros_like(self.U))
        m = torch.maximum(self.m, m_b)
        base = torch.where(m == float("-inf"), torch.zeros_like(m), m)  # no -inf - -inf
        alpha, beta = torch.exp(self.m - base), torch.exp(m_b - base)
        self.l = alpha * self.l + beta * l_b
        self.U = alpha[..., None] * self.U + beta[..., None] * U_b
        self.m = m

    def finalize(self, torch):
        """O = U / l and L = m + log l; O = 0 and L = -inf where l = 0."""
        empty = self.l == 0
        l = torch.where(empty, torch.ones_like(self.l), self.l)
        O = torch.where(empty[..., None], torch.zeros_like(self.U), self.U / l[..., None])
        L = torch.where(empty, torch.full_like(self.m, float("-inf")), self.m + torch.log(l))
        return O, L


class Rank:
    """One rank: its Q slice, its running states (one per Q chunk) and its forward calls."""

    def __init__(self, torch, lib, kernel, rank, ranks, q, layout, causal):
        self.torch, self.lib, self.kernel = torch, lib, kernel
        self.rank, self.ranks, self.layout, self.causal = rank, ranks, layout, causal
        self.n = q.shape[2]
        self.chunks = rank_slice(rank, ranks, self.n, layout)
        self.q = gather(torch, q, self.chunks)  # (B, H, rows, d)
        self.reset(poison=True)

    def reset(self, poison):
        """Empty states before a run; poison: fill each call's O and LSE with NaN first, so
        that a row the kernel forgot to write cannot pass the check."""
        b, h, _, d = self.q.shape
        self.states = [State(self.torch, (b, h, rows, d), self.q.device) for _, rows in self.chunks]
        self.poison, self.calls = poison, 0

    def buffer(self, shape, dtype):
        torch = self.torch
        if self.poison:
            return torch.full(shape, float("nan"), dtype=dtype, device=self.q.device)
        return torch.empty(shape, dtype=dtype, device=self.q.device)

    def step(self, kv, source, stream):
        """Every pair of this rank's Q chunks with the K/V slice `kv` (2, B, Hkv, rows, d)
        that rank `source` started with, merged into the running states."""
        torch = self.torch
        k_chunks = rank_slice(source, self.ranks, self.n, self.layout)
        q_at = 0
        for a, q_chunk in enumerate(self.chunks):
            q = self.q[:, :, q_at:q_at + q_chunk[1]]
            q_at += q_chunk[1]
            k_at = 0
            for k_chunk in k_chunks:
                k, v = kv[0, :, :, k_at:k_at + k_chunk[1]], kv[1, :, :, k_at:k_at + k_chunk[1]]
                k_at += k_chunk[1]
                if q_chunk[1] == 0 or k_chunk[1] == 0:  # an empty chunk (P > N / 2, zigzag)
                    continue
                kind = pair_kind(q_chunk, k_chunk, self.causal)
                if kind is None:
                    continue
                o, lse = self.buffer(q.shape, q.dtype), self.buffer(q.shape[:3], torch.float32)
                self.lib.forward(self.lib.params(q, k, v, o, lse, causal=kind, kernel=self.kernel,
                                                 stream=stream.cuda_stream))
                self.states[a].merge_output(torch, o, lse)
                self.calls += 1

    def output(self):
        """(O in the input dtype, L fp32) of this rank's rows, chunk after chunk."""
        outs = [s.finalize(self.torch) for s in self.states]
        O = self.torch.cat([o for o, _ in outs], dim=2).to(self.q.dtype)
        L = self.torch.cat([l for _, l in outs], dim=2)
        return O, L


class RankBackward:
    """One rank's backward: its rows of O, dO and L as the forward left them, its dQ
    accumulator (fp32), and flashlab's backward on each pair it holds."""

    def __init__(self, torch, lib, rank, o, lse, do):
        self.torch, self.lib, self.rank = torch, lib, rank
        self.o, self.lse = o, lse  # (B, H, rows, d) input dtype, (B, H, rows) fp32
        self.do = gather(torch, do, rank.chunks)
        self.reset(poison=True)

    def reset(self, poison):
        self.dq = self.torch.zeros(self.rank.q.shape, dtype=self.torch.float32,
                                   device=self.rank.q.device)
        self.poison, self.calls = poison, 0

    def buffer(self, like):
        torch = self.torch
        if self.poison:  # a row the kernel forgot to write cannot pass the check
            return torch.full_like(like, float("nan"))
        return torch.empty_like(like)

    def step(self, kv, source, stream):
        """This rank's shares (dK, dV fp32, (B, Hkv, rows, d)) of the slice `kv` that rank
        `source` started with; adds its dQ shares into self.dq."""
        torch, rk = self.torch, self.rank
        k_chunks = rank_slice(source, rk.ranks, rk.n, rk.layout)
        dk_share = torch.zeros(kv.shape[1:], dtype=torch.float32, device=kv.device)
        dv_share = torch.zeros_like(dk_share)
        q_at = 0
        for q_chunk in rk.chunks:
            rows = slice(q_at, q_at + q_chunk[1])
            q_at += q_chunk[1]
            k_at = 0
            for k_chunk in k_chunks:
                keys = slice(k_at, k_at + k_chunk[1])
                k_at += k_chunk[1]
                if q_chunk[1] == 0 or k_chunk[1] == 0:
                    continue
                kind = pair_kind(q_chunk, k_chunk, rk.causal)
                if kind is None:
                    continue
                q, o, do = rk.q[:, :, rows], self.o[:, :, rows], self.do[:, :, rows]
                lse = self.lse[:, :, rows].contiguous()
                k, v = kv[0, :, :, keys], kv[1, :, :, keys]
                dq, dk, dv = self.buffer(q), self.buffer(k), self.buffer(v)
                self.lib.backward(self.lib.backward_params(
                    q, k, v, o, lse, do, dq, dk, dv, causal=kind, stream=stream.cuda_stream))
                self.dq[:, :, rows] += dq.float()
                dk_share[:, :, keys] += dk.float()
                dv_share[:, :, keys] += dv.float()
                self.calls += 1
        return dk_share, dv_share


def scatter(torch, parts, chunks_of_rank, like_o, like_l):
    """The ranks' rows put back in sequence order."""
    O, L = torch.empty_like(like_o), torch.empty_like(like_l)
    for (o, l), chunks in zip(parts, chunks_of_rank):
        at = 0
        for b, r in chunks:
            O[:, :, b:b + r], L[:, :, b:b + r] = o[:, :, at:at + r], l[:, :, at:at + r]
            at += r
    return O, L


# --- P ranks on one GPU: a stream per rank, the links as copies on streams of their own --
def emulated_ranks(torch, lib, args, q, k, v):
    """The P ranks and the K/V slice (2, B, Hkv, rows, d) each starts with."""
    P = args.emulate
    ranks = [Rank(torch, lib, args.kernel_id, r, P, q, args.layout, args.causal) for r in range(P)]
    return ranks, [torch.stack([gather(torch, k, rk.chunks), gather(torch, v, rk.chunks)])
                   for rk in ranks]


def ring_emulated(torch, ranks, kv_start, poison):
    """One forward of the ring; returns each rank's (O, L)."""
    P = len(ranks)
    for rk in ranks:
        rk.reset(poison)
    held = list(kv_start)
    compute = [torch.cuda.Stream() for _ in range(P)]
    links = [torch.cuda.Stream() for _ in range(P)]
    start = torch.cuda.current_stream()
    for s in compute + links:
        s.wait_stream(start)
    arrived = [None] * P  # the event after which held[r] is in place
    for step in range(P):
        received, received_at = [None] * P, [None] * P
        if step + 1 < P:  # the send of the slice each rank holds, beside this step's compute
            for r in range(P):
                prev = (r - 1) % P
                with torch.cuda.stream(links[r]):
                    if arrived[prev] is not None:
                        links[r].wait_event(arrived[prev])
                    held[prev].record_stream(links[r])
                    received[r] = held[prev].clone()
                    received_at[r] = torch.cuda.Event()
                    received_at[r].record(links[r])
        for r in range(P):
            with torch.cuda.stream(compute[r]):
                if arrived[r] is not None:
                    compute[r].wait_event(arrived[r])
                held[r].record_stream(compute[r])
                ranks[r].step(held[r], kv_source(r, step, P), compute[r])
        held, arrived = received, received_at
    parts = []
    for r in range(P):
        with torch.cuda.stream(compute[r]):
            parts.append(ranks[r].output())
        start.wait_stream(compute[r])
    return parts


def ring_backward_emulated(torch, backward_ranks, kv_start, poison):
    """One backward of the ring, P ranks on one GPU; returns each rank's (dQ, dK, dV) fp32:
    dQ of its query rows, dK and dV of the K/V rows it started with."""
    P = len(backward_ranks)
    for rb in backward_ranks:
        rb.reset(poison)
    compute = [torch.cuda.Stream() for _ in range(P)]
    links = [torch.cuda.Stream() for _ in range(P)]
    start = torch.cuda.current_stream()
    for s in compute + links:
        s.wait_stream(start)
    held, kv_arrived = list(kv_start), [None] * P  # the K/V slice each rank holds
    acc, acc_arrived = [None] * P, [None] * P      # the (dK, dV) accumulator each rank holds
    own = [None] * P                               # each owner's share of step 0
    for step in range(P):
        received, received_at = [None] * P, [None] * P
        if sends_kv(step, P):  # the K/V slice of the next step, beside this step's compute
            for r in range(P):
                prev = (r - 1) % P
                with torch.cuda.stream(links[r]):
                    if kv_arrived[prev] is not None:
                        links[r].wait_event(kv_arrived[prev])
                    held[prev].record_stream(links[r])
                    received[r] = held[prev].clone()
                    received_at[r] = torch.cuda.Event()
                    received_at[r].record(links[r])
        done = [None] * P
        for r in range(P):
            with torch.cuda.stream(compute[r]):
                if kv_arrived[r] is not None:
                    compute[r].wait_event(kv_arrived[r])
                held[r].record_stream(compute[r])
                dk, dv = backward_ranks[r].step(held[r], kv_source(r, step, P), compute[r])
                if step == 0:
                    own[r] = (dk, dv)
                elif step == 1:  # the accumulator of the slice it holds is born here
                    acc[r] = (dk, dv)
                else:  # the accumulator sent after the previous step, plus this share
                    compute[r].wait_event(acc_arrived[r])
                    for x in acc[r]:
                        x.record_stream(compute[r])
                    acc[r] = (acc[r][0] + dk, acc[r][1] + dv)
                done[r] = torch.cuda.Event()
                done[r].record(compute[r])
        acc_received, acc_received_at = [None] * P, [None] * P
        if sends_gradients(step, P):  # each accumulator on to the rank that holds its slice next
            for r in range(P):
                nxt = (r + 1) % P
                with torch.cuda.stream(links[r]):
                    links[r].wait_event(done[r])
                    for x in acc[r]:
                        x.record_stream(links[r])
                    acc_received[nxt] = tuple(x.clone() for x in acc[r])
                    acc_received_at[nxt] = torch.cuda.Event()
                    acc_received_at[nxt].record(links[r])
            acc, acc_arrived = acc_received, acc_received_at
        held, kv_arrived = received, received_at
    parts = []
    for r in range(P):
        with torch.cuda.stream(compute[r]):
            dk, dv = own[r]
            if P > 1:  # the accumulator is home: add the share kept from step 0
                compute[r].wait_event(acc_arrived[r])
                for x in acc[r]:
                    x.record_stream(compute[r])
                dk, dv = dk + acc[r][0], dv + acc[r][1]
            parts.append((backward_ranks[r].dq, dk, dv))
        start.wait_stream(compute[r])
    return parts


def scatter_gradients(torch, parts, chunks_of_rank, q, k):
    """The ranks' dQ, dK, dV rows put back in sequence order (fp32)."""
    dQ = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    dK = torch.empty(k.shape, dtype=torch.float32, device=k.device)
    dV = torch.empty_like(dK)
    for (dq, dk, dv), chunks in zip(parts, chunks_of_rank):
        at = 0
        for b, r in chunks:
            dQ[:, :, b:b + r], dK[:, :, b:b + r], dV[:, :, b:b + r] = (
                dq[:, :, at:at + r], dk[:, :, at:at + r], dv[:, :, at:at + r])
            at += r
    return dQ, dK, dV


# --- One rank per GPU, the links through NCCL -------------------------------------------
def ring_distributed(torch, dist, args, me, kv_start, poison):
    """One forward of the ring on this rank; its states are left in `me`."""
    rank, P, k = me.rank, me.ranks, kv_start
    me.reset(poison)
    held = kv_start
    stream = torch.cuda.current_stream()
    for step in range(P):
        requests, received = [], None
        if step + 1 < P:  # send what we hold to rank + 1, receive rank - 1's, while computing
            rows = sum(r for _, r in rank_slice(kv_source(rank, step + 1, P), P, args.n,
                                                args.layout))
            received = torch.empty(k.shape[:3] + (rows, k.shape[4]), dtype=k.dtype,
                                   device=k.device)
            requests = dist.batch_isend_irecv([
                dist.P2POp(dist.isend, held, (rank + 1) % P),
                dist.P2POp(dist.irecv, received, (rank - 1) % P)])
        me.step(held, kv_source(rank, step, P), stream)
        for request in requests:
            request.wait()
        if received is not None:
            held = received


def gather_to_all(torch, dist, me, args, q):
    """Every rank's (O, L) on every rank, in sequence order (slices padded to one size)."""
    P = dist.get_world_size()
    o, l = me.output()
    most = max(sum(r for _, r in rank_slice(x, P, args.n, args.layout)) for x in range(P))
    pad = most - o.shape[2]
    o_pad = torch.nn.functional.pad(o, (0, 0, 0, pad))
    l_pad = torch.nn.functional.pad(l, (0, pad))
    o_all = [torch.empty_like(o_pad) for _ in range(P)]
    l_all = [torch.empty_like(l_pad) for _ in range(P)]
    dist.all_gather(o_all, o_pad)
    dist.all_gather(l_all, l_pad)
    chunks = [rank_slice(x, P, args.n, args.layout) for x in range(P)]
    rows = [sum(r for _, r in c) for c in chunks]
    parts = [(o_all[x][:, :, :rows[x]], l_all[x][:, :, :rows[x]]) for x in range(P)]
    like_l = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
    return scatter(torch, parts, chunks, q, like_l)


# --- References, the check and the timing -----------------------------------------------
def math_attention(torch, q, k, v, causal, dtype):
    """Three operators in `dtype`, GQA by repeating K and V; returns (O, LSE)."""
    group = q.shape[1] // k.shape[1]
    q = q.to(dtype)
    k, v = k.repeat_interleave(group, 1).to(dtype), v.repeat_interleave(group, 1).to(dtype)
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if causal:
        n = q.shape[2]
        i = torch.arange(n, device=q.device)[:, None]
        j = torch.arange(n, device=q.device)[None, :]
        s = s.masked_fill(j > i, float("-inf"))
    lse = torch.logsumexp(s.float(), dim=-1)
    p = torch.softmax(s.float(), dim=-1).to(dtype)
    return p @ v, lse


def math_gradients(torch, q, k, v, do, causal, dtype):
    """dQ, dK, dV of the three-operator attention in `dtype`, by torch's autograd."""
    q, k, v = (x.detach().to(dtype).requires_grad_() for x in (q, k, v))
    o, _ = math_attention(torch, q, k, v, causal, dtype)
    o.backward(do.to(dtype))
    return q.grad, k.grad, v.grad


def one_gpu_backward(torch, lib, args, q, k, v, o, lse, do, poison=True):
    """flashlab's backward on the whole problem, on one GPU."""
    make = (lambda x: torch.full_like(x, float("nan"))) if poison else torch.empty_like
    dq, dk, dv = make(q), make(k), make(v)
    causal = fl.CAUSAL_TOP_LEFT if args.causal else fl.CAUSAL_NONE
    lib.backward(lib.backward_params(q, k, v, o, lse, do, dq, dk, dv, causal=causal))
    return dq, dk, dv


def check_backward(torch, lib, args, q, k, v, do, gradients, O_one, L_one):
    """PASS when each of the ring's dQ, dK, dV is within GRADIENT_RULE x the naive bf16
    error of the fp32 autograd reference; prints the figures either way."""
    ref = math_gradients(torch, q, k, v, do, args.causal, torch.float32)
    naive = math_gradients(torch, q, k, v, do, args.causal, q.dtype)
    one = one_gpu_backward(torch, lib, args, q, k, v, O_one, L_one, do)
    err = lambda a, b: (a.float() - b.float()).abs().max().item()  # noqa: E731
    ok = True
    for name, g, r, n, o in zip(("dQ", "dK", "dV"), gradients, ref, naive, one):
        e_ring, e_naive, e_one = err(g, r), err(n, r), err(o, r)
        good = torch.isfinite(g).all().item() and e_ring <= GRADIENT_RULE * e_naive
        ok = ok and good
        print(f"max|{name}_ring - {name}_ref| = {e_ring:.3e}, naive bf16 {e_naive:.3e} (rule: <= "
              f"{GRADIENT_RULE} x), one-GPU backward {e_one:.3e}; max|{name}_ring - {name}_one| "
              f"= {err(g, o):.3e}{'' if good else '  <- FAIL'}")
    print("backward PASS" if ok else "backward FAIL")
    return ok


def one_gpu(torch, lib, args, q, k, v, poison=True):
    o = torch.full_like(q, float("nan")) if poison else torch.empty_like(q)
    lse = torch.full(q.shape[:3], float("nan"), dtype=torch.float32, device=q.device)
    causal = fl.CAUSAL_TOP_LEFT if args.causal else fl.CAUSAL_NONE
    lib.forward(lib.params(q, k, v, o, lse, causal=causal, kernel=args.kernel_id))
    return o, lse


def check(torch, lib, args, q, k, v, O, L):
    """PASS when the ring's O is within RULE x the naive bf16 error of the fp32 reference and
    its LSE matches the reference's; prints the figures either way."""
    O_ref, L_ref = math_attention(torch, q, k, v, args.causal, torch.float32)
    O_naive, _ = math_attention(torch, q, k, v, args.causal, q.dtype)
    O_one, L_one = one_gpu(torch, lib, args, q, k, v)
    err = lambda a, b: (a.float() - b.float()).abs().max().item()  # noqa: E731
    e_ring, e_naive, e_one = err(O, O_ref), err(O_naive, O_ref), err(O_one, O_ref)
    e_lse = err(L, L_ref)
    ok = (torch.isfinite(O).all().item() and e_ring <= RULE * e_naive and e_lse <= LSE_TOLERANCE)
    print(f"max|O_ring - O_ref| = {e_ring:.3e}, naive bf16 {e_naive:.3e} (rule: <= {RULE} x), "
          f"one-GPU kernel {e_one:.3e}; max|O_ring - O_one| = {err(O, O_one):.3e}; "
          f"max|L_ring - L_ref| = {e_lse:.3e} (<= {LSE_TOLERANCE})")
    print("PASS" if ok else "FAIL")
    return ok


def median_ms(torch, fn, repeats):
    times = []
    for _ in range(repeats + 1):  # the first run warms up
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times[1:])


def tflops(args, ms, ranks=1):
    flops = 4 * args.batch * args.heads * args.n ** 2 * args.d / (2 if args.causal else 1)
    return flops / ranks / (ms * 1e-3) / 1e12


def inputs(torch, args, device):
    gen = torch.Generator(device=device).manual_seed(args.seed)  # the same on every rank
    shape_q = (args.batch, args.heads, args.n, args.d)
    shape_kv = (args.batch, args.heads_kv, args.n, args.d)
    return [torch.randn(s, generator=gen, device=device, dtype=torch.bfloat16)
            for s in (shape_q, shape_kv, shape_kv)]


def parse():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="build/gpu/libflashlab.so")
    ap.add_argument("--emulate", type=int, default=0, metavar="P",
                    help="P ranks as CUDA streams on one GPU (no torchrun)")
    ap.add_argument("--n", type=int, default=16384, help="the whole sequence, N = P x N per rank")
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--heads-kv", type=int, default=0, help="GQA: K/V heads (default: --heads)")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--layout", choices=("contiguous", "zigzag"), default="zigzag")
    ap.add_argument("--kernel", choices=("fa2", "fa3"), default="fa2")
    ap.add_argument("--backward", action="store_true",
                    help="the ring's backward too, checked and timed (with --emulate P)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    args.heads_kv = args.heads_kv or args.heads
    args.kernel_id = fl.KERNELS[args.kernel]
    if args.backward and args.emulate == 0:
        ap.error("--backward runs with --emulate P (ranks emulated on one GPU); the ring's "
                 "backward through NCCL is not written yet")
    if args.heads % args.heads_kv:
        ap.error(f"--heads {args.heads} is not a multiple of --heads-kv {args.heads_kv}: "
                 "each K/V head serves a whole group of query heads")
    return args


def check_ranks(ap_error, ranks, n):
    if ranks < 1 or ranks > n:
        ap_error(f"a ring of P = {ranks} ranks over N = {n}: P must be between 1 and N "
                 "(every rank holds at least one query and one key)")


def backward(torch, lib, args, q, k, v, ranks, kv_start, parts):
    """The ring's backward after its forward (emulated ranks): checked, then timed against
    flashlab's backward on the whole problem on one GPU."""
    gen = torch.Generator(device=q.device).manual_seed(args.seed + 1)
    do = torch.randn(q.shape, generator=gen, device=q.device, dtype=q.dtype)
    backward_ranks = [RankBackward(torch, lib, rk, o, l, do) for rk, (o, l) in zip(ranks, parts)]
    run = lambda poison: ring_backward_emulated(torch, backward_ranks, kv_start, poison)  # noqa: E731
    chunks = [rk.chunks for rk in ranks]
    gradients = scatter_gradients(torch, run(True), chunks, q, k)
    O_one, L_one = one_gpu(torch, lib, args, q, k, v)
    ok = check_backward(torch, lib, args, q, k, v, do, gradients, O_one, L_one)
    print(f"backward calls: {sum(rb.calls for rb in backward_ranks)} over all ranks")
    ms_ring = median_ms(torch, lambda: run(False), args.repeats)
    ms_one = median_ms(torch, lambda: one_gpu_backward(torch, lib, args, q, k, v, O_one, L_one, do,
                                                       poison=False), args.repeats)
    ring_rate = BACKWARD_FLOPS * tflops(args, ms_ring)
    one_rate = BACKWARD_FLOPS * tflops(args, ms_one)
    print(f"ring backward: {ms_ring:.3f} ms, {ring_rate:.1f} TFLOP/s; one GPU, whole problem: "
          f"{ms_one:.3f} ms, {one_rate:.1f} TFLOP/s; ratio {ring_rate / one_rate:.3f}")
    return ok


def main():
    args = parse()
    import torch
    lib = fl.Flashlab(args.lib)
    distributed = args.emulate == 0
    if distributed:
        import torch.distributed as dist
        dist.init_process_group("nccl")
        rank, P = dist.get_rank(), dist.get_world_size()
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    else:
        rank, P = 0, args.emulate
    check_ranks(lambda m: sys.exit("ring_attention.py: " + m), P, args.n)
    q, k, v = inputs(torch, args, torch.device("cuda"))
    say = print if rank == 0 else (lambda *a, **kw: None)
    say(f"ring attention: P = {P} ({'emulated on one GPU' if not distributed else 'NCCL'}), "
        f"B = {args.batch}, H = {args.heads}/{args.heads_kv}, N = {args.n} "
        f"({args.n // P} per rank), d = {args.d}, {'causal' if args.causal else 'non-causal'}, "
        f"{args.layout}, {args.kernel}")

    if distributed:
        me = Rank(torch, lib, args.kernel_id, rank, P, q, args.layout, args.causal)
        kv_start = torch.stack([gather(torch, k, me.chunks), gather(torch, v, me.chunks)])
        run = lambda poison: ring_distributed(torch, dist, args, me, kv_start, poison)  # noqa: E731
        run(True)
        O, L = gather_to_all(torch, dist, me, args, q)
        calls = me.calls
    else:
        ranks, kv_start = emulated_ranks(torch, lib, args, q, k, v)
        run = lambda poison: ring_emulated(torch, ranks, kv_start, poison)  # noqa: E731
        parts = run(True)
        like_l = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
        O, L = scatter(torch, parts, [rk.chunks for rk in ranks], q, like_l)
        calls = sum(rk.calls for rk in ranks)
    ok = check(torch, lib, args, q, k, v, O, L) if rank == 0 else True
    say(f"forward calls: {calls}{' on rank 0' if distributed else ' over all ranks'}")

    ms_ring = median_ms(torch, lambda: run(False), args.repeats)
    ms_one = median_ms(torch, lambda: one_gpu(torch, lib, args, q, k, v, poison=False),
                       args.repeats)
    gpus = P if distributed else 1  # emulated ranks share one GPU
    ring_rate, one_rate = tflops(args, ms_ring, gpus), tflops(args, ms_one)
    say(f"ring: {ms_ring:.3f} ms, {ring_rate:.1f} TFLOP/s per GPU; one GPU, whole problem: "
        f"{ms_one:.3f} ms, {one_rate:.1f} TFLOP/s; per-GPU throughput ratio "
        f"{ring_rate / one_rate:.3f}")
    if args.backward:
        ok = backward(torch, lib, args, q, k, v, ranks, kv_start, parts) and ok
    if distributed:
        dist.destroy_process_group()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
