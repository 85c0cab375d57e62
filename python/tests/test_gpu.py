"""The GPU side from Python. The kernel table needs no GPU and is tested everywhere; the
kernels themselves (flashlab.torch) need torch and a CUDA device, and their tests skip with
the reason where either is missing.

Correctness follows ANCHORS.md's rule: the error of a kernel against an fp64 reference is at
most 2x (forward) or 3x (gradients) the error of torch's plain three-operator attention in the
same low precision, over awkward sizes."""
import os

import pytest

import flashlab
from flashlab import _flashlab

gpu = _flashlab.gpu

# Where the plain attention happens to be exact (one key: P = 1, O = V), its error and so the
# 2x bound are 0; a kernel is then allowed this much, a quarter of bf16's epsilon (2^-7) at
# |O| ~ 1, which no real mistake stays under.
FLOOR = 2.0 ** -9


def test_the_kernel_table_needs_no_gpu():
    assert flashlab.kernels() == list(gpu.KERNELS) and "fa2" in flashlab.kernels()
    for name in flashlab.kernels():
        info = flashlab.kernel_info(name, 128, "bf16")
        assert info.name == name and info.summary
        assert info.supported == (info.reason == "")
        if info.supported and info.Br:
            assert info.Bc > 0 and info.threads > 0 and info.sram_bytes > 0
    fa2 = flashlab.kernel_info("fa2", 64, "bf16")
    assert fa2.supported and fa2.dropout and 64 in fa2.head_dims
    odd = flashlab.kernel_info("fa2", 59, "bf16")
    assert not odd.supported and "d = 59" in odd.reason and not odd.Br
    wide = flashlab.kernel_info("fa2", 64, "fp32")
    assert not wide.supported and "fp32" in wide.reason
    with pytest.raises(ValueError, match="unknown GPU kernel `fa9`: the kernels are"):
        flashlab.kernel_info("fa9", 64)
    with pytest.raises(ValueError, match="dtype 'int8' is unknown"):
        flashlab.kernel_info("fa2", 64, "int8")


def test_a_kernel_call_without_the_library_says_why():
    error = gpu.library_error()
    if not error:
        pytest.skip(f"libflashlab.so loads here ({gpu.library()}): the calls are tested below")
    assert gpu.library() is None and "libflashlab.so" in error
    for call in (gpu.forward, gpu.backward, gpu.decode, gpu.backward_workspace_bytes):
        with pytest.raises(RuntimeError, match="could not be loaded|ABI version"):
            call(batch=1)


def test_a_misspelt_or_malformed_field_is_refused_before_any_call():
    for call in (gpu.forward, gpu.backward, gpu.decode, gpu.decode_num_splits):
        with pytest.raises(TypeError, match="`hieght`, which is no field"):
            call(hieght=1)
    with pytest.raises(ValueError, match="q_stride has 3 entries"):
        gpu.forward(q_stride=(1, 2, 3))


def test_the_abi_validates_before_any_device_call():
    """Validation and workspace sizes need the library but no device."""
    if gpu.library_error():
        pytest.skip("libflashlab.so is not loadable here: " + gpu.library_error())
    sizes = dict(batch=2, heads_q=4, heads_kv=2, n_q=97, n_k=113, d=64, dtype=gpu.DTYPES["bf16"])
    assert gpu.backward_workspace_bytes(**sizes) > 0
    with pytest.raises(ValueError, match="FLASHLAB_ERROR_BAD_SHAPE: heads_q = 0"):
        gpu.forward(**dict(sizes, heads_q=0))
    stride = (4 * 97 * 59, 97 * 59, 59, 1)
    with pytest.raises(ValueError, match="FLASHLAB_ERROR_UNSUPPORTED: d = 59 is not supported "
                                         "by the fa2 kernel"):
        gpu.forward(q=1 << 20, k=1 << 20, v=1 << 20, o=1 << 24, q_stride=stride,
                    k_stride=stride, v_stride=stride, o_stride=stride,
                    kernel=gpu.KERNEL_IDS["fa2"], **dict(sizes, d=59, heads_kv=4))


def test_flashlab_torch_imports_without_torch_and_says_what_is_missing():
    import flashlab.torch as ft
    if ft.torch is not None:
        pytest.skip("torch is installed here: the calls are tested below")
    for call in (lambda: ft.attention(None, None, None, causal=True),
                 lambda: ft.forward(None, None, None), lambda: ft.decode(None, None, None, None)):
        with pytest.raises(RuntimeError, match="it needs torch, which is not installed here"):
            call()


def torch_and_gpu():
    """torch with a CUDA device, or skip saying which is missing."""
    torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device that torch can see: the GPU tests need one")
    if gpu.library_error():
        pytest.fail(gpu.library_error())  # a GPU but no library: the build is incomplete
    return torch


