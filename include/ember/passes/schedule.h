#pragma once
/// Schedules: how a set of tensor expressions becomes loops (TVM-style stages). Each
/// compute tensor has a Stage whose loop axes can be split, fused, reordered and annotated,
/// and which can be inlined into its consumers or computed inside a consumer's loop.
/// `lower_schedule` turns a schedule into one loop-IR function.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ember/ir/tensor_expr.h"
#include "ember/passes/machine_model.h"
#include "ember/passes/schedule_knobs.h"

namespace ember::passes {

using ir::IterVar;
using ir::Tensor;

class Schedule;

/// Where a stage's loop nest is emitted.
enum class AttachKind { Root, Inline, At };

/// How a split whose factor does not divide the extent treats the last, partial tile.
enum class SplitTail {
  Guard,  ///< the last tile runs past the extent under a guard
  /// The last tile starts early, at extent - factor, and recomputes a few values of the
  /// tile before it: no guard, so a register tile stays unconditional. Only for data
  /// (not reduction) axes, whose values may be computed twice with the same result.
  Shift,
  /// The last tile runs past the extent into padding: the stage's local buffer is rounded
  /// up to whole tiles, and the values past the extent read their inputs at the last valid
  /// index. No guard, and no value is computed twice into the same place, so a reduction
  /// may accumulate into it in several passes (a GEMM blocked along k). Only for data axes
  /// of a stage computed at another stage's loop.
  Pad,
};

/// A loop relation recorded by split or fuse, replayed in order by lowering.
/// Split: parent -> (outer, inner) with inner extent `factor`. Fuse: (outer, inner) -> fused.
struct IterRelation {
  enum Kind { Split, Fuse } kind;
  IterVar parent, outer, inner, fused;
  int64_t factor = 0;
  SplitTail tail = SplitTail::Guard;
};

class Stage {
 public:
  Stage(Tensor tensor, Schedule* schedule);
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  const Tensor& tensor() const { return tensor_; }
  /// The spatial axes then the reduction axes of the compute.
  const std::vector<IterVar>& root_axes() const { return root_axes_; }
  const std::vector<IterVar>& axes() const { return tensor_->axes; }
  std::vector<IterVar> reduce_axes() const;
  /// Current loop order, outermost first.
  const std::vector<IterVar>& leaf_axes() const { return leaf_; }

