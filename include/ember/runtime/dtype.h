#pragma once
/// Element types shared by every layer (graph IR, loop IR, runtime).
#include <cstdint>
#include <string>

namespace ember {

/// Int8 and UInt8 are quantized models' tensors (issue 45); arithmetic on them wraps, as
/// PyTorch's does. BFloat16 is a storage type (issue 45): bfloat16 tensors hold the upper
/// half of a float32; the generated code widens them to float32 in registers and rounds to
/// nearest even when it stores them or casts to them. New entries go last: their order is
/// not stored anywhere, but it keeps switch tables in one order.
enum class DType : uint8_t { Float32, Float64, Int32, Int64, Bool, Int8, UInt8, BFloat16 };

/// Size of one element in bytes (Bool is one byte).
int dtype_bytes(DType t);
/// "float32", "float64", "int32", "int64", "bool", "int8", "uint8", "bfloat16".
const char* dtype_name(DType t);
/// Inverse of dtype_name; throws ember::Error naming the bad string.
DType dtype_from_name(const std::string& name);
/// Elements of type `t` in one vector register of `vector_bits` bits (at least one): the
/// one lanes formula of every layer (MachineModel::lanes, the schedules, the ops' lowerings).
inline int register_lanes(DType t, int vector_bits) {
  const int lanes = vector_bits / (8 * dtype_bytes(t));
  return lanes > 1 ? lanes : 1;
}
inline bool is_float(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::BFloat16;
}
inline bool is_int(DType t) {
  return t == DType::Int32 || t == DType::Int64 || t == DType::Int8 || t == DType::UInt8;
}
/// Compared, divided, widened and shifted as unsigned values.
inline bool is_unsigned(DType t) { return t == DType::UInt8 || t == DType::Bool; }
/// The smallest and largest value of an integer type (Bool: 0 and 1).
int64_t int_min(DType t);
int64_t int_max(DType t);
/// `v` wrapped into integer type `t` (two's complement, as a generated trunc does).
int64_t wrap_int(DType t, int64_t v);

/// bfloat16 bits of a float, rounded to nearest even (NaN: the quiet NaN 0x7FC0), as
/// PyTorch's c10::BFloat16 and the generated code round.
uint16_t bf16_bits(float f);
/// The float a bfloat16 bit pattern holds (exact).
float bf16_to_float(uint16_t bits);
/// `v` rounded to the nearest bfloat16 (through float32, as the generated code rounds).
inline double round_bf16(double v) { return bf16_to_float(bf16_bits(static_cast<float>(v))); }

}  // namespace ember
