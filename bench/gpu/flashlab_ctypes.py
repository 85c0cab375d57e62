"""flashlab's C ABI (gpu/include/flashlab/flashlab.h) from Python, through ctypes.

A torch tensor crosses as data_ptr() and stride(), untouched: Q, K, V and O are viewed as
(batch, heads, N, d) whatever their memory layout, and their four strides say where each
element lives. Nothing is copied.
"""
import ctypes

NAIVE, SCALAR, FA2 = 0, 1, 2
KERNELS = {"naive": NAIVE, "scalar": SCALAR, "fa2": FA2}
CAUSAL_NONE, CAUSAL_TOP_LEFT, CAUSAL_BOTTOM_RIGHT = 0, 1, 2
FP32, FP16, BF16 = 0, 1, 2


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


class Flashlab:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.flashlab_forward.argtypes = [ctypes.POINTER(ForwardParams)]
        self.lib.flashlab_forward.restype = ctypes.c_int
        self.lib.flashlab_last_error.restype = ctypes.c_char_p
        self.lib.flashlab_status_name.argtypes = [ctypes.c_int]
        self.lib.flashlab_status_name.restype = ctypes.c_char_p

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

    def forward(self, params):
        status = self.lib.flashlab_forward(ctypes.byref(params))
        if status != 0:
            raise RuntimeError(self.lib.flashlab_status_name(status).decode() + ": " +
                               self.lib.flashlab_last_error().decode())
