"""Fusion-catalog cases for attention as one kernel (run by test_catalog.py).

softmax(q k^T * scale + mask) v becomes one nn.attention kernel (online softmax over key
blocks: the L x S scores never reach memory), from F.scaled_dot_product_attention, from
attention written by hand, and inside nn.MultiheadAttention. Negative cases keep their ops.
Inputs include large scores (exp would overflow without the running max), -0.0 and masks
that leave one key per row (the edge of the mask); no row is fully masked, where PyTorch's
SDPA (0) and softmax (NaN) disagree.
"""
import math

import torch
import torch.nn.functional as F

from catalog_real import BERT_HEADS, BERT_TOKENS, real

PATTERN = "attention (online softmax)"


def _qkv(b=2, h=2, lq=24, s=40, d=16, dv=16, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, lq, d, generator=g) * scale
    k = torch.randn(b, h, s, d, generator=g)
    v = torch.randn(b, h, s, dv, generator=g)
    q[0, 0, 0, :4] = -0.0
    k[0, 0, 1, :] = -0.0
    return q, k, v


class SDPA(torch.nn.Module):
    def __init__(self, causal=False, scale=None):
        super().__init__()
        self.causal, self.scale = causal, scale

    def forward(self, q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal,
                                              scale=self.scale)


class HandWritten(torch.nn.Module):
    """softmax(q @ k^T / sqrt(d)), with masked_fill(~keep, fill); optionally returns the
    probabilities too."""

    def __init__(self, fill=float("-inf"), return_probs=False):
        super().__init__()
        self.fill, self.return_probs = fill, return_probs

    def forward(self, q, k, v, keep=None):
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if keep is not None:
            s = s.masked_fill(~keep, self.fill)
        p = torch.softmax(s, dim=-1)
        out = p @ v
        return (out, p) if self.return_probs else out


class MaskBeforeScale(torch.nn.Module):
    def forward(self, q, k, v, mask):
        return torch.softmax((q @ k.transpose(-2, -1) + mask) * 0.25, dim=-1) @ v


class MHA(torch.nn.Module):
    def __init__(self, need_weights=False):
        super().__init__()
        torch.manual_seed(0)
        self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)
        self.need_weights = need_weights

    def forward(self, x, pad=None):
        out, w = self.attn(x, x, x, key_padding_mask=pad, need_weights=self.need_weights)
        return (out, w) if self.need_weights else out


def _keep_mask(lq, s, seed=1):
    g = torch.Generator().manual_seed(seed)
    keep = torch.rand(lq, s, generator=g) > 0.5
    keep[:, 0] = True       # no row fully masked
    keep[3, 1:] = False     # a row that keeps exactly one key
    return keep


def _float_mask(lq, s, seed=2):
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(lq, s, generator=g) * 3
    m[2, 5:] = float("-inf")   # -inf entries, one key left at the row's start
    m[4, :] = -1e4             # a large constant offset (softmax is shift invariant)
    m[5, 7] = -0.0
    return m


def _padding(b, s):
    pad = torch.zeros(b, s, dtype=torch.bool)
    pad[0, s - 5:] = True
    pad[1, 1::2] = True
    return pad


CASES = [
    {"name": "sdpa", "model": lambda: SDPA().eval(), "inputs": lambda: _qkv(),
     "kernels": 1, "pattern": PATTERN, "negative": False,
     "bench_inputs": lambda: _qkv(2, 4, 256, 256, 64, 64)},
    {"name": "sdpa_causal_scale", "model": lambda: SDPA(causal=True, scale=0.3).eval(),
     "inputs": lambda: _qkv(lq=40, s=40, seed=3), "kernels": 1, "pattern": PATTERN,
     "negative": False, "bench_inputs": lambda: _qkv(2, 4, 256, 256, 64, 64)},
    {"name": "sdpa_large_scores_bool_mask", "model": lambda: SDPA().eval(),
     # Scores near 1e3: exp overflows unless the (running) max is subtracted.
     "inputs": lambda: _qkv(seed=4, scale=60.0) + (_keep_mask(24, 40),),
     "kernels": 1, "pattern": PATTERN, "negative": False, "rtol": 1e-4, "atol": 1e-4},
    {"name": "sdpa_float_mask_odd_sizes", "model": lambda: SDPA().eval(),
     "inputs": lambda: _qkv(1, 3, 17, 70, 5, 7, seed=5) + (_float_mask(17, 70),),
     "kernels": 1, "pattern": PATTERN, "negative": False},
    {"name": "hand_written_masked_fill", "model": lambda: HandWritten().eval(),
     "inputs": lambda: _qkv(seed=6) + (_keep_mask(24, 40, seed=7),),
     "kernels": 1, "pattern": PATTERN, "negative": False},
    {"name": "mha_key_padding", "model": lambda: MHA().eval(),
     "inputs": lambda: (torch.randn(2, 12, 32, generator=torch.Generator().manual_seed(8)),
                        _padding(2, 12)),
     # 11 kernels, as at BERT size: each head's strided_slice joins its reshape -> transpose
     # -> reshape. The lanes' index division costs less than the kernel's transfers, which
     # the prefetcher overlaps with it (the FuseOps cost rule, fusion_cost.h).
     "kernels": 11, "pattern": PATTERN, "negative": False},
    # Negative: the probabilities are an output too, so the scores must be stored.
    {"name": "neg_probabilities_returned", "model": lambda: HandWritten(return_probs=True).eval(),
     "inputs": lambda: _qkv(seed=9), "kernels": 5, "pattern": None, "negative": True,
     "absent": PATTERN},
    # Negative: masked_fill with a finite value is not a -inf mask.
    {"name": "neg_finite_fill", "model": lambda: HandWritten(fill=-1e9).eval(),
     "inputs": lambda: _qkv(seed=10) + (_keep_mask(24, 40, seed=11),),
     "kernels": 5, "pattern": None, "negative": True, "absent": PATTERN},
    # Negative: a float mask added before the scale is scaled with the scores.
    {"name": "neg_mask_before_scale", "model": lambda: MaskBeforeScale().eval(),
     "inputs": lambda: _qkv(seed=12) + (_float_mask(24, 40),),
     "kernels": 5, "pattern": None, "negative": True, "absent": PATTERN},
]

# Real sizes (benchmarks/catalog.py --size real): BERT-base, 12 heads of 64 over 128 tokens.
_QKV = (BERT_HEADS,) * 3
_MASK = (128, 128)
REAL = {
    "sdpa": real(*_QKV), "sdpa_causal_scale": real(*_QKV),
    "sdpa_large_scores_bool_mask": real(*_QKV, _MASK), "sdpa_float_mask_odd_sizes": real(*_QKV, _MASK),
    "hand_written_masked_fill": real(*_QKV, _MASK),
    "mha_key_padding": real((1,) + BERT_TOKENS, (1, 128), dims={32: 768, 4: 12}),
    "neg_probabilities_returned": real(*_QKV), "neg_finite_fill": real(*_QKV, _MASK),
    "neg_mask_before_scale": real(*_QKV, _MASK),
}
for _case in CASES:
    _case["real"] = REAL[_case["name"]]
