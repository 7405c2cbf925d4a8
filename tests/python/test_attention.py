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
    # No kernel allocates a buffer as large as the scores, and no executor value is one. The
    # kernel's one scratch beside its tiles is K transposed: K's size (S is whole key blocks).
    allocs = allocations(fused)
    assert allocs, fused.get_source("loop")[:2000]
    k_numel = (inputs[1] if len(inputs) > 1 else inputs[0]).numel()
    assert all(size < n * n or (name == "keys_t" and size == k_numel) for name, size in allocs), \
        allocs
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
