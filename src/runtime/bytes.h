#pragma once
// Little-endian integers in byte strings, for the model container and .npy (x86-64 and
// AArch64 Linux are little-endian; memcpy keeps the reads alignment-safe).
#include <cstring>
#include <string>

namespace ember::runtime::bytes {

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <class T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace ember::runtime::bytes
