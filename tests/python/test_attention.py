"""Attention as one kernel: nn.attention from ember.op, from F.scaled_dot_product_attention,
from attention written by hand and from nn.MultiheadAttention, against PyTorch and against
the unfused build (RecognizeAttention disabled), with the loop IR checked for the absence of
any score-sized buffer. Tolerances: rtol 1e-4, atol 1e-5 (sums in a different order)."""
import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ember
from ember import EmberError, ir, op
from ember.transform import PassContext

TOL = dict(rtol=1e-4, atol=1e-5)
PATTERN = "attention (online softmax)"


def run_lib(lib, inputs):
    m = ember.GraphModule(lib)
    for i, x in enumerate(inputs):
        m.set_input(i, x.numpy() if isinstance(x, torch.Tensor) else x)
    m.run()
    return [np.asarray(m.get_output(i)).copy() for i in range(m.get_num_outputs())]


def compile_model(model, inputs, fused=True):
    mod, params = ember.frontend.from_pytorch(model, inputs)
    if fused:
        return ember.build(mod, target="llvm", params=params)
    with PassContext(disabled_passes=["RecognizeAttention"]):
        return ember.build(mod, target="llvm", params=params)


def allocations(lib):
    """(name, elements) of every buffer the kernels allocate."""
    out = []
    for name, dims in re.findall(r"allocate (\S+): \w+\[([\d, ]*)\]", lib.get_source("loop")):
        out.append((name, int(np.prod([int(d) for d in dims.split(",") if d.strip()]))))
    return out


def qkv(b, h, lq, s, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, h, n, d, generator=g) for n in (lq, s, s))


class SDPA(torch.nn.Module):
    def __init__(self, causal=False):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal)


class HandWritten(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5), dim=-1) @ v


class MHA(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.attn = torch.nn.MultiheadAttention(64, 4, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


@pytest.mark.parametrize("name,model,inputs", [
    ("sdpa", SDPA(), qkv(1, 2, 128, 128, 32)),
    ("sdpa_causal", SDPA(causal=True), qkv(1, 2, 128, 128, 32, seed=1)),
    ("hand_written", HandWritten(), qkv(1, 2, 128, 128, 32, seed=2)),
    ("multihead", MHA(), (torch.randn(2, 128, 64, generator=torch.Generator().manual_seed(3)),)),
])
def test_one_kernel_without_the_score_matrix(name, model, inputs):
    n = 128
    model.eval()
    fused = compile_model(model, inputs)
    kernels = [k for k in fused.fusion_report() if "nn.attention" in k.ops]
    assert len(kernels) == 1 and PATTERN in kernels[0].patterns, fused.fusion_report()
    # No kernel allocates a buffer as large as the scores, and no executor value is one: the
    # attention kernel's buffers are per task (a block of queries).
    allocs = allocations(fused)
    assert allocs, fused.get_source("loop")[:2000]
    assert all(size < n * n for name, size in allocs), allocs
    graph = fused.get_source("graph")
    assert "nn.softmax" not in graph and "nn.batch_matmul" not in graph, graph

    with torch.no_grad():
        want = model(*inputs).numpy()
    got = run_lib(fused, inputs)[0]
    unfused = run_lib(compile_model(model, inputs, fused=False), inputs)[0]
    np.testing.assert_allclose(got, want, **TOL)
    np.testing.assert_allclose(got, unfused, **TOL)


def test_op_with_masks_matches_torch():
    q, k, v = (t.numpy() for t in qkv(2, 3, 33, 47, 8, seed=4))
    g = torch.Generator().manual_seed(5)
    keep = (torch.rand(2, 1, 33, 47, generator=g) > 0.4)
    keep[..., 0] = True
    bias = torch.randn(33, 47, generator=g) * 2
    cases = [
        (dict(mask=keep.numpy()), dict(attn_mask=keep)),
        (dict(mask=bias.numpy()), dict(attn_mask=bias)),
        (dict(causal=True, scale=0.2), dict(is_causal=True, scale=0.2)),
        (dict(mask=bias.numpy(), causal=True), dict(attn_mask=bias + torch.full(
            (33, 47), float("-inf")).triu(1))),
    ]
    for ours, theirs in cases:
        args = [ir.var(n, shape=a.shape) for n, a in (("q", q), ("k", k), ("v", v))]
        inputs = [q, k, v]
        mask = ours.pop("mask", None)
        if mask is not None:
            args.append(ir.var("mask", shape=mask.shape, dtype=mask.dtype.name))
            inputs.append(mask)
        out = op.nn.attention(*args[:3], mask=args[3] if mask is not None else None, **ours,
                              name="attn")
        assert out.shape == (2, 3, 33, 8)
        lib = ember.build(ir.Function(args, out), target="llvm")
        got = run_lib(lib, inputs)[0]
        want = F.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k),
                                              torch.from_numpy(v), **theirs).numpy()
        np.testing.assert_allclose(got, want, **TOL, err_msg=str(theirs.keys()))


def test_op_errors_name_the_node():
    q = ir.var("q", shape=(2, 8, 4))
    with pytest.raises(EmberError, match=r"attn.*same batch dimensions"):
        op.nn.attention(q, ir.var("k", shape=(3, 8, 4)), ir.var("v", shape=(3, 8, 4)), name="attn")
    with pytest.raises(EmberError, match=r"attn.*does not broadcast"):
        op.nn.attention(q, q, q, mask=ir.var("m", shape=(8, 5), dtype="bool"), name="attn")
    with pytest.raises(EmberError, match="causal"):
        op.nn.attention(q, q, q, causal="yes")


