// Export: the CPU code as a shared library, and the whole model as one artifact file.
//
// The exported code is the in-process JIT's code: we re-read the optimised LLVM IR the JIT
// module kept and only run the back end again (as position-independent code), so a loaded
// artifact computes bit for bit what the in-memory Library computed.
//
// The library must load into any process: a C++ program that links the static runtime
// without -rdynamic, or Python, whose extension modules keep their symbols private. So the
// code never names a runtime symbol: each runtime function it calls (ember_parallel_for)
// becomes a private stub that jumps through a pointer variable `__ember_import_<name>`,
// which runtime::LibraryModule fills after dlopen.
#include "ember/codegen/export.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ember/runtime/artifact.h"
#include "ember/runtime/cuda.h"
#include "ember/runtime/library_module.h"
#include "ember/runtime/manifest.h"
#include "ember/runtime/version.h"
#include "ember/support/error.h"
#include "fmt/format.h"
#include "llvm/AsmParser/Parser.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm_emit.h"
#include "llvm_errors.h"

extern char** environ;

namespace ember::codegen {

namespace {

// The instruction-set features of an LLVM feature string ("+avx2,-avx512f,+fast-gather"):
// the "+" features LLVM's host detection knows (the runtime checks exactly those with
// cpuid before loading the code); the others are tuning hints no CPU lacks.
std::string isa_features(const std::string& features) {
  const llvm::StringMap<bool> known = llvm::sys::getHostCPUFeatures();
  std::vector<std::string> isa;
  std::stringstream all(features);
  for (std::string f; std::getline(all, f, ',');)
    if (f.size() > 1 && f[0] == '+' && known.count(f.substr(1))) isa.push_back(f);
  return fmt::format("{}", fmt::join(isa, ","));
}

// The kernel manifest as a constant string in the library, where the runtime finds it in
// the file's bytes before loading it (runtime::read_kernel_manifest).
void add_manifest(llvm::Module& m, const std::string& manifest) {
  auto* text = llvm::ConstantDataArray::getString(m.getContext(), manifest, /*AddNull=*/true);
  auto* g =
      new llvm::GlobalVariable(m, text->getType(), /*isConstant=*/true,
                               llvm::GlobalValue::ExternalLinkage, text, runtime::kManifestSymbol);
  g->setVisibility(llvm::GlobalValue::DefaultVisibility);
}

// Turns each call of a runtime function into a call through its import slot.
std::vector<std::string> add_import_slots(llvm::Module& m) {
  std::vector<std::string> imports;
  llvm::PointerType* ptr = llvm::PointerType::getUnqual(m.getContext());
  for (llvm::Function& f : m) {
    if (!f.isDeclaration() || !f.getName().starts_with("ember_")) continue;
    std::string name = f.getName().str();
    if (!runtime::runtime_imports().count(name))
      throw InternalError("internal error: generated code calls '" + name +
                          "', which the runtime does not provide");
    auto* slot = new llvm::GlobalVariable(m, ptr, false, llvm::GlobalValue::ExternalLinkage,
                                          llvm::ConstantPointerNull::get(ptr),
                                          runtime::kImportPrefix + name);
    slot->setVisibility(llvm::GlobalValue::DefaultVisibility);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(m.getContext(), "entry", &f));
    std::vector<llvm::Value*> args;
    for (llvm::Argument& a : f.args()) args.push_back(&a);
    llvm::CallInst* call = b.CreateCall(f.getFunctionType(), b.CreateLoad(ptr, slot), args);
    call->setTailCall();
    if (f.getReturnType()->isVoidTy())
      b.CreateRetVoid();
    else
      b.CreateRet(call);
    f.setLinkage(llvm::GlobalValue::InternalLinkage);
    imports.push_back(name);
  }
  return imports;
}

std::string temp_dir() {
  const char* env = std::getenv("TMPDIR");
  std::string dir = std::string(env && *env ? env : "/tmp") + "/ember-export-XXXXXX";
  if (!mkdtemp(dir.data()))
    fail("export: cannot create a temporary directory under '", env && *env ? env : "/tmp",
         "'; set TMPDIR to a writable directory");
  return dir;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) fail("export: cannot write '", path, "'");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// What each kernel was compiled for: its buffers' dtypes and shapes, in parameter order.
std::vector<runtime::KernelSignature> kernel_signatures(const std::vector<ir::PrimFunc>& funcs) {
  std::vector<runtime::KernelSignature> out;
  for (const ir::PrimFunc& f : funcs) {
    runtime::KernelSignature k{f.name, {}};
    for (const ir::Buffer& b : f.params) k.buffers.push_back({b->shape, b->dtype});
    out.push_back(std::move(k));
  }
  return out;
}

bool on_path(const std::string& exe) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && access((dir + "/" + exe).c_str(), X_OK) == 0) return true;
  return false;
}

}  // namespace