  /// Splits `axis` into (outer, inner) with inner extent `factor`; a non-dividing factor
  /// adds a guard, or shifts the last tile back (see SplitTail).
  std::pair<IterVar, IterVar> split(const IterVar& axis, int64_t factor,
                                    SplitTail tail = SplitTail::Guard);
  /// Fuses two adjacent leaf axes (outer directly above inner) into one.
  IterVar fuse(const IterVar& outer, const IterVar& inner);
  /// Fuses a run of adjacent leaf axes, outermost first; one axis is returned as is.
  IterVar fuse(const std::vector<IterVar>& axes);
  /// Puts the given leaf axes in this relative order (the others stay where they are).
  void reorder(const std::vector<IterVar>& order);
  /// split both axes, then order (x.outer, y.outer, x.inner, y.inner).
  std::vector<IterVar> tile(const IterVar& x, const IterVar& y, int64_t fx, int64_t fy);
  void vectorize(const IterVar& axis) { annotate(axis, ir::ForKind::Vectorized); }
  void parallel(const IterVar& axis) { annotate(axis, ir::ForKind::Parallel); }
  void unroll(const IterVar& axis) { annotate(axis, ir::ForKind::Unrolled); }
  /// Marks a reduction chunk loop whose body is a lane's share of warp mma tiles
  /// (ir::ForKind::WarpMma; the GPU tensor-core template).
  void warp_mma(const IterVar& axis) { annotate(axis, ir::ForKind::WarpMma); }
  /// Binds `axis` to a GPU block or thread index (ForKind::GpuBlockX ... GpuThreadZ): the
  /// loop runs as that many blocks or threads. A tag is bound at most once per stage.
  void bind(const IterVar& axis, ir::ForKind thread_tag);
  /// Computes this stage inside `parent`'s loop `axis`, over the region that the parent
  /// reads there; its storage becomes a local buffer of that region's size.
  void compute_at(Stage& parent, const IterVar& axis);
  /// Substitutes this stage's expression into its consumers; it gets no loop nest.
  void compute_inline();
  /// At the start of each iteration of the leaf loop `at`, prefetches its share (1 / the
  /// extent of `at`) of the `bytes` of `input` that follow the first element this stage reads
  /// in the next iteration of the outer leaf loop `ahead`: the next k-chunk of a packed
  /// weight panel (a contiguous block), on its way from memory while this chunk computes.
  /// A hint: a wrong address costs time, never a fault or a wrong result.
  void prefetch(const IterVar& at, const Tensor& input, const IterVar& ahead, int64_t bytes);
  struct Prefetch {
    IterVar at, ahead;
    Tensor input;
    int64_t bytes;
  };
  const std::vector<Prefetch>& prefetches() const { return prefetches_; }
  /// Allocates `pad` more elements along this stage's innermost axis longer than 1 than its
  /// region needs, when the outermost axis's stride would otherwise be even: rows of a
  /// shared-memory tile then start in different banks, so threads reading down a column do
  /// not all wait on one bank (TVM's storage_align).
  void pad_rows(int64_t pad);
  int64_t row_pad() const { return row_pad_; }
  /// On the GPU: this stage, computed at block level by thread loops that each own the same
  /// elements (a register tile strided by the threads, its epilogue split the same way),
  /// keeps each thread's elements in that thread's registers (BufferScope::PerThread)
  /// rather than in a block-shared tile.
  void keep_per_thread() { per_thread_ = true; }
  bool per_thread() const { return per_thread_; }

  AttachKind attach_kind() const { return attach_; }
  const Stage* attach_stage() const { return attach_stage_; }
  const IterVar& attach_axis() const { return attach_axis_; }
  const std::vector<IterRelation>& relations() const { return relations_; }
  ir::ForKind kind_of(const IterVar& axis) const;
  /// The compute expression (cache_write replaces the original's with a copy).
  const ir::PrimExpr& body() const { return body_; }
  bool is_local() const { return local_; }

 private:
  friend class Schedule;
  void annotate(const IterVar& axis, ir::ForKind kind);
  size_t leaf_pos(const IterVar& axis, const char* what) const;

