#pragma once
#include <string>

#include "ember/ir/graph.h"
#include "ember/ir/loop.h"

namespace ember::passes {

/// RecognizePatterns (opt level 1): finds the fusion catalog's composite patterns written as
/// elementwise pieces and replaces each with one op, marked with attrs["fusion_pattern"] and
/// named after every node it replaces (joined by " + "):
///  - "GELU(erf) recognition": 0.5 * x * (1 + erf(x / sqrt(2))) in any arrangement of the
///    product (x * 0.5 * (...), (...) * x * 0.5, x / sqrt(2) or x * (1 / sqrt(2)), 1 + erf
///    or erf + 1) -> nn.gelu(x).
///  - "GELU(tanh) recognition": 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
///    with x^3 as power(x, 3) or a product of x's -> nn.gelu(x, approximate="tanh").
///    Constants match within a relative 1e-4 (written-out digits such as 0.7071 match).
///  - "L1Norm recognition": sum(abs(x)) -> l1_norm; "SumSquares recognition": sum(x * x) or
///    sum(power(x, 2)) -> sum_squares; "L2Norm recognition": sqrt of that -> l2_norm;
///    "LogSum recognition": log(sum(x)) -> log_sum; "LogSumExp recognition":
///    log(sum(exp(x))), and the stable form log(sum(exp(x - m))) + m with m = max(x) over the
///    same axes (keepdims, optionally guarded as torch.logsumexp does: where(|m| == inf, 0,
///    m)) -> log_sum_exp (computed stably; the naive form gives the same where it does not
///    overflow). Float tensors only; axis and keepdims are kept.
///  - "softmax -> log": log(nn.softmax(x, axis)) -> nn.log_softmax(x, axis).
///  - "softmax->topk": topk(nn.softmax(x, axis=a), axis=a) -> topk(x, softmax=1) (and
///    "log_softmax->topk": the same with nn.log_softmax, log_softmax=1) when the softmax has
///    no other use and is not a model output: no softmax tensor is materialised.
///  - "8-bit weight -> dense": nn.dense(x, cast(W)), nn.matmul(x, cast(transpose(W))) and
///    nn.matmul(x, cast(V)) with W [N, K] / V [K, N] an int8 or uint8 constant and x float
///    (torchao's weight-only int8 layers) -> nn.dense(x, W) with the 8-bit weight, which the
///    kernel converts as it reads it (FoldConstant would have stored it widened).
/// Shapes and dtypes must come out the same; a near miss (another constant, an extra
/// factor, a different axis) is left alone.
ir::Function recognize_patterns(const ir::Function& f);

}  // namespace ember::passes
