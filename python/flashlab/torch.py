"""flashlab's GPU kernels on torch tensors, and an autograd function over them.

    import flashlab.torch as ft
    o = ft.attention(q, k, v, causal=True)   # in place of F.scaled_dot_product_attention

Tensors are (batch, heads, N, d), as torch's scaled_dot_product_attention takes them: q and
o (B, H, N_q, d), k and v (B, H_kv, N_k, d) with H a multiple of H_kv (grouped-query
attention; H_kv = 1 is multi-query). Any strides with a contiguous last dimension cross as
they are (tensor.stride(), in elements), so a (B, N, H, d) tensor seen through
.transpose(1, 2) is not copied. Every call is enqueued on torch's current stream of the
tensors' device. A bad call raises what the library says: ValueError (shapes, strides,
alignment, an unsupported d) or TypeError (a dtype), with the library's message.

Neither `import flashlab` nor `import flashlab.torch` needs torch or a GPU: without them, a
call here raises RuntimeError saying which is missing.
"""
from . import _flashlab

try:
    import torch
except ImportError:  # the calls below say so
    torch = None

_gpu = _flashlab.gpu


def _require_gpu():
    if torch is None:
        raise RuntimeError("flashlab.torch runs flashlab's CUDA kernels on torch tensors: it "
                           "needs torch, which is not installed here (the CPU reference and the "
                           "simulator, flashlab.*, need neither)")
    if not torch.cuda.is_available():
        raise RuntimeError("flashlab.torch runs flashlab's CUDA kernels: it needs a GPU that "
                           "torch can see (torch.cuda.is_available() is False)")
    error = _gpu.library_error()
    if error:
        raise RuntimeError(error)


def _causal_id(causal):
    """False/None: no mask; True: torch's is_causal (top-left); or a name from flashlab.CAUSAL."""
    if causal is None or causal is False:
        return _gpu.CAUSAL["none"]
    if causal is True:
        return _gpu.CAUSAL["top-left"]
    if causal not in _gpu.CAUSAL:
        raise ValueError(f"causal = {causal!r} is not an alignment: use False, True (torch's "
                         f"is_causal, top-left) or one of {', '.join(_gpu.CAUSAL)}")
    return _gpu.CAUSAL[causal]


def _check_tensors(kernel, d, **tensors):
    """Every tensor a CUDA tensor on one device, of one dtype that `kernel` takes."""
    first_name, first = next(iter(tensors.items()))
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} is a {type(t).__name__}: give a torch.Tensor")
        if t.device.type != "cuda":
            raise ValueError(f"{name} is on {t.device}: flashlab's kernels take CUDA tensors "
                             f"(move it with .cuda())")
        if t.device != first.device:
            raise ValueError(f"{name} is on {t.device} but {first_name} on {first.device}: "
                             f"give every tensor on one device")
        if t.dtype != first.dtype:
            raise TypeError(f"{name} has dtype {t.dtype} but {first_name} has {first.dtype}: "
                            f"give every tensor the same dtype")
        if t.dim() != 4:
            raise ValueError(f"{name} has shape {tuple(t.shape)}: it must be 4-d "
                             f"(batch, heads, N, d)")
    names = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
    info = _gpu.kernel_info(kernel, d, _gpu.DTYPES.get(names.get(first.dtype), -1))
    if names.get(first.dtype) not in info["dtypes"]:
        raise TypeError(f"dtype {first.dtype} is not taken by the {kernel} kernel: it takes "
                        f"{' or '.join(info['dtypes'])}")
    return _gpu.DTYPES[names[first.dtype]]


def _scale(scale):
    # 0 asks the library for its default 1/sqrt(d); a given scale crosses as it is.
    return 0.0 if scale is None else float(scale)


def _stream(device):
    return torch.cuda.current_stream(device).cuda_stream


