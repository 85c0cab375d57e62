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
ABI_VERSION = 2


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
        ("reserved", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
    ]


class Fa3Options(ctypes.Structure):
    """Field for field the C struct flashlab_fa3_options (gpu/include/flashlab/fa3.h)."""
    _fields_ = [
        ("warp_specialized", ctypes.c_int32), ("stages", ctypes.c_int32),
        ("ping_pong", ctypes.c_int32), ("intra_overlap", ctypes.c_int32),
    ]

    def describe(self):
        return (f"ws={self.warp_specialized} stages={self.stages} "
                f"ping_pong={self.ping_pong} overlap={self.intra_overlap}")


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
        self.lib.flashlab_forward_fa3.argtypes = [ctypes.POINTER(ForwardParams),
                                                  ctypes.POINTER(Fa3Options)]
        self.lib.flashlab_forward_fa3.restype = ctypes.c_int
        self.lib.flashlab_fa3_default_options.argtypes = [ctypes.POINTER(Fa3Options)]
        self.lib.flashlab_fa3_default_options.restype = ctypes.c_int
        if self.lib.flashlab_abi_version() != ABI_VERSION:
            raise RuntimeError(f"{path} has ABI version {self.lib.flashlab_abi_version()}; "
                               f"this mirror is of version {ABI_VERSION}")

    def params(self, q, k, v, o, lse=None, causal=CAUSAL_NONE, kernel=FA2, scale=0.0,
               stream=None):
        """Q, O: (B, Hq, N_q, d) torch tensors; K, V: (B, Hkv, N_k, d); any strides."""
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

    def _check(self, status):
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

    def forward_fa3(self, params, options):
        """flashlab_forward with fa3's switches (params.kernel must be FA3)."""
        self._check(self.lib.flashlab_forward_fa3(ctypes.byref(params), ctypes.byref(options)))
