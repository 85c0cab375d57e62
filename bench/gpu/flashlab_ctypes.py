"""flashlab's C ABI (gpu/include/flashlab/flashlab.h) from Python, through ctypes.

A torch tensor crosses as data_ptr() and stride(), untouched: Q, K, V and O are viewed as
(batch, heads, N, d) whatever their memory layout, and their four strides say where each
element lives. Nothing is copied.
"""
import ctypes

NAIVE, SCALAR, FA2, FA3 = 0, 1, 2, 3
KERNELS = {"naive": NAIVE, "scalar": SCALAR, "fa2": FA2, "fa3": FA3}
CAUSAL_NONE, CAUSAL_TOP_LEFT, CAUSAL_BOTTOM_RIGHT = 0, 1, 2
FP32, FP16, BF16 = 0, 1, 2
MEMORY_NONE, MEMORY_HBM, MEMORY_SRAM, MEMORY_REGISTERS = 0, 1, 2, 3
MAX_HEAD_DIMS = 8
# flashlab_rescale_count (fa3.h): the order of fa3's rescale counts.
RESCALE_COUNT_NAMES = ("first", "rescaled", "skipped", "kept")
# flashlab_decode_params.kv_l2_policy (decode.h)
DECODE_L2_AUTO, DECODE_L2_EVICT_NORMAL, DECODE_L2_EVICT_FIRST = 0, 1, 2
# flashlab_decode_params.grid (decode.h): the library's choice, a block per split, the queue
DECODE_GRID_AUTO, DECODE_GRID_SPLITS, DECODE_GRID_QUEUE = 0, 1, 2
# flashlab_fa3_grid (fa3.h): one block per query tile, persistent, automatic, work queue
FA3_GRID_PER_TILE, FA3_GRID_PERSISTENT, FA3_GRID_AUTO, FA3_GRID_QUEUE = 0, 1, 2, 3
# FLASHLAB_FA3_AUTO (fa3.h): stages and ping_pong chosen for the call's head dimension
FA3_AUTO = -1
ABI_VERSION = 9


class ForwardParams(ctypes.Structure):
    """Field for field the C struct flashlab_forward_params."""
    _fields_ = [
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p), ("lse", ctypes.c_void_p),
        ("q_stride", ctypes.c_int64 * 4), ("k_stride", ctypes.c_int64 * 4),
        ("v_stride", ctypes.c_int64 * 4), ("o_stride", ctypes.c_int64 * 4),
        ("batch", ctypes.c_int64), ("heads_q", ctypes.c_int64), ("heads_kv", ctypes.c_int64),
        ("n_q", ctypes.c_int64), ("n_k", ctypes.c_int64), ("d", ctypes.c_int64),
        ("scale", ctypes.c_double),
        ("dtype", ctypes.c_int32), ("causal", ctypes.c_int32), ("kernel", ctypes.c_int32),
        ("dropout_p", ctypes.c_double), ("dropout_seed", ctypes.c_uint64),
        ("dropout_offset", ctypes.c_uint32),
        ("reserved", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
    ]


class DropoutMaskParams(ctypes.Structure):
    """Field for field the C struct flashlab_dropout_mask_params (flashlab/dropout.h)."""
    _fields_ = [
        ("mask", ctypes.c_void_p),
        ("batch0", ctypes.c_int64), ("batch", ctypes.c_int64),
        ("head0", ctypes.c_int64), ("heads", ctypes.c_int64),
        ("row0", ctypes.c_int64), ("rows", ctypes.c_int64),
        ("col0", ctypes.c_int64), ("cols", ctypes.c_int64),
        ("p", ctypes.c_double), ("seed", ctypes.c_uint64), ("offset", ctypes.c_uint32),
        ("reserved", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
    ]


class BackwardParams(ctypes.Structure):
    """Field for field the C struct flashlab_backward_params (backward.h)."""
    _fields_ = [
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p), ("dout", ctypes.c_void_p), ("lse", ctypes.c_void_p),
        ("dq", ctypes.c_void_p), ("dk", ctypes.c_void_p), ("dv", ctypes.c_void_p),
        ("q_stride", ctypes.c_int64 * 4), ("k_stride", ctypes.c_int64 * 4),
        ("v_stride", ctypes.c_int64 * 4), ("o_stride", ctypes.c_int64 * 4),
        ("dout_stride", ctypes.c_int64 * 4), ("dq_stride", ctypes.c_int64 * 4),
        ("dk_stride", ctypes.c_int64 * 4), ("dv_stride", ctypes.c_int64 * 4),
        ("batch", ctypes.c_int64), ("heads_q", ctypes.c_int64), ("heads_kv", ctypes.c_int64),
        ("n_q", ctypes.c_int64), ("n_k", ctypes.c_int64), ("d", ctypes.c_int64),
        ("scale", ctypes.c_double),
        ("dtype", ctypes.c_int32), ("causal", ctypes.c_int32),
        ("deterministic", ctypes.c_int32), ("reserved", ctypes.c_int32),
        ("dropout_p", ctypes.c_double), ("dropout_seed", ctypes.c_uint64),
        ("dropout_offset", ctypes.c_uint64),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_int64),
        ("stream", ctypes.c_void_p),
    ]