def forward(q, k, v, causal=False, scale=None, kernel="fa2", return_lse=False, dropout_p=0.0,
            dropout_seed=0, dropout_offset=0):
    """One forward call of a kernel of the ladder (flashlab.KERNELS): o (B, H, N_q, d) in q's
    dtype, and with return_lse the log-sum-exp (B, H, N_q), fp32, natural log."""
    _require_gpu()
    dtype = _check_tensors(kernel, q.shape[-1] if q.dim() == 4 else 0, q=q, k=k, v=v)
    batch, heads_q, n_q, d = q.shape
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((batch, heads_q, n_q), dtype=torch.float32, device=q.device)
    with torch.cuda.device(q.device):
        _gpu.forward(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(),
                     lse=lse.data_ptr(), q_stride=q.stride(), k_stride=k.stride(),
                     v_stride=v.stride(), o_stride=o.stride(), batch=batch, heads_q=heads_q,
                     heads_kv=k.shape[1], n_q=n_q, n_k=k.shape[2], d=d, scale=_scale(scale),
                     dtype=dtype, causal=_causal_id(causal),
                     kernel=_gpu.KERNEL_IDS[kernel] if kernel in _gpu.KERNEL_IDS else -1,
                     dropout_p=float(dropout_p), dropout_seed=int(dropout_seed),
                     dropout_offset=int(dropout_offset), stream=_stream(q.device))
    return (o, lse) if return_lse else o


def backward(q, k, v, o, lse, do, causal=False, scale=None, deterministic=False, dropout_p=0.0,
             dropout_seed=0, dropout_offset=0):
    """FlashAttention-2's backward from the forward's o and lse (fp32 (B, H, N_q)): dq, dk, dv,
    with dk and dv summed over the query heads that share a KV head. The dropout arguments
    must be the forward's: the backward draws the same mask again."""
    _require_gpu()
    dtype = _check_tensors("fa2", q.shape[-1] if q.dim() == 4 else 0, q=q, k=k, v=v, o=o, do=do)
    if lse.dtype != torch.float32 or tuple(lse.shape) != tuple(q.shape[:3]):
        raise ValueError(f"lse has dtype {lse.dtype} and shape {tuple(lse.shape)}: it must be "
                         f"float32 of shape {tuple(q.shape[:3])}, as forward(return_lse=True) "
                         f"gives it")
    lse = lse.contiguous()
    batch, heads_q, n_q, d = q.shape
    dq, dk, dv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    fields = dict(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(),
                  dout=do.data_ptr(), lse=lse.data_ptr(), dq=dq.data_ptr(), dk=dk.data_ptr(),
                  dv=dv.data_ptr(), q_stride=q.stride(), k_stride=k.stride(),
                  v_stride=v.stride(), o_stride=o.stride(), dout_stride=do.stride(),
                  dq_stride=dq.stride(), dk_stride=dk.stride(), dv_stride=dv.stride(),
                  batch=batch, heads_q=heads_q, heads_kv=k.shape[1], n_q=n_q, n_k=k.shape[2],
                  d=d, scale=_scale(scale), dtype=dtype,
                  causal=_causal_id(causal),
                  deterministic=1 if deterministic else 0, dropout_p=float(dropout_p),
                  dropout_seed=int(dropout_seed), dropout_offset=int(dropout_offset),
                  stream=_stream(q.device))
    with torch.cuda.device(q.device):
        need = _gpu.backward_workspace_bytes(**fields)
        workspace = torch.empty(max(need, 1), dtype=torch.uint8, device=q.device)
        _gpu.backward(workspace=workspace.data_ptr(), workspace_bytes=workspace.numel(),
                      **fields)
    return dq, dk, dv


