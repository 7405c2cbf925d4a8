#pragma once
/// Element types shared by every layer (graph IR, loop IR, runtime).
#include <cstdint>
#include <string>

namespace ember {

enum class DType : uint8_t { Float32, Float64, Int32, Int64, Bool };

/// Size of one element in bytes (Bool is one byte).
int dtype_bytes(DType t);
/// "float32", "float64", "int32", "int64", "bool".
const char* dtype_name(DType t);
/// Inverse of dtype_name; throws ember::Error naming the bad string.
DType dtype_from_name(const std::string& name);
/// Elements of type `t` in one vector register of `vector_bits` bits (at least one): the
/// one lanes formula of every layer (MachineModel::lanes, the schedules, the ops' lowerings).
inline int register_lanes(DType t, int vector_bits) {
  const int lanes = vector_bits / (8 * dtype_bytes(t));
  return lanes > 1 ? lanes : 1;
}
inline bool is_float(DType t) { return t == DType::Float32 || t == DType::Float64; }
inline bool is_int(DType t) { return t == DType::Int32 || t == DType::Int64; }

}  // namespace ember
