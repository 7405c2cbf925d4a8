#pragma once
/// The channel from generated code back to the runtime. A kernel that meets bad data (an
/// index out of range) calls ember_index_error, and one whose scratch buffer cannot be
/// allocated gets null from ember_alloc; either records it in the KernelErrors of the
/// kernel call in flight on this thread (the executor installs one; parallel loops carry it
/// to the pool's threads). The kernel itself goes on safely (it reads index 0 instead, or
/// skips the work that needed the buffer), and the executor raises the recorded error as
/// ember::Error naming the kernel once it returns.
#include <atomic>
#include <cstdint>
#include <string>

extern "C" {
/// Called by generated code: `index` is outside an axis of `size` elements (`axis` of the
/// op's data; `allow_negative`: whether -size..-1 count from the end).
void ember_index_error(int64_t index, int64_t size, int64_t axis, int64_t allow_negative);
/// Called by generated code for a scratch buffer of `bytes` bytes aligned to `alignment` (a
/// power of two): the memory (release it with free), or null once the failure is recorded.
void* ember_alloc(int64_t bytes, int64_t alignment);
}

namespace ember::runtime {

/// What went wrong in a kernel call; the first report wins, later ones are dropped.
class KernelErrors {
 public:
  void record_index(int64_t index, int64_t size, int64_t axis, bool allow_negative);
  void record_alloc(int64_t bytes);
  /// True once a report is complete (read after the kernel and its parallel loops returned).
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  /// The recorded error as a message about kernel `kernel`; clears the record.
  std::string take_message(const std::string& kernel);

 private:
  bool claim();  // true for the first report only

  std::atomic<bool> claimed_{false}, failed_{false};
  enum class Kind { Index, Alloc } kind_ = Kind::Index;
  int64_t index_ = 0, size_ = 0, axis_ = 0, bytes_ = 0;
  bool allow_negative_ = false;
};

/// The record kernels running on this thread report to (null when none is installed).
KernelErrors* current_kernel_errors();

/// Installs `errors` as this thread's record while it lives, then restores the previous one.
class KernelErrorScope {
 public:
  explicit KernelErrorScope(KernelErrors* errors);
  ~KernelErrorScope();
  KernelErrorScope(const KernelErrorScope&) = delete;
  KernelErrorScope& operator=(const KernelErrorScope&) = delete;

 private:
  KernelErrors* saved_;
};

}  // namespace ember::runtime
