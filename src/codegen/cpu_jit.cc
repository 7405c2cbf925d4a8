// The CPU back end: loop IR -> LLVM IR (LLVMCodeGen) -> O3 for the host CPU -> ORC LLJIT in
// this process. The JIT module is a runtime::Module; it owns the LLJIT, so kernel pointers
// stay valid as long as the module lives. LLVM runs inside run_llvm (llvm_errors.cc): its
// errors become InternalError, never a process exit.
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "ember/codegen/codegen.h"
#include "ember/runtime/kernel_error.h"
#include "ember/runtime/parallel.h"
#include "ember/support/error.h"
#include "llvm/AsmParser/Parser.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm_codegen.h"
#include "llvm_emit.h"
#include "llvm_errors.h"

namespace ember::codegen {

namespace {

void init_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    install_llvm_error_handler();
  });
}

template <class T>
T check(llvm::Expected<T> value, const char* what) {
  if (!value)
    throw InternalError(std::string("internal error: ") + what + ": " +
                        llvm::toString(value.takeError()));
  return std::move(*value);
}

void check(llvm::Error err, const char* what) {
  if (err)
    throw InternalError(std::string("internal error: ") + what + ": " +
                        llvm::toString(std::move(err)));
}

// The features a named CPU has by default, spelled out ("+avx2,+fma,..."), so that the
// code records them and a model file can be checked against the machine that loads it.
llvm::SubtargetFeatures cpu_default_features(const std::string& triple, const std::string& cpu) {
  llvm::SubtargetFeatures out;
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) return out;
  std::unique_ptr<llvm::MCSubtargetInfo> info(target->createMCSubtargetInfo(triple, cpu, ""));
  if (!info || !info->isCPUStringValid(cpu)) return out;  // make_target_machine says why
  for (const llvm::SubtargetFeatureKV& kv : info->getAllProcessorFeatures())
    if (info->checkFeatures(std::string("+") + kv.Key)) out.AddFeature(kv.Key);
  return out;
}

// The host CPU and its real features, or the CPU the options name (with that CPU's
// default features).
llvm::orc::JITTargetMachineBuilder target_builder(const CpuOptions& options) {
  auto jtmb = check(llvm::orc::JITTargetMachineBuilder::detectHost(), "cannot detect host");
  if (!options.cpu.empty() && options.cpu != "native") {
    jtmb.setCPU(options.cpu);
    jtmb.getFeatures() = cpu_default_features(jtmb.getTargetTriple().str(), options.cpu);
  }
  if (options.opt_level < 0 || options.opt_level > 3)
    fail("CpuOptions::opt_level is ", options.opt_level, "; use 0, 1, 2 or 3");
  static const llvm::CodeGenOptLevel kLevels[] = {
      llvm::CodeGenOptLevel::None, llvm::CodeGenOptLevel::Less, llvm::CodeGenOptLevel::Default,
      llvm::CodeGenOptLevel::Aggressive};
  jtmb.setCodeGenOptLevel(kLevels[options.opt_level]);
  return jtmb;
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(llvm::orc::JITTargetMachineBuilder& jtmb) {
  // Check the CPU name first: LLVM would only print a warning and ignore it.
  const std::string& triple = jtmb.getTargetTriple().str();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) throw InternalError("internal error: no LLVM target for " + triple + ": " + error);
  std::unique_ptr<llvm::MCSubtargetInfo> info(target->createMCSubtargetInfo(triple, "", ""));
  if (!info || !info->isCPUStringValid(jtmb.getCPU()))
    fail("unknown CPU '", jtmb.getCPU(), "' in CpuOptions::cpu; use \"native\" or an LLVM ",
         "CPU name such as \"skylake-avx512\"");
  return check(jtmb.createTargetMachine(), "cannot create the target machine");
}

void verify_module(const llvm::Module& m, const char* when) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (llvm::verifyModule(m, &os))
    throw InternalError(std::string("internal error: generated LLVM IR is invalid ") + when +
                        ":\n" + os.str());
}

void optimize(llvm::Module& m, llvm::TargetMachine* tm, int opt_level) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = opt_level >= 2;
  tuning.SLPVectorization = opt_level >= 2;
  llvm::PassBuilder pb(tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  static const llvm::OptimizationLevel kLevels[] = {
      llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1, llvm::OptimizationLevel::O2,
      llvm::OptimizationLevel::O3};
  llvm::ModulePassManager mpm = opt_level == 0
                                    ? pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0)
                                    : pb.buildPerModuleDefaultPipeline(kLevels[opt_level]);
  mpm.run(m, mam);
}

