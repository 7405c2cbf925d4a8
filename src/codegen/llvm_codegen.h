#pragma once
/// LLVMCodeGen: translates loop IR (ember/ir/loop.h) into LLVM IR, one visitor for every
/// target. Vectorized loops are widened here (the body is emitted once on <L x T> values);
/// parallel loops are outlined into a body function run by the runtime's ember_parallel_for.
/// Target specifics are virtual: a GPU subclass overrides emit_parallel_for (thread axes).
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ember/ir/loop.h"
#include "ember/ir/transposed_loads.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

namespace ember::codegen {

class LLVMCodeGen {
 public:
  /// Emits into `module`; every function gets the "target-cpu"/"target-features" attributes
  /// so the optimiser, the JIT and the assembly printer agree on the instruction set.
  /// `vector_bits` (when not 0) is also recorded, as "prefer-vector-width" and
  /// "min-legal-vector-width", so LLVM keeps vectors of that width in registers of that width.
  LLVMCodeGen(llvm::Module* module, std::string cpu, std::string features, int vector_bits = 0);
  virtual ~LLVMCodeGen() = default;

  /// Adds the external function `void name(ptr args)` (runtime::KernelFn ABI) for `f`.
  /// Throws ember::Error for a duplicate name, InternalError for invalid loop IR.
  void add_function(const ir::PrimFunc& f);

 protected:
  // ---- expressions; in a vectorized body a value is a scalar or an <L x T> vector.
  llvm::Value* emit(const ir::PrimExpr& e);
  llvm::Value* emit_binary(const ir::BinaryNode* op);
  llvm::Value* emit_compare(const ir::CompareNode* op);
  llvm::Value* emit_cast(DType to, DType from, llvm::Value* v);
  llvm::Value* emit_fptosi_sat(llvm::Type* ty, llvm::Value* v);
  /// The cast to `to` of `value` (emitted as v) when it is a clip into the int32 range: a
  /// plain conversion (and a NaN select); null otherwise (emit_cast's saturating one).
  llvm::Value* emit_clipped_cast(DType to, const ir::PrimExpr& value, llvm::Value* v);
  llvm::Value* emit_call(const ir::PrimCallNode* op);
  /// Intrinsic::Barrier; only a GPU target has one (the CPU target fails an internal check).
  virtual llvm::Value* emit_barrier();
  /// Intrinsic::MmaSync: a warp-level tensor-core instruction (GPU targets only).
  virtual llvm::Value* emit_warp_mma(const ir::PrimCallNode* op);
  /// Intrinsic::AsyncCopy, AsyncCommit, AsyncWait: here a plain copy (cp.async on a GPU).
  virtual llvm::Value* emit_async_copy(const ir::PrimCallNode* op);
  /// Intrinsic::DotU8S8 over (acc, a, b): vpdpbusd where the CPU has VNNI at this width,
  /// else two vpmaddwd of the bytes widened to int16 (AVX-512BW, AVX2, SSE2), else (scalar
  /// code) the four byte products widened to int32 and summed. Exact in every form.
  /// `seven_bits` (Intrinsic::DotU7S8: a's bytes below 128): without VNNI, vpmaddubsw, then
  /// vpmaddwd by ones (SSSE3 at least; elsewhere as DotU8S8).
  llvm::Value* emit_dot_u8s8(const std::vector<llvm::Value*>& args, bool seven_bits = false);
  /// Intrinsic::DotBF16 over (acc, a, b): vdpbf16ps where the CPU has AVX512_BF16 at this
  /// width, two FMAs of the widened halves elsewhere.
  llvm::Value* emit_dot_bf16(const std::vector<llvm::Value*>& args);
  /// Intrinsic::Prefetch: llvm.prefetch of the load's element address (reads nothing).
  llvm::Value* emit_prefetch(const ir::PrimCallNode* op);
  /// Intrinsic::CheckIndex: the index wrapped and checked; 0 where it is out of range.
  llvm::Value* emit_check_index(const ir::PrimCallNode* op, const std::vector<llvm::Value*>& args);
  /// Reports the first lane of `index` where `bad` holds to the runtime (ember_index_error).
  /// A GPU target has no runtime to report to (it only reads 0 there).
  virtual void emit_index_error(llvm::Value* bad, llvm::Value* index, int64_t size, int64_t axis,
                                int64_t allow_negative);
  llvm::Value* emit_load(const ir::LoadNode* op);
  llvm::Value* emit_guarded_load(const ir::SelectNode* op);

