#pragma once
/// Checked size arithmetic. Every element count and byte count in Ember goes through these,
/// so a shape too large for any memory is an ember::Error naming what has it, never a count
/// that wrapped around (to 0, or a negative size) and a crash later.
#include <cstdint>
#include <string>
#include <vector>

#include "ember/support/error.h"

namespace ember {

/// a + b, a - b and a * b into *out; true when the result does not fit in int64_t.
inline bool add_overflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_add_overflow(a, b, out);
}
inline bool sub_overflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_sub_overflow(a, b, out);
}
inline bool mul_overflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

/// "(2, 3)": a shape for messages.
inline std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

/// a + b and a * b; ember::Error naming `what` when the result does not fit in int64_t.
inline int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  int64_t out;
  if (add_overflows(a, b, &out))
    fail(what, ": ", a, " + ", b, " does not fit in 64 bits; the sizes are too large");
  return out;
}
inline int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
  int64_t out;
  if (mul_overflows(a, b, &out))
    fail(what, ": ", a, " * ", b, " does not fit in 64 bits; the sizes are too large");
  return out;
}

/// The number of elements of `shape` (1 for a 0-d shape). ember::Error naming `what` for a
/// negative dimension, or when the count does not fit in int64_t.
inline int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& what) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d < 0)
      fail(what, " has shape ", shape_text(shape),
           " with a negative dimension: sizes must be >= 0");
    overflow = overflow || mul_overflows(n, d, &n);
  }
  // A zero dimension makes the count 0 however large the others are.
  for (int64_t d : shape)
    if (d == 0) return 0;
  if (overflow)
    fail(what, " has shape ", shape_text(shape),
         ", whose element count does not fit in 64 bits; no machine can hold it: check the "
         "shape");
  return n;
}

/// checked_numel(shape) * elem_bytes: the byte size, which must fit in int64_t too.
inline int64_t checked_nbytes(const std::vector<int64_t>& shape, int64_t elem_bytes,
                              const std::string& what) {
  int64_t bytes;
  if (mul_overflows(checked_numel(shape, what), elem_bytes, &bytes))
    fail(what, " has shape ", shape_text(shape), ", whose size in bytes (", elem_bytes,
         " per element) does not fit in 64 bits; no machine can hold it: check the shape");
  return bytes;
}

}  // namespace ember
