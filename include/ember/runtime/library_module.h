#pragma once
/// A runtime Module over a shared library of compiled kernels (an exported model's CPU code),
/// loaded with dlopen. No LLVM: this is how a deployed model runs.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ember/runtime/module.h"

namespace ember::runtime {

/// Exported code never calls the runtime by symbol name: for each runtime function `f` it
/// imports, the library holds a pointer variable `__ember_import_f` that the loader fills.
/// So a library resolves in any process (Python loads the runtime with private symbols),
/// and two runtimes in one process never get mixed up.
inline constexpr const char* kImportPrefix = "__ember_import_";

/// The symbol of the kernel manifest (runtime::write_kernel_manifest) in exported code.
inline constexpr const char* kManifestSymbol = "__ember_kernel_manifest";

/// Runtime functions generated code may import, by name ("ember_parallel_for").
const std::map<std::string, void*>& runtime_imports();

class LibraryModule final : public Module {
 public:
  /// Opens the shared library at `path` (RTLD_NOW | RTLD_LOCAL) and fills its `imports`.
  /// ember::Error with the loader's message when it cannot be opened, or naming an import
  /// the library or this runtime lacks.
  static std::shared_ptr<LibraryModule> open(const std::string& path,
                                             const std::vector<std::string>& imports);
  /// Opens `bytes` (a whole .so file) as above from an anonymous, sealed in-memory file
  /// (memfd_create), so no other process can swap the file before it is loaded; where that
  /// is not possible, from a private temporary file that is removed again.
  static std::shared_ptr<LibraryModule> from_bytes(const std::string& bytes,
                                                   const std::vector<std::string>& imports);
  ~LibraryModule() override;
  LibraryModule(const LibraryModule&) = delete;
  LibraryModule& operator=(const LibraryModule&) = delete;

  KernelFn get_function(const std::string& name) const override;
  std::string type_key() const override { return "so"; }
  /// A shared library keeps no source: always ember::Error.
  std::string get_source(const std::string& format) const override;

 private:
  LibraryModule(void* handle, int memfd) : handle_(handle), memfd_(memfd) {}
  // Fills the imports of the library dlopen returned `handle` for (`what` names it); `memfd`
  // is the in-memory file it was loaded from (-1 for a file), which the module keeps open.
  static std::shared_ptr<LibraryModule> open_handle(void* handle, const std::string& what,
                                                    const std::vector<std::string>& imports,
                                                    int memfd = -1);
  void* handle_;
  int memfd_ = -1;
};

}  // namespace ember::runtime