  Tensor tensor_;
  Schedule* schedule_;
  ir::PrimExpr body_;
  std::vector<IterVar> root_axes_, leaf_;
  std::vector<IterRelation> relations_;
  std::map<const ir::IterVarNode*, ir::ForKind> kinds_;
  AttachKind attach_ = AttachKind::Root;
  const Stage* attach_stage_ = nullptr;
  IterVar attach_axis_;
  bool local_ = false;
  std::vector<Prefetch> prefetches_;
  int64_t row_pad_ = 0;
  bool per_thread_ = false;
};

/// Extents known only when the kernel runs (dynamic shapes). Every static extent of the
/// tensor expression stays the largest one the kernel serves, which sizes its buffers and
/// its schedule's tiles; where the run may be smaller, the run's extent is an expression of
/// `symbols`, variables the kernel reads from its shape argument (lower_schedule). A kernel
/// input or output is stored compactly at the run's shape (its row strides are run-time
/// values); buffers inside the kernel keep their static shape. Empty: every extent static.
struct LiveExtents {
  struct Symbol {
    ir::PrimVar var;
    int64_t min, max;  // its range; `max` is the static extent it stands for
  };
  std::vector<Symbol> symbols;
  /// The run's extent of a root axis of a stage (a data or a reduction axis).
  std::map<const ir::IterVarNode*, ir::PrimExpr> axes;
  /// The run's shape of a kernel input or output (a null entry: that dimension is static).
  std::map<const ir::TensorNode*, std::vector<ir::PrimExpr>> dims;
  bool empty() const { return symbols.empty(); }
};

/// The stages of every compute tensor reachable from `outputs`.
class Schedule {
 public:
  explicit Schedule(std::vector<Tensor> outputs);
  Stage& operator[](const Tensor& t);
  const std::vector<Tensor>& outputs() const { return outputs_; }
  /// Stages in producer-first order (cache stages included).
  const std::vector<std::unique_ptr<Stage>>& stages() const { return stages_; }
  /// TVM's cache_write: a new local stage computes `t`'s expression and `t` becomes a copy
  /// of it, so `t`'s stage can be the tile loop that the cache is computed at. Returns the
  /// cache tensor.
  Tensor cache_write(const Tensor& t, const std::string& suffix = "local");
  /// TVM's cache_read: a new stage copies `t` and the `readers` read the copy instead, so
  /// the copy can be computed at a reader's loop (an operand tile staged in GPU shared
  /// memory). Returns the copy.
  Tensor cache_read(const Tensor& t, const std::vector<Tensor>& readers,
                    const std::string& suffix = "shared");
  /// A reduction computed by `factor` cooperating GPU threads (`factor` a power of two):
  /// a partial stage [t's axes..., factor] in which element f reduces the flattened
  /// reduction indices f, f + factor, f + 2 * factor, ..., then log2(factor) tree levels
  /// that each halve the last axis; `t` becomes a read of the last level (no longer a
  /// reduction, so it can be inlined). Returns the partial stage, then the levels.
  std::vector<Tensor> tree_reduce(const Tensor& t, int64_t factor);
  /// TVM's rfactor on the CPU: the innermost reduction axis k of `t` (which `factor`
  /// divides) runs as k = ko * factor + f, and a new stage `t.partial` [t's axes with f
  /// inserted before the innermost one] reduces over ko (and the other reduction axes) for
  /// each f: `factor` independent partial sums, each reading every factor-th k. `t` becomes
  /// their sum, partial 0 first, which is no longer a reduction (so it can be inlined).
  /// Returns the partial tensor. With `lanes`, f is the partial's innermost axis instead
  /// (f then walks k contiguously: a dot product's vector lanes), and `t` stays a reduction,
  /// the sum over f.
  Tensor rfactor(const Tensor& t, int64_t factor, bool lanes = false);
  /// The GPU's split-K inside a block: the outermost reduction axis k of `t` (which
  /// `groups` x `chunk` divides) runs as k = (ko * groups + g) * chunk + ki, and a new stage
  /// `t.partial` [g, t's axes...] reduces over ko, ki (and the other reduction axes) for
  /// each g, so that one step of ko reads `groups` x `chunk` neighbouring k, a chunk per
  /// group. `t` becomes the sum of the groups' partials (no longer a reduction). Returns
  /// the partial tensor.
  Tensor split_reduction(const Tensor& t, int64_t groups, int64_t chunk);
  bool has_stage(const Tensor& t) const;
  /// The stage's expression with every inlined stage substituted into it.
  ir::PrimExpr expanded_body(const Stage& s) const;
  /// The name of the template that scheduled the group ("conv.chunked", "gemv.dot_rows",
  /// "tiled"...), set by the schedule that applies one; the fusion report, profile() and
  /// the model file show it.
  void set_template(std::string name) { template_ = std::move(name); }
  const std::string& template_name() const { return template_; }
  /// The extents known only at run time (dynamic shapes), read by lower_schedule.
  LiveExtents& live() { return live_; }
  const LiveExtents& live() const { return live_; }
  /// The run's extent of `s`'s root axis `a` (null: static): live().axes's where it has
  /// one; a data axis of a tensor with a run-time shape (live().dims) takes its dimension;
  /// any other axis that of the run-time dimension of a tensor that `s` indexes by `a`
  /// alone. One that indexes a run-time dimension through an expression is an ember::Error
  /// (its run's extent cannot be told).
  ir::PrimExpr run_extent(const Stage& s, const IterVar& a) const;