def reference(torch, q, k, v, causal, scale=None):
    """fp64 attention on the GPU, with GQA by repeating KV heads. causal: False, True
    (top-left) or 'bottom-right'."""
    group = q.shape[1] // k.shape[1]
    k, v = (x.repeat_interleave(group, dim=1).double() for x in (k, v))
    s = q.double() @ k.transpose(-1, -2) * (scale or q.shape[-1] ** -0.5)
    n_q, n_k = q.shape[2], k.shape[2]
    if causal:
        offset = n_k - n_q if causal == "bottom-right" else 0
        rows = torch.arange(n_q, device=q.device)[:, None]
        keep = torch.arange(n_k, device=q.device)[None, :] <= rows + offset
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a row that sees no key: O = 0
    return p @ v


def plain_low_precision(torch, q, k, v, causal):
    """Three operators in q's dtype, as a framework runs them: the error bound's baseline."""
    group = q.shape[1] // k.shape[1]
    k, v = (x.repeat_interleave(group, dim=1) for x in (k, v))
    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    n_q, n_k = q.shape[2], k.shape[2]
    if causal:
        offset = n_k - n_q if causal == "bottom-right" else 0
        rows = torch.arange(n_q, device=q.device)[:, None]
        s = s.masked_fill(torch.arange(n_k, device=q.device)[None, :] > rows + offset,
                          float("-inf"))
    return torch.softmax(s.float(), dim=-1).nan_to_num(0.0).to(q.dtype) @ v


SHAPES = [  # (B, H, H_kv, N_q, N_k, d)
    (1, 1, 1, 1, 1, 64), (2, 4, 4, 97, 97, 128), (1, 4, 2, 113, 203, 64),
    (1, 8, 1, 1023, 1024, 128), (2, 2, 2, 1024, 1023, 64),
]


def randn(torch, shape, dtype, requires_grad=False):
    return torch.randn(shape, device="cuda", dtype=dtype, requires_grad=requires_grad)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [False, True, "bottom-right"])
@pytest.mark.parametrize("dtype_name", ["bf16", "fp16"])
def test_attention_forward_meets_the_2x_rule(shape, causal, dtype_name):
    torch = torch_and_gpu()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    b, h, h_kv, n_q, n_k, d = shape
    q, k, v = (randn(torch, s, dtype) for s in ((b, h, n_q, d), (b, h_kv, n_k, d),
                                                 (b, h_kv, n_k, d)))
    import flashlab.torch as ft
    o = ft.attention(q, k, v, causal=causal)
    assert o.shape == (b, h, n_q, d) and o.dtype == dtype and not o.isnan().any()
    ref = reference(torch, q, k, v, causal)
    plain = plain_low_precision(torch, q, k, v, causal)
    err = (o.double() - ref).abs().max().item()
    bound = 2 * (plain.double() - ref).abs().max().item()
    assert err <= max(bound, FLOOR), (err, bound)


@pytest.mark.parametrize("shape", SHAPES[1:])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_backward_meets_the_3x_rule(shape, causal):
    torch = torch_and_gpu()
    import flashlab.torch as ft
    b, h, h_kv, n_q, n_k, d = shape
    dtype = torch.bfloat16
    q, k, v = (randn(torch, s, dtype, True) for s in ((b, h, n_q, d), (b, h_kv, n_k, d),
                                                       (b, h_kv, n_k, d)))
    do = randn(torch, (b, h, n_q, d), dtype)
    grads = torch.autograd.grad(ft.attention(q, k, v, causal=causal), (q, k, v), do)
    exact = [x.detach().double().requires_grad_() for x in (q, k, v)]
    ref = torch.autograd.grad(reference(torch, *exact, causal), exact, do.double())
    low = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    plain = torch.autograd.grad(plain_low_precision(torch, *low, causal), low, do)
    for name, got, want, base in zip(("dq", "dk", "dv"), grads, ref, plain):
        assert got.shape == want.shape, name
        err = (got.double() - want).abs().max().item()
        bound = 3 * (base.double() - want).abs().max().item()
        assert err <= max(bound, FLOOR), (name, err, bound)


def test_a_transposed_bshd_view_is_taken_without_a_copy():
    torch = torch_and_gpu()
    import flashlab.torch as ft
    bshd = [randn(torch, (2, 97, 4, 64), torch.bfloat16) for _ in range(3)]
    q, k, v = (x.transpose(1, 2) for x in bshd)  # (B, H, N, d) views, strides of BSHD
    assert not q.is_contiguous()
    o = ft.attention(q, k, v)
    o_contiguous = ft.attention(q.contiguous(), k.contiguous(), v.contiguous())
    assert torch.equal(o, o_contiguous)


