#pragma once
/// Attention as one kernel: the RecognizeAttention pass and nn.attention's CPU lowering.
#include <string>

#include "ember/ir/graph.h"
#include "ember/ir/loop.h"

namespace ember::passes {

/// RecognizeAttention (opt level 1): rewrites scaled dot-product attention written as ops,
///   batch_matmul(q, transpose(k)) -> multiply or divide by a scalar constant
///   -> [where(keep, ., -inf) for a bool or causal mask] -> [add a float mask]
///   -> softmax(last axis) -> batch_matmul(., v)
/// (with the reshapes that flatten batch dimensions for batch_matmul, as the PyTorch
/// frontend emits them) into one nn.attention call carrying
/// attrs["fusion_pattern"] = "attention (online softmax)" and the source names of the ops it
/// replaces. A tril constant mask becomes causal=1. It leaves the graph alone when an
/// intermediate (scores, probabilities) has another use, the mask fill is not -inf, or the
/// shapes do not line up.
ir::Function recognize_attention(const ir::Function& f);

/// nn.attention's kernel (registered in ir::custom_lowerings()); `group` must hold exactly
/// one nn.attention call. On the CPU: for each (batch, block of query rows), in parallel, a
/// loop over key blocks computes a small score tile, keeps a running row max and row sum,
/// rescales the output accumulator by exp(m_old - m_new) and adds P V_blk; the rows are
/// divided by their sum at the end. No buffer holds more than one score tile. With `gpu`,
/// lower_attention_rows bound to blocks and threads.
ir::PrimFunc lower_attention(const ir::Function& group, const std::string& func_name,
                             int vector_bits, bool gpu);

/// The one-row-per-thread form: each (batch, query row) streams over the keys one at a time
/// with the same online-softmax update. `block_kind` and `thread_kind` are the two outer
/// loops' kinds: GpuBlockX/GpuThreadX on a GPU, Parallel/Serial to run it on the CPU.
ir::PrimFunc lower_attention_rows(const ir::Function& group, const std::string& func_name,
                                  ir::ForKind block_kind, ir::ForKind thread_kind);

}  // namespace ember::passes