std::string print_module(const llvm::Module& m) {
  std::string text;
  llvm::raw_string_ostream os(text);
  m.print(os, nullptr);
  return os.str();
}

// C functions generated code may call. They are bound by address: with LLVM linked
// statically and symbols hidden, a search of the process would not find ember_parallel_for.
// A kernel that happens to have one of these names keeps it.
llvm::orc::SymbolMap runtime_symbols(llvm::orc::LLJIT& jit, const std::set<std::string>& kernels) {
  llvm::orc::MangleAndInterner mangle(jit.getExecutionSession(), jit.getDataLayout());
  auto entry = [](auto* fn) {
    return llvm::orc::ExecutorSymbolDef(llvm::orc::ExecutorAddr::fromPtr(fn),
                                        llvm::JITSymbolFlags::Exported);
  };
  const std::pair<const char*, llvm::orc::ExecutorSymbolDef> known[] = {
      {"ember_parallel_for", entry(&ember_parallel_for)},
      {"ember_index_error", entry(&ember_index_error)},
      {"ember_alloc", entry(&ember_alloc)},
      {"free", entry(&free)},
      {"memcpy", entry(&memcpy)},
      {"memmove", entry(&memmove)},
      {"memset", entry(&memset)}};
  llvm::orc::SymbolMap symbols;
  for (auto& [name, def] : known)
    if (!kernels.count(name)) symbols[mangle(name)] = def;
  return symbols;
}

// The optimised IR of the kernels, compiled one module each, as one module's text.
std::string link_ir(const std::vector<std::string>& parts) {
  std::string text;
  run_llvm("linking the kernels' IR", [&] {
    llvm::LLVMContext ctx;
    auto linked = std::make_unique<llvm::Module>("ember", ctx);
    for (const std::string& part : parts) {
      std::unique_ptr<llvm::Module> m = parse_ir(part, ctx, "the IR linker");
      if (linked->getTargetTriple().empty()) {
        linked->setTargetTriple(m->getTargetTriple());
        linked->setDataLayout(m->getDataLayout());
      }
      if (llvm::Linker::linkModules(*linked, std::move(m)))
        throw InternalError("internal error: the kernels' IR modules do not link");
    }
    text = print_module(*linked);
  });
  return text;
}

class CpuJitModule final : public runtime::Module {
 public:
  CpuJitModule(std::unique_ptr<llvm::orc::LLJIT> jit,
               std::map<std::string, runtime::KernelFn> kernels, std::vector<std::string> parts,
               llvm::orc::JITTargetMachineBuilder target)
      : jit_(std::move(jit)),
        kernels_(std::move(kernels)),
        parts_(std::move(parts)),
        target_(std::move(target)) {}

  runtime::KernelFn get_function(const std::string& name) const override {
    auto it = kernels_.find(name);
    if (it == kernels_.end()) {
      std::vector<std::string> names;
      for (auto& [n, fn] : kernels_) names.push_back("'" + n + "'");
      fail("kernel '", name, "' is not in this module; it has ",
           names.empty() ? std::string("no kernels") : fmt::format("{}", fmt::join(names, ", ")));
    }
    return it->second;
  }

  std::string type_key() const override { return "llvm-jit"; }

  std::string get_source(const std::string& format) const override {
    if (format == "ll") return ir();
    if (format == "asm") return assembly();
    fail("this llvm-jit module has no '", format, "' source; its formats are 'll' and 'asm'");
  }

 private:
  // The IR and the assembly are made on demand (most modules never need them): the kernels
  // were compiled as separate modules, linked into one here.
  std::string ir() const {
    std::lock_guard<std::mutex> lock(source_mutex_);
    if (ll_.empty()) ll_ = link_ir(parts_);
    return ll_;
  }

  // Printed from the optimised IR, with the same target settings as the JIT.
  std::string assembly() const {
    std::string ll = ir();
    std::lock_guard<std::mutex> lock(source_mutex_);
    if (!asm_.empty()) return asm_;
    run_llvm("printing the assembly", [&] {
      llvm::LLVMContext ctx;
      std::unique_ptr<llvm::Module> m = parse_ir(ll, ctx, "the assembly printer");
      auto target = target_;
      auto tm = make_target_machine(target);
      asm_ = emit_file(*m, *tm, llvm::CodeGenFileType::AssemblyFile);
    });
    return asm_;
  }

  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::map<std::string, runtime::KernelFn> kernels_;
  std::vector<std::string> parts_;  // each kernel's optimised IR
  llvm::orc::JITTargetMachineBuilder target_;
  mutable std::mutex source_mutex_;
  mutable std::string ll_, asm_;
};