def test_probabilities_output_keeps_the_ops():
    class Both(torch.nn.Module):
        def forward(self, q, k, v):
            p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
            return p @ v, p

    inputs = qkv(1, 2, 16, 16, 8, seed=6)
    lib = compile_model(Both().eval(), inputs)
    assert not any(PATTERN in p for k in lib.fusion_report() for p in k.patterns)
    got = run_lib(lib, inputs)
    with torch.no_grad():
        want = Both()(*inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), **TOL)


@pytest.mark.parametrize("lq,s,d,causal", [
    (5, 7, 16, False),      # fewer rows than a register tile
    (100, 77, 64, True),    # query blocks of whole tiles past L; a partial key block
    (130, 130, 24, False),  # three vectors of keys per tile row on AVX2
    (200, 64, 64, False),   # four query blocks, one key block
])
def test_tile_shapes_match_torch(lq, s, d, causal):
    q, k, v = qkv(1, 2, lq, s, d, seed=lq)
    model = SDPA(causal=causal).eval()
    got = run_lib(compile_model(model, (q, k, v)), (q, k, v))[0]
    with torch.no_grad():
        np.testing.assert_allclose(got, model(q, k, v).numpy(), **TOL)


@pytest.mark.parametrize("bits", [256, 512])
@pytest.mark.parametrize("lq,s,e,ev", [
    (13, 7, 5, 3),      # values no vector width divides: one vector of 3 lanes
    (17, 70, 5, 7),     # ... of 7
    (70, 130, 16, 20),  # 20 = 5 vectors of 4 lanes (half an AVX2 vector)
    (9, 9, 8, 1),       # one output feature
    (64, 64, 64, 40),   # 5 vectors of 8: tiles of one vector on AVX2
])
def test_value_widths_match_torch(bits, lq, s, e, ev):
    # The output rows O = P V are tiled along the value's features, in vectors of the widest
    # power of two lanes that divides them, or one vector of all of them where only narrower
    # ones do and they fit a register (3 or 7 features: lane by lane, 7 FMAs took one's place).
    g = torch.Generator().manual_seed(ev)
    q, k = torch.randn(2, 3, lq, e, generator=g), torch.randn(2, 3, s, e, generator=g)
    v, m = torch.randn(2, 3, s, ev, generator=g), torch.randn(1, 3, lq, s, generator=g)
    args = [ir.var(n, shape=tuple(x.shape), dtype="float32")
            for n, x in zip(("q", "k", "v", "mask"), (q, k, v, m))]
    lib = ember.build(ir.Function(args, op.nn.attention(*args[:3], mask=args[3])),
                      target=f"llvm -vector-bits={bits}")
    got = run_lib(lib, (q, k, v, m))[0]
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=m).numpy()
    np.testing.assert_allclose(got, want, **TOL)
    if ev in (3, 7):
        assert f"in [0, {ev}) vectorized" in lib.get_source("loop")


def padding_mask(b, lq, s, kind, seed):
    """A BERT-style key-padding mask [b, 1, 1, s] (the last quarter dropped) or a bool
    [lq, s] one with random drops (every row keeps key 0)."""
    g = torch.Generator().manual_seed(seed)
    if kind == "pad":
        m = torch.zeros(b, 1, 1, s)
        m[..., s - s // 4:] = -10000.0
        return m
    keep = torch.rand(lq, s, generator=g) > 0.3
    keep[:, 0] = True
    return keep


# Sizes no tile, vector or block divides (1, 7, 17, 127 queries and keys), the BERT ones,
# head dims 32, 64 and 80, with and without masks; against torch's SDPA at rtol 1e-4,
# atol 1e-5 (sums in another order; exp within a few ulp), at 1 and 2 threads. The suite
# also runs with EMBER_VECTOR_BITS=512 (the AVX-512 tiles).
@pytest.mark.parametrize("lq,s,d,mask,threads", [
    (1, 1, 64, None, 1),
    (1, 384, 64, "pad", 1),
    (7, 7, 32, "bool", 1),
    (17, 17, 80, "pad", 2),
    (7, 127, 80, None, 1),
    (127, 127, 64, "pad", 2),
    (128, 128, 80, "bool", 1),
    (384, 384, 64, "pad", 2),
    (512, 512, 32, None, 1),
    (129, 17, 64, "bool", 1),
])
def test_awkward_sizes_match_torch_sdpa(lq, s, d, mask, threads):
    q, k, v = qkv(1, 3, lq, s, d, seed=lq * 1000 + s)
    m = padding_mask(1, lq, s, mask, seed=s) if mask else None
    inputs = (q, k, v) if m is None else (q, k, v, m)
    args = [ir.var(n, shape=tuple(x.shape), dtype=str(x.numpy().dtype))
            for n, x in zip(("q", "k", "v", "mask"), inputs)]
    out = op.nn.attention(*args[:3], mask=args[3] if m is not None else None, name="attn")
    lib = ember.build(ir.Function(args, out), target="llvm")
    before = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        got = run_lib(lib, inputs)[0]
    finally:
        ember.set_num_threads(before)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=m).numpy()
    np.testing.assert_allclose(got, want, **TOL)
