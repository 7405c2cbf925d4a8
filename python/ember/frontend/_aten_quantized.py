"""PT2E-quantized graphs (issue 45): torchao's prepare_pt2e / convert_pt2e leave fp32 ops
between quantized_decomposed quantize / dequantize nodes. This first step computes those
nodes as PyTorch's reference does, in float32: a quantized activation is a float32 tensor
holding the integers (exact up to 2^24), so the model runs and matches the converted module
run in eager; the Q/DQ arithmetic is elementwise and fuses into the neighbouring kernels.
Int8 kernels (u8 x s8 -> s32) are not built yet. Constant weights (the frozen int8 tensors
and their dequantize_per_channel) are computed by PyTorch at import, as every constant is.
Registered into _aten_registry.CONVERTERS on import."""
import torch

from .._ember import EmberError
from ._aten_registry import binary, cast, converts, reshape

_NAMESPACE = "quantized_decomposed::"


def _scalar(value, what, op):
    if hasattr(value, "shape"):  # the .tensor overloads: a scale or zero point computed
        raise EmberError(f"{op}: a {what} computed at run time is not supported; quantize "
                         "with static scales (torchao's default X86InductorQuantizer config)")
    return float(value)


@converts(_NAMESPACE + "quantize_per_tensor")
def _quantize_per_tensor(cx, a):
    """clamp(round(x * (1 / scale)) + zero_point, quant_min, quant_max), torch's reference
    (round half to even), as float32 integers."""
    op = "quantize_per_tensor"
    inv_scale = 1.0 / _scalar(a["scale"], "scale", op)
    q = cx.emit("round", [binary(cx, "multiply", a["input"], inv_scale)])
    q = binary(cx, "add", q, _scalar(a["zero_point"], "zero point", op))
    return cx.emit("clip", [q], a_min=float(a["quant_min"]), a_max=float(a["quant_max"]))


@converts(_NAMESPACE + "dequantize_per_tensor")
def _dequantize_per_tensor(cx, a):
    """(q - zero_point) * scale in float32, torch's reference."""
    op = "dequantize_per_tensor"
    out_dtype = a["out_dtype"] if a.has("out_dtype") else None
    if out_dtype not in (None, torch.float32):
        raise EmberError(f"{op}: out_dtype {out_dtype} is not supported (float32 only)")
    q = binary(cx, "subtract", a["input"], _scalar(a["zero_point"], "zero point", op))
    return binary(cx, "multiply", q, _scalar(a["scale"], "scale", op))


@converts(_NAMESPACE + "dequantize_per_channel")
def _dequantize_per_channel(cx, a):
    """(q - zero_points[c]) * scales[c] along `axis`, in float32. A frozen weight's (every
    input constant) is computed by PyTorch at import instead."""
    q, axis = cast(cx, a["input"], "float32"), int(a["axis"])
    rank = len(q.shape)
    axis = axis + rank if axis < 0 else axis
    shape = [1] * rank
    shape[axis] = q.shape[axis]

    def along(v):  # a per-channel vector shaped to broadcast along `axis`
        return reshape(cx, cast(cx, v, "float32"), shape)

    if a["zero_points"] is not None:
        q = binary(cx, "subtract", q, along(a["zero_points"]))
    return binary(cx, "multiply", q, along(a["scales"]))