class Fa3Options(ctypes.Structure):
    """Field for field the C struct flashlab_fa3_options (gpu/include/flashlab/fa3.h)."""
    _fields_ = [
        ("warp_specialized", ctypes.c_int32), ("stages", ctypes.c_int32),
        ("ping_pong", ctypes.c_int32), ("intra_overlap", ctypes.c_int32),
        ("conditional_rescale", ctypes.c_int32), ("rescale_counts", ctypes.c_void_p),
        ("grid", ctypes.c_int32), ("software_exp2", ctypes.c_int32),
        ("overlap_items", ctypes.c_int32), ("kv_l2_share", ctypes.c_int32),
    ]

    def describe(self):
        def auto(x):
            return "auto" if x == FA3_AUTO else x
        return (f"ws={self.warp_specialized} stages={auto(self.stages)} "
                f"ping_pong={auto(self.ping_pong)} overlap={self.intra_overlap} "
                f"conditional={self.conditional_rescale} grid={self.grid} "
                f"sexp2={self.software_exp2} items={self.overlap_items} "
                f"kv_l2_share={auto(self.kv_l2_share)}")


class KernelInfo(ctypes.Structure):
    """Field for field the C struct flashlab_kernel_info_t."""
    _fields_ = [
        ("name", ctypes.c_char_p), ("summary", ctypes.c_char_p),
        ("supported", ctypes.c_int32), ("br", ctypes.c_int32), ("bc", ctypes.c_int32),
        ("threads", ctypes.c_int32), ("sram_bytes", ctypes.c_int64),
        ("blocks_per_sm", ctypes.c_int32),
        ("s_level", ctypes.c_int32), ("s_dtype", ctypes.c_int32),
        ("w_level", ctypes.c_int32), ("w_dtype", ctypes.c_int32),
        ("kv_passes", ctypes.c_int32), ("s_hbm_reads", ctypes.c_int32),
        ("pointer_align_bytes", ctypes.c_int32), ("stride_align_elements", ctypes.c_int32),
        ("dtypes", ctypes.c_uint32), ("head_dim_count", ctypes.c_int32),
        ("head_dims", ctypes.c_int64 * MAX_HEAD_DIMS), ("max_head_dim", ctypes.c_int64),
    ]


class DecodeParams(ctypes.Structure):
    """Field for field the C struct flashlab_decode_params (gpu/include/flashlab/decode.h)."""
    _fields_ = [
        ("q", ctypes.c_void_p), ("k_cache", ctypes.c_void_p), ("v_cache", ctypes.c_void_p),
        ("o", ctypes.c_void_p), ("lse", ctypes.c_void_p), ("seq_lens", ctypes.c_void_p),
        ("block_table", ctypes.c_void_p),
        ("q_stride", ctypes.c_int64 * 4), ("k_stride", ctypes.c_int64 * 4),
        ("v_stride", ctypes.c_int64 * 4), ("o_stride", ctypes.c_int64 * 4),
        ("block_table_stride", ctypes.c_int64), ("page_size", ctypes.c_int64),
        ("num_pages", ctypes.c_int64),
        ("batch", ctypes.c_int64), ("heads_q", ctypes.c_int64), ("heads_kv", ctypes.c_int64),
        ("n_q", ctypes.c_int64), ("max_seq_len", ctypes.c_int64), ("d", ctypes.c_int64),
        ("scale", ctypes.c_double),
        ("dtype", ctypes.c_int32), ("num_splits", ctypes.c_int32),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_int64),
        ("kv_l2_policy", ctypes.c_int32), ("grid", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
    ]