@pytest.mark.parametrize("kernel", list(flashlab.KERNELS))
def test_every_kernel_of_the_ladder_by_name(kernel):
    torch = torch_and_gpu()
    import flashlab.torch as ft
    if kernel == "fa3" and os.environ.get("FLASHLAB_SKIP_FA3"):
        pytest.skip("FLASHLAB_SKIP_FA3 is set")
    q, k, v = (randn(torch, (1, 2, 113, 128), torch.bfloat16) for _ in range(3))
    if not flashlab.kernel_info(kernel, 128, "bf16").supported:
        pytest.skip(flashlab.kernel_info(kernel, 128, "bf16").reason)
    o, lse = ft.forward(q, k, v, causal=True, kernel=kernel, return_lse=True)
    ref = reference(torch, q, k, v, True)
    bound = 2 * (plain_low_precision(torch, q, k, v, True).double() - ref).abs().max().item()
    assert (o.double() - ref).abs().max().item() <= max(bound, FLOOR)
    assert lse.shape == (1, 2, 113) and lse.dtype == torch.float32
    # L = m + log l from bf16 inputs: the scores are exact products summed in fp32, so L is
    # within a few fp32 ulps of |L| < 20 of the fp64 value; 1e-3 leaves room for exp2's error.
    s = q.double() @ k.double().transpose(-1, -2) * 128 ** -0.5
    keep = torch.ones(113, 113, dtype=torch.bool, device="cuda").tril()
    ref_lse = torch.logsumexp(s.masked_fill(~keep, float("-inf")), dim=-1)
    assert (lse.double() - ref_lse).abs().max().item() < 1e-3


def test_decode_refuses_an_unknown_grid_before_anything_else():
    import flashlab.torch as ft
    assert set(gpu.DECODE_GRIDS) == {"auto", "splits", "queue"}
    with pytest.raises(ValueError, match="grid = 'sideways' is not a decode grid: use one of "
                                         "auto, splits, queue"):
        ft.decode(None, None, None, None, grid="sideways")


@pytest.mark.parametrize("grid", ["splits", "queue"])
@pytest.mark.parametrize("splits", [0, 1, 3])
def test_decode_against_the_reference(splits, grid):
    torch = torch_and_gpu()
    import flashlab.torch as ft
    b, h, h_kv, n_cache, d = 3, 8, 2, 339, 128
    q = randn(torch, (b, h, 1, d), torch.bfloat16)
    k, v = (randn(torch, (b, h_kv, n_cache, d), torch.bfloat16) for _ in range(2))
    lengths = torch.tensor([339, 1, 200], dtype=torch.int32, device="cuda")
    o = ft.decode(q, k, v, lengths, num_splits=splits, check=True, grid=grid)
    for i, n in enumerate(lengths.tolist()):
        ref = reference(torch, q[i:i + 1], k[i:i + 1, :, :n], v[i:i + 1, :, :n], False)
        plain = plain_low_precision(torch, q[i:i + 1], k[i:i + 1, :, :n], v[i:i + 1, :, :n],
                                    False)
        bound = 2 * (plain.double() - ref).abs().max().item()
        assert (o[i:i + 1].double() - ref).abs().max().item() <= max(bound, FLOOR)


def test_paged_decode_reads_the_pages_the_table_names():
    torch = torch_and_gpu()
    import flashlab.torch as ft
    b, h, h_kv, d, page, pages_per_seq = 2, 8, 2, 128, 16, 8
    max_len = page * pages_per_seq
    q = randn(torch, (b, h, 1, d), torch.bfloat16)
    k, v = (randn(torch, (b, h_kv, max_len, d), torch.bfloat16) for _ in range(2))
    lengths = torch.tensor([max_len, 37], dtype=torch.int32, device="cuda")
    # The pages in a shuffled order: page p of sequence s (keys p*page to p*page + page - 1)
    # is stored at table[s, p] of a vLLM-style (pages, page_size, H_kv, d) cache.
    table = torch.randperm(b * pages_per_seq, device="cuda").view(b, pages_per_seq)
    k_pages, v_pages = (torch.empty((b * pages_per_seq, page, h_kv, d), device="cuda",
                                    dtype=torch.bfloat16) for _ in range(2))
    for s in range(b):
        for p in range(pages_per_seq):
            keys = slice(p * page, (p + 1) * page)
            k_pages[table[s, p]] = k[s, :, keys].transpose(0, 1)
            v_pages[table[s, p]] = v[s, :, keys].transpose(0, 1)
    o = ft.decode(q, k_pages.transpose(1, 2), v_pages.transpose(1, 2), lengths,
                  block_table=table.to(torch.int32), page_size=page, check=True)
    for i, n in enumerate(lengths.tolist()):
        one = (q[i:i + 1], k[i:i + 1, :, :n], v[i:i + 1, :, :n])
        ref = reference(torch, *one, False)
        bound = 2 * (plain_low_precision(torch, *one, False).double() - ref).abs().max().item()
        assert (o[i:i + 1].double() - ref).abs().max().item() <= max(bound, FLOOR)


