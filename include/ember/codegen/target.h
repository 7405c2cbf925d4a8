#pragma once
/// Target strings, as TVM writes them: a kind followed by options.
///
///   "llvm"                                  the host CPU at its native vector width
///   "llvm -vector-bits=256"                 the host CPU, vectors of 256 bits (AVX2 width)
///   "llvm -mcpu=skylake-avx512 -vector-bits=512"
///   "cuda" / "cuda -arch=sm_90"             NVIDIA GPU (PTX)
///
/// An unknown kind or option is an ember::Error that lists the known ones. -vector-bits sets
/// the width the schedules tile for and LLVM emits; a width wider than the CPU's registers is
/// legal (LLVM splits each vector in two), so both AVX2 and AVX-512 code paths can be built
/// and tested on any x86-64 host.
#include <string>

namespace ember::codegen {

struct Target {
  enum class Kind { Llvm, Cuda };
  Kind kind = Kind::Llvm;
  std::string cpu = "native";  // -mcpu: an LLVM CPU name, or "native" for the host
  int vector_bits = 0;         // -vector-bits: 128, 256 or 512; 0 = the CPU's own width
  std::string arch = "sm_80";  // cuda -arch

  bool is_cuda() const { return kind == Kind::Cuda; }
  /// The canonical string: parse(str()) == *this. Options at their defaults are left out.
  std::string str() const;
  /// The vector width the code uses: vector_bits, or the CPU's widest float vector.
  int resolved_vector_bits() const;
};

/// Parses a target string; throws ember::Error naming what is wrong.
Target parse_target(const std::string& text);

}  // namespace ember::codegen
