#pragma once
/// Loop IR: Halide/TIR-style scalar expressions and statements. Nodes are immutable and
/// shared (std::shared_ptr<const ...>); a node's identity is its address, so two `PrimVar`s
/// with the same name are different variables. Expressions are scalar: vectorization is a
/// loop kind (ForKind::Vectorized) that the code generator widens.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "ember/runtime/dtype.h"

namespace ember::ir {

// ----------------------------------------------------------------------------- expressions

enum class PrimKind {
  IntImm,
  FloatImm,
  Var,
  Binary,
  Compare,
  Not,
  Select,
  Cast,
  Reinterpret,
  Load,
  Call,
  Let,
  ProducerLoad,
  Reduce
};

struct PrimExprNode {
  PrimKind kind;
  DType dtype;
  PrimExprNode(PrimKind k, DType t) : kind(k), dtype(t) {}
  virtual ~PrimExprNode() = default;
};

/// A handle to an immutable scalar expression. Arithmetic operators build nodes and fold
/// constants (x + 0, x * 1, 2 + 3), so schedules produce readable index expressions.
class PrimExpr {
 public:
  PrimExpr() = default;
  PrimExpr(std::shared_ptr<const PrimExprNode> n) : node_(std::move(n)) {}
  PrimExpr(int v);      // int64 immediate (index arithmetic is int64)
  PrimExpr(int64_t v);  // int64 immediate
  PrimExpr(double v);   // float32 immediate

  const PrimExprNode* get() const { return node_.get(); }
  const PrimExprNode* operator->() const { return node_.get(); }
  explicit operator bool() const { return node_ != nullptr; }
  DType dtype() const { return node_->dtype; }
  PrimKind kind() const { return node_->kind; }
  template <class T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }
  bool same_as(const PrimExpr& o) const { return node_ == o.node_; }

 private:
  std::shared_ptr<const PrimExprNode> node_;
};

struct IntImmNode : PrimExprNode {
  static constexpr PrimKind kKind = PrimKind::IntImm;
  int64_t value;
  IntImmNode(DType t, int64_t v) : PrimExprNode(kKind, t), value(v) {}
};

struct FloatImmNode : PrimExprNode {
  static constexpr PrimKind kKind = PrimKind::FloatImm;
  double value;
  FloatImmNode(DType t, double v) : PrimExprNode(kKind, t), value(v) {}
};

struct PrimVarNode : PrimExprNode {
  static constexpr PrimKind kKind = PrimKind::Var;
  std::string name;
  PrimVarNode(std::string n, DType t) : PrimExprNode(kKind, t), name(std::move(n)) {}
};

/// A variable handle; a PrimVar converts to PrimExpr.
class PrimVar : public PrimExpr {
 public:
  PrimVar() = default;
  explicit PrimVar(std::string name, DType t = DType::Int64);
  explicit PrimVar(std::shared_ptr<const PrimVarNode> n) : PrimExpr(n) {}
  const PrimVarNode* get() const { return static_cast<const PrimVarNode*>(PrimExpr::get()); }
  const PrimVarNode* operator->() const { return get(); }
  const std::string& name() const { return (*this)->name; }
};

/// Integer Div and Mod are floor division and floor modulo (index arithmetic); on floats
/// Div is IEEE division and Mod is fmod. Shl/Shr/BitAnd/BitOr/BitXor are integer only;
/// Shr is arithmetic. Min/Max on floats propagate NaN (as torch.minimum/maximum do).
enum class BinaryOp { Add, Sub, Mul, Div, Mod, Min, Max, BitAnd, BitOr, BitXor, Shl, Shr };
struct BinaryNode : PrimExprNode {
  static constexpr PrimKind kKind = PrimKind::Binary;
  BinaryOp op;
  PrimExpr a, b;
  BinaryNode(BinaryOp o, PrimExpr x, PrimExpr y)
      : PrimExprNode(kKind, x.dtype()), op(o), a(std::move(x)), b(std::move(y)) {}
};

