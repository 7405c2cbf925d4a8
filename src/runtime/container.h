#pragma once
// The model file's container (format in include/ember/runtime/artifact.h): a header, a
// table of checksummed sections, and the sections at 64-byte aligned offsets. It knows
// nothing of what the sections hold; artifact.cc gives them meaning.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ember/runtime/ndarray.h"

namespace ember::runtime::container {

inline constexpr size_t kAlign = 64;

inline size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// Writes the sections (kind, bytes) to `path`: to a new, uniquely named file in the same
/// directory first (never following a link there), fsynced, then renamed over `path`.
void write(const std::string& path,
           const std::vector<std::pair<std::string, const std::string*>>& sections);

struct Section {
  std::string kind;
  const char* data;
  uint64_t size;
};

/// A container read into one 64-byte aligned buffer; the sections point into it.
struct File {
  NDArray buffer;  // the whole file (its owner keeps the sections alive)
  uint64_t size = 0;
  std::vector<Section> sections;
};

/// Reads and checks the file at `path`: magic, version, section table and checksums, the
/// header before the rest is read. With `sha256` (64 hex digits, any case), a file whose
/// digest differs is refused before anything in it is used. Every defect is an
/// ember::Error naming `where`.
File read(const std::string& path, const std::string& sha256, const std::string& where);

}  // namespace ember::runtime::container