class Flashlab:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.flashlab_forward.argtypes = [ctypes.POINTER(ForwardParams)]
        self.lib.flashlab_forward.restype = ctypes.c_int
        self.lib.flashlab_last_error.restype = ctypes.c_char_p
        self.lib.flashlab_status_name.argtypes = [ctypes.c_int]
        self.lib.flashlab_status_name.restype = ctypes.c_char_p
        self.lib.flashlab_kernel_info.argtypes = [ctypes.c_int32, ctypes.c_int64, ctypes.c_int32,
                                                  ctypes.POINTER(KernelInfo)]
        self.lib.flashlab_kernel_info.restype = ctypes.c_int
        self.lib.flashlab_backward.argtypes = [ctypes.POINTER(BackwardParams)]
        self.lib.flashlab_backward.restype = ctypes.c_int
        self.lib.flashlab_backward_workspace_bytes.argtypes = [ctypes.POINTER(BackwardParams),
                                                               ctypes.POINTER(ctypes.c_int64)]
        self.lib.flashlab_backward_workspace_bytes.restype = ctypes.c_int
        self.lib.flashlab_dropout_mask.argtypes = [ctypes.POINTER(DropoutMaskParams)]
        self.lib.flashlab_dropout_mask.restype = ctypes.c_int
        for name in ("flashlab_decode", "flashlab_decode_check"):
            getattr(self.lib, name).argtypes = [ctypes.POINTER(DecodeParams)]
            getattr(self.lib, name).restype = ctypes.c_int
        self.lib.flashlab_decode_num_splits.argtypes = [ctypes.POINTER(DecodeParams),
                                                        ctypes.POINTER(ctypes.c_int32)]
        self.lib.flashlab_decode_num_splits.restype = ctypes.c_int
        self.lib.flashlab_decode_workspace_bytes.argtypes = [ctypes.POINTER(DecodeParams),
                                                             ctypes.POINTER(ctypes.c_int64)]
        self.lib.flashlab_decode_workspace_bytes.restype = ctypes.c_int
        self.lib.flashlab_forward_fa3.argtypes = [ctypes.POINTER(ForwardParams),
                                                  ctypes.POINTER(Fa3Options)]
        self.lib.flashlab_forward_fa3.restype = ctypes.c_int
        self.lib.flashlab_fa3_default_options.argtypes = [ctypes.POINTER(Fa3Options)]
        self.lib.flashlab_fa3_default_options.restype = ctypes.c_int
        self.lib.flashlab_fa3_resolve_options.argtypes = [
            ctypes.c_int64, ctypes.POINTER(Fa3Options), ctypes.POINTER(Fa3Options)]
        self.lib.flashlab_fa3_resolve_options.restype = ctypes.c_int
        if self.lib.flashlab_abi_version() != ABI_VERSION:
            raise RuntimeError(f"{path} has ABI version {self.lib.flashlab_abi_version()}; "
                               f"this mirror is of version {ABI_VERSION}")

    def params(self, q, k, v, o, lse=None, causal=CAUSAL_NONE, kernel=FA2, scale=0.0,
               stream=None, dropout_p=0.0, dropout_seed=0, dropout_offset=0):
        """Q, O: (B, Hq, N_q, d) torch tensors; K, V: (B, Hkv, N_k, d); any strides.
        dropout_p > 0 drops weights by the CPU reference's Philox rule (fa2 only)."""
        import torch
        dtypes = {torch.float32: FP32, torch.float16: FP16, torch.bfloat16: BF16}
        p = ForwardParams()
        p.q, p.k, p.v, p.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
        p.lse = lse.data_ptr() if lse is not None else None
        p.q_stride[:], p.k_stride[:] = q.stride(), k.stride()
        p.v_stride[:], p.o_stride[:] = v.stride(), o.stride()
        p.batch, p.heads_q, p.n_q, p.d = q.shape
        p.heads_kv, p.n_k = k.shape[1], k.shape[2]
        p.scale, p.dtype, p.causal, p.kernel = scale, dtypes[q.dtype], causal, kernel
        p.dropout_p, p.dropout_seed, p.dropout_offset = dropout_p, dropout_seed, dropout_offset
        p.stream = stream if stream is not None else torch.cuda.current_stream().cuda_stream
        return p

    def kernel_info(self, kernel, d, dtype):
        """What `kernel` is for head dimension d and `dtype` (a KernelInfo); raises when it
        does not take them, with the library's reason."""
        info = KernelInfo()
        status = self.lib.flashlab_kernel_info(kernel, d, dtype, ctypes.byref(info))
        if status != 0:
            raise RuntimeError(self.lib.flashlab_status_name(status).decode() + ": " +
                               self.lib.flashlab_last_error().decode())
        return info

    def dropout_mask(self, mask, p, seed, offset=0, batch0=0, head0=0, row0=0, col0=0,
                     stream=None):
        """Fills `mask`, a contiguous (batch, heads, rows, cols) uint8 CUDA tensor, with the
        keep decisions (1 kept, 0 dropped) of the region starting at (batch0, head0, row0,
        col0)."""
        import torch
        m = DropoutMaskParams()
        m.mask = mask.data_ptr()
        m.batch0, m.head0, m.row0, m.col0 = batch0, head0, row0, col0
        m.batch, m.heads, m.rows, m.cols = mask.shape
        m.p, m.seed, m.offset = p, seed, offset
        m.stream = stream if stream is not None else torch.cuda.current_stream().cuda_stream
        status = self.lib.flashlab_dropout_mask(ctypes.byref(m))
        if status != 0:
            raise RuntimeError(self.lib.flashlab_status_name(status).decode() + ": " +
                               self.lib.flashlab_last_error().decode())

    def forward(self, params):
        self._check(self.lib.flashlab_forward(ctypes.byref(params)))

    def fa3_default_options(self):
        """fa3's default switches, from the library (the one place they are written)."""
        options = Fa3Options()
        self._check(self.lib.flashlab_fa3_default_options(ctypes.byref(options)))
        return options

    def fa3_resolved_options(self, d, options):
        """The options as a call at head dimension d runs them (FLASHLAB_FA3_AUTO resolved)."""
        out = Fa3Options()
        self._check(self.lib.flashlab_fa3_resolve_options(d, ctypes.byref(options),
                                                          ctypes.byref(out)))
        return out

    def forward_fa3(self, params, options):
        """flashlab_forward with fa3's switches (params.kernel must be FA3)."""
        self._check(self.lib.flashlab_forward_fa3(ctypes.byref(params), ctypes.byref(options)))

    def _check(self, status):
        if status != 0:
            raise RuntimeError(self.lib.flashlab_status_name(status).decode() + ": " +
                               self.lib.flashlab_last_error().decode())

    def backward_params(self, q, k, v, o, lse, do, dq, dk, dv, causal=CAUSAL_NONE, scale=0.0,
                        deterministic=False, stream=None, dropout_p=0.0, dropout_seed=0,
                        dropout_offset=0):
        """Q, O, dO, dQ: (B, Hq, N_q, d) torch tensors; K, V, dK, dV: (B, Hkv, N_k, d); any
        strides; LSE (B, Hq, N_q) fp32 contiguous, as forward() wrote it. The dropout
        arguments must be the forward's: the backward draws the same mask again. The
        workspace is left empty: backward() allocates it."""
        import torch
        dtypes = {torch.float32: FP32, torch.float16: FP16, torch.bfloat16: BF16}
        p = BackwardParams()
        p.q, p.k, p.v, p.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
        p.dout, p.lse = do.data_ptr(), lse.data_ptr()
        p.dq, p.dk, p.dv = dq.data_ptr(), dk.data_ptr(), dv.data_ptr()
        p.q_stride[:], p.k_stride[:], p.v_stride[:] = q.stride(), k.stride(), v.stride()
        p.o_stride[:], p.dout_stride[:] = o.stride(), do.stride()
        p.dq_stride[:], p.dk_stride[:], p.dv_stride[:] = dq.stride(), dk.stride(), dv.stride()
        p.batch, p.heads_q, p.n_q, p.d = q.shape
        p.heads_kv, p.n_k = k.shape[1], k.shape[2]
        p.scale, p.dtype, p.causal = scale, dtypes[q.dtype], causal
        p.deterministic = 1 if deterministic else 0
        p.dropout_p, p.dropout_seed, p.dropout_offset = dropout_p, dropout_seed, dropout_offset
        p.stream = stream if stream is not None else torch.cuda.current_stream().cuda_stream
        return p

    def workspace_bytes(self, params):
        n = ctypes.c_int64()
        self._check(self.lib.flashlab_backward_workspace_bytes(ctypes.byref(params),
                                                               ctypes.byref(n)))
        return n.value

    def backward(self, params, workspace=None):
        """Runs flashlab_backward; allocates the workspace (a torch uint8 tensor) unless one
        large enough is given, and returns it so that a caller may reuse it."""
        import torch
        need = self.workspace_bytes(params)
        if workspace is None or workspace.numel() < need:
            workspace = torch.empty(max(need, 1), dtype=torch.uint8, device="cuda")
        params.workspace, params.workspace_bytes = workspace.data_ptr(), workspace.numel()
        self._check(self.lib.flashlab_backward(ctypes.byref(params)))
        return workspace

    def decode_params(self, q, k_cache, v_cache, o, seq_lens, max_seq_len, lse=None,
                      block_table=None, page_size=0, num_splits=0, scale=0.0, stream=None,
                      kv_l2_policy=DECODE_L2_AUTO, grid=DECODE_GRID_AUTO):
        """Q, O: (B, Hq, N_q, d) torch tensors; seq_lens: (B) int32 on the GPU.
        Contiguous cache (block_table None): K, V viewed (B, Hkv, max_seq_len, d).
        Paged: K, V viewed (num_pages, Hkv, page_size, d), e.g. a (pages, page, Hkv, d)
        tensor through .transpose(1, 2); block_table (B, max_seq_len / page_size) int32.
        The workspace is allocated here, sized by flashlab_decode_workspace_bytes."""
        import torch
        dtypes = {torch.float16: FP16, torch.bfloat16: BF16}
        p = DecodeParams()
        p.q, p.k_cache, p.v_cache, p.o = (q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(),
                                          o.data_ptr())
        p.lse = lse.data_ptr() if lse is not None else None
        p.seq_lens = seq_lens.data_ptr()
        p.q_stride[:], p.k_stride[:] = q.stride(), k_cache.stride()
        p.v_stride[:], p.o_stride[:] = v_cache.stride(), o.stride()
        if block_table is not None:
            p.block_table = block_table.data_ptr()
            p.block_table_stride = block_table.stride(0)
            p.page_size, p.num_pages = page_size, k_cache.shape[0]
        p.batch, p.heads_q, p.n_q, p.d = q.shape
        p.heads_kv, p.max_seq_len = k_cache.shape[1], max_seq_len
        p.scale, p.dtype, p.num_splits = scale, dtypes[q.dtype], num_splits
        p.kv_l2_policy, p.grid = kv_l2_policy, grid
        p.stream = stream if stream is not None else torch.cuda.current_stream().cuda_stream
        p.workspace_bytes = self.decode_workspace_bytes(p)
        workspace = torch.empty(p.workspace_bytes, dtype=torch.uint8, device=q.device)
        p.workspace = workspace.data_ptr()
        return p, workspace  # keep the workspace alive as long as the params

    def decode_num_splits(self, params):
        out = ctypes.c_int32()
        self._check(self.lib.flashlab_decode_num_splits(ctypes.byref(params), ctypes.byref(out)))
        return out.value

    def decode_workspace_bytes(self, params):
        out = ctypes.c_int64()
        self._check(self.lib.flashlab_decode_workspace_bytes(ctypes.byref(params),
                                                             ctypes.byref(out)))
        return out.value

    def decode(self, params):
        self._check(self.lib.flashlab_decode(ctypes.byref(params)))

    def decode_check(self, params):
        """Waits for the stream; raises when the kernel met a bad length or page index."""
        self._check(self.lib.flashlab_decode_check(ctypes.byref(params)))



def attention_function(lib, causal=CAUSAL_NONE, deterministic=False, dropout_p=0.0,
                       dropout_seed=0, dropout_offset=0):
    """A torch.autograd.Function over flashlab: forward through flashlab_forward (fa2, with
    LSE), backward through flashlab_backward, both with the same dropout (p, seed, offset),
    so the backward replays the forward's mask. q, k, v are (B, H, N, d) bf16 or fp16 CUDA
    tensors; use as attention_function(lib)(q, k, v)."""
    dropout = dict(dropout_p=dropout_p, dropout_seed=dropout_seed,
                   dropout_offset=dropout_offset)
    import torch

    class FlashlabAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            o = torch.empty_like(q)
            lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
            lib.forward(lib.params(q, k, v, o, lse, causal=causal, kernel=FA2, **dropout))
            ctx.save_for_backward(q, k, v, o, lse)
            return o

        @staticmethod
        def backward(ctx, do):
            q, k, v, o, lse = ctx.saved_tensors
            do = do.contiguous() if do.stride(-1) != 1 else do
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            lib.backward(lib.backward_params(q, k, v, o, lse, do, dq, dk, dv, causal=causal,
                                             deterministic=deterministic, **dropout))
            return dq, dk, dv

    return FlashlabAttention.apply