CpuObject compile_cpu_object_from_ir(const std::string& ll, int opt_level,
                                     const std::string& manifest) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::InitializeNativeTargetAsmParser();
  if (opt_level < 0 || opt_level > 3) fail("export: opt_level is ", opt_level, "; use 0 to 3");

  CpuObject out;
  // Every LLVM object lives inside the step: after a fatal LLVM error they are abandoned.
  run_llvm("compiling the model's code for export", [&] {
    llvm::LLVMContext ctx;
    std::unique_ptr<llvm::Module> m = parse_ir(ll, ctx, "export");

    // LLVMCodeGen puts the CPU and its features on every function.
    std::string features;
    for (const llvm::Function& f : *m) {
      if (f.isDeclaration() || !f.hasFnAttribute("target-cpu")) continue;
      out.cpu = f.getFnAttribute("target-cpu").getValueAsString().str();
      if (f.hasFnAttribute("target-features"))
        features = f.getFnAttribute("target-features").getValueAsString().str();
      break;
    }
    out.features = isa_features(features);
    const std::string triple = m->getTargetTriple();
    std::string error;
    const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
    if (!target) throw InternalError("internal error: no LLVM target for " + triple + ": " + error);
    static const llvm::CodeGenOptLevel kLevels[] = {
        llvm::CodeGenOptLevel::None, llvm::CodeGenOptLevel::Less, llvm::CodeGenOptLevel::Default,
        llvm::CodeGenOptLevel::Aggressive};
    std::unique_ptr<llvm::TargetMachine> tm(
        target->createTargetMachine(triple, out.cpu, features, llvm::TargetOptions(),
                                    llvm::Reloc::PIC_, std::nullopt, kLevels[opt_level]));
    if (!tm) throw InternalError("internal error: cannot create the target machine for " + triple);
    m->setDataLayout(tm->createDataLayout());

    out.imports = add_import_slots(*m);
    if (!manifest.empty()) add_manifest(*m, manifest);
    std::string text;
    llvm::raw_string_ostream os(text);
    if (llvm::verifyModule(*m, &os))
      throw InternalError("internal error: exported LLVM IR is invalid:\n" + os.str());

    out.bytes = emit_file(*m, *tm, llvm::CodeGenFileType::ObjectFile);
  });
  return out;
}

CpuObject compile_cpu_object(const std::vector<ir::PrimFunc>& funcs, const CpuOptions& options) {
  // compile_cpu owns code generation and the optimisation pipeline; taking its optimised IR
  // keeps one copy of both (at the price of one JIT compile).
  return compile_cpu_object_from_ir(compile_cpu(funcs, options)->get_source("ll"),
                                    options.opt_level,
                                    runtime::write_kernel_manifest(kernel_signatures(funcs)));
}

std::string link_shared_library(const std::string& object) {
  const std::string cxx = "c++";
  if (!on_path(cxx))
    fail("export needs a C++ compiler to link the model's code into a shared library, and ",
         "there is no '", cxx, "' on PATH; install one (e.g. apt-get install g++)");
  std::string dir = temp_dir();
  std::string obj = dir + "/model.o", so = dir + "/model.so", log = dir + "/link.log";
  auto cleanup = [&] {
    for (const std::string& f : {obj, so, log}) std::remove(f.c_str());
    rmdir(dir.c_str());
  };
  try {
    write_file(obj, object);
    // libm for the few math calls LLVM may emit (fmod).
    std::vector<std::string> argv = {cxx, "-shared", "-o", so, obj, "-lm"};
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, cxx.c_str(), &actions, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) fail("export: cannot run '", cxx, "' to link the model's code");
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fail("export: linking the model's code with '", cxx, " -shared' failed:\n", read_file(log));
    std::string bytes = read_file(so);
    cleanup();
    return bytes;
  } catch (...) {
    cleanup();
    throw;
  }
}

void export_library(const Library& lib, const std::string& path) {
  if (!lib.graph || !lib.module) fail("export: the Library is empty; build a model first");
  runtime::Artifact a;
  a.graph = lib.graph;
  a.info.ember_version = runtime::ember_version();
  a.info.target = lib.target;
  // The build's reports are the model file's (with the tuning fields); a kernel the build
  // did not describe gets its name only.
  for (size_t i = 0; i < lib.graph->kernels.size(); ++i) {
    const auto& k = lib.graph->kernels[i];
    bool described = i < lib.kernels.size() && lib.kernels[i].func == k.func;
    a.info.kernels.push_back(described ? lib.kernels[i] : runtime::KernelReport{k.func, k.name});
  }
  a.info.fusion = lib.fusion;
  a.info.tuning = lib.tuning;

  const std::string kind = lib.module->type_key();
  const std::string manifest = runtime::write_kernel_manifest(kernel_signatures(lib.prim_funcs));
  if (kind == "llvm-jit") {
    CpuObject obj = compile_cpu_object_from_ir(lib.module->get_source("ll"), 3, manifest);
    a.info.cpu = obj.cpu;
    a.info.features = obj.features;
    a.info.imports = obj.imports;
    a.code.emplace_back("cpu.so", link_shared_library(obj.bytes));
  } else if (kind == "ptx") {
    // What a CudaModule needs besides the text: the arch and each kernel's launch dims.
    auto gpu = std::dynamic_pointer_cast<runtime::cuda::CudaModule>(lib.module);
    EMBER_CHECK(gpu != nullptr, "a 'ptx' module that is not a CudaModule");
    a.info.arch = gpu->arch();
    a.info.launch = gpu->kernels();
    // The manifest as PTX comments (the driver skips them).
    a.code.emplace_back(
        "ptx", lib.module->get_source("ptx") + "\n" +
                   runtime::write_kernel_manifest(kernel_signatures(lib.prim_funcs), "// "));
  } else {
    fail("export: this Library's code is a '", kind, "' module, which cannot be exported; ",
         "export the Library that ember.build returned");
  }
  runtime::save_artifact(a, path);
}

}  // namespace ember::codegen

namespace ember {
void Library::export_library(const std::string& path) const {
  codegen::export_library(*this, path);
}
}  // namespace ember
