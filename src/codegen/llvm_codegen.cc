#include "llvm_codegen.h"

#include <algorithm>
#include <set>

#include "ember/codegen/machine.h"
#include "ember/ir/loop_sums.h"
#include "ember/ir/transposed_loads.h"
#include "ember/support/error.h"
#include "llvm/Analysis/VectorUtils.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Metadata.h"

namespace ember::codegen {

using namespace ember::ir;
using llvm::Value;

namespace {

// Local buffers up to this size live on the stack; larger ones on the heap.
constexpr int64_t kMaxStackBytes = 64 * 1024;
constexpr unsigned kAlignment = 64;

// The comparisons of a chain of logical ands.
void comparisons_of(const PrimExpr& e, std::vector<const CompareNode*>& out) {
  if (auto* c = e.as<CompareNode>()) out.push_back(c);
  auto* b = e.as<BinaryNode>();
  if (!b || b->op != BinaryOp::BitAnd || e.dtype() != DType::Bool) return;
  comparisons_of(b->a, out);
  comparisons_of(b->b, out);
}

bool implied(const std::vector<const CompareNode*>& facts, CompareOp op, const PrimExpr& a,
             const PrimExpr& b) {
  for (auto* f : facts)
    if (f->op == op && structural_equal(f->a, a) && structural_equal(f->b, b)) return true;
  return false;
}

// `index` without the clamps max(e, lo) and min(e, hi) that `facts` (e >= lo, e < hi + 1)
// show to be no-ops. A padded input reads data[clamp(i)] only where its select's condition
// says i is inside, and unclamped, a row of such reads is contiguous.
PrimExpr without_implied_clamps(const PrimExpr& e, const std::vector<const CompareNode*>& facts) {
  auto* b = e.as<BinaryNode>();
  if (!b) return e;
  PrimExpr x = without_implied_clamps(b->a, facts), y = without_implied_clamps(b->b, facts);
  int64_t c;
  if (b->op == BinaryOp::Max && implied(facts, CompareOp::GE, x, y)) return x;
  if (b->op == BinaryOp::Min && as_int(y, &c) &&
      implied(facts, CompareOp::LT, x, make_const(y.dtype(), c + 1)))
    return x;
  if (x.same_as(b->a) && y.same_as(b->b)) return e;
  switch (b->op) {
    case BinaryOp::Add:
      return x + y;
    case BinaryOp::Sub:
      return x - y;
    case BinaryOp::Mul:
      return x * y;
    default:
      return e;
  }
}

bool is_vec(Value* v) { return v->getType()->isVectorTy(); }

}  // namespace

LLVMCodeGen::LLVMCodeGen(llvm::Module* module, std::string cpu, std::string features,
                         int vector_bits)
    : ctx_(module->getContext()),
      module_(module),
      b_(module->getContext()),
      cpu_(std::move(cpu)),
      features_(std::move(features)),
      vector_bits_(vector_bits) {}

// ------------------------------------------------------------------------------ functions

llvm::Function* LLVMCodeGen::make_function(const std::string& name, llvm::FunctionType* type,
                                           bool external) {
  if (external) {
    if (llvm::Function* old = module_->getFunction(name)) {
      if (!old->hasLocalLinkage())
        fail("two kernels are named '", name, "'; give every kernel of a module its own name");
      old->setName(name + ".helper");  // an internal helper took the name first: move it
    }
  }
  auto* f = llvm::Function::Create(
      type, external ? llvm::Function::ExternalLinkage : llvm::Function::InternalLinkage, name,
      module_);
  if (!cpu_.empty()) f->addFnAttr("target-cpu", cpu_);
  if (!features_.empty()) f->addFnAttr("target-features", features_);
  if (vector_bits_ > 0) {
    f->addFnAttr("prefer-vector-width", std::to_string(vector_bits_));
    f->addFnAttr("min-legal-vector-width", std::to_string(vector_bits_));
  }
  f->addFnAttr(llvm::Attribute::NoUnwind);
  return f;
}

llvm::Function* LLVMCodeGen::make_impl(const std::string& name,
                                       const std::vector<llvm::Type*>& scalars,
                                       size_t num_buffers) {
  std::vector<llvm::Type*> params = scalars;
  params.insert(params.end(), num_buffers, b_.getPtrTy());
  auto* f =
      make_function(name + ".impl", llvm::FunctionType::get(b_.getVoidTy(), params, false), false);
  f->addFnAttr(llvm::Attribute::AlwaysInline);
  for (size_t i = scalars.size(); i < params.size(); ++i) {
    f->addParamAttr(i, llvm::Attribute::NoAlias);
    f->addParamAttr(i, llvm::Attribute::NoCapture);
  }
  return f;
}

void LLVMCodeGen::add_function(const PrimFunc& f) {
  verify(f);
  func_name_ = f.name;
  nan_free_ = nan_free_buffers(f.body);
  llvm::Type* ptr = b_.getPtrTy();
  llvm::Function* kernel =
      make_function(f.name, llvm::FunctionType::get(b_.getVoidTy(), {ptr}, false), true);
  llvm::Function* impl = make_impl(f.name, {}, f.params.size());

  // The exported wrapper unpacks `void** args` and calls the noalias body.
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", kernel));
  llvm::Value* args = kernel->getArg(0);
  args->setName("args");
  std::vector<Value*> call_args;
  for (size_t i = 0; i < f.params.size(); ++i) {
    Value* slot = b_.CreateConstInBoundsGEP1_64(ptr, args, i);
    call_args.push_back(b_.CreateLoad(ptr, slot, f.params[i]->name));
  }
  b_.CreateCall(impl, call_args);
  b_.CreateRetVoid();

  func_ = impl;
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", impl));
  for (size_t i = 0; i < f.params.size(); ++i) {
    impl->getArg(i)->setName(f.params[i]->name);
    buffers_[f.params[i].get()] = impl->getArg(i);
  }
  emit(f.body);
  b_.CreateRetVoid();
  buffers_.clear();
  vars_.clear();
  func_ = nullptr;
}

// -------------------------------------------------------------------------------- helpers

llvm::Type* LLVMCodeGen::value_type(DType t) {
  switch (t) {
    case DType::Float32:
      return b_.getFloatTy();
    case DType::Float64:
      return b_.getDoubleTy();
    case DType::Int32:
      return b_.getInt32Ty();
    case DType::Int64:
      return b_.getInt64Ty();
    case DType::Bool:
      return b_.getInt1Ty();
    case DType::Int8:
    case DType::UInt8:
      return b_.getInt8Ty();
    case DType::BFloat16:
      return b_.getFloatTy();  // computed in float32; rounded where stored or cast to
  }
  EMBER_CHECK(false, "unknown dtype");
}

llvm::Type* LLVMCodeGen::memory_type(DType t) {
  if (t == DType::BFloat16) return b_.getInt16Ty();  // the bits, rounded with integer ops
  return t == DType::Bool ? b_.getInt8Ty() : value_type(t);
}

llvm::Type* LLVMCodeGen::shaped_like(llvm::Type* elem, Value* v) const {
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(v->getType()))
    return llvm::VectorType::get(elem, vt->getElementCount());
  return elem;
}

Value* LLVMCodeGen::widen(Value* v) {
  return lanes_ && !is_vec(v) ? b_.CreateVectorSplat(lanes_, v) : v;
}

void LLVMCodeGen::match(Value*& a, Value*& b) {
  if (is_vec(a) || is_vec(b)) {
    a = widen(a);
    b = widen(b);
  }
}

Value* LLVMCodeGen::int_cast(Value* v, llvm::Type* to) { return b_.CreateSExtOrTrunc(v, to); }

Value* LLVMCodeGen::buffer_ptr(const Buffer& b) {
  auto it = buffers_.find(b.get());
  EMBER_CHECK(it != buffers_.end(), "buffer ", b->name, " is used in ", func_name_,
              " outside its allocation");
  return it->second;
}

Value* LLVMCodeGen::element_ptr(const Buffer& b, Value* index) {
  return b_.CreateInBoundsGEP(memory_type(b->dtype), buffer_ptr(b), index);
}

// Bool is i1 in registers and i8 in memory, bfloat16 float in registers and i16 in memory;
// `v` may be a scalar or a vector.
Value* LLVMCodeGen::to_memory(DType t, Value* v) {
  if (t == DType::BFloat16) return bf16_bits(v);
  if (t != DType::Bool) return v;
  return b_.CreateZExt(v, shaped_like(b_.getInt8Ty(), v));
}

Value* LLVMCodeGen::from_memory(DType t, Value* v) {
  if (t == DType::BFloat16) return bf16_widen(v);
  if (t != DType::Bool) return v;
  return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
}

// Round to nearest even with integer operations, as PyTorch's c10::BFloat16 does (and
// ember::bf16_bits, which constant folding uses): bits + 0x7FFF + (bit 16), upper half; NaN
// gives the quiet NaN 0x7FC0. Integer code vectorizes on every x86 CPU (an fptrunc to
// bfloat is a library call per element without AVX512_BF16, which also flushes subnormals).
Value* LLVMCodeGen::bf16_bits(Value* v) {
  llvm::Type* i32 = shaped_like(b_.getInt32Ty(), v);
  llvm::Type* i16 = shaped_like(b_.getInt16Ty(), v);
  auto c32 = [&](uint32_t x) { return llvm::ConstantInt::get(i32, x); };
  Value* u = b_.CreateBitCast(v, i32);
  Value* odd = b_.CreateAnd(b_.CreateLShr(u, c32(16)), c32(1));
  Value* rounded = b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(u, c32(0x7FFF)), odd), c32(16));
  Value* nan = b_.CreateFCmpUNO(v, v);
  return b_.CreateTrunc(b_.CreateSelect(nan, c32(0x7FC0), rounded), i16);
}

