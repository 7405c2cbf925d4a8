// The GPU back end: loop IR -> LLVM IR (NVPTXCodeGen) -> O3 for nvptx64 -> PTX text. No
// CUDA is needed to build: the PTX is loaded by the CUDA runtime module at first launch.
#include "nvptx_codegen.h"

#include <cctype>
#include <mutex>
#include <regex>

#include "ember/codegen/codegen.h"
#include "ember/support/error.h"
#include "llvm/IR/CallingConv.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/IntrinsicsNVPTX.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm_errors.h"

extern "C" void LLVMInitializeNVPTXTargetInfo();
extern "C" void LLVMInitializeNVPTXTarget();
extern "C" void LLVMInitializeNVPTXTargetMC();
extern "C" void LLVMInitializeNVPTXAsmPrinter();

namespace ember::codegen {

using namespace ember::ir;
using llvm::Value;
using runtime::cuda::LaunchDims;

namespace {

constexpr const char* kTriple = "nvptx64-nvidia-cuda";
constexpr unsigned kSharedAddrSpace = 3;
// A per-thread array this large would spill to slow local memory (and most of the GPU's
// local memory budget); a schedule that needs one is a bug in the GPU schedule.
constexpr int64_t kMaxLocalBytes = 64 * 1024;
constexpr int64_t kMaxThreadsPerBlock = 1024;

int dim_of(ForKind k) {
  switch (k) {
    case ForKind::GpuBlockX:
    case ForKind::GpuThreadX:
      return 0;
    case ForKind::GpuBlockY:
    case ForKind::GpuThreadY:
      return 1;
    default:
      return 2;
  }
}

bool is_block(ForKind k) {
  return k == ForKind::GpuBlockX || k == ForKind::GpuBlockY || k == ForKind::GpuBlockZ;
}

llvm::Intrinsic::ID sreg(ForKind k) {
  switch (k) {
    case ForKind::GpuBlockX:
      return llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x;
    case ForKind::GpuBlockY:
      return llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y;
    case ForKind::GpuBlockZ:
      return llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z;
    case ForKind::GpuThreadX:
      return llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x;
    case ForKind::GpuThreadY:
      return llvm::Intrinsic::nvvm_read_ptx_sreg_tid_y;
    default:
      return llvm::Intrinsic::nvvm_read_ptx_sreg_tid_z;
  }
}

const llvm::Target* init_nvptx() {
  static const llvm::Target* target = [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    // LLVM must never exit the process (run_llvm, llvm_errors.cc).
    install_llvm_error_handler();
    std::string error;
    const llvm::Target* t = llvm::TargetRegistry::lookupTarget(kTriple, error);
    if (!t) throw InternalError("internal error: LLVM has no NVPTX target: " + error);
    return t;
  }();
  return target;
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(const std::string& arch) {
  const llvm::Target* target = init_nvptx();
  std::unique_ptr<llvm::MCSubtargetInfo> info(target->createMCSubtargetInfo(kTriple, "", ""));
  if (!std::regex_match(arch, std::regex("sm_[0-9]+a?")) || !info->isCPUStringValid(arch))
    fail("unknown CUDA architecture '", arch,
         "' in the target; use e.g. \"cuda -arch=sm_80\" "
         "(Ampere), \"cuda -arch=sm_89\" (Ada) or \"cuda -arch=sm_90\" (Hopper)");
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(kTriple, arch, "", llvm::TargetOptions(), std::nullopt,
                                  std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!tm) throw InternalError("internal error: cannot create the NVPTX target machine");
  return tm;
}

void verify_module(const llvm::Module& m, const char* when) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (llvm::verifyModule(m, &os))
    throw InternalError(std::string("internal error: generated NVPTX IR is invalid ") + when +
                        ":\n" + os.str());
}

void optimize(llvm::Module& m, llvm::TargetMachine* tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(tm);  // registers the NVPTX passes (NVVMReflect, address spaces)
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, mam);
}

std::string print_module(const llvm::Module& m) {
  std::string text;
  llvm::raw_string_ostream os(text);
  m.print(os, nullptr);
  return os.str();
}

std::string emit_ptx(llvm::Module& m, llvm::TargetMachine* tm) {
  llvm::SmallString<0> text;
  llvm::raw_svector_ostream os(text);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
    throw InternalError("internal error: the NVPTX target cannot print PTX");
  pm.run(m);
  return text.str().str();
}

}  // namespace

