#pragma once
#include "ember/ir/graph.h"
#include "ember/passes/machine_model.h"

namespace ember::passes {

/// AlterOpLayout (opt level 3, CPU targets only): puts tensors into the layouts the CPU
/// schedules read with contiguous vector loads (TVM's AlterOpLayout, oneDNN's nChw8c).
///  * nn.dense whose weight [N, K] is a constant becomes nn.dense_packed over
///    nn.pack_dense_weight(weight) [N / b, K, b], b the vector lanes that divide N.
///  * nn.grouped_matmul whose weight [G, K, N] is a constant gets it packed in panels
///    [G, N / b, K, b] (reshape + transpose, attr weight_block=b), b the kernel's column
///    tile (4 vectors with AVX-512, 2 with AVX2, fewer where N needs): each k row of a panel
///    is then contiguous with the next, where the plain rows are N apart, each in its own
///    page. An N that takes no whole vectors keeps the plain layout.
///  * nn.conv2d (groups 1 or depthwise, constant weight) whose channels channel_block_for
///    gives a block c (two vectors, one, or half of one, chosen per tensor) becomes
///    nn.conv2d_blocked on NCHW[c]c activations [N, ceil(C/c), H, W, c] with the weight
///    packed by nn.pack_conv_weight. Channels the block does not divide are padded: zero
///    in to_blocked and in the packed weight, dropped by from_blocked (attr channels). An
///    RGB stem reads its 3 channels as one block; a conv whose channels get no block keeps
///    NCHW.
///  * nn.conv2d_u8s8 (int8 products, Int8Products) of pack_bytes4(Q, axis=1) and
///    nn.conv2d_bf16 (BF16Products) of pack_bf16_pairs(X, axis=1) by constant weight words
///    become nn.conv2d_u8s8_blocked / nn.conv2d_bf16_blocked wherever blocks_word_conv
///    holds: Q (X) blocked in the 32-bit lanes' channel block and read a word at a time, the
///    weight words packed by nn.pack_conv_weight; the epilogue between two such convs (the
///    next quantize, the bfloat16 rounding) stays blocked, so no packing kernel runs.
///    Its depthwise form (uint8 bytes by one int8 weight per channel and tap) runs blocked in
///    the int32 block of its channels, its weight packed as a float depthwise conv's and
///    widened to float32.
///  * Elementwise ops keep the blocked layout: op(from_blocked(a), b) becomes
///    from_blocked(op(a, b')), where b' is b blocked (a residual of the same shape, a
///    per-channel constant [C, 1, 1]) or b itself (a scalar). A padded value stays blocked
///    only through ops that keep its pad channels finite (the next conv multiplies them by
///    zero). Max and avg pooling keep the blocked layout. Every other op reads the plain
///    layout through from_blocked, so a blocked value is converted back only where an op
///    needs NCHW (flatten, concat, softmax, the outputs), and to_blocked once per tensor and
///    block.
/// The FoldConstant step after this pass packs the weights and constants once at build time
/// (with FoldConstant off, the packing runs per call and the results are the same). Calls
/// keep their names; the fusion report shows the blocked or packed op as a kernel's anchor.
ir::Function alter_op_layout(const ir::Function& f, const MachineModel& machine);

/// Whether AlterOpLayout runs a conv over words of `per_word` channels (4 for an int8 conv,
/// 2 for a bfloat16 one) of `channels` input and `out_channels` output channels blocked:
/// where channel_block_for gives both 32-bit lanes' blocks, the input's in whole words (an
/// RGB stem's 3 channels as one block padded to whole words; `depthwise`: an int8 conv of one
/// group per channel, over the bytes themselves: any block).
bool blocks_word_conv(const MachineModel& machine, int64_t channels, int64_t out_channels,
                      int64_t per_word, bool depthwise = false);

}  // namespace ember::passes
