#include "ember/runtime/kernel_error.h"

#include <cstdio>
#include <cstdlib>

#include "ember/support/error.h"

namespace ember::runtime {

namespace {
thread_local KernelErrors* t_errors = nullptr;
}  // namespace

bool KernelErrors::claim() { return !claimed_.exchange(true, std::memory_order_acq_rel); }

void KernelErrors::record_index(int64_t index, int64_t size, int64_t axis, bool allow_negative) {
  if (!claim()) return;
  kind_ = Kind::Index;
  index_ = index;
  size_ = size;
  axis_ = axis;
  allow_negative_ = allow_negative;
  failed_.store(true, std::memory_order_release);
}

void KernelErrors::record_alloc(int64_t bytes) {
  if (!claim()) return;
  kind_ = Kind::Alloc;
  bytes_ = bytes;
  failed_.store(true, std::memory_order_release);
}

std::string KernelErrors::take_message(const std::string& kernel) {
  failed_.store(false);
  claimed_.store(false);
  if (kind_ == Kind::Alloc)
    return detail::concat("kernel '", kernel, "': cannot allocate its scratch buffer of ", bytes_,
                          " bytes (the system is out of memory); free memory, run the model on "
                          "smaller inputs, or use fewer threads (each thread allocates its own)");
  std::string valid = allow_negative_ ? detail::concat(-size_, " to ", size_ - 1)
                                      : detail::concat("0 to ", size_ - 1);
  std::string msg =
      detail::concat("kernel '", kernel, "': take index ", index_, " is out of range for axis ",
                     axis_, " of size ", size_, " (valid indices are ", valid,
                     allow_negative_ ? ""
                                     : "; this op does not take negative indices, as torch's "
                                       "index_select and embedding",
                     "); fix the indices input");
  return msg;
}

KernelErrors* current_kernel_errors() { return t_errors; }

KernelErrorScope::KernelErrorScope(KernelErrors* errors) : saved_(t_errors) { t_errors = errors; }

KernelErrorScope::~KernelErrorScope() { t_errors = saved_; }

}  // namespace ember::runtime

// Exported past -fvisibility=hidden: JIT code and exported shared libraries call it by name.
extern "C" __attribute__((visibility("default"))) void ember_index_error(int64_t index,
                                                                         int64_t size, int64_t axis,
                                                                         int64_t allow_negative) {
  if (ember::runtime::KernelErrors* errors = ember::runtime::current_kernel_errors()) {
    errors->record_index(index, size, axis, allow_negative != 0);
    return;
  }
  // A kernel called outside a GraphExecutor (a C++ caller of Module::get_function): there is
  // no one to raise the error, so say it here rather than not at all.
  std::fprintf(stderr, "ember: a kernel read index %lld of an axis of size %lld\n",
               static_cast<long long>(index), static_cast<long long>(size));
}

extern "C" __attribute__((visibility("default"))) void* ember_alloc(int64_t bytes,
                                                                    int64_t alignment) {
  // aligned_alloc wants a multiple of the alignment (C11); a size that rounds past the
  // address space cannot be had either.
  const uint64_t align = static_cast<uint64_t>(alignment), want = static_cast<uint64_t>(bytes);
  void* p = nullptr;
  if (bytes >= 0 && want <= UINT64_MAX - align)
    p = std::aligned_alloc(align, (want + align - 1) / align * align);
  if (p) return p;
  if (ember::runtime::KernelErrors* errors = ember::runtime::current_kernel_errors()) {
    errors->record_alloc(bytes);
    return nullptr;
  }
  std::fprintf(stderr, "ember: a kernel could not allocate %lld bytes of scratch memory\n",
               static_cast<long long>(bytes));
  return nullptr;
}
