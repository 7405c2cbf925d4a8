#include "ember/runtime/library_module.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ember/runtime/kernel_error.h"
#include "ember/runtime/parallel.h"
#include "ember/support/error.h"

namespace ember::runtime {

namespace {
std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown error";
}
}  // namespace

const std::map<std::string, void*>& runtime_imports() {
  static const std::map<std::string, void*> table = {
      {"ember_parallel_for", reinterpret_cast<void*>(&ember_parallel_for)},
      {"ember_index_error", reinterpret_cast<void*>(&ember_index_error)},
      {"ember_alloc", reinterpret_cast<void*>(&ember_alloc)}};
  return table;
}

std::shared_ptr<LibraryModule> LibraryModule::open(const std::string& path,
                                                   const std::vector<std::string>& imports) {
  // RTLD_LOCAL: kernel symbols stay out of the process's namespace, so two models (or two
  // versions of one) never bind to each other's functions.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    fail("cannot load the model's code '", path, "': ", dl_error(),
         " (an artifact exported on another platform, or a temporary directory mounted "
         "noexec: set TMPDIR to another directory)");
  return open_handle(handle, "'" + path + "'", imports);
}

std::shared_ptr<LibraryModule> LibraryModule::open_handle(void* handle, const std::string& what,
                                                          const std::vector<std::string>& imports,
                                                          int memfd) {
  std::shared_ptr<LibraryModule> module(new LibraryModule(handle, memfd));
  const auto& table = runtime_imports();
  for (const std::string& name : imports) {
    auto it = table.find(name);
    if (it == table.end())
      fail("the model's code needs the runtime function '", name,
           "', which this Ember runtime lacks; use the Ember version that exported it");
    dlerror();
    auto* slot = static_cast<void**>(dlsym(handle, (kImportPrefix + name).c_str()));
    if (!slot)
      fail(what, " has no import slot for '", name,
           "': the artifact is inconsistent; export the model again");
    *slot = it->second;
  }
  return module;
}

namespace {
bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}
}  // namespace

std::shared_ptr<LibraryModule> LibraryModule::from_bytes(const std::string& bytes,
                                                         const std::vector<std::string>& imports) {
  // An anonymous in-memory file: no name in any directory that another process could
  // replace between writing and dlopen, nothing left behind, and sealed once written.
  std::string memory_error;  // why loading from memory failed, if it did
  int fd = memfd_create("ember-model-code", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd >= 0) {
    if (write_all(fd, bytes)) {
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
      std::string path = "/proc/self/fd/" + std::to_string(fd);
      // dlopen of /proc/self/fd/N needs /proc and executable memfds (vm.memfd_noexec);
      // without them, fall back to a private temporary file.
      dlerror();
      if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        // The loader knows a library by its path first: "/proc/self/fd/N" must name no other
        // library while this one is loaded, so the module keeps fd N open until it is
        // unloaded. Check that this is our library all the same (a library another part of
        // the process loaded by such a name would be returned instead): its manifest is
        // the one in `bytes`.
        dlerror();
        const auto* manifest = static_cast<const char*>(dlsym(handle, kManifestSymbol));
        if (manifest && bytes.find(manifest) != std::string::npos)
          return open_handle(handle, "the model's code", imports, fd);
        dlclose(handle);
        memory_error = "another library was loaded by the name " + path;
      } else {
        memory_error = dl_error();
      }
    }
    close(fd);
  }
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/ember-XXXXXX.so";
  fd = mkstemps(path.data(), 3);
  if (fd < 0)
    fail("cannot create a temporary file for the model's code in '", path,
         "': ", std::strerror(errno), "; set TMPDIR to a writable directory",
         memory_error.empty() ? "" : " (loading it from memory failed: " + memory_error + ")");
  if (!write_all(fd, bytes)) {
    int err = errno;
    close(fd);
    unlink(path.c_str());
    fail("cannot write the model's code to '", path, "': ", std::strerror(err));
  }
  close(fd);
  // The file is only needed while dlopen maps it.
  try {
    auto module = open(path, imports);
    unlink(path.c_str());
    return module;
  } catch (...) {
    unlink(path.c_str());
    throw;
  }
}

LibraryModule::~LibraryModule() {
  dlclose(handle_);
  if (memfd_ < 0) return;
  // Still loaded by its name (dlclose need not unload)? Then the fd number must never name
  // another library: keep the fd open.
  std::string path = "/proc/self/fd/" + std::to_string(memfd_);
  if (void* still = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
    dlclose(still);
    return;
  }
  close(memfd_);
}

KernelFn LibraryModule::get_function(const std::string& name) const {
  dlerror();
  void* fn = dlsym(handle_, name.c_str());
  if (!fn) fail("kernel '", name, "' is not in this shared library: ", dl_error());
  return reinterpret_cast<KernelFn>(fn);
}

std::string LibraryModule::get_source(const std::string& format) const {
  fail("a loaded shared library has no '", format,
       "' source; get the source from the Library that ember.build returned before export");
}

}  // namespace ember::runtime
