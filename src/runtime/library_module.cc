#include "ember/runtime/library_module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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
      {"ember_parallel_for", reinterpret_cast<void*>(&ember_parallel_for)}};
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
  std::shared_ptr<LibraryModule> module(new LibraryModule(handle));
  const auto& table = runtime_imports();
  for (const std::string& name : imports) {
    auto it = table.find(name);
    if (it == table.end())
      fail("the model's code needs the runtime function '", name,
           "', which this Ember runtime lacks; use the Ember version that exported it");
    dlerror();
    auto* slot = static_cast<void**>(dlsym(handle, (kImportPrefix + name).c_str()));
    if (!slot)
      fail("the model's code '", path, "' has no import slot for '", name,
           "': the artifact is inconsistent; export the model again");
    *slot = it->second;
  }
  return module;
}

std::shared_ptr<LibraryModule> LibraryModule::from_bytes(const std::string& bytes,
                                                         const std::vector<std::string>& imports) {
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/ember-XXXXXX.so";
  int fd = mkstemps(path.data(), 3);
  if (fd < 0)
    fail("cannot create a temporary file for the model's code in '", path,
         "': ", std::strerror(errno), "; set TMPDIR to a writable directory");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      close(fd);
      unlink(path.c_str());
      fail("cannot write the model's code to '", path, "': ", std::strerror(err));
    }
    done += static_cast<size_t>(n);
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

LibraryModule::~LibraryModule() { dlclose(handle_); }

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