def test_dropout_reaches_the_kernel_and_its_backward():
    torch = torch_and_gpu()
    import flashlab.torch as ft
    q, k, v = (randn(torch, (1, 2, 128, 64), torch.bfloat16, True) for _ in range(3))
    torch.manual_seed(1)
    a = ft.attention(q, k, v, dropout_p=0.3)
    torch.manual_seed(1)
    b = ft.attention(q, k, v, dropout_p=0.3)
    assert torch.equal(a, b)  # the seed is drawn from torch's generator
    assert not torch.equal(a, ft.attention(q, k, v))
    a.sum().backward()
    assert all(x.grad is not None and x.grad.isfinite().all() for x in (q, k, v))


def test_dropout_on_the_gpu_is_the_cpu_reference_mask():
    """fa2's forward and the backward with dropout (p, seed, offset) against attention with the
    CPU reference's mask Z (flashlab.dropout_multipliers, per batch entry and query head),
    under the 2x and 3x rules: a kernel that drew any other mask would be far off."""
    torch = torch_and_gpu()
    import flashlab.torch as ft
    b, h, n_q, n_k, d, p, seed, offset = 2, 2, 97, 113, 64, 0.2, 987654321, 5
    q, k, v, do = (randn(torch, (b, h, n, d), torch.bfloat16)
                   for n in (n_q, n_k, n_k, n_q))
    o, lse = ft.forward(q, k, v, return_lse=True, dropout_p=p, dropout_seed=seed,
                        dropout_offset=offset)
    grads = ft.backward(q, k, v, o, lse, do, dropout_p=p, dropout_seed=seed,
                        dropout_offset=offset)
    for i in range(b):
        for j in range(h):
            z = torch.tensor(flashlab.dropout_multipliers(p, seed, offset, n_q, n_k, batch=i,
                                                          head=j), device="cuda")

            def attend(q_, k_, v_):  # (P o Z) V in the inputs' precision, P in fp32 or fp64
                s_ = q_ @ k_.T * d ** -0.5
                p_ = torch.softmax(s_.double() if q_.dtype == torch.float64 else s_.float(), -1)
                return (p_.to(q_.dtype) * z.to(q_.dtype)) @ v_

            exact = [x[i, j].double().requires_grad_() for x in (q, k, v)]
            low = [x[i, j].clone().requires_grad_() for x in (q, k, v)]
            ref, plain = attend(*exact), attend(*low)
            err = (o[i, j].double() - ref).abs().max().item()
            assert err <= max(2 * (plain.double() - ref).abs().max().item(), FLOOR), (i, j, err)
            ref_grads = torch.autograd.grad(ref, exact, do[i, j].double())
            plain_grads = torch.autograd.grad(plain, low, do[i, j])
            for got, want, base in zip(grads, ref_grads, plain_grads):
                err = (got[i, j].double() - want).abs().max().item()
                bound = 3 * (base.double() - want).abs().max().item()
                assert err <= max(bound, FLOOR), (i, j, err, bound)


def test_bad_tensors_raise_with_the_library_message():
    torch = torch_and_gpu()
    import flashlab.torch as ft
    q = randn(torch, (1, 2, 16, 64), torch.bfloat16)
    with pytest.raises(TypeError, match="fp16 or bf16"):
        ft.attention(q.float(), q.float(), q.float())
    with pytest.raises(ValueError, match="cuda"):
        ft.attention(q.cpu(), q.cpu(), q.cpu())
    with pytest.raises(TypeError, match="same dtype"):
        ft.attention(q, q.half(), q)
    odd = randn(torch, (1, 2, 16, 59), torch.bfloat16)
    with pytest.raises(ValueError, match="FLASHLAB_ERROR_UNSUPPORTED.*d = 59"):
        ft.attention(odd, odd, odd)
    with pytest.raises(ValueError, match="FLASHLAB_ERROR_BAD_SHAPE"):
        ft.attention(q, randn(torch, (1, 3, 16, 64), torch.bfloat16),
                     randn(torch, (1, 3, 16, 64), torch.bfloat16))  # 2 query heads, 3 KV heads
    with pytest.raises(ValueError, match="FLASHLAB_ERROR_BAD_STRIDE"):
        ft.attention(q.transpose(2, 3).contiguous().transpose(2, 3), q, q)
    with pytest.raises(ValueError, match="4-d"):
        ft.attention(q[0], q[0], q[0])
    with pytest.raises(ValueError, match="causal = 'diagonal'"):
        ft.attention(q, q, q, causal="diagonal")
