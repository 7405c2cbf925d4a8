#pragma once
/// NumPy .npy files (format 1.0-3.0, little-endian, C order, Ember's dtypes), so C++
/// programs can exchange inputs and outputs with Python.
#include <string>

#include "ember/runtime/ndarray.h"

namespace ember::runtime {

NDArray load_npy(const std::string& path);
void save_npy(const std::string& path, const NDArray& t);

}  // namespace ember::runtime