  // ---- statements
  void emit(const ir::Stmt& s);
  void emit_for(const ir::ForNode* op);
  /// Parallel loop: outlined body plus a call to ember_parallel_for (serial when nested).
  virtual void emit_parallel_for(const ir::ForNode* op);
  /// What a parallel loop's body reads from outside it, stored in a struct on the stack.
  struct Closure {
    std::vector<const ir::PrimVarNode*> vars;
    std::vector<const ir::BufferNode*> buffers;
    std::vector<llvm::Type*> scalar_types;  // the loop's begin, then `vars`
    std::vector<llvm::Type*> field_types;   // `scalar_types`, then a pointer per buffer
    std::vector<llvm::Value*> fields;       // their values where the loop is
    llvm::StructType* type = nullptr;
    llvm::AllocaInst* value = nullptr;
  };
  /// `begin` and the free variables and buffers of `op`'s body (no struct yet).
  Closure closure_of(const ir::ForNode* op, llvm::Value* begin);
  /// closure_of, stored in a new closure struct on the stack.
  Closure make_closure(const ir::ForNode* op, llvm::Value* begin);
  /// Emits `emit_body` as the body of `f` (then a return), and comes back to where it was.
  void in_function(llvm::Function* f, const std::function<void()>& emit_body);
  /// Fills `impl(i64 begin, i64 end, min, vars..., buffers...)`: the loop over
  /// [min + begin, min + end) with `loop_hint` (an llvm.loop metadata name or null).
  void emit_impl_loop(const ir::ForNode* op, const Closure& c, llvm::Function* impl,
                      const char* loop_hint);
  /// A loop annotated rolled_call: a long-chain loop after an accumulation (a GEMM's
  /// epilogue, rolled by roll_long_epilogues) as a call of a function of its own, kept
  /// rolled (llvm.loop.unroll.disable) and never inlined. Inlined, LLVM unrolled a short one
  /// and interleaved its rows' chains, and hoisted its constants out of the loops around it,
  /// into registers live across the accumulation loop, which then spilled accumulators. An
  /// elementwise kernel's long-chain loops stay inline (as a call they run slower), as do
  /// those before any accumulation (a reduction's elementwise producer: sigmoid -> sum ->
  /// log, as a call per row, ran slower than its unfused kernels; calibration: rolled
  /// calls).
  void emit_rolled_call(const ir::ForNode* op);
  /// Fills the outlined `body(i64 begin, i64 end, ptr closure)`, which unpacks the closure
  /// and calls `impl`, and `impl`, the loop over [min + begin, min + end); then returns to
  /// the insertion point it was called at.
  void emit_outlined_body(const ir::ForNode* op, const Closure& c, llvm::Function* body,
                          llvm::Function* impl);
  /// Loop bound to a GPU block/thread index; only a GPU target has them.
  virtual void emit_gpu_for(const ir::ForNode* op);
  void emit_vectorized_for(const ir::ForNode* op);
  // loop_hint: an llvm.loop metadata name; interleave > 0 adds llvm.loop.interleave.count.
  void emit_serial_loop(const ir::ForNode* op, llvm::Value* begin, llvm::Value* end,
                        const char* loop_hint, int interleave = 0);
  /// A loop over [begin, end) whose body `body_fn(i)` emits.
  void emit_loop(const std::string& name, llvm::Value* begin, llvm::Value* end,
                 const char* loop_hint, int interleave,
                 const std::function<void(llvm::Value*)>& body_fn);
  /// A serial loop whose vector loop reads columns (ir::transposed_loads) block by block.
  void emit_transposed_loop(const ir::ForNode* op, const ir::TransposedLoads& t);
  void transpose_block(const ir::TransposedLoad& l, int64_t lanes, llvm::AllocaInst* array,
                       int64_t first);
  std::vector<llvm::Value*> transpose_in_registers(std::vector<llvm::Value*> rows);
  llvm::Align column_alignment(llvm::FixedVectorType* column) const;
  void emit_store(const ir::StoreNode* op);
  /// The value of a scalar accumulation `b[i] = b[i] + x` or `fma(p, q, b[i])` (a reduction's
  /// update) with its order left to LLVM, so that the loop vectorizer may split the sum; null
  /// when `op` is not one.
  llvm::Value* emit_accumulation(const ir::StoreNode* op);
  virtual void emit_allocate(const ir::AllocateNode* op);
  void emit_if(const ir::IfThenElseNode* op);