/// Comparisons produce Bool; float comparisons are ordered (false when either is NaN),
/// except NE, which is true when either is NaN. Bool And/Or are BitAnd/BitOr on Bool.
enum class CompareOp { EQ, NE, LT, LE, GT, GE };
struct CompareNode : PrimExprNode {
  static constexpr PrimKind kKind = PrimKind::Compare;
  CompareOp op;
  PrimExpr a, b;
  CompareNode(CompareOp o, PrimExpr x, PrimExpr y)
      : PrimExprNode(kKind, DType::Bool), op(o), a(std::move(x)), b(std::move(y)) {}
};

struct NotNode : PrimExprNode {
  static constexpr PrimKind kKind = PrimKind::Not;
  PrimExpr a;
  explicit NotNode(PrimExpr x) : PrimExprNode(kKind, DType::Bool), a(std::move(x)) {}
};

/// Evaluates both sides (it is a vector blend); guard loads with clamped indices.
struct SelectNode : PrimExprNode {
  static constexpr PrimKind kKind = PrimKind::Select;
  PrimExpr cond, t, f;
  SelectNode(PrimExpr c, PrimExpr x, PrimExpr y)
      : PrimExprNode(kKind, x.dtype()), cond(std::move(c)), t(std::move(x)), f(std::move(y)) {}
};

/// Value conversion (float->int truncates toward zero, like C and torch).
struct CastNode : PrimExprNode {
  static constexpr PrimKind kKind = PrimKind::Cast;
  PrimExpr value;
  CastNode(DType t, PrimExpr v) : PrimExprNode(kKind, t), value(std::move(v)) {}
};

/// Bit reinterpretation between types of the same size (float32 <-> int32).
struct ReinterpretNode : PrimExprNode {
  static constexpr PrimKind kKind = PrimKind::Reinterpret;
  PrimExpr value;
  ReinterpretNode(DType t, PrimExpr v) : PrimExprNode(kKind, t), value(std::move(v)) {}
};

/// Global: kernel parameters; Local: per-thread (stack, registers); Shared: one copy per
/// GPU thread block (addrspace 3), visible to all of its threads; PerThread: a GPU
/// allocation at block level whose every element belongs to one thread, the same in every
/// thread loop (a tiled GEMM's accumulator): lower_gpu_phases gives each thread its own
/// elements, a Local buffer it keeps in registers, instead of sharing the block's tile.
enum class BufferScope { Global, Local, Shared, PerThread };
struct BufferNode {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // static; row-major
  BufferScope scope = BufferScope::Global;
  int64_t numel() const;
};
/// A named, typed, row-major memory region: a kernel parameter (Global) or an allocation.
using Buffer = std::shared_ptr<const BufferNode>;
Buffer make_buffer(std::string name, DType dtype, std::vector<int64_t> shape,
                   BufferScope scope = BufferScope::Global);
/// Row-major flat offset of `indices` into `buffer`.
PrimExpr flat_index(const Buffer& buffer, const std::vector<PrimExpr>& indices);
/// Row-major flat offset of `indices` into a tensor of `shape` (extents that may be known
/// only at run time: a kernel input stored compactly at the run's shape).
PrimExpr flat_index(const std::vector<PrimExpr>& shape, const std::vector<PrimExpr>& indices);

/// Load of element `index` (flat, in elements) of `buffer`.
struct LoadNode : PrimExprNode {
  static constexpr PrimKind kKind = PrimKind::Load;
  Buffer buffer;
  PrimExpr index;
  LoadNode(Buffer buf, PrimExpr i)
      : PrimExprNode(kKind, buf->dtype), buffer(std::move(buf)), index(std::move(i)) {}
};