NVPTXCodeGen::NVPTXCodeGen(llvm::Module* module, std::string arch)
    : LLVMCodeGen(module, std::move(arch), "") {}

LaunchDims NVPTXCodeGen::add_kernel(const PrimFunc& f) {
  verify(f);
  func_name_ = f.name;

  // Launch dimensions first: a loop bound to an index with a smaller extent than the
  // launch needs a guard, and that is known only once every loop has been seen.
  dims_ = LaunchDims();
  dims_.num_params = static_cast<int>(f.params.size());
  visit_prim(
      f.body, [](const PrimExpr&) {},
      [&](const Stmt& s) {
        auto* op = s.as<ForNode>();
        if (!op || !is_gpu_kind(op->for_kind)) return;
        int64_t ext = 0;
        as_int(op->extent, &ext);  // the verifier checked it is constant
        auto& d = is_block(op->for_kind) ? dims_.grid : dims_.block;
        d[dim_of(op->for_kind)] = std::max(d[dim_of(op->for_kind)], ext);
      });
  int64_t threads = dims_.block[0] * dims_.block[1] * dims_.block[2];
  EMBER_CHECK(threads <= kMaxThreadsPerBlock, "kernel ", f.name, " needs ", threads,
              " threads per block; a GPU block has at most ", kMaxThreadsPerBlock);
  EMBER_CHECK(dims_.grid[0] < (int64_t{1} << 31) && dims_.grid[1] < 65536 && dims_.grid[2] < 65536,
              "kernel ", f.name, " has a grid too large for CUDA");

  // PTX names are C identifiers; kernel names may hold PyTorch paths ("layer1.0 + relu").
  std::string symbol;
  for (char c : f.name) symbol += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (symbol.empty() || std::isdigit(static_cast<unsigned char>(symbol[0]))) symbol = "_" + symbol;
  if (symbol != f.name)
    for (int n = 1; module_->getFunction(symbol); ++n) symbol += "_" + std::to_string(n);
  dims_.symbol = symbol;

  std::vector<llvm::Type*> params(f.params.size(), b_.getPtrTy());
  llvm::Function* kernel =
      make_function(symbol, llvm::FunctionType::get(b_.getVoidTy(), params, false), true);
  kernel->setCallingConv(llvm::CallingConv::PTX_Kernel);
  for (size_t i = 0; i < f.params.size(); ++i) {
    llvm::Argument* arg = kernel->getArg(i);
    arg->setName(f.params[i]->name);
    // The executor never passes overlapping buffers, and a kernel never writes its
    // inputs: the backend may then read inputs through the read-only cache.
    kernel->addParamAttr(i, llvm::Attribute::NoAlias);
    if (static_cast<int>(i) < f.num_inputs) kernel->addParamAttr(i, llvm::Attribute::ReadOnly);
    buffers_[f.params[i].get()] = arg;
  }
  // The block size is fixed: telling ptxas lets it budget registers for it.
  llvm::NamedMDNode* annotations = module_->getOrInsertNamedMetadata("nvvm.annotations");
  const char* ntid[] = {"maxntidx", "maxntidy", "maxntidz"};
  for (int d = 0; d < 3; ++d)
    annotations->addOperand(llvm::MDNode::get(
        ctx_, {llvm::ValueAsMetadata::get(kernel), llvm::MDString::get(ctx_, ntid[d]),
               llvm::ConstantAsMetadata::get(b_.getInt32(dims_.block[d]))}));

  func_ = kernel;
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", kernel));
  emit(f.body);
  b_.CreateRetVoid();
  buffers_.clear();
  vars_.clear();
  active_.clear();
  func_ = nullptr;
  return dims_;
}

void NVPTXCodeGen::emit_parallel_for(const ForNode* op) {
  llvm::Type* t = value_type(op->var.dtype());
  Value* begin = int_cast(emit(op->min), t);
  emit_serial_loop(op, begin, b_.CreateAdd(begin, int_cast(emit(op->extent), t)), nullptr);
}

