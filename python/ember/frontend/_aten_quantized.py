"""PT2E-quantized graphs (issue 45): torchao's prepare_pt2e / convert_pt2e leave fp32 ops
between quantized_decomposed quantize / dequantize nodes. They convert as PyTorch's
reference computes them: a quantize is an 8-bit tensor (the clamped integers, cast), a
dequantize its float32 value, so the model matches the converted module run in eager and
the Q/DQ arithmetic is elementwise, fused into the neighbouring kernels. A dense or conv
between them becomes an int8 product where the CPU has VNNI (the Int8Products pass);
everything else computes in float32. Frozen int8 weights stay int8 constants.
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
    (round half to even), in the quantized dtype (uint8 or int8: exact after the clamp)."""
    op = "quantize_per_tensor"
    inv_scale = 1.0 / _scalar(a["scale"], "scale", op)
    q = cx.emit("round", [binary(cx, "multiply", a["input"], inv_scale)])
    q = binary(cx, "add", q, _scalar(a["zero_point"], "zero point", op))
    q = cx.emit("clip", [q], a_min=float(a["quant_min"]), a_max=float(a["quant_max"]))
    dtype = str(a["dtype"]).replace("torch.", "")
    return cast(cx, q, dtype) if dtype in ("uint8", "int8") else q


@converts(_NAMESPACE + "dequantize_per_tensor")
def _dequantize_per_tensor(cx, a):
    """(q - zero_point) * scale in float32, torch's reference."""
    op = "dequantize_per_tensor"
    out_dtype = a["out_dtype"] if a.has("out_dtype") else None
    if out_dtype not in (None, torch.float32):
        raise EmberError(f"{op}: out_dtype {out_dtype} is not supported (float32 only)")
    q = binary(cx, "subtract", cast(cx, a["input"], "float32"),
               _scalar(a["zero_point"], "zero point", op))
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