// One kernel compiled: its optimised IR and its object file.
struct CompiledKernel {
  std::string ll, object;
};

CompiledKernel compile_kernel(const ir::PrimFunc& f, llvm::TargetMachine& tm,
                              const CpuOptions& options) {
  CompiledKernel out;
  run_llvm("compiling kernel '" + f.name + "' for the CPU", [&] {
    llvm::LLVMContext context;
    context.setDiagnosticHandler(recording_diagnostic_handler());
    llvm::Module module(f.name, context);
    module.setDataLayout(tm.createDataLayout());
    module.setTargetTriple(tm.getTargetTriple().str());
    LLVMCodeGen codegen(&module, tm.getTargetCPU().str(), tm.getTargetFeatureString().str(),
                        options.vector_bits);
    try {
      codegen.add_function(f);
    } catch (const InternalError& e) {  // a compiler bug: say which kernel it is in
      throw InternalError(std::string(e.what()) + "\nin kernel '" + f.name + "'");
    }
    verify_module(module, "before optimisation");
    optimize(module, &tm, options.opt_level);
    verify_module(module, "after optimisation");
    out.ll = print_module(module);
    out.object = emit_file(module, tm, llvm::CodeGenFileType::ObjectFile);
  });
  return out;
}

// Every kernel compiled, on up to one thread per core: kernels are independent modules, each
// thread with its own LLVM context and target machine, taking the next kernel when done.
std::vector<CompiledKernel> compile_kernels(const std::vector<ir::PrimFunc>& funcs,
                                            const llvm::orc::JITTargetMachineBuilder& target,
                                            const CpuOptions& options) {
  std::vector<CompiledKernel> out(funcs.size());
  std::vector<std::exception_ptr> errors(funcs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    auto builder = target;
    std::unique_ptr<llvm::TargetMachine> tm;
    for (size_t i; (i = next++) < funcs.size();) {
      try {
        if (!tm) tm = make_target_machine(builder);
        out[i] = compile_kernel(funcs[i], *tm, options);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  size_t threads =
      std::min<size_t>(funcs.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);  // the first kernel's error, as a serial build gives
  return out;
}

}  // namespace

std::shared_ptr<runtime::Module> compile_cpu(const std::vector<ir::PrimFunc>& funcs,
                                             const CpuOptions& options) {
  init_llvm();
  llvm::orc::JITTargetMachineBuilder target = target_builder(options);
  make_target_machine(target);  // a bad CPU name fails here, once, not per kernel
  std::set<std::string> names;
  for (const ir::PrimFunc& f : funcs)
    if (!names.insert(f.name).second)
      fail("two kernels are named '", f.name, "'; give every kernel of a module its own name");
  std::vector<CompiledKernel> compiled = compile_kernels(funcs, target, options);

  std::shared_ptr<runtime::Module> out;
  // Every LLVM object lives inside the step: after a fatal LLVM error they are abandoned.
  run_llvm("loading " + std::to_string(funcs.size()) + " kernel(s) into the JIT", [&] {
    auto jit = check(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(target).create(),
                     "cannot create the JIT");
    llvm::orc::JITDylib& lib = jit->getMainJITDylib();
    check(lib.define(llvm::orc::absoluteSymbols(runtime_symbols(*jit, names))),
          "cannot define runtime symbols");
    // Anything else LLVM emits a call to (libm's fmod for float Mod) comes from the process.
    lib.addGenerator(check(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                               jit->getDataLayout().getGlobalPrefix()),
                           "cannot search the process for symbols"));
    std::vector<std::string> parts;
    for (size_t i = 0; i < funcs.size(); ++i) {
      check(jit->addObjectFile(
                llvm::MemoryBuffer::getMemBufferCopy(compiled[i].object, funcs[i].name)),
            "cannot add a kernel's object file to the JIT");
      parts.push_back(std::move(compiled[i].ll));
    }
    // Looking every kernel up now links them here, so errors surface in compile_cpu.
    std::map<std::string, runtime::KernelFn> kernels;
    for (const ir::PrimFunc& f : funcs)
      kernels[f.name] =
          check(jit->lookup(f.name), "cannot find a compiled kernel").toPtr<runtime::KernelFn>();
    out = std::make_shared<CpuJitModule>(std::move(jit), std::move(kernels), std::move(parts),
                                         target);
  });
  return out;
}

}  // namespace ember::codegen
