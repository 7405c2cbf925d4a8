// libFuzzer target for the model-file reader (scripts/fuzz_model_file.sh builds and runs it).
//
// Each input is a file's bytes. It is read as a model file the way `ember inspect` reads
// one (load_library with load_code = false: the container, the graph JSON, the parameters
// and the graph-vs-code manifest check; the file's code is never loaded), a model that
// loads is planned by a GraphExecutor over kernels that do nothing, and the same bytes are
// read as a .npy file. The only exception allowed out is ember::Error (a defect reported to
// the user); anything else (an InternalError, std::out_of_range, ...) escapes and libFuzzer
// reports it as a crash, as it does sanitizer reports.
//
// The custom mutator keeps most inputs well-formed containers: it mutates one section (the
// graph JSON most often, numbers in it especially, or the kernel manifest inside the code
// section) and writes the file again with correct checksums, so inputs get past the
// checksum checks to the JSON, the graph checks and the graph-vs-code check.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ember/runtime/artifact.h"
#include "ember/runtime/graph_executor.h"
#include "ember/runtime/manifest.h"
#include "ember/runtime/npy.h"
#include "ember/support/checked_math.h"
#include "ember/support/error.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using ember::runtime::ExecGraph;

// ------------------------------------------------------------------------------ the target

// The input as a file: a memfd, named by its /proc path, so no file is left behind.
std::string input_path(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("ember-model-fuzz", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, 0) != 0) abort();
  for (size_t done = 0; done < size;) {
    ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) abort();
    done += static_cast<size_t>(n);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

void do_nothing(void**) {}

// Kernels that do nothing: the executor's memory plan runs over a fuzzed graph, no code.
class NoCode final : public ember::runtime::Module {
 public:
  ember::runtime::KernelFn get_function(const std::string&) const override { return do_nothing; }
  std::string type_key() const override { return "none"; }
  std::string get_source(const std::string&) const override { return ""; }
};

// Bytes the executor would allocate for the graph's values (an upper bound).
int64_t value_bytes(const ExecGraph& g) {
  int64_t total = 0;
  for (const ExecGraph::Value& v : g.values) {
    int64_t bytes = 0;
    try {
      bytes = ember::checked_nbytes(v.shape, ember::dtype_bytes(v.dtype), "value");
    } catch (const ember::Error&) {
      return INT64_MAX;
    }
    if (ember::add_overflows(total, bytes, &total)) return INT64_MAX;
  }
  return total;
}

void read_model(const std::string& path, bool pin_digest, const uint8_t* data, size_t size) {
  ember::runtime::LoadOptions options;
  options.load_code = false;  // never the fuzz input's code
  if (pin_digest) options.sha256 = ember::runtime::sha256_hex(data, size);
  std::shared_ptr<ember::runtime::LoadedLibrary> lib;
  try {
    lib = ember::runtime::load_library(path, options);
  } catch (const ember::Error&) {
    return;
  }
  // A graph the reader accepted must be one the executor can plan (its errors are
  // ember::Error too); big graphs are skipped, only to keep the fuzzer's memory small.
  if (value_bytes(*lib->graph) > (int64_t{64} << 20)) return;
  try {
    ember::runtime::GraphExecutor executor(lib->graph, std::make_shared<NoCode>());
  } catch (const ember::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = input_path(data, size);
  read_model(path, size % 2 == 1, data, size);
  try {
    ember::runtime::load_npy(path);
  } catch (const ember::Error&) {
  }
  return 0;
}

// ------------------------------------------------------------------------------ mutator
namespace {

constexpr size_t kAlign = 64;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

template <class T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// A model file taken apart: its version and sections (kind, bytes), in file order.
struct Container {
  uint32_t version = 0;
  std::vector<std::pair<std::string, std::string>> sections;
};

std::optional<Container> parse(const uint8_t* data, size_t size) {
  if (size < 16 || std::memcmp(data, "EMBERLIB", 8) != 0) return std::nullopt;
  Container c;
  c.version = get<uint32_t>(data + 8);
  uint32_t count = get<uint32_t>(data + 12);
  if (count > 64 || size < 16 + 32 * size_t{count} + 8) return std::nullopt;
  for (uint32_t s = 0; s < count; ++s) {
    const uint8_t* entry = data + 16 + 32 * s;
    uint64_t offset = get<uint64_t>(entry + 8), bytes = get<uint64_t>(entry + 16);
    if (offset > size || bytes > size - offset) return std::nullopt;
    c.sections.emplace_back(std::string(reinterpret_cast<const char*>(entry),
                                        strnlen(reinterpret_cast<const char*>(entry), 8)),
                            std::string(reinterpret_cast<const char*>(data + offset), bytes));
  }
  return c;
}

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The file for `c`, with correct offsets and checksums (the layout save_artifact writes).
std::string serialize(const Container& c) {
  std::string out("EMBERLIB", 8);
  put<uint32_t>(out, c.version);
  put<uint32_t>(out, static_cast<uint32_t>(c.sections.size()));
  size_t offset = align_up(16 + 32 * c.sections.size() + 8);
  for (const auto& [kind, bytes] : c.sections) {
    char name[8] = {};
    std::memcpy(name, kind.data(), std::min<size_t>(kind.size(), 8));
    out.append(name, 8);
    put<uint64_t>(out, offset);
    put<uint64_t>(out, bytes.size());
    put<uint64_t>(out, fnv1a(bytes));
    offset = align_up(offset + bytes.size());
  }
  put<uint64_t>(out, fnv1a(out));
  for (const auto& [kind, bytes] : c.sections) {
    out.resize(align_up(out.size()), '\0');
    out += bytes;
  }
  return out;
}

// libFuzzer's own byte-level mutation of s, with room to grow by `grow` bytes.
void mutate_bytes(std::string& s, size_t grow) {
  size_t size = s.size();
  s.resize(size + grow);
  if (s.empty()) return;
  size = LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(s.data()), size, s.size());
  s.resize(size);
}

// Replaces one number in the text with a boundary value or a neighbour: what reaches the
// value ids, shapes, offsets and sizes the reader must check.
void mutate_number(std::string& s, std::minstd_rand& rng) {
  std::vector<std::pair<size_t, size_t>> numbers;  // (start, length)
  for (size_t i = 0; i < s.size();) {
    if (s[i] >= '0' && s[i] <= '9') {
      size_t j = i;
      while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
      size_t start = i > 0 && s[i - 1] == '-' ? i - 1 : i;
      numbers.emplace_back(start, j - start);
      i = j;
    } else {
      ++i;
    }
  }
  if (numbers.empty()) return;
  static const char* const kValues[] = {"0",
                                        "1",
                                        "-1",
                                        "2",
                                        "3",
                                        "7",
                                        "8",
                                        "63",
                                        "64",
                                        "65",
                                        "4096",
                                        "2147483647",
                                        "2147483648",
                                        "4294967296",
                                        "1125899906842624",
                                        "9223372036854775807",
                                        "9223372036854775808",
                                        "-9223372036854775808",
                                        "18446744073709551616",
                                        "18446744073709551620"};
  auto [start, length] = numbers[rng() % numbers.size()];
  std::string value;
  if (rng() % 3 == 0) {
    // (unsigned: wraps at the ends instead of overflowing)
    uint64_t n = static_cast<uint64_t>(std::strtoll(s.substr(start, length).c_str(), nullptr, 10));
    value = std::to_string(static_cast<int64_t>(rng() % 2 ? n + 1 : n - 1));
  } else {
    value = kValues[rng() % (sizeof(kValues) / sizeof(kValues[0]))];
  }
  s.replace(start, length, value);
}

// Replaces one string literal of the JSON with a token the reader gives meaning to.
void mutate_string(std::string& s, std::minstd_rand& rng) {
  std::vector<size_t> quotes;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == '"' && (i == 0 || s[i - 1] != '\\')) quotes.push_back(i);
  if (quotes.size() < 2) return;
  size_t k = rng() % (quotes.size() / 2) * 2;
  static const char* const kTokens[] = {
      "float32", "float64", "int32", "int64",    "bool",   "",     "values", "inputs",
      "params",  "kernels", "views", "outputs",  "launch", "arch", "sm_80",  "\\u0000",
      "\\u00zz", "\\u12",   "\\",    "+avx512f", "x",      "ptx"};
  s.replace(quotes[k] + 1, quotes[k + 1] - quotes[k] - 1,
            kTokens[rng() % (sizeof(kTokens) / sizeof(kTokens[0]))]);
}