Value* LLVMCodeGen::bf16_widen(Value* bits) {
  llvm::Type* i32 = shaped_like(b_.getInt32Ty(), bits);
  Value* u = b_.CreateShl(b_.CreateZExt(bits, i32), llvm::ConstantInt::get(i32, 16));
  return b_.CreateBitCast(u, shaped_like(b_.getFloatTy(), bits));
}

llvm::AllocaInst* LLVMCodeGen::entry_alloca(llvm::Type* t, const std::string& name) {
  // Allocas in the entry block are static: inside loops they are reused, not re-grown.
  llvm::BasicBlock& entry = func_->getEntryBlock();
  llvm::IRBuilder<> tmp(&entry, entry.getFirstInsertionPt());
  llvm::AllocaInst* a = tmp.CreateAlloca(t, nullptr, name);
  a->setAlignment(llvm::Align(kAlignment));
  return a;
}

void LLVMCodeGen::bind(const PrimVarNode* v, Value* value, std::optional<int64_t> stride) {
  vars_[v] = value;
  if (is_vec(value)) varying_[v] = stride;
}

void LLVMCodeGen::unbind(const PrimVarNode* v) {
  vars_.erase(v);
  varying_.erase(v);
}

// ---------------------------------------------------------------- vectorization analysis

bool LLVMCodeGen::is_varying(const PrimExpr& e) const {
  if (varying_.empty()) return false;
  bool found = false;
  visit_prim(e, [&](const PrimExpr& x) {
    if (auto* v = x.as<PrimVarNode>(); v && varying_.count(v)) found = true;
  });
  return found;
}