  // ---- helpers
  llvm::Type* value_type(DType t);   // Bool is i1 in registers
  llvm::Type* memory_type(DType t);  // ... and i8 in memory
  /// `elem`, or a vector of `elem` with as many lanes as `v` has.
  llvm::Type* shaped_like(llvm::Type* elem, llvm::Value* v) const;
  /// Broadcasts a scalar to the current vector width (no-op for vectors or scalar code).
  llvm::Value* widen(llvm::Value* v);
  /// Makes two operands agree in shape (scalar, or vectors of the current width).
  void match(llvm::Value*& a, llvm::Value*& b);
  llvm::Value* int_cast(llvm::Value* v, llvm::Type* to);
  llvm::Value* buffer_ptr(const ir::Buffer& b);
  llvm::Value* element_ptr(const ir::Buffer& b, llvm::Value* index);
  /// Integer value stored / loaded from memory (Bool: i1 <-> i8).
  llvm::Value* to_memory(DType t, llvm::Value* v);
  llvm::Value* from_memory(DType t, llvm::Value* v);
  /// A float32 value (scalar or vector) rounded to the nearest bfloat16, as its 16 bits.
  llvm::Value* bf16_bits(llvm::Value* v);
  /// 16 bfloat16 bits (scalar or vector) as the float32 they hold.
  llvm::Value* bf16_widen(llvm::Value* bits);
  llvm::AllocaInst* entry_alloca(llvm::Type* t, const std::string& name);
  llvm::Function* make_function(const std::string& name, llvm::FunctionType* type, bool external);
  /// Creates `name.impl` with noalias buffer parameters, always inlined into its caller, so
  /// the optimiser learns that the kernel's buffers never alias.
  llvm::Function* make_impl(const std::string& name, const std::vector<llvm::Type*>& scalars,
                            size_t num_buffers);

  // ---- vectorization analysis
  /// True when `e` reads the vector lane (the vectorized loop var or a let bound to a vector).
  bool is_varying(const ir::PrimExpr& e) const;
  /// Per-lane stride of `e` when it is affine in the lane with a constant step.
  std::optional<int64_t> lane_stride(const ir::PrimExpr& e) const;
  /// Binds a variable; `stride` is the value's lane stride when it is a vector.
  void bind(const ir::PrimVarNode* v, llvm::Value* value, std::optional<int64_t> stride);
  void unbind(const ir::PrimVarNode* v);

  llvm::LLVMContext& ctx_;
  llvm::Module* module_;
  llvm::IRBuilder<> b_;
  std::string cpu_, features_;
  int vector_bits_ = 0;
  std::string func_name_;
  llvm::Function* func_ = nullptr;
  std::unordered_map<const ir::PrimVarNode*, llvm::Value*> vars_;
  std::unordered_map<const ir::BufferNode*, llvm::Value*> buffers_;
  // Vectorization state: lanes_ == 0 in scalar code; mask_ == nullptr means all lanes on.
  int lanes_ = 0;
  llvm::Value* mask_ = nullptr;
  // Lane stride of each variable bound to a vector (nullopt: not affine in the lane).
  std::unordered_map<const ir::PrimVarNode*, std::optional<int64_t>> varying_;
  // Loads read from a block transposed in registers (emit_transposed_loop): the block's stack
  // array, and the column of the current iteration.
  std::unordered_map<const ir::LoadNode*, std::pair<llvm::AllocaInst*, const ir::TransposedLoads*>>
      transposed_;
  llvm::Value* transposed_column_ = nullptr;
  int parallel_depth_ = 0;
  int num_outlined_ = 0;
  std::set<const ir::BufferNode*> nan_free_;  // ir::nan_free_buffers of the function
};

}  // namespace ember::codegen