/// Pure math intrinsics that map to single LLVM intrinsics (all vectorize). Transcendentals
/// (exp, log, tanh, erf, ...) are not here: prim_math.h expands them into these.
/// Barrier (GPU only, no arguments, Int32 result, used in an Evaluate) waits until every
/// thread of the block has reached it and their shared-memory writes are visible.
/// CheckIndex(index, size, axis, allow_negative) (all Int64; size, axis and allow_negative
/// immediates) is a runtime-checked index into an axis of `size` elements: a negative index
/// counts from the end when allow_negative is 1; an index still outside [0, size) is reported
/// to the runtime (ember_index_error, which the executor raises as an error naming the
/// kernel) and reads as 0, so the load it feeds stays in bounds.
/// Prefetch(load) (CPU only, Int32 result, used in an Evaluate) asks the cache for the line
/// that holds the load's element; it reads nothing and never faults, so that element may
/// lie past the buffer (a prefetch of the next block at the last one).
/// MmaSync(element, precision, c0..c3, a..., b...) (NVPTX only, Float32) is element
/// `element` (0-3) of D = A B + C of one warp-level m16n8kK mma.sync (K = mma_k(precision)):
/// each lane passes its fragment values of C, A and B as float32 in PTX's fragment order
/// (4, 4 and 2 for TF32; 4, 8 and 4 for FP16 and BF16), rounded to the precision by the
/// instruction's operand conversion. Calls with the same arguments are one instruction, so
/// a lane's four elements come from one mma. Made only by lower_warp_mma.
/// AsyncCopy(dst load, src load) (Int32, in an Evaluate) copies the element the source
/// load reads into the element the destination load names: on the GPU asynchronously
/// (cp.async, global to shared), visible once AsyncWait says its group is complete;
/// elsewhere at once. AsyncCommit() closes the thread's current group of copies;
/// AsyncWait(n) waits until at most n of the thread's groups are still in flight. Made only
/// by pipeline_shared_tiles.
/// DotU8S8(acc, a, b) (all Int32) is acc + the sum over j < 4 of byte j of `a` as an
/// unsigned 8-bit value times byte j of `b` as a signed one: an int8 product's four-deep
/// step (u8 activations, s8 weights), one vpdpbusd per vector on AVX-512 VNNI and AVX-VNNI
/// CPUs, exact everywhere (no saturation). The int8 kernels' building block (issue 45).
/// DotU7S8(acc, a, b) is DotU8S8 where every byte of `a` is below 128 (activations
/// quantized to 7 bits: PT2E's reduce_range), which the op that writes it has proven: then
/// each pair of byte products sums within int16, so that without VNNI it is vpmaddubsw,
/// vpmaddwd by ones and an add (three instructions a vector, where DotU8S8 takes nine). A
/// byte of 128 or more gives an unspecified sum.
/// DotBF16(acc, a, b) (acc Float32, a and b Int32 words of two bfloat16 values, element 2k
/// in the low half) is acc + a.hi * b.hi + a.lo * b.lo, each product exact and each sum
/// rounded to float32 in that order: vdpbf16ps on AVX512_BF16 CPUs (which also flushes
/// subnormal inputs and results to zero), two FMAs of the widened halves elsewhere. The
/// bfloat16 GEMM's step (issue 45).
enum class Intrinsic {
  Sqrt,
  Floor,
  Ceil,
  Abs,
  Round,
  IsNan,
  Fma,
  Barrier,
  CheckIndex,
  Prefetch,
  MmaSync,
  AsyncCopy,
  AsyncCommit,
  AsyncWait,
  DotU8S8,
  DotBF16,
  DotU7S8
};

/// The precision of a float32 GEMM on tensor cores: Highest keeps float32 FMAs (no tensor
/// cores), TF32 rounds the operands to TF32 (torch's allow_tf32), BF16 and FP16 to those
/// types; every one accumulates in float32.
enum class MmaPrecision { Highest, TF32, BF16, FP16 };
/// The reduction depth K of one mma.sync of that precision (m16n8k8 for TF32, m16n8k16).
int64_t mma_k(MmaPrecision p);
/// "highest", "tf32", "bf16", "fp16".
const char* mma_precision_name(MmaPrecision p);
/// The precision named by one of those strings; an ember::Error for another.
MmaPrecision parse_mma_precision(const std::string& name);
struct PrimCallNode : PrimExprNode {
  static constexpr PrimKind kKind = PrimKind::Call;
  Intrinsic op;
  std::vector<PrimExpr> args;
  PrimCallNode(DType t, Intrinsic o, std::vector<PrimExpr> a)
      : PrimExprNode(kKind, t), op(o), args(std::move(a)) {}
};

struct LetNode : PrimExprNode {
  static constexpr PrimKind kKind = PrimKind::Let;
  PrimVar var;
  PrimExpr value, body;
  LetNode(PrimVar v, PrimExpr val, PrimExpr b)
      : PrimExprNode(kKind, b.dtype()),
        var(std::move(v)),
        value(std::move(val)),
        body(std::move(b)) {}
};