void NVPTXCodeGen::emit_gpu_for(const ForNode* op) {
  ForKind k = op->for_kind;
  EMBER_CHECK(!active_.count(k), "loop ", op->var.name(), " in ", func_name_, " is bound to ",
              for_kind_name(k), " inside another loop bound to it");
  int64_t ext = 0;
  as_int(op->extent, &ext);
  int64_t launched = (is_block(k) ? dims_.grid : dims_.block)[dim_of(k)];

  llvm::Type* t = value_type(op->var.dtype());
  Value* index = int_cast(b_.CreateIntrinsic(sreg(k), {}, {}), t);
  Value* value = b_.CreateAdd(int_cast(emit(op->min), t), index, op->var.name());
  // Another loop bound to this index needs more blocks/threads than this one: the extra
  // ones skip this loop's body.
  llvm::BasicBlock* end_bb = nullptr;
  if (ext < launched) {
    auto* body_bb = llvm::BasicBlock::Create(ctx_, op->var.name() + ".body", func_);
    end_bb = llvm::BasicBlock::Create(ctx_, op->var.name() + ".end", func_);
    b_.CreateCondBr(b_.CreateICmpSLT(index, llvm::ConstantInt::get(t, ext)), body_bb, end_bb);
    b_.SetInsertPoint(body_bb);
  }
  active_.insert(k);
  bind(op->var.as<PrimVarNode>(), value, 0);
  emit(op->body);
  unbind(op->var.as<PrimVarNode>());
  active_.erase(k);
  if (end_bb) {
    b_.CreateBr(end_bb);
    b_.SetInsertPoint(end_bb);
  }
}

void NVPTXCodeGen::emit_allocate(const AllocateNode* op) {
  const Buffer& buf = op->buffer;
  int64_t bytes = buf->numel() * dtype_bytes(buf->dtype);
  llvm::Type* array = llvm::ArrayType::get(memory_type(buf->dtype), buf->numel());
  Value* ptr = nullptr;
  if (buf->scope == BufferScope::Shared) {
    auto* gv = new llvm::GlobalVariable(
        *module_, array, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(array),
        func_name_ + "." + buf->name + ".shared" + std::to_string(num_shared_++), nullptr,
        llvm::GlobalValue::NotThreadLocal, kSharedAddrSpace);
    gv->setAlignment(llvm::Align(16));
    ptr = gv;
  } else {
    if (bytes > kMaxLocalBytes)
      fail("kernel ", func_name_, " needs a per-thread buffer '", buf->name, "' of ", bytes,
           " bytes, more than a GPU thread should hold (", kMaxLocalBytes,
           "); this op has no GPU schedule that fits: build it with target=\"llvm\"");
    ptr = entry_alloca(array, buf->name);
  }
  buffers_[buf.get()] = ptr;
  emit(op->body);
  buffers_.erase(buf.get());
}

Value* NVPTXCodeGen::emit_barrier() {
  b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
  return b_.getInt32(0);
}

// One lane's share of an m16n8kK mma.sync: the float32 fragment values rounded to the
// precision's operand type (TF32 by cvt.rna, FP16/BF16 by round to nearest even, packed two
// per register with the lower index in the lower half, as PTX's fragments are), C in
// float32. LLVM merges the four calls of a lane's four elements into one instruction.
Value* NVPTXCodeGen::emit_warp_mma(const PrimCallNode* op) {
  int64_t element = 0, code = 0;
  EMBER_CHECK(as_int(op->args[0], &element) && as_int(op->args[1], &code), "mma_sync in ",
              func_name_, " needs constant element and precision");
  const auto precision = static_cast<MmaPrecision>(code);
  EMBER_CHECK(precision != MmaPrecision::Highest, "mma_sync of precision highest in ", func_name_);
  std::vector<Value*> values;
  for (size_t i = 2; i < op->args.size(); ++i) values.push_back(emit(op->args[i]));
  for (Value* v : values)
    EMBER_CHECK(!v->getType()->isVectorTy(), "mma_sync of vectors in ", func_name_);
  std::vector<Value*> operands;
  const bool tf32 = precision == MmaPrecision::TF32;
  const size_t a_count = tf32 ? 4 : 8, b_count = tf32 ? 2 : 4;
  auto pack = [&](size_t first, size_t count) {
    for (size_t i = first; i < first + count; i += tf32 ? 1 : 2) {
      if (tf32) {
        operands.push_back(b_.CreateIntrinsic(llvm::Intrinsic::nvvm_f2tf32_rna, {}, {values[i]}));
        continue;
      }
      llvm::Type* half = precision == MmaPrecision::FP16 ? b_.getHalfTy() : b_.getBFloatTy();
      llvm::Type* pair = llvm::FixedVectorType::get(half, 2);
      Value* v = llvm::PoisonValue::get(pair);
      v = b_.CreateInsertElement(v, b_.CreateFPTrunc(values[i], half), uint64_t{0});
      v = b_.CreateInsertElement(v, b_.CreateFPTrunc(values[i + 1], half), uint64_t{1});
      operands.push_back(precision == MmaPrecision::FP16 ? v
                                                         : b_.CreateBitCast(v, b_.getInt32Ty()));
    }
  };
  pack(4, a_count);
  pack(4 + a_count, b_count);
  for (size_t i = 0; i < 4; ++i) operands.push_back(values[i]);  // C, float32
  llvm::Intrinsic::ID id = tf32 ? llvm::Intrinsic::nvvm_mma_m16n8k8_row_col_tf32
                           : precision == MmaPrecision::FP16
                               ? llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_f32_f32
                               : llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_bf16;
  Value* d = b_.CreateIntrinsic(id, {}, operands);
  return b_.CreateExtractValue(d, {static_cast<unsigned>(element)});
}