std::optional<int64_t> LLVMCodeGen::lane_stride(const PrimExpr& e) const {
  if (!is_varying(e)) return 0;
  if (auto* v = e.as<PrimVarNode>()) return varying_.at(v);
  auto* op = e.as<BinaryNode>();
  if (!op || !is_int(e.dtype())) return std::nullopt;
  int64_t c;
  switch (op->op) {
    case BinaryOp::Add:
    case BinaryOp::Sub: {
      auto sa = lane_stride(op->a), sb = lane_stride(op->b);
      if (!sa || !sb) return std::nullopt;
      return op->op == BinaryOp::Add ? *sa + *sb : *sa - *sb;
    }
    case BinaryOp::Mul: {
      if (as_int(op->a, &c)) {
        if (auto s = lane_stride(op->b)) return c * *s;
      } else if (as_int(op->b, &c)) {
        if (auto s = lane_stride(op->a)) return c * *s;
      }
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

// ---------------------------------------------------------------------------- expressions

Value* LLVMCodeGen::emit(const PrimExpr& e) {
  EMBER_CHECK(e, "null expression in ", func_name_);
  switch (e.kind()) {
    case PrimKind::IntImm:
      return llvm::ConstantInt::get(value_type(e.dtype()), e.as<IntImmNode>()->value, true);
    case PrimKind::FloatImm: {
      double v = e.as<FloatImmNode>()->value;
      if (e.dtype() == DType::BFloat16) v = round_bf16(v);
      return llvm::ConstantFP::get(value_type(e.dtype()), v);
    }
    case PrimKind::Var: {
      auto it = vars_.find(e.as<PrimVarNode>());
      EMBER_CHECK(it != vars_.end(), "unbound variable ", e.as<PrimVarNode>()->name, " in ",
                  func_name_);
      return it->second;
    }
    case PrimKind::Binary:
      // bfloat16 arithmetic: float32's, rounded (PyTorch's bfloat16 op on one element).
      if (e.dtype() == DType::BFloat16)
        return bf16_widen(bf16_bits(emit_binary(e.as<BinaryNode>())));
      return emit_binary(e.as<BinaryNode>());
    case PrimKind::Compare:
      return emit_compare(e.as<CompareNode>());
    case PrimKind::Not:
      return b_.CreateNot(emit(e.as<NotNode>()->a));
    case PrimKind::Select: {
      auto* op = e.as<SelectNode>();
      if (Value* v = emit_guarded_load(op)) return v;
      Value *c = emit(op->cond), *t = emit(op->t), *f = emit(op->f);
      if (is_vec(c) || is_vec(t) || is_vec(f)) {
        c = widen(c);
        t = widen(t);
        f = widen(f);
      }
      return b_.CreateSelect(c, t, f);
    }
    case PrimKind::Cast: {
      auto* op = e.as<CastNode>();
      Value* v = emit(op->value);
      if (Value* r = emit_clipped_cast(e.dtype(), op->value, v)) return r;
      return emit_cast(e.dtype(), op->value.dtype(), v);
    }
    case PrimKind::Reinterpret: {
      auto* op = e.as<ReinterpretNode>();
      EMBER_CHECK(e.dtype() != DType::Bool && op->value.dtype() != DType::Bool &&
                      dtype_bytes(e.dtype()) == dtype_bytes(op->value.dtype()),
                  "reinterpret between types of different sizes: ", to_string(e));
      Value* v = emit(op->value);
      return b_.CreateBitCast(v, shaped_like(value_type(e.dtype()), v));
    }
    case PrimKind::Load:
      return emit_load(e.as<LoadNode>());
    case PrimKind::Call:
      if (e.dtype() == DType::BFloat16)
        return bf16_widen(bf16_bits(emit_call(e.as<PrimCallNode>())));
      return emit_call(e.as<PrimCallNode>());
    case PrimKind::Let: {
      auto* op = e.as<LetNode>();
      Value* v = emit(op->value);
      bind(op->var.as<PrimVarNode>(), v, lane_stride(op->value));
      Value* r = emit(op->body);
      unbind(op->var.as<PrimVarNode>());
      return r;
    }
    case PrimKind::ProducerLoad:
    case PrimKind::Reduce:
      EMBER_CHECK(false, "tensor-expression node reached codegen in ", func_name_,
                  " (lower it first): ", to_string(e));
  }
  EMBER_CHECK(false, "unknown expression kind");
}

Value* LLVMCodeGen::emit_binary(const BinaryNode* op) {
  Value *a = emit(op->a), *b = emit(op->b);
  match(a, b);
  DType t = op->a.dtype();
  bool fp = is_float(t);
  llvm::Type* ty = a->getType();
  Value* zero = llvm::Constant::getNullValue(ty);
  switch (op->op) {
    case BinaryOp::Add:
      return fp ? b_.CreateFAdd(a, b) : b_.CreateAdd(a, b);
    case BinaryOp::Sub:
      return fp ? b_.CreateFSub(a, b) : b_.CreateSub(a, b);
    case BinaryOp::Mul:
      return fp ? b_.CreateFMul(a, b) : b_.CreateMul(a, b);
    case BinaryOp::Div:
    case BinaryOp::Mod: {
      if (fp) return op->op == BinaryOp::Div ? b_.CreateFDiv(a, b) : b_.CreateFRem(a, b);
      // Masked-off lanes must not divide by a zero that the guard was there to avoid.
      if (mask_ && is_vec(b) && !llvm::isa<llvm::Constant>(b))
        b = b_.CreateSelect(mask_, b, llvm::ConstantInt::get(ty, 1));
      if (is_unsigned(t))
        return op->op == BinaryOp::Div ? b_.CreateUDiv(a, b) : b_.CreateURem(a, b);
      // Floor division: C's truncating quotient, minus one when the remainder is nonzero
      // and has the other sign than the divisor.
      Value* q = b_.CreateSDiv(a, b);
      Value* r = b_.CreateSRem(a, b);
      Value* adjust =
          b_.CreateAnd(b_.CreateICmpNE(r, zero), b_.CreateICmpSLT(b_.CreateXor(r, b), zero));
      if (op->op == BinaryOp::Div) return b_.CreateSub(q, b_.CreateZExt(adjust, ty));
      return b_.CreateAdd(r, b_.CreateSelect(adjust, b, zero));
    }
    case BinaryOp::Min:
    case BinaryOp::Max: {
      bool is_min = op->op == BinaryOp::Min;
      llvm::Intrinsic::ID id = fp ? (is_min ? llvm::Intrinsic::minimum : llvm::Intrinsic::maximum)
                               : is_unsigned(t)
                                   ? (is_min ? llvm::Intrinsic::umin : llvm::Intrinsic::umax)
                                   : (is_min ? llvm::Intrinsic::smin : llvm::Intrinsic::smax);
      Value* v = b_.CreateBinaryIntrinsic(id, a, b);
      // NaN propagates, but -0 and +0 need no order (PyTorch's max and relu keep either):
      // without nsz, x86 orders them with a sign test and blend per step, which slows a max
      // reduction's horizontal steps (calibration: min and max without signed zeros).
      if (auto* call = llvm::dyn_cast<llvm::CallInst>(v); call && fp) {
        call->setHasNoSignedZeros(true);
        // Neither side can be NaN (nan_free_buffers): one vmaxps, no NaN test and blend.
        if (never_nan(op->a, nan_free_) && never_nan(op->b, nan_free_)) call->setHasNoNaNs(true);
      }
      return v;
    }
    case BinaryOp::BitAnd:
      return b_.CreateAnd(a, b);
    case BinaryOp::BitOr:
      return b_.CreateOr(a, b);
    case BinaryOp::BitXor:
      return b_.CreateXor(a, b);
    case BinaryOp::Shl:
      return b_.CreateShl(a, b);
    case BinaryOp::Shr:
      return is_unsigned(t) ? b_.CreateLShr(a, b) : b_.CreateAShr(a, b);
  }
  EMBER_CHECK(false, "unknown binary op");
}

Value* LLVMCodeGen::emit_compare(const CompareNode* op) {
  // The predicate is read first: read after the emits, GCC 12's -fsanitize=null checked a
  // null pointer in place of `op` (a false report, seen in gdb with op valid).
  const int pred = static_cast<int>(op->op);
  Value *a = emit(op->a), *b = emit(op->b);
  match(a, b);
  using P = llvm::CmpInst::Predicate;
  DType t = op->a.dtype();
  if (is_float(t)) {
    static const P kFloat[] = {P::FCMP_OEQ, P::FCMP_UNE, P::FCMP_OLT,
                               P::FCMP_OLE, P::FCMP_OGT, P::FCMP_OGE};
    return b_.CreateFCmp(kFloat[pred], a, b);
  }
  static const P kSigned[] = {P::ICMP_EQ,  P::ICMP_NE,  P::ICMP_SLT,
                              P::ICMP_SLE, P::ICMP_SGT, P::ICMP_SGE};
  static const P kUnsigned[] = {P::ICMP_EQ,  P::ICMP_NE,  P::ICMP_ULT,
                                P::ICMP_ULE, P::ICMP_UGT, P::ICMP_UGE};
  return b_.CreateICmp((is_unsigned(t) ? kUnsigned : kSigned)[pred], a, b);
}

Value* LLVMCodeGen::emit_cast(DType to, DType from, Value* v) {
  if (to == from) return v;
  // bfloat16 is a float32 in registers: from it, a float32's cast; to it, float32's
  // (double rounds to float32 first, as PyTorch's conversion does), rounded.
  if (from == DType::BFloat16) return emit_cast(to, DType::Float32, v);
  if (to == DType::BFloat16) return bf16_widen(bf16_bits(emit_cast(DType::Float32, from, v)));
  llvm::Type* ty = shaped_like(value_type(to), v);
  if (to == DType::Bool) {
    // x != 0; NaN is true, as in C and PyTorch.
    Value* zero = llvm::Constant::getNullValue(v->getType());
    return is_float(from) ? b_.CreateFCmpUNE(v, zero) : b_.CreateICmpNE(v, zero);
  }
  if (is_unsigned(from)) return is_float(to) ? b_.CreateUIToFP(v, ty) : b_.CreateZExtOrTrunc(v, ty);
  if (is_float(from) && is_float(to)) return b_.CreateFPCast(v, ty);
  // Saturating, not fptosi (poison for NaN and out-of-range values): NaN gives 0, values
  // past the int's range its min or max; an 8-bit type takes the int32 value, wrapped (as
  // PyTorch's conversion does, and make_const).
  if (is_float(from) && dtype_bytes(to) == 1)
    return b_.CreateTrunc(emit_fptosi_sat(shaped_like(b_.getInt32Ty(), v), v), ty);
  if (is_float(from)) return emit_fptosi_sat(ty, v);
  if (is_float(to)) return b_.CreateSIToFP(v, ty);
  return b_.CreateSExtOrTrunc(v, ty);
}

namespace {

// The range [lo, hi] of a clip with constant bounds (clip's min(max(x, lo), hi), either
// way round), or false.
bool clip_range(const PrimExpr& e, double* lo, double* hi) {
  auto* outer = e.as<BinaryNode>();
  if (!outer || (outer->op != BinaryOp::Min && outer->op != BinaryOp::Max)) return false;
  const BinaryOp inner_op = outer->op == BinaryOp::Min ? BinaryOp::Max : BinaryOp::Min;
  double o, i;
  for (const PrimExpr* bound : {&outer->b, &outer->a}) {
    const BinaryNode* inner = (bound == &outer->b ? outer->a : outer->b).as<BinaryNode>();
    if (!inner || inner->op != inner_op || !as_float(*bound, &o)) continue;
    if (as_float(inner->b, &i) || as_float(inner->a, &i)) {
      *lo = std::min(o, i), *hi = std::max(o, i);
      return true;
    }
  }
  return false;
}

}  // namespace

// A float32 or float64 clipped into the int32 range converts exactly with fptosi (an 8-bit
// type takes the int32 value, truncated): of the saturating cast (emit_fptosi_sat: a clamp,
// a compare and select for the top, a NaN test and select) only the NaN select remains,
// and none where the clip's input is never NaN. A quantize (clip(round(x / s) + z, 0, 255)
// cast to uint8, every int8 conv's epilogue) is then a conversion and a NaN select where it
// took six instructions more. Null where the value is not such a clip.
Value* LLVMCodeGen::emit_clipped_cast(DType to, const PrimExpr& value, Value* v) {
  const DType from = value.dtype();
  double lo, hi;
  if ((from != DType::Float32 && from != DType::Float64) || !is_int(to) || to == DType::Bool ||
      dtype_bytes(to) > 4 || !clip_range(value, &lo, &hi) || lo < -2147483648.0 ||
      hi >= 2147483648.0)
    return nullptr;
  llvm::Type* i32 = shaped_like(b_.getInt32Ty(), v);
  Value* r = b_.CreateFPToSI(v, i32);
  if (!never_nan(value, nan_free_))
    r = b_.CreateSelect(b_.CreateFCmpUNO(v, v), llvm::Constant::getNullValue(i32), r);
  return b_.CreateTrunc(r, shaped_like(value_type(to), v));
}

// llvm.fptosi.sat without the intrinsic: x86 has no saturating conversion, so LLVM 19
// scalarizes it on a vector (four instructions per lane, in exp's 2^n scale). Scalars take
// the same form, because LLVM's loop vectorizer widens a scalar loop's fptosi.sat into that
// scalarized vector one too (a row reduction of exp, which the vectorizer widens thanks to
// the reassoc flag; calibration: fptosi.sat). Clamped into range first, plain fptosi is
// exact, and the saturated ends and NaN are selects.
Value* LLVMCodeGen::emit_fptosi_sat(llvm::Type* ty, Value* v) {
  llvm::Type* ft = v->getType();
  const llvm::fltSemantics& sem = ft->getScalarType()->getFltSemantics();
  const unsigned bits = ty->getScalarSizeInBits();
  if (&sem != &llvm::APFloat::IEEEsingle() && &sem != &llvm::APFloat::IEEEdouble())
    return b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {ty, ft}, {v});
  // -2^(bits-1) is exact in any float type; the largest float below 2^(bits-1) converts.
  llvm::APFloat lo(sem), hi(sem), limit(sem);
  lo.convertFromAPInt(llvm::APInt::getSignedMinValue(bits), true,
                      llvm::APFloat::rmNearestTiesToEven);
  limit.convertFromAPInt(llvm::APInt::getOneBitSet(bits + 1, bits - 1), false,
                         llvm::APFloat::rmNearestTiesToEven);
  hi.convertFromAPInt(llvm::APInt::getSignedMaxValue(bits), true, llvm::APFloat::rmTowardZero);
  auto splat = [&](const llvm::APFloat& f) { return llvm::ConstantFP::get(ft, f); };
  Value* clamped = b_.CreateMinNum(b_.CreateMaxNum(v, splat(lo)), splat(hi));
  Value* r = b_.CreateFPToSI(clamped, ty);
  Value* max_int = llvm::ConstantInt::get(ty, llvm::APInt::getSignedMaxValue(bits));
  r = b_.CreateSelect(b_.CreateFCmpOGE(v, splat(limit)), max_int, r);
  return b_.CreateSelect(b_.CreateFCmpUNO(v, v), llvm::Constant::getNullValue(ty), r);
}

Value* LLVMCodeGen::emit_barrier() {
  EMBER_CHECK(false, "barrier in ", func_name_, ": barriers exist only on a GPU target");
}

// Off the GPU an asynchronous copy is a copy, done at once; its groups need no waiting.
Value* LLVMCodeGen::emit_async_copy(const PrimCallNode* op) {
  if (op->op != Intrinsic::AsyncCopy) return b_.getInt32(0);
  auto* dst = op->args[0].as<LoadNode>();
  EMBER_CHECK(dst && op->args[1].as<LoadNode>(), "async_copy needs two loads in ", func_name_);
  Value* value = emit(op->args[1]);
  Value* index = emit(dst->index);
  EMBER_CHECK(!is_vec(index) && !is_vec(value), "async_copy of vectors in ", func_name_);
  b_.CreateStore(to_memory(dst->buffer->dtype, value), element_ptr(dst->buffer, index));
  return b_.getInt32(0);
}

Value* LLVMCodeGen::emit_warp_mma(const PrimCallNode*) {
  EMBER_CHECK(false, "mma_sync in ", func_name_,
              ": warp matrix instructions exist only on a GPU target");
}

void LLVMCodeGen::emit_gpu_for(const ForNode* op) {
  EMBER_CHECK(false, "loop ", op->var.name(), " in ", func_name_, " is bound to ",
              for_kind_name(op->for_kind), ": GPU-bound loops need target=\"cuda\"");
}

Value* LLVMCodeGen::emit_call(const PrimCallNode* op) {
  if (op->op == Intrinsic::Barrier) return emit_barrier();  // the one call without arguments
  if (op->op == Intrinsic::Prefetch) return emit_prefetch(op);
  if (op->op == Intrinsic::MmaSync) return emit_warp_mma(op);
  if (op->op == Intrinsic::AsyncCopy || op->op == Intrinsic::AsyncCommit ||
      op->op == Intrinsic::AsyncWait)
    return emit_async_copy(op);
  std::vector<Value*> args;
  bool vec = false;
  for (auto& a : op->args) {
    args.push_back(emit(a));
    vec = vec || is_vec(args.back());
  }
  if (vec)
    for (auto& a : args) a = widen(a);
  auto arity = [&](size_t n) {
    EMBER_CHECK(args.size() == n, "intrinsic call with ", args.size(), " arguments in ",
                func_name_);
  };
  DType t = op->args[0].dtype();
  bool fp = is_float(t);
  switch (op->op) {
    case Intrinsic::Sqrt:
      arity(1);
      EMBER_CHECK(fp, "sqrt of a non-float value in ", func_name_);
      return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, args[0]);
    case Intrinsic::Floor:
    case Intrinsic::Ceil:
    case Intrinsic::Round: {
      arity(1);
      if (!fp) return args[0];  // integers are already whole
      auto id = op->op == Intrinsic::Floor  ? llvm::Intrinsic::floor
                : op->op == Intrinsic::Ceil ? llvm::Intrinsic::ceil
                                            : llvm::Intrinsic::roundeven;  // as torch.round
      return b_.CreateUnaryIntrinsic(id, args[0]);
    }
    case Intrinsic::Abs:
      arity(1);
      if (fp) return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, args[0]);
      if (t == DType::Bool) return args[0];
      return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, args[0], b_.getFalse());
    case Intrinsic::IsNan:
      arity(1);
      if (!fp)
        return emit_cast(op->dtype, DType::Bool,
                         llvm::ConstantInt::getFalse(shaped_like(b_.getInt1Ty(), args[0])));
      return emit_cast(op->dtype, DType::Bool, b_.CreateFCmpUNO(args[0], args[0]));
    case Intrinsic::Fma:
      arity(3);
      EMBER_CHECK(fp, "fma of non-float values in ", func_name_);
      return b_.CreateIntrinsic(llvm::Intrinsic::fma, {args[0]->getType()}, args);
    case Intrinsic::CheckIndex:
      return emit_check_index(op, args);
    case Intrinsic::DotU8S8:
    case Intrinsic::DotU7S8:
      arity(3);
      EMBER_CHECK(t == DType::Int32 && op->args[1].dtype() == DType::Int32 &&
                      op->args[2].dtype() == DType::Int32,
                  "dot_u8s8 of non-int32 values in ", func_name_);
      return emit_dot_u8s8(args, op->op == Intrinsic::DotU7S8);
    case Intrinsic::DotBF16:
      arity(3);
      EMBER_CHECK(t == DType::Float32 && op->args[1].dtype() == DType::Int32 &&
                      op->args[2].dtype() == DType::Int32,
                  "dot_bf16 of other than a float32 and int32 words in ", func_name_);
      return emit_dot_bf16(args);
    case Intrinsic::Barrier:
    case Intrinsic::Prefetch:
    case Intrinsic::MmaSync:
    case Intrinsic::AsyncCopy:
    case Intrinsic::AsyncCommit:
    case Intrinsic::AsyncWait:
      break;  // handled above
  }
  EMBER_CHECK(false, "unknown intrinsic");
}

