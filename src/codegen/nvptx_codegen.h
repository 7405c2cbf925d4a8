#pragma once
/// NVPTXCodeGen: the GPU subclass of LLVMCodeGen. Each PrimFunc becomes a PTX entry point
/// taking one pointer per buffer; loops bound to GPU indices (ForKind::GpuBlock*/GpuThread*)
/// read %ctaid/%tid instead of looping, and their extents become the launch dimensions.
/// Shared buffers live in addrspace(3); Intrinsic::Barrier is bar.sync 0. Internal to
/// src/codegen (LLVM stays out of the public headers).
#include <set>
#include <string>

#include "ember/runtime/cuda.h"
#include "llvm_codegen.h"

namespace ember::codegen {

class NVPTXCodeGen : public LLVMCodeGen {
 public:
  /// `arch` is the SM version ("sm_80"); it becomes each function's "target-cpu".
  NVPTXCodeGen(llvm::Module* module, std::string arch);

  /// Adds the kernel `void name(ptr p0, ..., ptr pN)` for `f` and returns its launch
  /// dimensions (the largest extent bound to each block/thread index; 1 where none is).
  runtime::cuda::LaunchDims add_kernel(const ir::PrimFunc& f);

 protected:
  /// There is no thread pool on the GPU: a parallel loop runs serially in its thread.
  void emit_parallel_for(const ir::ForNode* op) override;
  void emit_gpu_for(const ir::ForNode* op) override;
  /// Local buffers are per-thread stack arrays; Shared ones are block-wide addrspace(3)
  /// globals.
  void emit_allocate(const ir::AllocateNode* op) override;
  llvm::Value* emit_barrier() override;
  llvm::Value* emit_warp_mma(const ir::PrimCallNode* op) override;
  llvm::Value* emit_async_copy(const ir::PrimCallNode* op) override;
  /// No runtime to report to from a GPU thread: an out-of-range index traps, which fails the
  /// launch (a CUDA error naming no index) rather than reading a wrong row.
  void emit_index_error(llvm::Value* bad, llvm::Value* index, int64_t size, int64_t axis,
                        int64_t allow_negative) override;

 private:
  runtime::cuda::LaunchDims dims_;
  std::set<ir::ForKind> active_;  // GPU kinds bound by enclosing loops
  int num_shared_ = 0;
};

}  // namespace ember::codegen
