#pragma once
/// NDArray: a dense, row-major tensor holding data: 64-byte aligned CPU memory, or GPU memory
/// (device CUDA, made by the CUDA runtime; data() is then a device pointer that the host must
/// not read). Copies share storage (like torch.Tensor); use clone() for a deep copy of a CPU
/// tensor. Python calls it ember.Tensor; the symbolic tensor of the compiler is ir::Tensor.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/runtime/dtype.h"

namespace ember::runtime {

using Shape = std::vector<int64_t>;

enum class DeviceType : int32_t { CPU = 1, CUDA = 2 };
struct Device {
  DeviceType type = DeviceType::CPU;
  int32_t id = 0;
};

/// The element count; ember::Error for a negative dimension or a count past 64 bits.
int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "(1, 3, 32, 32)"

class NDArray {
 public:
  NDArray() = default;
  /// Uninitialised storage, 64-byte aligned.
  static NDArray empty(const Shape& shape, DType dtype);
  static NDArray zeros(const Shape& shape, DType dtype);
  /// A tensor over memory owned by `owner` (kept alive as long as the tensor lives).
  static NDArray view(std::shared_ptr<void> owner, void* data, const Shape& shape, DType dtype);
  /// The same over memory of `device` (a CUDA device pointer for DeviceType::CUDA).
  static NDArray view(std::shared_ptr<void> owner, void* data, const Shape& shape, DType dtype,
                      Device device) {
    NDArray t = view(std::move(owner), data, shape, dtype);
    t.device_ = device;
    return t;
  }

  bool defined() const { return data_ != nullptr || numel() == 0; }
  void* data() const { return data_; }
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  /// numel() * the dtype's size (ember::Error if that does not fit in 64 bits).
  size_t nbytes() const;
  const std::shared_ptr<void>& owner() const { return owner_; }

  /// Element `i` (flat, CPU memory) of any dtype as a double: exact for every value but
  /// int64 beyond 2^53. For constant checks and folding, not for kernels.
  double element(int64_t i) const;

  NDArray clone() const;
  /// Copies src's bytes into this tensor; shapes and dtypes must match (ember::Error if not).
  void copy_from(const NDArray& src);
  /// Same storage, new shape with the same element count.
  NDArray reshape(const Shape& shape) const;

 private:
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::Float32;
  Device device_;
};

}  // namespace ember::runtime