Value* LLVMCodeGen::emit_dot_u8s8(const std::vector<Value*>& args, bool seven_bits) {
  Value *acc = args[0], *a = args[1], *b = args[2];
  const unsigned n =
      is_vec(acc) ? llvm::cast<llvm::FixedVectorType>(acc->getType())->getNumElements() : 1;
  // VNNI: AVX-512 VNNI at 512 bits; at 256 and 128 bits with AVX512VL, or AVX-VNNI (the VEX
  // form of the same instruction, which LLVM selects for the same intrinsic).
  const bool vnni = has_feature(features_, "avx512vnni");
  const bool narrow_vnni =
      (vnni && has_feature(features_, "avx512vl")) || has_feature(features_, "avxvnni");
  // Without VNNI, exact on vpmaddwd (pairs of int16 products summed into int32 lanes): the
  // words seen as int16 lanes, a's bytes zero-extended (the even ones by a mask, the odd
  // ones by a logical shift), b's sign-extended (two shifts, one), and two vpmaddwd, one of
  // the even bytes, one of the odd. Each lane sums two u8 * s8 products: |sum| <= 65280, far
  // from the one case vpmaddwd saturates (-32768 * -32768 twice). vpmaddubsw would take the
  // bytes as they are but saturates its int16 pair sums (255 * 127 * 2 > 32767); made exact
  // (a split at bit 7) it costs four multiplies per vector where this takes two.
  // vpmaddubsw came with SSSE3 (x86-64's baseline, SSE2, has the DotU8S8 form only).
  seven_bits = seven_bits && has_feature(features_, "ssse3");
  auto has_vnni_at = [&](unsigned w) { return w == 16 ? vnni : narrow_vnni; };
  auto has_madd_at = [&](unsigned w) {
    return has_feature(features_, w == 16 ? "avx512bw" : w == 8 ? "avx2" : "sse2");
  };
  // One instruction's width (a VNNI one before the pmaddwd pair): the widest no wider than
  // the vector (four lanes at least); a vector of another width goes in such pieces, its
  // last one padded with zero words.
  unsigned piece = 0;
  bool use_vnni = false;
  for (bool with_vnni : {true, false})
    for (unsigned w : {16u, 8u, 4u})
      if (n > 1 && !piece && w <= std::max(n, 4u) &&
          (with_vnni ? has_vnni_at(w) : has_madd_at(w))) {
        piece = w;
        use_vnni = with_vnni;
      }
  auto one_piece = [&](Value* acc, Value* a, Value* b) -> Value* {
    if (use_vnni)
      return b_.CreateIntrinsic(piece == 16  ? llvm::Intrinsic::x86_avx512_vpdpbusd_512
                                : piece == 8 ? llvm::Intrinsic::x86_avx512_vpdpbusd_256
                                             : llvm::Intrinsic::x86_avx512_vpdpbusd_128,
                                {}, {acc, a, b});
    const auto madd = piece == 16  ? llvm::Intrinsic::x86_avx512_pmaddw_d_512
                      : piece == 8 ? llvm::Intrinsic::x86_avx2_pmadd_wd
                                   : llvm::Intrinsic::x86_sse2_pmadd_wd;
    auto* halves = llvm::FixedVectorType::get(b_.getInt16Ty(), 2 * piece);
    if (seven_bits) {  // a's bytes below 128: |pair sum| <= 127 * 128 * 2 < 2^15, exact
      const auto maddubs = piece == 16  ? llvm::Intrinsic::x86_avx512_pmaddubs_w_512
                           : piece == 8 ? llvm::Intrinsic::x86_avx2_pmadd_ub_sw
                                        : llvm::Intrinsic::x86_ssse3_pmadd_ub_sw_128;
      auto* bytes = llvm::FixedVectorType::get(b_.getInt8Ty(), 4 * piece);
      Value* pairs =
          b_.CreateIntrinsic(maddubs, {}, {b_.CreateBitCast(a, bytes), b_.CreateBitCast(b, bytes)});
      Value* quads = b_.CreateIntrinsic(madd, {}, {pairs, llvm::ConstantInt::get(halves, 1)});
      return b_.CreateAdd(acc, quads);
    }
    Value* eight = llvm::ConstantInt::get(halves, 8);
    Value* a16 = b_.CreateBitCast(a, halves);
    Value* b16 = b_.CreateBitCast(b, halves);
    Value* a_even = b_.CreateAnd(a16, llvm::ConstantInt::get(halves, 0xFF));
    Value* a_odd = b_.CreateLShr(a16, eight);
    Value* b_even = b_.CreateAShr(b_.CreateShl(b16, eight), eight);
    Value* b_odd = b_.CreateAShr(b16, eight);
    Value* even = b_.CreateIntrinsic(madd, {}, {a_even, b_even});
    Value* odd = b_.CreateIntrinsic(madd, {}, {a_odd, b_odd});
    return b_.CreateAdd(b_.CreateAdd(acc, even), odd);
  };
  if (piece == n) return one_piece(acc, a, b);
  if (piece) {
    const unsigned padded = (n + piece - 1) / piece * piece;
    auto lanes = [&](Value* v, unsigned first, unsigned count) {  // zero past lane n
      llvm::SmallVector<int, 64> pick;
      for (unsigned l = first; l < first + count; ++l)
        pick.push_back(static_cast<int>(l < n ? l : n));  // lane n: the zero vector's first
      return b_.CreateShuffleVector(v, llvm::Constant::getNullValue(v->getType()), pick);
    };
    llvm::SmallVector<Value*, 8> sums;
    for (unsigned p = 0; p < padded; p += piece)
      sums.push_back(one_piece(lanes(acc, p, piece), lanes(a, p, piece), lanes(b, p, piece)));
    Value* all = llvm::concatenateVectors(b_, sums);
    llvm::SmallVector<int, 64> first_n;
    for (unsigned l = 0; l < n; ++l) first_n.push_back(static_cast<int>(l));
    return b_.CreateShuffleVector(all, first_n);
  }
  // Exact elsewhere (scalar code; no SSE2): u8 * s8 widened to int32, then each group of
  // four bytes summed.
  auto bytes = [&](Value* v, bool is_signed) {
    Value* x = b_.CreateBitCast(v, llvm::FixedVectorType::get(b_.getInt8Ty(), 4 * n));
    auto* wide = llvm::FixedVectorType::get(b_.getInt32Ty(), 4 * n);
    return is_signed ? b_.CreateSExt(x, wide) : b_.CreateZExt(x, wide);
  };
  Value* products = b_.CreateMul(bytes(a, false), bytes(b, true));
  Value* sum = acc;
  for (unsigned j = 0; j < 4; ++j) {
    llvm::SmallVector<int, 16> pick;
    for (unsigned lane = 0; lane < n; ++lane) pick.push_back(static_cast<int>(4 * lane + j));
    Value* part = b_.CreateShuffleVector(products, pick);
    if (n == 1) part = b_.CreateExtractElement(part, uint64_t{0});
    sum = b_.CreateAdd(sum, part);
  }
  return sum;
}

