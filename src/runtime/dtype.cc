#include "ember/runtime/dtype.h"

#include <cstring>

#include "ember/support/error.h"

namespace ember {

namespace {
struct DTypeInfo {
  DType type;
  const char* name;
  int bytes;
};
// One table so names, sizes and the error message's list of valid names cannot drift.
constexpr DTypeInfo kDTypes[] = {
    {DType::Float32, "float32", 4}, {DType::Float64, "float64", 8},   {DType::Int32, "int32", 4},
    {DType::Int64, "int64", 8},     {DType::Bool, "bool", 1},         {DType::Int8, "int8", 1},
    {DType::UInt8, "uint8", 1},     {DType::BFloat16, "bfloat16", 2},
};

const DTypeInfo& info(DType t) {
  for (const DTypeInfo& d : kDTypes)
    if (d.type == t) return d;
  EMBER_CHECK(false, "unknown DType value ", static_cast<int>(t));
}
}  // namespace

int dtype_bytes(DType t) { return info(t).bytes; }

int64_t int_min(DType t) {
  EMBER_CHECK(is_int(t) || t == DType::Bool, "int_min of ", dtype_name(t));
  if (is_unsigned(t)) return 0;
  return t == DType::Int64 ? INT64_MIN : -(int64_t{1} << (8 * dtype_bytes(t) - 1));
}

int64_t int_max(DType t) {
  EMBER_CHECK(is_int(t) || t == DType::Bool, "int_max of ", dtype_name(t));
  if (t == DType::Bool) return 1;
  if (t == DType::Int64) return INT64_MAX;
  const int bits = 8 * dtype_bytes(t) - (is_unsigned(t) ? 0 : 1);
  return (int64_t{1} << bits) - 1;
}

int64_t wrap_int(DType t, int64_t v) {
  switch (t) {
    case DType::Int8:
      return static_cast<int8_t>(static_cast<uint8_t>(v));
    case DType::UInt8:
      return static_cast<uint8_t>(v);
    case DType::Int32:
      return static_cast<int32_t>(static_cast<uint32_t>(v));
    case DType::Bool:
      return v != 0;
    default:
      return v;
  }
}

uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (f != f) return 0x7FC0;
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float bf16_to_float(uint16_t bits) {
  const uint32_t u = uint32_t{bits} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

const char* dtype_name(DType t) { return info(t).name; }

DType dtype_from_name(const std::string& name) {
  std::string valid;
  for (const DTypeInfo& d : kDTypes) {
    if (name == d.name) return d.type;
    valid += valid.empty() ? "" : ", ";
    valid += d.name;
  }
  fail("unknown dtype '", name, "': use one of ", valid);
}

}  // namespace ember
