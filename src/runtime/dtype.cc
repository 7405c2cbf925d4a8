#include "ember/runtime/dtype.h"

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
    {DType::Float32, "float32", 4}, {DType::Float64, "float64", 8}, {DType::Int32, "int32", 4},
    {DType::Int64, "int64", 8},     {DType::Bool, "bool", 1},
};

const DTypeInfo& info(DType t) {
  for (const DTypeInfo& d : kDTypes)
    if (d.type == t) return d;
  EMBER_CHECK(false, "unknown DType value ", static_cast<int>(t));
}
}  // namespace

int dtype_bytes(DType t) { return info(t).bytes; }

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