Value* LLVMCodeGen::emit_dot_bf16(const std::vector<Value*>& args) {
  Value *acc = args[0], *a = args[1], *b = args[2];
  const unsigned n =
      is_vec(acc) ? llvm::cast<llvm::FixedVectorType>(acc->getType())->getNumElements() : 1;
  // AVX512_BF16: 512 bits, and 256 or 128 with AVX512VL.
  const bool bf16 = has_feature(features_, "avx512bf16");
  const bool narrow = bf16 && has_feature(features_, "avx512vl");
  if ((n == 16 && bf16) || ((n == 8 || n == 4) && narrow)) {
    const llvm::Intrinsic::ID id = n == 16  ? llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512
                                   : n == 8 ? llvm::Intrinsic::x86_avx512bf16_dpbf16ps_256
                                            : llvm::Intrinsic::x86_avx512bf16_dpbf16ps_128;
    llvm::Function* fn = llvm::Intrinsic::getDeclaration(module_, id);
    llvm::FunctionType* ft = fn->getFunctionType();
    return b_.CreateCall(fn, {acc, b_.CreateBitCast(a, ft->getParamType(1)),
                              b_.CreateBitCast(b, ft->getParamType(2))});
  }
  // Elsewhere the halves widened to float32 (exact) and two FMAs in vdpbf16ps's order: the
  // same sums, but subnormals are kept.
  llvm::Type* i32 = shaped_like(b_.getInt32Ty(), a);
  llvm::Type* f32 = shaped_like(b_.getFloatTy(), a);
  auto hi = [&](Value* w) {
    return b_.CreateBitCast(b_.CreateAnd(w, llvm::ConstantInt::get(i32, 0xFFFF0000u)), f32);
  };
  auto lo = [&](Value* w) {
    return b_.CreateBitCast(b_.CreateShl(w, llvm::ConstantInt::get(i32, 16)), f32);
  };
  Value* sum = b_.CreateIntrinsic(llvm::Intrinsic::fma, {f32}, {hi(a), hi(b), acc});
  return b_.CreateIntrinsic(llvm::Intrinsic::fma, {f32}, {lo(a), lo(b), sum});
}