void mutate_text(std::string& s, std::minstd_rand& rng) {
  switch (rng() % 4) {
    case 0:
    case 1:
      return mutate_number(s, rng);
    case 2:
      return mutate_string(s, rng);
    default:
      return mutate_bytes(s, 64);
  }
}

// The kernel manifest inside a code section (what the graph-vs-code check reads).
void mutate_manifest(std::string& code, std::minstd_rand& rng) {
  size_t begin = code.find(ember::runtime::kManifestBegin);
  size_t end = code.find(ember::runtime::kManifestEnd, begin == std::string::npos ? 0 : begin);
  if (begin == std::string::npos || end == std::string::npos) return mutate_bytes(code, 64);
  std::string manifest = code.substr(begin, end - begin);
  mutate_text(manifest, rng);
  code.replace(begin, end - begin, manifest);
}

// Adds, drops, reorders or renames sections, or changes the version.
void mutate_layout(Container& c, std::minstd_rand& rng) {
  static const char* const kKinds[] = {"graph", "params", "cpu.so", "ptx", "junk", ""};
  auto& s = c.sections;
  switch (rng() % 5) {
    case 0:
      if (!s.empty()) s.erase(s.begin() + rng() % s.size());
      break;
    case 1:
      if (!s.empty()) s.push_back(s[rng() % s.size()]);
      break;
    case 2:
      if (s.size() > 1) std::swap(s[rng() % s.size()], s[rng() % s.size()]);
      break;
    case 3:
      if (!s.empty()) s[rng() % s.size()].first = kKinds[rng() % 6];
      break;
    default:
      c.version = rng() % 4 == 0 ? static_cast<uint32_t>(rng()) : rng() % 3;
  }
}

std::string* section(Container& c, const char* kind) {
  for (auto& [k, bytes] : c.sections)
    if (k == kind) return &bytes;
  return nullptr;
}

std::string* code_section(Container& c) {
  std::string* code = section(c, "cpu.so");
  return code ? code : section(c, "ptx");
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned seed) {
  std::minstd_rand rng(seed);
  std::optional<Container> c = parse(data, size);
  const unsigned pick = rng() % 100;
  if (!c || pick >= 92) return LLVMFuzzerMutate(data, size, max_size);  // raw, unfixed
  std::string* graph = section(*c, "graph");
  std::string* code = code_section(*c);
  std::string* params = section(*c, "params");
  if (pick < 60 && graph)
    mutate_text(*graph, rng);
  else if (pick < 75 && code)
    mutate_manifest(*code, rng);
  else if (pick < 82 && params)
    mutate_bytes(*params, 128);
  else
    mutate_layout(*c, rng);
  std::string out = serialize(*c);
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
