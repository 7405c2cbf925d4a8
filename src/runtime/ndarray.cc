#include "ember/runtime/ndarray.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

#include "ember/runtime/cuda.h"
#include "ember/support/checked_math.h"
#include "ember/support/error.h"

namespace ember::runtime {

namespace {
constexpr size_t kAlignment = 64;

// "float32(1, 3, 32, 32)": how error messages name a tensor's type.
std::string type_str(const NDArray& t) {
  return std::string(dtype_name(t.dtype())) + shape_str(t.shape());
}
}  // namespace

int64_t shape_numel(const Shape& shape) { return checked_numel(shape, "a tensor"); }

size_t NDArray::nbytes() const {
  return static_cast<size_t>(checked_nbytes(shape_, dtype_bytes(dtype_), "a tensor"));
}

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ")";
  return os.str();
}

NDArray NDArray::empty(const Shape& shape, DType dtype) {
  // At most 2^63 - 1 bytes (checked), so rounding up below cannot wrap around.
  size_t bytes = static_cast<size_t>(
      checked_nbytes(shape, dtype_bytes(dtype), std::string("a ") + dtype_name(dtype) + " tensor"));
  // aligned_alloc needs a size that is a multiple of the alignment; a zero-size tensor still
  // gets one block so that data() is a valid, unique pointer.
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (!p)
    fail("out of memory: cannot allocate ", bytes, " bytes for a ", dtype_name(dtype),
         shape_str(shape), " tensor; use smaller shapes (or a machine with more memory)");
  NDArray t;
  t.owner_ = std::shared_ptr<void>(p, std::free);
  t.data_ = p;
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

NDArray NDArray::zeros(const Shape& shape, DType dtype) {
  NDArray t = empty(shape, dtype);
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

NDArray NDArray::view(std::shared_ptr<void> owner, void* data, const Shape& shape, DType dtype) {
  NDArray t;
  t.owner_ = std::move(owner);
  t.data_ = data;
  t.shape_ = shape;
  t.dtype_ = dtype;
  shape_numel(shape);  // validates the shape
  if (!data && t.numel() != 0)
    fail("NDArray::view of a ", type_str(t), " tensor was given a null data pointer");
  return t;
}

double NDArray::element(int64_t i) const {
  EMBER_CHECK(device_.type == DeviceType::CPU && i >= 0 && i < numel(), "element ", i, " of a ",
              type_str(*this), " tensor");
  switch (dtype_) {
    case DType::Float32:
      return data_as<float>()[i];
    case DType::Float64:
      return data_as<double>()[i];
    case DType::Int32:
      return data_as<int32_t>()[i];
    case DType::Int64:
      return static_cast<double>(data_as<int64_t>()[i]);
    case DType::Bool:
    case DType::UInt8:
      return data_as<uint8_t>()[i];
    case DType::Int8:
      return data_as<int8_t>()[i];
    case DType::BFloat16:
      return bf16_to_float(data_as<uint16_t>()[i]);
  }
  EMBER_CHECK(false, "unknown dtype");
}

NDArray NDArray::clone() const {
  if (!defined()) fail("cannot clone an undefined tensor");
  // Device memory is not addressable here: the driver copies it.
  if (device_.type == DeviceType::CUDA) {
    NDArray t = cuda::empty(shape_, dtype_, device_.id);
    cuda::copy(t, *this);
    return t;
  }
  NDArray t = empty(shape_, dtype_);
  if (nbytes() > 0) std::memcpy(t.data_, data_, nbytes());
  return t;
}

void NDArray::copy_from(const NDArray& src) {
  if (!defined()) fail("copy_from: the destination tensor is undefined");
  if (!src.defined()) fail("copy_from: the source tensor is undefined");
  if (src.shape_ != shape_ || src.dtype_ != dtype_)
    fail("copy_from: cannot copy a ", type_str(src), " tensor into a ", type_str(*this),
         " tensor: shapes and dtypes must match (reshape or cast the source first)");
  if (device_.type == DeviceType::CUDA || src.device_.type == DeviceType::CUDA)
    return cuda::copy(*this, src);
  // memmove: a view may overlap its source.
  if (nbytes() > 0 && src.data_ != data_) std::memmove(data_, src.data_, nbytes());
}

NDArray NDArray::reshape(const Shape& shape) const {
  if (shape_numel(shape) != numel())
    fail("cannot reshape a ", type_str(*this), " tensor (", numel(), " elements) to ",
         shape_str(shape), " (", shape_numel(shape), " elements): element counts must match");
  NDArray t = *this;
  t.shape_ = shape;
  return t;
}

}  // namespace ember::runtime