 private:
  void insert_before(const Stage& s, std::vector<std::unique_ptr<Stage>> stages);
  const ir::ReduceNode* sum_to_factor(const Tensor& t, const char* what);
  Tensor partial_sums(Stage& s, const IterVar& f, size_t f_pos, const ir::VarMap& k_map,
                      const std::vector<IterVar>& reduce_axes);

  std::vector<Tensor> outputs_;
  std::vector<std::unique_ptr<Stage>> stages_;
  std::string template_;
  LiveExtents live_;
};

/// The default CPU schedule for a group of stages whose outputs are `sch.outputs()`:
/// elementwise and injective intermediates are inlined; each output is tiled so that its
/// innermost axis runs as vectors of `vector_bits` and its outer loops run in parallel; a
/// reduction (the anchor: conv, dense, pooling, ...) read by an output is computed as a
/// local tile at the output's tile loop, so the epilogue is applied while the tile is hot.
/// `knobs` override the schedule's choices where set (tuning, schedule_knobs.h); `space`,
/// when given, receives the kernel's knob ranges and the values used. Every tile size comes
/// from `machine` (the target CPU's model, or a pinned one).
void apply_default_schedule(Schedule& sch, const MachineModel& machine,
                            const ScheduleKnobs& knobs = {}, KnobSpace* space = nullptr);

/// The default GPU schedule (src/passes/schedule/gpu_schedule.cc): where `precision` allows
/// tensor cores, a GEMM anchor first tries warp-level mma.sync tiles (gpu_tensor_core.cc);
/// otherwise one of three templates:
/// conv/dense/matmul tiled per block through shared memory with a register tile per thread;
/// row reductions (softmax, layer norm, sum, ...) as one block per row with a tree in shared
/// memory (tree_reduce); otherwise one thread per output with its reductions in registers.
/// Within a block, loops bound to threads run as phases (see lower_gpu_phases); the fused
/// epilogue is applied before the global store.
void apply_gpu_schedule(Schedule& sch, ir::MmaPrecision precision = ir::MmaPrecision::Highest);

/// The GPU kernel's memory and synchronisation from its loop nest (run by the NVPTX code
/// generator after lowering): an allocation outside every thread loop that a thread loop
/// writes is shared by the block's threads (BufferScope::Shared), unless it is PerThread:
/// then each thread keeps its own elements (a Local buffer indexed without the thread's
/// part); in a kernel with shared memory a barrier follows each thread loop at block level,
/// so thread loops run as phases that see each other's writes.
ir::PrimFunc lower_gpu_phases(const ir::PrimFunc& f);

/// The tensor-core template's instructions (after lower_gpu_phases, NVPTX builds only):
/// each ForKind::WarpMma loop becomes mma_sync calls of `precision` whose fragment values
/// are that loop's own loads at the lanes PTX assigns (gpu_tensor_core.cc).
ir::PrimFunc lower_warp_mma(const ir::PrimFunc& f, ir::MmaPrecision precision);

/// A tensor-core kernel's reduction chunk loop, software-pipelined (after lower_gpu_phases,
/// NVPTX builds with tensor cores): its shared operand tiles doubled, the next chunk's
/// global-to-shared copies (cp.async) started before the current chunk's mma. Other loops
/// are left as they are. On the CPU the copies are plain copies, so the emulation runs it.
ir::PrimFunc pipeline_shared_tiles(const ir::PrimFunc& f);

/// Lowers a schedule to one loop-IR function. `inputs` are the placeholder tensors (in
/// parameter order); the outputs are the schedule's outputs. Stages that are neither
/// inlined nor attached get their own root loop nest, in producer-first order. With live
/// extents (sch.live()), the function takes one more input after `inputs`, "shape_args"
/// (int64, one value per symbol, in order), and loops run to the run's extents.
ir::PrimFunc lower_schedule(const Schedule& sch, const std::string& name,
                            const std::vector<Tensor>& inputs);

}  // namespace ember::passes
