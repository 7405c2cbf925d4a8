#pragma once
// What the GPU schedule's templates share (gpu_schedule.cc, gpu_tensor_core.cc): the
// questions about a fused group's stages that every template asks first.
#include <utility>
#include <vector>

#include "ember/ir/loop.h"
#include "ember/passes/schedule.h"

namespace ember::passes::gpu {

constexpr int64_t kMaxSharedBytes = 48 * 1024;  // static shared memory of one block
constexpr int64_t kMinBlocks = 128;             // blocks the tiled templates aim for

bool is_output(const Schedule& sch, const Stage& s);
/// threadIdx.x, .y or .z.
bool is_thread_kind(ir::ForKind k);

/// A mutator that knows the value of every enclosing LetStmt (each resolved through the
/// ones outside it) in `lets_`, for passes that rewrite indices written through lets.
class LetScopeMutator : public ir::PrimMutator {
 protected:
  ir::Stmt visit_let_stmt(const ir::Stmt& s, const ir::LetStmtNode* op) override;
  ir::VarMap lets_;
};
/// Root reduction stages that `body` reads directly.
std::vector<Stage*> reductions_read(const Schedule& sch, const ir::PrimExpr& body);
/// Inlines elementwise intermediates and caches a reduction output; returns the single
/// output's stage, or null for a kernel with several outputs.
Stage* prepare(Schedule& sch);
/// Fuses `axes`, splits by `threads` and binds the inner part to threadIdx.x.
void bind_strided(Stage& s, const std::vector<IterVar>& axes, int64_t threads);
/// The two operands of a sum of products `a * b` of different tensors, or null.
std::pair<const ir::ProducerLoadNode*, const ir::ProducerLoadNode*> product_operands(
    const Stage& r);
/// Does `o` read the anchor `r` at its own index (0 on a dimension of size 1)?
bool reads_at_own_index(const ir::PrimExpr& body, const Stage& o, const Stage& r);

/// The tensor-core template (gpu_tensor_core.cc): a GEMM or convolution anchor as
/// warp-level mma.sync tiles of `precision`, its reduction staged `max_chunk` elements of
/// its outermost axis at a time, its epilogue from each lane's accumulators, in blocks no
/// larger than the `first_tiling`-th. False when it does not apply (precision Highest,
/// sizes under one tile, a chunk that does not divide).
bool schedule_tensor_core(Schedule& sch, ir::MmaPrecision precision, int64_t max_chunk,
                          size_t first_tiling);

}  // namespace ember::passes::gpu