// Tensor-expression nodes (see tensor_expr.h); they exist only before lowering.
struct TensorNode;
using TensorRef = std::shared_ptr<const TensorNode>;
struct IterVarNode;
using IterVar = std::shared_ptr<const IterVarNode>;

/// Read of a tensor-expression tensor at multi-dimensional indices.
struct ProducerLoadNode : PrimExprNode {
  static constexpr PrimKind kKind = PrimKind::ProducerLoad;
  TensorRef producer;
  std::vector<PrimExpr> indices;
  ProducerLoadNode(DType t, TensorRef p, std::vector<PrimExpr> idx)
      : PrimExprNode(kKind, t), producer(std::move(p)), indices(std::move(idx)) {}
};

/// A reduction over `axes`; only allowed as the whole body of a compute.
enum class ReduceOp { Sum, Max, Min };
struct ReduceNode : PrimExprNode {
  static constexpr PrimKind kKind = PrimKind::Reduce;
  ReduceOp op;
  PrimExpr source;
  std::vector<IterVar> axes;
  ReduceNode(ReduceOp o, PrimExpr s, std::vector<IterVar> ax)
      : PrimExprNode(kKind, s.dtype()), op(o), source(std::move(s)), axes(std::move(ax)) {}
};

// Builders. They fold constants and trivial identities but never reassociate floats.
PrimExpr make_const(DType t, double value);
PrimExpr operator+(PrimExpr a, PrimExpr b);
PrimExpr operator-(PrimExpr a, PrimExpr b);
PrimExpr operator-(PrimExpr a);
PrimExpr operator*(PrimExpr a, PrimExpr b);
PrimExpr operator/(PrimExpr a, PrimExpr b);  // floor division on integers
PrimExpr operator%(PrimExpr a, PrimExpr b);  // floor modulo on integers
PrimExpr operator<(PrimExpr a, PrimExpr b);
PrimExpr operator<=(PrimExpr a, PrimExpr b);
PrimExpr operator>(PrimExpr a, PrimExpr b);
PrimExpr operator>=(PrimExpr a, PrimExpr b);
PrimExpr operator==(PrimExpr a, PrimExpr b);
PrimExpr operator!=(PrimExpr a, PrimExpr b);
/// Logical ops on Bool are functions, not operators: `!e` on a handle is a null test.
PrimExpr logical_and(PrimExpr a, PrimExpr b);
/// `a && b` of two expressions would test that both handles are set (always true), not
/// build their conjunction: write logical_and.
bool operator&&(const PrimExpr& a, const PrimExpr& b) = delete;
PrimExpr logical_or(PrimExpr a, PrimExpr b);
PrimExpr logical_not(PrimExpr a);
PrimExpr binary(BinaryOp op, PrimExpr a, PrimExpr b);
PrimExpr compare(CompareOp op, PrimExpr a, PrimExpr b);
PrimExpr min(PrimExpr a, PrimExpr b);
PrimExpr max(PrimExpr a, PrimExpr b);
PrimExpr select(PrimExpr cond, PrimExpr t, PrimExpr f);
PrimExpr cast(DType t, PrimExpr v);
PrimExpr reinterpret(DType t, PrimExpr v);
/// An intrinsic call; its dtype is args[0]'s (Bool for IsNan). Named apart from graph.h's
/// `call`, which builds a graph-IR op call.
PrimExpr prim_call(Intrinsic op, std::vector<PrimExpr> args);
/// `evaluate(barrier())` synchronises the threads of a GPU block (__syncthreads).
PrimExpr barrier();
/// `evaluate(prefetch(b, i))` prefetches the cache line of element `i` of `b` (CPU only).
PrimExpr prefetch(Buffer buffer, PrimExpr index);
/// Intrinsic::AsyncCopy of src[src_index] into dst[dst_index], AsyncCommit and AsyncWait(n).
PrimExpr async_copy(Buffer dst, PrimExpr dst_index, Buffer src, PrimExpr src_index);
PrimExpr async_commit();
PrimExpr async_wait(int64_t groups);
/// Element `element` of one lane's mma.sync (Intrinsic::MmaSync): its C, A and B fragments.
PrimExpr mma_sync(int element, MmaPrecision precision, std::vector<PrimExpr> c,
                  std::vector<PrimExpr> a, std::vector<PrimExpr> b);