Value* LLVMCodeGen::emit_prefetch(const PrimCallNode* op) {
  auto* l = op->args.size() == 1 ? op->args[0].as<LoadNode>() : nullptr;
  EMBER_CHECK(l, "prefetch needs one load as its argument in ", func_name_);
  Value* index = emit(l->index);
  EMBER_CHECK(!is_vec(index), "prefetch of a vector of addresses in ", func_name_);
  // llvm.prefetch(address, read, locality 3 (keep in every level), data cache)
  b_.CreateIntrinsic(
      llvm::Intrinsic::prefetch, {b_.getPtrTy()},
      {element_ptr(l->buffer, index), b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
  return b_.getInt32(0);
}

Value* LLVMCodeGen::emit_check_index(const PrimCallNode* op, const std::vector<Value*>& args) {
  int64_t size = 0, axis = 0, allow_negative = 0;
  EMBER_CHECK(args.size() == 4 && op->args[0].dtype() == DType::Int64 &&
                  as_int(op->args[1], &size) && as_int(op->args[2], &axis) &&
                  as_int(op->args[3], &allow_negative),
              "check_index needs an int64 index and immediate size, axis and flag in ", func_name_);
  Value* index = args[0];
  Value* zero = llvm::Constant::getNullValue(index->getType());
  Value* n = args[1];
  Value* wrapped = index;
  if (allow_negative)
    wrapped = b_.CreateSelect(b_.CreateICmpSLT(index, zero), b_.CreateAdd(index, n), index);
  // Unsigned: a negative index left after wrapping is out of range too.
  Value* bad = b_.CreateICmpUGE(wrapped, n);
  if (mask_ && is_vec(bad)) bad = b_.CreateAnd(bad, mask_);  // lanes past the end hold junk
  emit_index_error(bad, index, size, axis, allow_negative);
  return b_.CreateSelect(bad, zero, wrapped);
}

void LLVMCodeGen::emit_index_error(Value* bad, Value* index, int64_t size, int64_t axis,
                                   int64_t allow_negative) {
  Value* any = is_vec(bad) ? b_.CreateOrReduce(bad) : bad;
  auto* report = llvm::BasicBlock::Create(ctx_, "index.bad", func_);
  auto* ok = llvm::BasicBlock::Create(ctx_, "index.ok", func_);
  llvm::MDBuilder md(ctx_);
  b_.CreateCondBr(any, report, ok, md.createUnlikelyBranchWeights());
  b_.SetInsertPoint(report);
  Value* first = index;
  if (is_vec(bad)) {  // the first bad lane's index
    unsigned lanes = llvm::cast<llvm::FixedVectorType>(bad->getType())->getNumElements();
    Value* bits = b_.CreateBitCast(bad, b_.getIntNTy(lanes));
    Value* lane = b_.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, bits, b_.getTrue());
    first = b_.CreateExtractElement(index, lane);
  }
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::FunctionCallee fn = module_->getOrInsertFunction(
      "ember_index_error", llvm::FunctionType::get(b_.getVoidTy(), {i64, i64, i64, i64}, false));
  b_.CreateCall(fn, {first, b_.getInt64(size), b_.getInt64(axis), b_.getInt64(allow_negative)});
  b_.CreateBr(ok);
  b_.SetInsertPoint(ok);
}

Value* LLVMCodeGen::emit_load(const LoadNode* op) {
  DType t = op->buffer->dtype;
  llvm::Type* mt = memory_type(t);
  llvm::Align align(dtype_bytes(t));
  if (auto it = transposed_.find(op); it != transposed_.end() && lanes_ > 0 && !mask_) {
    // This iteration's column of its block, transposed before the loop (emit_transposed_loop):
    // the block of the unrolled loops' current combination.
    auto [array, loops] = it->second;
    Value* combination = b_.getInt64(0);
    for (const ForNode* f : loops->between) {
      int64_t n = 0;
      as_int(f->extent, &n);
      Value* i = b_.CreateSub(vars_.at(f->var.get()), int_cast(emit(f->min), b_.getInt64Ty()));
      combination = b_.CreateAdd(b_.CreateMul(combination, b_.getInt64(n)), i);
    }
    Value* column =
        b_.CreateAdd(b_.CreateMul(combination, b_.getInt64(lanes_)), transposed_column_);
    auto* vt = llvm::FixedVectorType::get(mt, lanes_);
    Value* at = b_.CreateInBoundsGEP(array->getAllocatedType(), array, {b_.getInt64(0), column});
    return from_memory(t, b_.CreateAlignedLoad(vt, at, column_alignment(vt)));
  }
  Value* index = emit(op->index);
  if (!is_vec(index) && !mask_)  // scalar code, or the same element in every lane
    return from_memory(t, b_.CreateAlignedLoad(mt, element_ptr(op->buffer, index), align));

  llvm::Type* vt = llvm::FixedVectorType::get(mt, lanes_);
  Value* pass = llvm::Constant::getNullValue(vt);
  if (is_vec(index) && lane_stride(op->index) == std::optional<int64_t>(1)) {
    // Contiguous: one vector load at lane 0's element.
    Value* base = element_ptr(op->buffer, b_.CreateExtractElement(index, uint64_t{0}));
    Value* v = mask_ ? static_cast<Value*>(b_.CreateMaskedLoad(vt, base, align, mask_, pass))
                     : b_.CreateAlignedLoad(vt, base, align);
    return from_memory(t, v);
  }
  // A small constant stride (a stride-2 convolution's input row): one contiguous load of
  // the (L-1)*s+1 elements the lanes span, then a shuffle that keeps every s-th. It reads
  // nothing past the last lane's element, so it is as safe as the gather it replaces.
  std::optional<int64_t> stride = is_vec(index) ? lane_stride(op->index) : std::nullopt;
  if (!mask_ && stride && *stride >= 2 && *stride <= 4) {
    const int64_t span = (lanes_ - 1) * *stride + 1;
    auto* wide = llvm::FixedVectorType::get(mt, span);
    Value* base = element_ptr(op->buffer, b_.CreateExtractElement(index, uint64_t{0}));
    Value* all = b_.CreateAlignedLoad(wide, base, align);
    std::vector<int> pick;
    for (int64_t l = 0; l < lanes_; ++l) pick.push_back(static_cast<int>(l * *stride));
    return from_memory(t, b_.CreateShuffleVector(all, pick));
  }
  // A larger constant stride (a column of a row-major matrix): a scalar load per lane at a
  // constant offset from lane 0's element. x86 has no fast gather (8 lanes of vgatherdps
  // cost more than 8 loads), and the per-lane addresses of a gather cost more still.
  if (!mask_ && stride && *stride != 0) {
    Value* base = element_ptr(op->buffer, b_.CreateExtractElement(index, uint64_t{0}));
    Value* v = llvm::PoisonValue::get(vt);
    for (int64_t l = 0; l < lanes_; ++l) {
      Value* at = b_.CreateInBoundsGEP(mt, base, b_.getInt64(l * *stride));
      v = b_.CreateInsertElement(v, b_.CreateAlignedLoad(mt, at, align), uint64_t(l));
    }
    return from_memory(t, v);
  }
  // Gather (a uniform index under a mask is a gather from one address).
  Value* ptrs = element_ptr(op->buffer, widen(index));
  return from_memory(t, b_.CreateMaskedGather(vt, ptrs, align, mask_, pass));
}

// select(inside, data[clamp(i)], fill) in a vector loop, where `inside` makes the clamps
// no-ops (a padded input): one masked load of the contiguous data[i], `fill` elsewhere,
// instead of a gather of the clamped addresses. Null when the select is not of this form.
Value* LLVMCodeGen::emit_guarded_load(const SelectNode* op) {
  auto* load = op->t.as<LoadNode>();
  if (!load || !is_float(load->buffer->dtype) || !is_varying(op->cond)) return nullptr;
  std::vector<const CompareNode*> facts;
  comparisons_of(op->cond, facts);
  PrimExpr index = without_implied_clamps(load->index, facts);
  if (index.same_as(load->index) || lane_stride(index) != std::optional<int64_t>(1)) return nullptr;
  DType t = load->buffer->dtype;
  if (memory_type(t) != value_type(t)) return nullptr;
  // Only vectors that fit one register: LLVM 19 miscompiles a masked load that x86 splits
  // into halves when a half's mask is all false (it loads that half unmasked instead of
  // taking the fill: 512-bit code on an AVX2 host read past a padded row).
  const int register_bits = widest_vector_bits(features_);
  if (lanes_ * dtype_bytes(t) * 8 > register_bits) return nullptr;
  Value* mask = widen(emit(op->cond));
  if (mask_) mask = b_.CreateAnd(mask_, mask);
  Value* fill = widen(emit(op->f));
  auto* vt = llvm::FixedVectorType::get(memory_type(t), lanes_);
  Value* first = b_.CreateExtractElement(widen(emit(index)), uint64_t{0});
  return b_.CreateMaskedLoad(vt, element_ptr(load->buffer, first), llvm::Align(dtype_bytes(t)),
                             mask, fill);
}

// ----------------------------------------------------------------------------- statements

void LLVMCodeGen::emit(const Stmt& s) {
  if (!s) return;
  switch (s.kind()) {
    case StmtKind::For:
      return emit_for(s.as<ForNode>());
    case StmtKind::Store:
      return emit_store(s.as<StoreNode>());
    case StmtKind::Allocate:
      return emit_allocate(s.as<AllocateNode>());
    case StmtKind::LetStmt: {
      auto* op = s.as<LetStmtNode>();
      Value* v = emit(op->value);
      bind(op->var.as<PrimVarNode>(), v, lane_stride(op->value));
      emit(op->body);
      unbind(op->var.as<PrimVarNode>());
      return;
    }
    case StmtKind::IfThenElse:
      return emit_if(s.as<IfThenElseNode>());
    case StmtKind::Seq:
      for (auto& x : s.as<SeqNode>()->seq) emit(x);
      return;
    case StmtKind::Evaluate:
      emit(s.as<EvaluateNode>()->value);
      return;
  }
}

void LLVMCodeGen::emit_for(const ForNode* op) {
  EMBER_CHECK(lanes_ == 0, "loop over ", op->var.name(), " inside a vectorized loop in ",
              func_name_, ": vectorized loops must be innermost");
  switch (op->for_kind) {
    case ForKind::Parallel:
      return emit_parallel_for(op);
    case ForKind::Vectorized:
      return emit_vectorized_for(op);
    case ForKind::GpuBlockX:
    case ForKind::GpuBlockY:
    case ForKind::GpuBlockZ:
    case ForKind::GpuThreadX:
    case ForKind::GpuThreadY:
    case ForKind::GpuThreadZ:
      return emit_gpu_for(op);
    case ForKind::Serial:
    case ForKind::WarpMma:  // on the GPU, lower_warp_mma replaced it; here a serial loop
    case ForKind::Unrolled: {
      // As the loop's annotations say (annotate_loops, a kernel pass).
      const LoopAnnotations& a = op->annotations;
      if (a.transposed_blocks) return emit_transposed_loop(op, transposed_loads(op));
      if (a.rolled_call) return emit_rolled_call(op);
      llvm::Type* t = value_type(op->var.dtype());
      Value* begin = int_cast(emit(op->min), t);
      Value* end = b_.CreateAdd(begin, int_cast(emit(op->extent), t));
      const char* hint = op->for_kind == ForKind::Unrolled ? "llvm.loop.unroll.full"
                         : a.sum_accumulators              ? "llvm.loop.unroll.disable"
                                                           : nullptr;
      return emit_serial_loop(op, begin, end, hint, a.sum_accumulators);
    }
  }
}

void LLVMCodeGen::emit_serial_loop(const ForNode* op, Value* begin, Value* end,
                                   const char* loop_hint, int interleave) {
  emit_loop(op->var.name(), begin, end, loop_hint, interleave, [&](Value* i) {
    bind(op->var.as<PrimVarNode>(), i, 0);
    emit(op->body);
    unbind(op->var.as<PrimVarNode>());
  });
}

void LLVMCodeGen::emit_loop(const std::string& name, Value* begin, Value* end,
                            const char* loop_hint, int interleave,
                            const std::function<void(Value*)>& body_fn) {
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx_, name + ".header", func_);
  auto* body = llvm::BasicBlock::Create(ctx_, name + ".body", func_);
  auto* exit = llvm::BasicBlock::Create(ctx_, name + ".end", func_);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* i = b_.CreatePHI(begin->getType(), 2, name);
  b_.CreateCondBr(b_.CreateICmpSLT(i, end), body, exit);

  b_.SetInsertPoint(body);
  body_fn(i);
  // i < end, so i + 1 cannot overflow.
  Value* next = b_.CreateAdd(i, llvm::ConstantInt::get(i->getType(), 1), "", false, true);
  llvm::BranchInst* back = b_.CreateBr(header);
  if (loop_hint) {
    llvm::TempMDTuple self = llvm::MDNode::getTemporary(ctx_, {});
    std::vector<llvm::Metadata*> ops = {
        self.get(), llvm::MDNode::get(ctx_, llvm::MDString::get(ctx_, loop_hint))};
    if (interleave > 0)
      ops.push_back(llvm::MDNode::get(
          ctx_, {llvm::MDString::get(ctx_, "llvm.loop.interleave.count"),
                 llvm::ConstantAsMetadata::get(b_.getInt32(static_cast<uint32_t>(interleave)))}));
    llvm::MDNode* loop_id = llvm::MDNode::getDistinct(ctx_, ops);
    loop_id->replaceOperandWith(0, loop_id);
    back->setMetadata(llvm::LLVMContext::MD_loop, loop_id);
  }
  i->addIncoming(begin, pre);
  i->addIncoming(next, b_.GetInsertBlock());
  b_.SetInsertPoint(exit);
}

// The V x V transpose of `rows` in registers: log2 V rounds, each swapping the off-diagonal
// h x h blocks of every 2h x 2h block (h = V/2, V/4, ..., 1), two shuffles per row pair.
std::vector<Value*> LLVMCodeGen::transpose_in_registers(std::vector<Value*> rows) {
  const int v = static_cast<int>(rows.size());
  for (int h = v / 2; h >= 1; h /= 2) {
    std::vector<int> low, high;  // row r's new elements, then row r + h's
    for (int c = 0; c < v; ++c) {
      low.push_back((c & h) ? v + c - h : c);
      high.push_back((c & h) ? v + c : c + h);
    }
    for (int r = 0; r < v; ++r) {
      if (r & h) continue;
      Value *a = rows[r], *b = rows[r + h];
      rows[r] = b_.CreateShuffleVector(a, b, low);
      rows[r + h] = b_.CreateShuffleVector(a, b, high);
    }
  }
  return rows;
}