// cp.async of 4 bytes from global to shared memory, its groups, and the wait for them.
Value* NVPTXCodeGen::emit_async_copy(const PrimCallNode* op) {
  if (op->op == Intrinsic::AsyncCommit) {
    b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_commit_group, {}, {});
    return b_.getInt32(0);
  }
  if (op->op == Intrinsic::AsyncWait) {
    int64_t n = 0;
    EMBER_CHECK(as_int(op->args[0], &n), "async_wait of a variable count in ", func_name_);
    b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_wait_group, {}, {b_.getInt32(n)});
    return b_.getInt32(0);
  }
  auto* dst = op->args[0].as<LoadNode>();
  auto* src = op->args[1].as<LoadNode>();
  EMBER_CHECK(dst && src && dst->buffer->scope == BufferScope::Shared &&
                  dtype_bytes(dst->buffer->dtype) == 4,
              "async_copy in ", func_name_, " needs a 4-byte load into shared memory");
  Value* to = element_ptr(dst->buffer, emit(dst->index));
  Value* from = element_ptr(src->buffer, emit(src->index));
  from = b_.CreateAddrSpaceCast(from, llvm::PointerType::get(ctx_, 1));  // global
  b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_ca_shared_global_4, {}, {to, from});
  return b_.getInt32(0);
}

void NVPTXCodeGen::emit_index_error(Value* bad, Value*, int64_t, int64_t, int64_t) {
  Value* any = bad->getType()->isVectorTy() ? b_.CreateOrReduce(bad) : bad;
  auto* trap = llvm::BasicBlock::Create(ctx_, "index.bad", func_);
  auto* ok = llvm::BasicBlock::Create(ctx_, "index.ok", func_);
  b_.CreateCondBr(any, trap, ok);
  b_.SetInsertPoint(trap);
  b_.CreateIntrinsic(llvm::Intrinsic::trap, {}, {});
  b_.CreateBr(ok);
  b_.SetInsertPoint(ok);
}

std::shared_ptr<runtime::Module> compile_cuda(const std::vector<ir::PrimFunc>& funcs,
                                              const CudaOptions& options) {
  std::shared_ptr<runtime::Module> out;
  // Every LLVM object lives inside the step: after a fatal LLVM error they are abandoned.
  run_llvm("compiling " + std::to_string(funcs.size()) + " kernel(s) for " + options.arch, [&] {
    std::unique_ptr<llvm::TargetMachine> tm = make_target_machine(options.arch);
    llvm::LLVMContext context;
    context.setDiagnosticHandler(recording_diagnostic_handler());
    llvm::Module module("ember", context);
    module.setDataLayout(tm->createDataLayout());
    module.setTargetTriple(kTriple);

    NVPTXCodeGen codegen(&module, options.arch);
    std::map<std::string, LaunchDims> kernels;
    // The kernels come after lower_gpu_phases (the build driver's step before this one).
    for (const ir::PrimFunc& f : funcs) {
      try {
        kernels[f.name] = codegen.add_kernel(f);
      } catch (const InternalError& e) {  // a compiler bug: say which kernel it is in
        throw InternalError(std::string(e.what()) + "\nin kernel '" + f.name + "'");
      }
    }
    verify_module(module, "before optimisation");
    optimize(module, tm.get());
    verify_module(module, "after optimisation");
    std::string ll = print_module(module);
    std::string ptx = emit_ptx(module, tm.get());
    out = std::make_shared<runtime::cuda::CudaModule>(std::move(ptx), std::move(ll), options.arch,
                                                      std::move(kernels));
  });
  return out;
}

}  // namespace ember::codegen