PrimExpr load(Buffer buffer, PrimExpr index);
PrimExpr let(PrimVar v, PrimExpr value, PrimExpr body);
/// Constant value if `e` is an IntImm (or FloatImm for the double overload).
bool as_int(const PrimExpr& e, int64_t* out);
bool as_float(const PrimExpr& e, double* out);

// ------------------------------------------------------------------------------ statements

enum class StmtKind { For, Store, Allocate, LetStmt, IfThenElse, Seq, Evaluate };

struct StmtNode {
  StmtKind kind;
  explicit StmtNode(StmtKind k) : kind(k) {}
  virtual ~StmtNode() = default;
};

class Stmt {
 public:
  Stmt() = default;
  Stmt(std::shared_ptr<const StmtNode> n) : node_(std::move(n)) {}
  const StmtNode* get() const { return node_.get(); }
  const StmtNode* operator->() const { return node_.get(); }
  explicit operator bool() const { return node_ != nullptr; }
  StmtKind kind() const { return node_->kind; }
  template <class T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }
  bool same_as(const Stmt& o) const { return node_ == o.node_; }

 private:
  std::shared_ptr<const StmtNode> node_;
};

/// Vectorized loops must be innermost and have a constant extent; the code generator
/// turns the body into vector instructions of that many lanes. Parallel loops are outlined
/// and run on the runtime's thread pool. GPU kinds bind the loop to a block index
/// (blockIdx.x/y/z) or a thread index (threadIdx.x/y/z): the loop disappears and its
/// constant extent becomes that launch dimension (the NVPTX target only).
enum class ForKind {
  Serial,
  Parallel,
  Vectorized,
  Unrolled,
  GpuBlockX,
  GpuBlockY,
  GpuBlockZ,
  GpuThreadX,
  GpuThreadY,
  GpuThreadZ,
  /// A serial loop over a chunk of a GEMM's reduction whose body is one lane's share of
  /// warp-level m16n8 tiles (the GPU tensor-core template); the NVPTX build turns it into
  /// mma.sync instructions (lower_warp_mma), elsewhere it runs as a serial loop.
  WarpMma
};
const char* for_kind_name(ForKind k);
/// True for the GpuBlock* and GpuThread* kinds.
bool is_gpu_kind(ForKind k);

/// How the code generator emits a loop beyond its kind: decisions that annotate_loops
/// (src/passes/lower/annotate_loops.cc, a kernel pass) writes and that the code
/// generator and the FuseOps cost model only read. The printed loop IR shows them.
struct LoopAnnotations {
  /// > 0: a rolled sum (ir::is_rolled_scalar_sum) that LLVM's loop vectorizer widens into
  /// this many independent vector accumulators (ir::rolled_sum_interleave).
  int sum_accumulators = 0;
  /// Its column loads (ir::transposed_loads) are read as blocks transposed in registers.
  bool transposed_blocks = false;
  /// A long-chain loop after an accumulation (ir::is_long_chain_loop), emitted rolled in a
  /// function of its own.
  bool rolled_call = false;
  bool empty() const { return !sum_accumulators && !transposed_blocks && !rolled_call; }
  bool operator==(const LoopAnnotations& o) const {
    return sum_accumulators == o.sum_accumulators && transposed_blocks == o.transposed_blocks &&
           rolled_call == o.rolled_call;
  }
};

struct ForNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::For;
  PrimVar var;
  PrimExpr min, extent;
  ForKind for_kind;
  Stmt body;
  LoopAnnotations annotations;
  ForNode(PrimVar v, PrimExpr mn, PrimExpr ext, ForKind k, Stmt b, LoopAnnotations a = {})
      : StmtNode(kKind),
        var(std::move(v)),
        min(std::move(mn)),
        extent(std::move(ext)),
        for_kind(k),
        body(std::move(b)),
        annotations(a) {}
};

struct StoreNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Store;
  Buffer buffer;
  PrimExpr index, value;
  StoreNode(Buffer buf, PrimExpr i, PrimExpr v)
      : StmtNode(kKind), buffer(std::move(buf)), index(std::move(i)), value(std::move(v)) {}
};