// A serial loop around a vector loop of V lanes that reads columns (ir::transposed_loads): per
// V iterations, each such load's V x V block (one per combination of the unrolled loops in
// between) is read as V rows, transposed in registers and kept in a stack array that the
// iterations read a column of; the iterations past the last whole block run as written.
void LLVMCodeGen::emit_transposed_loop(const ForNode* op, const TransposedLoads& t) {
  int64_t lanes = 0, extent = 0;
  as_int(t.vector_loop->extent, &lanes);
  as_int(op->extent, &extent);
  llvm::Type* it = value_type(op->var.dtype());
  Value* begin = int_cast(emit(op->min), it);
  const int64_t blocks = extent / lanes;
  std::vector<llvm::AllocaInst*> arrays;
  for (const TransposedLoad& l : t.loads) {
    auto* vt = llvm::FixedVectorType::get(memory_type(l.load->buffer->dtype), lanes);
    arrays.push_back(entry_alloca(llvm::ArrayType::get(vt, t.combinations * lanes), "transposed"));
  }
  const char* hint = op->for_kind == ForKind::Unrolled ? "llvm.loop.unroll.full" : nullptr;
  emit_loop(
      op->var.name() + ".block", b_.getInt64(0), b_.getInt64(blocks), nullptr, 0,
      [&](Value* block) {
        Value* first = b_.CreateAdd(begin, b_.CreateMul(block, llvm::ConstantInt::get(it, lanes)));
        bind(op->var.as<PrimVarNode>(), first, 0);
        bind(t.vector_loop->var.as<PrimVarNode>(), int_cast(emit(t.vector_loop->min), it), 0);
        for (int64_t combination = 0; combination < t.combinations; ++combination) {
          for (int64_t k = t.between.size(), rest = combination; k-- > 0;) {
            int64_t n = 0;
            as_int(t.between[k]->extent, &n);
            Value* at = b_.CreateAdd(int_cast(emit(t.between[k]->min), it),
                                     llvm::ConstantInt::get(it, rest % n));
            bind(t.between[k]->var.as<PrimVarNode>(), at, 0);
            rest /= n;
          }
          for (size_t k = 0; k < t.loads.size(); ++k)
            transpose_block(t.loads[k], lanes, arrays[k], combination * lanes);
        }
        for (const ForNode* f : t.between) unbind(f->var.as<PrimVarNode>());
        unbind(t.vector_loop->var.as<PrimVarNode>());
        for (size_t k = 0; k < t.loads.size(); ++k) transposed_[t.loads[k].load] = {arrays[k], &t};
        emit_loop(op->var.name() + ".column", b_.getInt64(0), b_.getInt64(lanes), hint, 0,
                  [&](Value* column) {
                    transposed_column_ = column;
                    bind(op->var.as<PrimVarNode>(), b_.CreateAdd(first, int_cast(column, it)), 0);
                    emit(op->body);
                  });
        transposed_.clear();
        unbind(op->var.as<PrimVarNode>());
      });
  if (blocks * lanes < extent) {
    Value* rest = b_.CreateAdd(begin, llvm::ConstantInt::get(it, blocks * lanes));
    emit_serial_loop(op, rest, b_.CreateAdd(begin, llvm::ConstantInt::get(it, extent)), hint);
  }
}

// Reads the block of `l` at the loops' current values (the first column of the block, the
// vector loop at its first lane) as `lanes` rows and stores it transposed into
// array[first .. first + lanes).
void LLVMCodeGen::transpose_block(const TransposedLoad& l, int64_t lanes, llvm::AllocaInst* array,
                                  int64_t first) {
  DType t = l.load->buffer->dtype;
  llvm::Type* mt = memory_type(t);
  auto* vt = llvm::FixedVectorType::get(mt, lanes);
  Value* corner = element_ptr(l.load->buffer, emit(l.load->index));
  std::vector<Value*> rows;
  for (int64_t r = 0; r < lanes; ++r) {
    Value* at = b_.CreateInBoundsGEP(mt, corner, b_.getInt64(r * l.lane_stride));
    rows.push_back(b_.CreateAlignedLoad(vt, at, llvm::Align(dtype_bytes(t))));
  }
  rows = transpose_in_registers(std::move(rows));
  for (int64_t c = 0; c < lanes; ++c) {
    Value* at = b_.CreateInBoundsGEP(array->getAllocatedType(), array,
                                     {b_.getInt64(0), b_.getInt64(first + c)});
    b_.CreateAlignedStore(rows[c], at, column_alignment(vt));
  }
}

// A column of a transposed block's array: the array is kAlignment-aligned and its columns
// are vectors of a power-of-two size, so each is aligned to its size up to kAlignment.
llvm::Align LLVMCodeGen::column_alignment(llvm::FixedVectorType* column) const {
  const uint64_t bytes = module_->getDataLayout().getTypeAllocSize(column).getFixedValue();
  return llvm::Align(std::min<uint64_t>(kAlignment, bytes));
}

void LLVMCodeGen::emit_vectorized_for(const ForNode* op) {
  int64_t lanes = 0;
  EMBER_CHECK(as_int(op->extent, &lanes), "vectorized loop over ", op->var.name(), " in ",
              func_name_, " has a non-constant extent ", to_string(op->extent));
  llvm::Type* t = value_type(op->var.dtype());
  Value* begin = int_cast(emit(op->min), t);
  if (lanes <= 1 || lanes_collide(op)) {
    emit_serial_loop(op, begin, b_.CreateAdd(begin, llvm::ConstantInt::get(t, lanes)), nullptr);
    return;
  }
  lanes_ = static_cast<int>(lanes);
  std::vector<llvm::Constant*> steps;
  for (int64_t i = 0; i < lanes; ++i) steps.push_back(llvm::ConstantInt::get(t, i));
  Value* lane_values = b_.CreateAdd(widen(begin), llvm::ConstantVector::get(steps), op->var.name());
  bind(op->var.as<PrimVarNode>(), lane_values, 1);
  emit(op->body);
  unbind(op->var.as<PrimVarNode>());
  lanes_ = 0;
  mask_ = nullptr;
}

LLVMCodeGen::Closure LLVMCodeGen::closure_of(const ForNode* op, Value* begin) {
  Closure c;
  std::set<const void*> seen;
  auto use_buffer = [&](const Buffer& b) {
    if (buffers_.count(b.get()) && seen.insert(b.get()).second) c.buffers.push_back(b.get());
  };
  visit_prim(
      op->body,
      [&](const PrimExpr& e) {
        if (auto* v = e.as<PrimVarNode>(); v && vars_.count(v) && seen.insert(v).second)
          c.vars.push_back(v);
        if (auto* l = e.as<LoadNode>()) use_buffer(l->buffer);
      },
      [&](const Stmt& s) {
        if (auto* st = s.as<StoreNode>()) use_buffer(st->buffer);
      });
  c.scalar_types = {begin->getType()};
  c.fields = {begin};
  for (auto* v : c.vars) {
    c.scalar_types.push_back(vars_[v]->getType());
    c.fields.push_back(vars_[v]);
  }
  c.field_types = c.scalar_types;
  for (auto* b : c.buffers) {
    c.field_types.push_back(b_.getPtrTy());
    c.fields.push_back(buffers_[b]);
  }
  return c;
}

LLVMCodeGen::Closure LLVMCodeGen::make_closure(const ForNode* op, Value* begin) {
  Closure c = closure_of(op, begin);
  c.type = llvm::StructType::get(ctx_, c.field_types);
  c.value = entry_alloca(c.type, "closure");
  for (size_t i = 0; i < c.fields.size(); ++i)
    b_.CreateStore(c.fields[i], b_.CreateStructGEP(c.type, c.value, i));
  return c;
}

void LLVMCodeGen::in_function(llvm::Function* f, const std::function<void()>& emit_body) {
  llvm::BasicBlock* saved_block = b_.GetInsertBlock();
  llvm::Function* saved_func = func_;
  auto saved_vars = std::move(vars_);
  auto saved_buffers = std::move(buffers_);
  vars_.clear();
  buffers_.clear();
  func_ = f;
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", f));
  emit_body();
  b_.CreateRetVoid();
  func_ = saved_func;
  vars_ = std::move(saved_vars);
  buffers_ = std::move(saved_buffers);
  b_.SetInsertPoint(saved_block);
}

void LLVMCodeGen::emit_impl_loop(const ForNode* op, const Closure& c, llvm::Function* impl,
                                 const char* loop_hint) {
  in_function(impl, [&] {
    llvm::Type* t = value_type(op->var.dtype());
    Value* min = impl->getArg(2);
    for (size_t i = 0; i < c.vars.size(); ++i) {
      impl->getArg(3 + i)->setName(c.vars[i]->name);
      vars_[c.vars[i]] = impl->getArg(3 + i);
    }
    for (size_t i = 0; i < c.buffers.size(); ++i) {
      llvm::Argument* arg = impl->getArg(3 + c.vars.size() + i);
      arg->setName(c.buffers[i]->name);
      buffers_[c.buffers[i]] = arg;
    }
    emit_serial_loop(op, b_.CreateAdd(min, int_cast(impl->getArg(0), t)),
                     b_.CreateAdd(min, int_cast(impl->getArg(1), t)), loop_hint);
  });
}