def decode(q, k_cache, v_cache, seq_lens, scale=None, block_table=None, page_size=0,
           num_splits=0, return_lse=False, check=False, grid="auto"):
    """Split-KV decode: q (B, H, n_q, d) new rows against a KV cache with seq_lens (B) int32
    valid keys per sequence. Contiguous cache: k_cache, v_cache (B, H_kv, max_seq_len, d).
    Paged (block_table (B, pages per sequence) int32): k_cache, v_cache (num_pages, H_kv,
    page_size, d), e.g. a (pages, page_size, H_kv, d) tensor through .transpose(1, 2).
    num_splits 0 lets the library choose. check=True waits for the kernels and raises if a
    length or page index was out of range. grid: "auto" (the library's), "splits" (a block per
    split) or "queue" (persistent blocks taking pieces of the sequences from a queue; num_splits
    is then the pieces)."""
    if grid not in _gpu.DECODE_GRIDS:
        raise ValueError(f"grid = {grid!r} is not a decode grid: use one of "
                         f"{', '.join(_gpu.DECODE_GRIDS)}")
    _require_gpu()
    dtype = _check_tensors("fa2", q.shape[-1] if q.dim() == 4 else 0, q=q, k_cache=k_cache,
                           v_cache=v_cache)
    for name, t in (("seq_lens", seq_lens), ("block_table", block_table)):
        if t is not None and (t.dtype != torch.int32 or t.device != q.device):
            raise TypeError(f"{name} has dtype {t.dtype} on {t.device}: it must be int32 on "
                            f"{q.device}")
    seq_lens = seq_lens.contiguous()  # held here: a copy must outlive the kernels
    batch, heads_q, n_q, d = q.shape
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((batch, heads_q, n_q), dtype=torch.float32, device=q.device)
    fields = dict(q=q.data_ptr(), k_cache=k_cache.data_ptr(), v_cache=v_cache.data_ptr(),
                  o=o.data_ptr(), lse=lse.data_ptr(), seq_lens=seq_lens.data_ptr(),
                  q_stride=q.stride(), k_stride=k_cache.stride(), v_stride=v_cache.stride(),
                  o_stride=o.stride(), batch=batch, heads_q=heads_q, heads_kv=k_cache.shape[1],
                  n_q=n_q, d=d, scale=_scale(scale), dtype=dtype, num_splits=int(num_splits),
                  grid=_gpu.DECODE_GRIDS[grid], stream=_stream(q.device))
    if block_table is None:
        fields.update(max_seq_len=k_cache.shape[2])
    else:
        if block_table.stride(-1) != 1:
            block_table = block_table.contiguous()
        fields.update(block_table=block_table.data_ptr(),
                      block_table_stride=block_table.stride(0), page_size=int(page_size),
                      num_pages=k_cache.shape[0],
                      max_seq_len=block_table.shape[1] * int(page_size))
    with torch.cuda.device(q.device):
        need = _gpu.decode_workspace_bytes(**fields)
        workspace = torch.empty(max(need, 1), dtype=torch.uint8, device=q.device)
        fields.update(workspace=workspace.data_ptr(), workspace_bytes=workspace.numel())
        _gpu.decode(**fields)
        if check:
            _gpu.decode_check(**fields)
    return (o, lse) if return_lse else o


def _attention_function():
    """The autograd function, defined at its first use (torch is needed from there on)."""
    global _Attention
    if _Attention is not None:
        return _Attention

    class Attention(torch.autograd.Function):
        """o = softmax(q k^T * scale) v with fa2's forward and FlashAttention-2's backward. The
        forward keeps o and the log-sum-exp (not P); the backward recomputes P from them."""

        @staticmethod
        def forward(ctx, q, k, v, causal, scale, dropout_p, dropout_seed):
            o, lse = forward(q, k, v, causal=causal, scale=scale, kernel="fa2", return_lse=True,
                             dropout_p=dropout_p, dropout_seed=dropout_seed)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.causal, ctx.scale = causal, scale
            ctx.dropout_p, ctx.dropout_seed = dropout_p, dropout_seed
            return o

        @staticmethod
        def backward(ctx, do):
            q, k, v, o, lse = ctx.saved_tensors
            if do.stride(-1) != 1:  # e.g. the expanded ones of o.sum(): stride 0 everywhere
                do = do.contiguous()
            dq, dk, dv = backward(q, k, v, o, lse, do, causal=ctx.causal, scale=ctx.scale,
                                  dropout_p=ctx.dropout_p, dropout_seed=ctx.dropout_seed)
            return dq, dk, dv, None, None, None, None

    _Attention = Attention
    return _Attention


_Attention = None


def attention(q, k, v, causal=False, scale=None, dropout_p=0.0):
    """In place of torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
    scale=scale, dropout_p=dropout_p): q (B, H, N_q, d), k and v (B, H_kv, N_k, d), bf16 or
    fp16 CUDA tensors; returns (B, H, N_q, d), differentiable in q, k and v. causal=True is
    torch's top-left alignment; "bottom-right" aligns the last query with the last key. With
    dropout, the Philox seed is drawn from torch's generator, so torch.manual_seed fixes it."""
    _require_gpu()
    dropout_seed = 0
    if dropout_p != 0:
        dropout_seed = int(torch.randint(0, 2**62, (1,), dtype=torch.int64).item())
    return _attention_function().apply(q, k, v, causal, scale, float(dropout_p), dropout_seed)