/// Allocates `buffer` (scope Local) for the duration of `body`.
struct AllocateNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Allocate;
  Buffer buffer;
  Stmt body;
  AllocateNode(Buffer buf, Stmt b) : StmtNode(kKind), buffer(std::move(buf)), body(std::move(b)) {}
};

struct LetStmtNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::LetStmt;
  PrimVar var;
  PrimExpr value;
  Stmt body;
  LetStmtNode(PrimVar v, PrimExpr val, Stmt b)
      : StmtNode(kKind), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
};

/// `else_case` may be empty.
struct IfThenElseNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::IfThenElse;
  PrimExpr cond;
  Stmt then_case, else_case;
  IfThenElseNode(PrimExpr c, Stmt t, Stmt e)
      : StmtNode(kKind), cond(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
};

struct SeqNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Seq;
  std::vector<Stmt> seq;
  explicit SeqNode(std::vector<Stmt> s) : StmtNode(kKind), seq(std::move(s)) {}
};

struct EvaluateNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Evaluate;
  PrimExpr value;
  explicit EvaluateNode(PrimExpr v) : StmtNode(kKind), value(std::move(v)) {}
};

Stmt for_loop(PrimVar v, PrimExpr min, PrimExpr extent, ForKind kind, Stmt body,
              LoopAnnotations annotations = {});
Stmt store(Buffer buffer, PrimExpr index, PrimExpr value);
Stmt allocate(Buffer buffer, Stmt body);
Stmt let_stmt(PrimVar v, PrimExpr value, Stmt body);
Stmt if_then_else(PrimExpr cond, Stmt then_case, Stmt else_case = Stmt());
/// Flattens nested Seqs and drops empty statements; one statement stays itself.
Stmt seq(std::vector<Stmt> stmts);
Stmt evaluate(PrimExpr value);

/// A compiled kernel's loop-IR form: `params` are the kernel's buffers, inputs first then
/// outputs; the generated function takes them as an array of pointers in this order.
struct PrimFunc {
  std::string name;
  std::vector<Buffer> params;
  int num_inputs = 0;
  Stmt body;
};

// ------------------------------------------------------------------------ traversal helpers

/// Walks a tree without rebuilding it (Halide's IRVisitor). There is one method per node
/// kind; each by default visits the node's children in order (not the variable a For, Let
/// or LetStmt binds, nor a Reduce's axes). Override the kinds you care about and call the
/// base version to descend, or do not, to prune. A subclass that overrides one of the
/// `visit` entry points adds `using PrimVisitor::visit;` to keep the other.
class PrimVisitor {
 public:
  virtual ~PrimVisitor() = default;
  /// Dispatches on the node's kind; an empty handle is skipped.
  virtual void visit(const PrimExpr& e);
  virtual void visit(const Stmt& s);

 protected:
  virtual void visit_int_imm(const IntImmNode*) {}
  virtual void visit_float_imm(const FloatImmNode*) {}
  virtual void visit_var(const PrimVarNode*) {}
  virtual void visit_binary(const BinaryNode* op);
  virtual void visit_compare(const CompareNode* op);
  virtual void visit_not(const NotNode* op);
  virtual void visit_select(const SelectNode* op);
  virtual void visit_cast(const CastNode* op);
  virtual void visit_reinterpret(const ReinterpretNode* op);
  virtual void visit_load(const LoadNode* op);
  virtual void visit_call(const PrimCallNode* op);
  virtual void visit_let(const LetNode* op);
  virtual void visit_producer_load(const ProducerLoadNode* op);
  virtual void visit_reduce(const ReduceNode* op);

  virtual void visit_for(const ForNode* op);
  virtual void visit_store(const StoreNode* op);
  virtual void visit_allocate(const AllocateNode* op);
  virtual void visit_let_stmt(const LetStmtNode* op);
  virtual void visit_if_then_else(const IfThenElseNode* op);
  virtual void visit_seq(const SeqNode* op);
  virtual void visit_evaluate(const EvaluateNode* op);
};