void LLVMCodeGen::emit_outlined_body(const ForNode* op, const Closure& c, llvm::Function* body,
                                     llvm::Function* impl) {
  in_function(body, [&] {
    std::vector<Value*> call_args{body->getArg(0), body->getArg(1)};
    for (size_t i = 0; i < c.field_types.size(); ++i)
      call_args.push_back(
          b_.CreateLoad(c.field_types[i], b_.CreateStructGEP(c.type, body->getArg(2), i)));
    b_.CreateCall(impl, call_args);
  });
  ++parallel_depth_;
  emit_impl_loop(op, c, impl, nullptr);
  --parallel_depth_;
}

void LLVMCodeGen::emit_rolled_call(const ForNode* op) {
  llvm::Type* t = value_type(op->var.dtype());
  Closure c = closure_of(op, int_cast(emit(op->min), t));
  llvm::Type* i64 = b_.getInt64Ty();
  std::vector<llvm::Type*> scalars{i64, i64};
  scalars.insert(scalars.end(), c.scalar_types.begin(), c.scalar_types.end());
  llvm::Function* impl = make_impl(func_name_ + ".rolled" + std::to_string(num_outlined_++),
                                   scalars, c.buffers.size());
  impl->removeFnAttr(llvm::Attribute::AlwaysInline);
  impl->addFnAttr(llvm::Attribute::NoInline);
  emit_impl_loop(op, c, impl, "llvm.loop.unroll.disable");
  std::vector<Value*> args{llvm::ConstantInt::get(i64, 0), int_cast(emit(op->extent), i64)};
  args.insert(args.end(), c.fields.begin(), c.fields.end());
  b_.CreateCall(impl, args);
}

void LLVMCodeGen::emit_parallel_for(const ForNode* op) {
  llvm::Type* t = value_type(op->var.dtype());
  Value* begin = int_cast(emit(op->min), t);
  Value* extent = emit(op->extent);
  if (parallel_depth_ > 0) {  // the pool is already busy: nested loops run serially
    emit_serial_loop(op, begin, b_.CreateAdd(begin, int_cast(extent, t)), nullptr);
    return;
  }

  // Everything the body reads from outside travels in a closure struct.
  Closure closure = make_closure(op, begin);

  // void body(i64 begin, i64 end, ptr closure) unpacks the closure and calls the noalias impl.
  llvm::Type* i64 = b_.getInt64Ty();
  std::string name = func_name_ + ".parallel" + std::to_string(num_outlined_++);
  llvm::Function* body = make_function(
      name, llvm::FunctionType::get(b_.getVoidTy(), {i64, i64, b_.getPtrTy()}, false), false);
  std::vector<llvm::Type*> impl_scalars{i64, i64};
  impl_scalars.insert(impl_scalars.end(), closure.scalar_types.begin(), closure.scalar_types.end());
  llvm::Function* impl = make_impl(name, impl_scalars, closure.buffers.size());
  emit_outlined_body(op, closure, body, impl);

  llvm::FunctionCallee parallel_for = module_->getOrInsertFunction(
      "ember_parallel_for",
      llvm::FunctionType::get(b_.getInt32Ty(), {i64, b_.getPtrTy(), b_.getPtrTy()}, false));
  b_.CreateCall(parallel_for, {int_cast(extent, i64), body, closure.value});
}

Value* LLVMCodeGen::emit_accumulation(const StoreNode* op) {
  const Accumulation kind = accumulation_of(op);
  // Only sums are reassociated: LLVM vectorizes llvm.maximum / minimum reductions as they are.
  if ((kind != Accumulation::Add && kind != Accumulation::Fma) || lanes_ != 0 || mask_)
    return nullptr;
  llvm::FastMathFlags flags;
  flags.setAllowReassoc();
  if (kind == Accumulation::Add) {
    auto* add = op->value.as<BinaryNode>();
    Value *a = emit(add->a), *b = emit(add->b);
    auto* sum = llvm::cast<llvm::Instruction>(b_.CreateFAdd(a, b));
    sum->setFastMathFlags(flags);
    return sum;
  }
  // fmuladd, not fma: LLVM vectorizes reductions of the former (it is still one FMA
  // instruction on a CPU that has them).
  auto* fma = op->value.as<PrimCallNode>();
  flags.setAllowContract();
  std::vector<Value*> args{emit(fma->args[0]), emit(fma->args[1]), emit(fma->args[2])};
  auto* call = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {args[0]->getType()}, args);
  call->setFastMathFlags(flags);
  return call;
}

void LLVMCodeGen::emit_store(const StoreNode* op) {
  DType t = op->buffer->dtype;
  llvm::Align align(dtype_bytes(t));
  Value* value = emit_accumulation(op);
  if (!value) value = emit(op->value);
  Value* index = emit(op->index);
  if (!is_vec(index) && !mask_) {
    EMBER_CHECK(!is_vec(value), "lane-varying store to one element of ", op->buffer->name, " in ",
                func_name_);
    b_.CreateAlignedStore(to_memory(t, value), element_ptr(op->buffer, index), align);
    return;
  }
  value = to_memory(t, widen(value));
  if (is_vec(index) && lane_stride(op->index) == std::optional<int64_t>(1)) {
    Value* base = element_ptr(op->buffer, b_.CreateExtractElement(index, uint64_t{0}));
    if (mask_)
      b_.CreateMaskedStore(value, base, align, mask_);
    else
      b_.CreateAlignedStore(value, base, align);
    return;
  }
  // A constant stride: a scalar store per lane at a constant offset from lane 0's element
  // (cheaper than a scatter's per-lane addresses; see emit_load).
  std::optional<int64_t> stride = is_vec(index) ? lane_stride(op->index) : std::nullopt;
  if (!mask_ && stride && *stride != 0) {
    llvm::Type* mt = memory_type(t);
    Value* base = element_ptr(op->buffer, b_.CreateExtractElement(index, uint64_t{0}));
    for (int64_t l = 0; l < lanes_; ++l)
      b_.CreateAlignedStore(b_.CreateExtractElement(value, uint64_t(l)),
                            b_.CreateInBoundsGEP(mt, base, b_.getInt64(l * *stride)), align);
    return;
  }
  b_.CreateMaskedScatter(value, element_ptr(op->buffer, widen(index)), align, mask_);
}

void LLVMCodeGen::emit_allocate(const AllocateNode* op) {
  const Buffer& buf = op->buffer;
  EMBER_CHECK(lanes_ == 0, "allocation of ", buf->name, " inside a vectorized loop in ",
              func_name_);
  int64_t bytes = buf->numel() * dtype_bytes(buf->dtype);
  EMBER_CHECK(bytes >= 0, "buffer ", buf->name, " has a negative size");
  Value* ptr = nullptr;
  llvm::FunctionCallee free_fn;
  llvm::BasicBlock* done = nullptr;
  if (bytes <= kMaxStackBytes) {
    ptr = entry_alloca(llvm::ArrayType::get(memory_type(buf->dtype), buf->numel()), buf->name);
  } else {
    llvm::Type* i64 = b_.getInt64Ty();
    llvm::FunctionCallee alloc = module_->getOrInsertFunction(
        "ember_alloc", llvm::FunctionType::get(b_.getPtrTy(), {i64, i64}, false));
    free_fn = module_->getOrInsertFunction(
        "free", llvm::FunctionType::get(b_.getVoidTy(), {b_.getPtrTy()}, false));
    ptr = b_.CreateCall(alloc, {b_.getInt64(bytes), b_.getInt64(kAlignment)}, buf->name);
    // Null: the runtime has recorded the failure (kernel_error.h); skip what needs the buffer.
    auto* ok = llvm::BasicBlock::Create(ctx_, "alloc.ok", func_);
    done = llvm::BasicBlock::Create(ctx_, "alloc.done", func_);
    llvm::MDBuilder md(ctx_);
    b_.CreateCondBr(b_.CreateIsNull(ptr), done, ok, md.createUnlikelyBranchWeights());
    b_.SetInsertPoint(ok);
  }
  buffers_[buf.get()] = ptr;
  emit(op->body);
  buffers_.erase(buf.get());
  if (!done) return;
  b_.CreateCall(free_fn, {ptr});
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

void LLVMCodeGen::emit_if(const IfThenElseNode* op) {
  Value* cond = emit(op->cond);
  if (is_vec(cond)) {
    // A lane-varying condition becomes a mask on the loads and stores of each branch.
    Value* outer = mask_;
    mask_ = outer ? b_.CreateAnd(outer, cond) : cond;
    emit(op->then_case);
    if (op->else_case) {
      Value* not_cond = b_.CreateNot(cond);
      mask_ = outer ? b_.CreateAnd(outer, not_cond) : not_cond;
      emit(op->else_case);
    }
    mask_ = outer;
    return;
  }
  auto* then_bb = llvm::BasicBlock::Create(ctx_, "if.then", func_);
  auto* else_bb = op->else_case ? llvm::BasicBlock::Create(ctx_, "if.else", func_) : nullptr;
  auto* end_bb = llvm::BasicBlock::Create(ctx_, "if.end", func_);
  b_.CreateCondBr(cond, then_bb, else_bb ? else_bb : end_bb);
  b_.SetInsertPoint(then_bb);
  emit(op->then_case);
  b_.CreateBr(end_bb);
  if (else_bb) {
    b_.SetInsertPoint(else_bb);
    emit(op->else_case);
    b_.CreateBr(end_bb);
  }
  b_.SetInsertPoint(end_bb);
}

}  // namespace ember::codegen