/// Rebuilds only what changed (Halide's IRMutator). There is one method per node kind,
/// given the node's handle and the node; each by default mutates the children and returns
/// the handle itself when none changed, else a node rebuilt with the builders (which fold
/// constants again). Override the kinds you care about and call the base version to
/// recurse. `mutate` dispatches; override it to see every node before dispatch.
class PrimMutator {
 public:
  virtual ~PrimMutator() = default;
  virtual PrimExpr mutate(const PrimExpr& e);
  virtual Stmt mutate(const Stmt& s);

 protected:
  virtual PrimExpr visit_int_imm(const PrimExpr& e, const IntImmNode*) { return e; }
  virtual PrimExpr visit_float_imm(const PrimExpr& e, const FloatImmNode*) { return e; }
  virtual PrimExpr visit_var(const PrimExpr& e, const PrimVarNode*) { return e; }
  virtual PrimExpr visit_binary(const PrimExpr& e, const BinaryNode* op);
  virtual PrimExpr visit_compare(const PrimExpr& e, const CompareNode* op);
  virtual PrimExpr visit_not(const PrimExpr& e, const NotNode* op);
  virtual PrimExpr visit_select(const PrimExpr& e, const SelectNode* op);
  virtual PrimExpr visit_cast(const PrimExpr& e, const CastNode* op);
  virtual PrimExpr visit_reinterpret(const PrimExpr& e, const ReinterpretNode* op);
  virtual PrimExpr visit_load(const PrimExpr& e, const LoadNode* op);
  virtual PrimExpr visit_call(const PrimExpr& e, const PrimCallNode* op);
  virtual PrimExpr visit_let(const PrimExpr& e, const LetNode* op);
  virtual PrimExpr visit_producer_load(const PrimExpr& e, const ProducerLoadNode* op);
  virtual PrimExpr visit_reduce(const PrimExpr& e, const ReduceNode* op);

  virtual Stmt visit_for(const Stmt& s, const ForNode* op);
  virtual Stmt visit_store(const Stmt& s, const StoreNode* op);
  virtual Stmt visit_allocate(const Stmt& s, const AllocateNode* op);
  virtual Stmt visit_let_stmt(const Stmt& s, const LetStmtNode* op);
  virtual Stmt visit_if_then_else(const Stmt& s, const IfThenElseNode* op);
  virtual Stmt visit_seq(const Stmt& s, const SeqNode* op);
  virtual Stmt visit_evaluate(const Stmt& s, const EvaluateNode* op);
};

/// The operands of a loop-IR expression node, in order: a Load's index, a Let's value and
/// body, a Call's arguments; none for immediates, variables and tensor-expression nodes
/// (ProducerLoad, Reduce), which walkers of lowered code do not meet.
std::vector<PrimExpr> operands(const PrimExpr& e);

/// Calls `fn` on every expression node (pre-order) under `e` / `s`.
void visit_prim(const PrimExpr& e, const std::function<void(const PrimExpr&)>& fn);
void visit_prim(const Stmt& s, const std::function<void(const PrimExpr&)>& expr_fn,
                const std::function<void(const Stmt&)>& stmt_fn = nullptr);

/// Replaces variables (by identity) with expressions.
using VarMap = std::vector<std::pair<const PrimVarNode*, PrimExpr>>;
PrimExpr substitute(const PrimExpr& e, const VarMap& map);
Stmt substitute(const Stmt& s, const VarMap& map);

/// Points loads and stores of buffers (by identity) at other buffers.
using BufferMap = std::map<const BufferNode*, Buffer>;
PrimExpr swap_buffers(const PrimExpr& e, const BufferMap& map);
Stmt swap_buffers(const Stmt& s, const BufferMap& map);

/// Structural equality: same shape of tree, same constants, variables matched by identity.
bool structural_equal(const PrimExpr& a, const PrimExpr& b);

std::ostream& operator<<(std::ostream& os, const PrimExpr& e);
std::ostream& operator<<(std::ostream& os, const Stmt& s);
std::ostream& operator<<(std::ostream& os, const PrimFunc& f);
std::string to_string(const PrimExpr& e);
std::string to_string(const Stmt& s);
std::string to_string(const PrimFunc& f);

/// Checks a PrimFunc before codegen: every PrimVar is bound, every buffer is a parameter or
/// allocated, vectorized loops are innermost with constant extents, dtypes agree.
/// Throws InternalError naming the offending statement.
void verify(const PrimFunc& f);

}  // namespace ember::ir
