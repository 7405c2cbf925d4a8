// The artifact file (format in artifact.h): writing, reading with every check a damaged or
// foreign file needs, loading the code, and a small .npy reader/writer.
#include "ember/runtime/artifact.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "ember/runtime/cpu_features.h"
#include "ember/runtime/cuda.h"
#include "ember/runtime/library_module.h"
#include "ember/support/checked_math.h"
#include "ember/support/error.h"

namespace ember::runtime {

namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'E', 'R', 'L', 'I', 'B'};
constexpr size_t kHeaderBytes = 16, kEntryBytes = 32, kAlign = 64;
// A sanity bound for a section count: a corrupted count must not make us read gigabytes.
constexpr uint32_t kMaxSections = 64;
// ... and for one value of the graph (1 PB): a corrupted shape must not ask for it.
constexpr int64_t kMaxValueBytes = int64_t{1} << 50;

static_assert(sizeof(void*) == 8, "the artifact reader assumes a 64-bit host");

uint64_t fnv1a(const char* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(data[i])) * 1099511628211ull;
  return h;
}

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// 16 random hex digits for a temporary file's name.
std::string random_suffix() {
  static std::atomic<uint64_t> counter{0};
  std::random_device device;
  uint64_t x =
      (uint64_t{device()} << 32) ^ device() ^ (uint64_t(::getpid()) << 16) ^ counter.fetch_add(1);
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Little-endian integers (x86-64 and AArch64 Linux are little-endian; memcpy keeps the
// reads alignment-safe).
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

// ------------------------------------------------------------------------------ JSON
// The graph is JSON so that it stays readable and versionable. The subset here is what the
// graph needs: objects, arrays, strings, integers, booleans and null.
struct Json {
  enum Kind { Null, Bool, Int, String, Array, Object } kind = Null;
  bool b = false;
  int64_t i = 0;
  std::string s;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> fields;
};

void write_string(std::ostream& os, const std::string& s) {
  os << '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      os << '\\' << c;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      os << buf;
    } else {
      os << c;  // UTF-8 passes through
    }
  }
  os << '"';
}

class JsonParser {
 public:
  JsonParser(const std::string& text, std::string where) : t_(text), where_(std::move(where)) {}
  Json parse() {
    Json v = value(0);
    skip_ws();
    if (pos_ != t_.size()) error("unexpected text after the end");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& what) {
    fail(where_, ": the graph section is malformed (", what, " at byte ", pos_,
         "); the file is damaged or was not written by Ember");
  }
  void skip_ws() {
    while (pos_ < t_.size() && std::strchr(" \t\r\n", t_[pos_])) ++pos_;
  }
  bool eat(char c) {
    skip_ws();
    if (pos_ < t_.size() && t_[pos_] == c) return ++pos_, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) error(std::string("expected '") + c + "'");
  }
  Json value(int depth) {
    if (depth > 32) error("nesting too deep");
    skip_ws();
    if (pos_ >= t_.size()) error("unexpected end");
    Json v;
    char c = t_[pos_];
    if (c == '{') {
      v.kind = Json::Object;
      ++pos_;
      if (eat('}')) return v;
      do {
        skip_ws();
        std::string key = string();
        expect(':');
        v.fields.emplace_back(std::move(key), value(depth + 1));
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      v.kind = Json::Array;
      ++pos_;
      if (eat(']')) return v;
      do v.items.push_back(value(depth + 1));
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::String;
      v.s = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Json::Int;
      v.i = integer();
    } else if (t_.compare(pos_, 4, "true") == 0 || t_.compare(pos_, 5, "false") == 0) {
      v.kind = Json::Bool;
      v.b = t_[pos_] == 't';
      pos_ += v.b ? 4 : 5;
    } else if (t_.compare(pos_, 4, "null") == 0) {
      pos_ += 4;
    } else {
      error("unexpected character");
    }
    return v;
  }
  int64_t integer() {
    bool neg = t_[pos_] == '-';
    if (neg) ++pos_;
    if (pos_ >= t_.size() || t_[pos_] < '0' || t_[pos_] > '9') error("expected a digit");
    uint64_t n = 0;
    const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') {
      // Checked before n * 10 + digit, which can pass 2^64 and wrap to a small number.
      const uint64_t digit = static_cast<uint64_t>(t_[pos_++] - '0');
      if (n > (limit - digit) / 10) error("integer out of range");
      n = n * 10 + digit;
    }
    if (pos_ < t_.size() && std::strchr(".eE", t_[pos_])) error("expected an integer");
    return neg ? -static_cast<int64_t>(n) : static_cast<int64_t>(n);
  }
  std::string string() {
    if (pos_ >= t_.size() || t_[pos_] != '"') error("expected a string");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= t_.size()) error("unterminated string");
      char c = t_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= t_.size()) error("unterminated string");
      char e = t_[pos_++];
      if (e == 'u') {
        // Only the \u00XX escapes the writer produces (control characters).
        if (pos_ + 4 > t_.size() || t_.compare(pos_, 2, "00") != 0) error("unsupported escape");
        int code = 0;
        for (size_t k = pos_ + 2; k < pos_ + 4; ++k) {
          char h = t_[k];
          int digit = h >= '0' && h <= '9'   ? h - '0'
                      : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                             : -1;
          if (digit < 0) error("bad \\u escape");
          code = code * 16 + digit;
        }
        out += static_cast<char>(code);
        pos_ += 4;
      } else if (e == '"' || e == '\\' || e == '/') {
        out += e;
      } else if (e == 'n') {
        out += '\n';
      } else if (e == 't') {
        out += '\t';
      } else {
        error("unsupported escape");
      }
    }
  }

  const std::string& t_;
  std::string where_;
  size_t pos_ = 0;
};

// Typed access to the parsed graph; every mismatch names the field path.
class GraphReader {
 public:
  explicit GraphReader(std::string where) : where_(std::move(where)) {}
  [[noreturn]] void error(const std::string& path, const std::string& what) const {
    fail(where_, " is corrupted: the graph section is inconsistent: ", path, " ", what,
         "; the file is damaged or was written by an incompatible Ember");
  }
  const Json& field(const Json& obj, const std::string& key, const std::string& path) const {
    if (obj.kind != Json::Object) error(path, "is not an object");
    for (const auto& [k, v] : obj.fields)
      if (k == key) return v;
    error(path + "." + key, "is missing");
  }
  const Json* optional(const Json& obj, const std::string& key) const {
    for (const auto& [k, v] : obj.fields)
      if (k == key) return &v;
    return nullptr;
  }
  const std::vector<Json>& array(const Json& obj, const std::string& key,
                                 const std::string& path) const {
    const Json& v = field(obj, key, path);
    if (v.kind != Json::Array) error(path + "." + key, "is not a list");
    return v.items;
  }
  int64_t integer(const Json& obj, const std::string& key, const std::string& path) const {
    const Json& v = field(obj, key, path);
    if (v.kind != Json::Int) error(path + "." + key, "is not an integer");
    return v.i;
  }
  std::string string(const Json& obj, const std::string& key, const std::string& path) const {
    const Json& v = field(obj, key, path);
    if (v.kind != Json::String) error(path + "." + key, "is not a string");
    return v.s;
  }
  std::vector<std::string> strings(const Json& obj, const std::string& key,
                                   const std::string& path) const {
    std::vector<std::string> out;
    for (const Json& item : array(obj, key, path)) {
      if (item.kind != Json::String) error(path + "." + key, "holds a non-string");
      out.push_back(item.s);
    }
    return out;
  }
  /// A value id: an integer in [0, n).
  int id(const Json& v, int n, const std::string& path) const {
    if (v.kind != Json::Int || v.i < 0 || v.i >= n)
      error(path, "is not a value id in [0, " + std::to_string(n) + ")");
    return static_cast<int>(v.i);
  }

 private:
  std::string where_;
};

std::string index_path(const std::string& list, size_t i) {
  return list + "[" + std::to_string(i) + "]";
}

// ------------------------------------------------------------------------------ graph
std::string graph_json(const Artifact& a, const std::vector<size_t>& param_offsets) {
  const ExecGraph& g = *a.graph;
  std::ostringstream os;
  auto ints = [&](const auto& v) {
    os << '[';
    for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
    os << ']';
  };
  auto strs = [&](const std::vector<std::string>& v) {
    os << '[';
    for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : ""), write_string(os, v[i]);
    os << ']';
  };
  auto sep = [&](size_t i) { os << (i ? ",\n  " : "\n  "); };
  os << "{\"ember_version\": ";
  write_string(os, a.info.ember_version);
  os << ",\n \"target\": ";
  write_string(os, a.info.target);
  os << ",\n \"cpu\": ";
  write_string(os, a.info.cpu);
  os << ",\n \"features\": ";
  write_string(os, a.info.features);
  os << ",\n \"imports\": ";
  strs(a.info.imports);
  os << ",\n \"arch\": ";
  write_string(os, a.info.arch);
  os << ",\n \"launch\": [";
  size_t li = 0;
  for (const auto& [func, d] : a.info.launch) {
    sep(li++);
    os << "{\"func\": ";
    write_string(os, func);
    os << ", \"grid\": ";
    ints(d.grid);
    os << ", \"block\": ";
    ints(d.block);
    os << ", \"num_params\": " << d.num_params << ", \"symbol\": ";
    write_string(os, d.symbol);
    os << "}";
  }
  os << "]";
  os << ",\n \"values\": [";
  for (size_t i = 0; i < g.values.size(); ++i) {
    sep(i);
    os << "{\"shape\": ";
    ints(g.values[i].shape);
    os << ", \"dtype\": \"" << dtype_name(g.values[i].dtype) << "\"}";
  }
  os << "],\n \"inputs\": [";
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    sep(i);
    os << "{\"name\": ";
    write_string(os, g.inputs[i].name);
    os << ", \"value\": " << g.inputs[i].value << "}";
  }
  os << "],\n \"params\": [";
  for (size_t i = 0; i < g.params.size(); ++i) {
    sep(i);
    os << "{\"name\": ";
    write_string(os, g.params[i].name);
    os << ", \"value\": " << g.params[i].value << ", \"offset\": " << param_offsets[i]
       << ", \"nbytes\": " << g.params[i].data.nbytes() << "}";
  }
  os << "],\n \"kernels\": [";
  for (size_t i = 0; i < g.kernels.size(); ++i) {
    const ExecGraph::Kernel& k = g.kernels[i];
    const KernelReport* r = i < a.info.kernels.size() ? &a.info.kernels[i] : nullptr;
    sep(i);
    os << "{\"func\": ";
    write_string(os, k.func);
    os << ", \"name\": ";
    write_string(os, k.name);
    os << ", \"args\": ";
    ints(k.args);
    os << ", \"num_inputs\": " << k.num_inputs << ", \"ops\": ";
    strs(r ? r->ops : std::vector<std::string>{});
    os << ", \"anchor\": ";
    write_string(os, r ? r->anchor : "");
    os << ", \"patterns\": ";
    strs(r ? r->patterns : std::vector<std::string>{});
    os << "}";
  }
  os << "],\n \"views\": [";
  for (size_t i = 0; i < g.views.size(); ++i) {
    sep(i);
    os << "{\"dst\": " << g.views[i].dst << ", \"src\": " << g.views[i].src << "}";
  }
  os << "],\n \"outputs\": ";
  ints(g.outputs);
  os << ",\n \"fusion\": [";
  for (size_t i = 0; i < a.info.fusion.size(); ++i) {
    const FusionEdge& e = a.info.fusion[i];
    sep(i);
    os << "{\"producer\": ";
    write_string(os, e.producer);
    os << ", \"consumer\": ";
    write_string(os, e.consumer);
    os << ", \"fused\": " << (e.fused ? "true" : "false") << ", \"reason\": ";
    write_string(os, e.reason);
    os << "}";
  }
  os << "]}\n";
  return os.str();
}

// The GPU launch table ("arch", "launch"): required with PTX code, optional otherwise (CPU
// artifacts from before the table lack it). The bounds are CUDA's, so a damaged table is
// an error here rather than a failed launch on the GPU machine.
void read_launch_table(const Json& root, const GraphReader& r, bool gpu_code, ArtifactInfo& info) {
  const Json* arch = gpu_code ? &r.field(root, "arch", "graph") : r.optional(root, "arch");
  if (arch) {
    if (arch->kind != Json::String) r.error("graph.arch", "is not a string");
    info.arch = arch->s;
  }
  const bool sm = info.arch.size() > 3 && info.arch.compare(0, 3, "sm_") == 0 &&
                  info.arch.find_first_not_of("0123456789", 3) == std::string::npos;
  if (gpu_code && !sm) r.error("graph.arch", "is '" + info.arch + "', not a GPU architecture");
  if (!gpu_code && !r.optional(root, "launch")) return;
  const auto& launch = r.array(root, "launch", "graph");
  for (size_t i = 0; i < launch.size(); ++i) {
    std::string path = index_path("launch", i);
    cuda::LaunchDims d;
    auto dims = [&](const std::string& key, std::array<int64_t, 3>& out) {
      const auto& items = r.array(launch[i], key, path);
      if (items.size() != 3) r.error(path + "." + key, "does not have 3 dimensions");
      for (size_t j = 0; j < 3; ++j) {
        if (items[j].kind != Json::Int || items[j].i < 1 || items[j].i >= (int64_t{1} << 31))
          r.error(path + "." + key, "holds a dimension that is not a positive 32-bit integer");
        out[j] = items[j].i;
      }
    };
    std::string func = r.string(launch[i], "func", path);
    dims("grid", d.grid);
    dims("block", d.block);
    if (d.grid[1] > 65535 || d.grid[2] > 65535) r.error(path + ".grid", "exceeds CUDA's limits");
    if (d.block[0] * d.block[1] * d.block[2] > 1024)
      r.error(path + ".block", "has more than 1024 threads");
    int64_t num_params = r.integer(launch[i], "num_params", path);
    if (num_params < 0 || num_params > 65536) r.error(path + ".num_params", "is out of range");
    d.num_params = static_cast<int>(num_params);
    d.symbol = r.string(launch[i], "symbol", path);
    if (d.symbol.empty()) r.error(path + ".symbol", "is empty");
    if (!info.launch.emplace(func, std::move(d)).second)
      r.error(path + ".func", "'" + func + "' appears twice");
  }
}

// Each value has at most one owner of its memory: a graph input, a parameter, or a view of
// another value; views form no cycle; and no kernel writes an input or a parameter (or a
// view of one): parameters are shared by every executor of the model. The compiler never
// writes such a graph; a file edited into one is refused here, before the executor plans it.
void check_value_roles(const ExecGraph& g, const GraphReader& r) {
  enum Owner : char { kNone, kInput, kParam, kView };
  const int n = static_cast<int>(g.values.size());
  std::vector<char> owner(n, kNone);
  auto claim = [&](int v, Owner o, const std::string& path) {
    if (owner[v] != kNone)
      r.error(path, "is value " + std::to_string(v) +
                        ", which is already an input, a parameter or a view");
    owner[v] = o;
  };
  for (size_t i = 0; i < g.inputs.size(); ++i)
    claim(g.inputs[i].value, kInput, index_path("inputs", i) + ".value");
  for (size_t i = 0; i < g.params.size(); ++i)
    claim(g.params[i].value, kParam, index_path("params", i) + ".value");
  std::vector<int> src(n, -1);
  for (size_t i = 0; i < g.views.size(); ++i) {
    claim(g.views[i].dst, kView, index_path("views", i) + ".dst");
    src[g.views[i].dst] = g.views[i].src;
  }
  // The value whose memory v is; each step follows one view.
  auto root = [&](int v, const std::string& path) {
    for (int steps = 0; src[v] >= 0; ++steps) {
      if (steps > n) r.error(path, "reaches a cycle of views");
      v = src[v];
    }
    return v;
  };
  for (size_t i = 0; i < g.views.size(); ++i) root(g.views[i].dst, index_path("views", i));
  for (size_t i = 0; i < g.kernels.size(); ++i) {
    const ExecGraph::Kernel& k = g.kernels[i];
    for (size_t j = static_cast<size_t>(k.num_inputs); j < k.args.size(); ++j) {
      std::string path = index_path(index_path("kernels", i) + ".args", j);
      char o = owner[root(k.args[j], path)];
      if (o == kInput || o == kParam)
        r.error(path, "is an output of the kernel but an input or a parameter of the graph");
    }
  }
}

// Parses and validates the graph; params view `params` (a span of `buffer`). `gpu_code`:
// the file holds PTX, so every kernel needs its launch dims.
void read_graph(const std::string& text, const std::string& where,
                const std::shared_ptr<void>& buffer, const char* params, uint64_t params_size,
                bool gpu_code, Artifact& a) {
  Json root = JsonParser(text, where).parse();
  GraphReader r(where);
  auto g = std::make_shared<ExecGraph>();
  ArtifactInfo& info = a.info;
  info.ember_version = r.string(root, "ember_version", "graph");
  info.target = r.string(root, "target", "graph");
  info.cpu = r.string(root, "cpu", "graph");
  info.features = r.string(root, "features", "graph");
  info.imports = r.strings(root, "imports", "graph");
  read_launch_table(root, r, gpu_code, info);

  const auto& values = r.array(root, "values", "graph");
  for (size_t i = 0; i < values.size(); ++i) {
    std::string path = index_path("values", i);
    ExecGraph::Value v;
    // Bound every dimension and the byte size, so no shape can overflow or ask for absurd
    // memory before the executor sees it.
    for (const Json& d : r.array(values[i], "shape", path)) {
      if (d.kind != Json::Int || d.i < 0) r.error(path + ".shape", "has a bad dimension");
      v.shape.push_back(d.i);
    }
    std::string dtype = r.string(values[i], "dtype", path);
    try {
      v.dtype = dtype_from_name(dtype);
    } catch (const Error&) {
      r.error(path + ".dtype", "is '" + dtype + "', not a dtype this runtime knows");
    }
    int64_t bytes = 0;
    try {
      bytes = checked_nbytes(v.shape, dtype_bytes(v.dtype), path);
    } catch (const Error&) {
      r.error(path + ".shape", "overflows 64 bits");
    }
    if (bytes > kMaxValueBytes) r.error(path + ".shape", "is impossibly large");
    g->values.push_back(std::move(v));
  }
  const int n = static_cast<int>(g->values.size());

  const auto& inputs = r.array(root, "inputs", "graph");
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string path = index_path("inputs", i);
    g->inputs.push_back({r.string(inputs[i], "name", path),
                         r.id(r.field(inputs[i], "value", path), n, path + ".value")});
  }
  const auto& params_json = r.array(root, "params", "graph");
  for (size_t i = 0; i < params_json.size(); ++i) {
    std::string path = index_path("params", i);
    const Json& p = params_json[i];
    int value = r.id(r.field(p, "value", path), n, path + ".value");
    const ExecGraph::Value& v = g->values[value];
    int64_t offset = r.integer(p, "offset", path), nbytes = r.integer(p, "nbytes", path);
    if (nbytes != checked_nbytes(v.shape, dtype_bytes(v.dtype), path))
      r.error(path + ".nbytes", "does not match the value's shape and dtype");
    if (offset < 0 || offset % kAlign != 0 || static_cast<uint64_t>(offset) > params_size ||
        static_cast<uint64_t>(nbytes) > params_size - static_cast<uint64_t>(offset))
      r.error(path + ".offset", "is not an aligned range inside the params section");
    g->params.push_back(
        {r.string(p, "name", path), value,
         Tensor::view(buffer, const_cast<char*>(params) + offset, v.shape, v.dtype)});
  }
  const auto& kernels = r.array(root, "kernels", "graph");
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::string path = index_path("kernels", i);
    const Json& k = kernels[i];
    ExecGraph::Kernel kern;
    kern.func = r.string(k, "func", path);
    kern.name = r.string(k, "name", path);
    const auto& args = r.array(k, "args", path);
    for (size_t j = 0; j < args.size(); ++j)
      kern.args.push_back(r.id(args[j], n, index_path(path + ".args", j)));
    int64_t num_inputs = r.integer(k, "num_inputs", path);
    if (num_inputs < 0 || num_inputs > static_cast<int64_t>(args.size()))
      r.error(path + ".num_inputs", "is out of range");
    kern.num_inputs = static_cast<int>(num_inputs);
    if (gpu_code) {
      auto launch = info.launch.find(kern.func);
      if (launch == info.launch.end())
        r.error(path + ".func", "'" + kern.func + "' has no entry in graph.launch");
      if (launch->second.num_params != static_cast<int>(kern.args.size()))
        r.error(path + ".args", "do not match the " + std::to_string(launch->second.num_params) +
                                    " parameters of the kernel's launch entry");
    }
    KernelReport report{kern.func, kern.name, r.strings(k, "ops", path),
                        r.string(k, "anchor", path), r.strings(k, "patterns", path)};
    info.kernels.push_back(std::move(report));
    g->kernels.push_back(std::move(kern));
  }
  const auto& views = r.array(root, "views", "graph");
  for (size_t i = 0; i < views.size(); ++i) {
    std::string path = index_path("views", i);
    int dst = r.id(r.field(views[i], "dst", path), n, path + ".dst");
    int src = r.id(r.field(views[i], "src", path), n, path + ".src");
    const auto &d = g->values[dst], &s = g->values[src];
    if (dst == src || d.dtype != s.dtype || shape_numel(d.shape) != shape_numel(s.shape))
      r.error(path, "is not a view of the same bytes");
    g->views.push_back({dst, src});
  }
  const auto& outputs = r.array(root, "outputs", "graph");
  for (size_t i = 0; i < outputs.size(); ++i)
    g->outputs.push_back(r.id(outputs[i], n, index_path("outputs", i)));
  const auto& fusion = r.array(root, "fusion", "graph");
  for (size_t i = 0; i < fusion.size(); ++i) {
    std::string path = index_path("fusion", i);
    const Json& fused = r.field(fusion[i], "fused", path);
    if (fused.kind != Json::Bool) r.error(path + ".fused", "is not true or false");
    info.fusion.push_back({r.string(fusion[i], "producer", path),
                           r.string(fusion[i], "consumer", path), fused.b,
                           r.string(fusion[i], "reason", path)});
  }
  check_value_roles(*g, r);
  a.graph = std::move(g);
}

// ------------------------------------------------------------------------------ CPU check
// Code compiled for a CPU feature this machine lacks would die of SIGILL at the first
// kernel: check every feature the code was compiled for (the exporter records only
// instruction-set features, with LLVM's names) before loading it. A feature this runtime
// cannot check is refused too: loading would be a guess.
void check_cpu_features(const ArtifactInfo& info, const std::string& where) {
  std::string missing, unknown;
  std::stringstream features(info.features);
  for (std::string f; std::getline(features, f, ',');) {
    if (f.size() < 2 || f[0] != '+') continue;
    std::string name = f.substr(1);
    std::optional<bool> present = host_has_cpu_feature(name);
    if (!present)
      unknown += (unknown.empty() ? "" : ", ") + name;
    else if (!*present)
      missing += (missing.empty() ? "" : ", ") + name;
  }
  if (!missing.empty())
    fail(where, ": the model was compiled for CPU '", info.cpu, "', and this CPU lacks ", missing,
         "; export the model again on (or for) this machine");
  if (!unknown.empty())
    fail(where, ": the model's code needs the CPU feature(s) ", unknown,
         ", which this Ember runtime cannot check on this machine; export the model again "
         "with this Ember version on (or for) this machine");
}

// ------------------------------------------------------------------------------ kernels
// The graph's kernels must be what the code was compiled for, buffer by buffer: a graph
// changed after export would have the code read or write past its buffers.
std::string value_str(const ExecGraph::Value& v) {
  return dtype_name(v.dtype) + shape_str(v.shape);
}

void check_kernels_against_code(const ExecGraph& g,
                                const std::vector<std::pair<std::string, std::string>>& code,
                                const std::string& where) {
  if (code.empty()) return;  // no code: load_library says so
  const auto& [kind, bytes] = code[0];
  std::map<std::string, std::vector<ExecGraph::Value>> compiled;
  for (KernelSignature& k : read_kernel_manifest(bytes, kind == "ptx" ? "// " : "", where))
    compiled[k.func] = std::move(k.buffers);
  for (const ExecGraph::Kernel& k : g.kernels) {
    auto it = compiled.find(k.func);
    if (it == compiled.end())
      fail(where, " is inconsistent: kernel '", k.name, "' calls function '", k.func,
           "', which its code does not have; the file was changed after export: export the "
           "model again");
    const auto& buffers = it->second;
    if (buffers.size() != k.args.size())
      fail(where, " is inconsistent: kernel '", k.name, "' passes ", k.args.size(),
           " buffers but its code takes ", buffers.size(),
           "; the file was changed after export: export the model again");
    for (size_t i = 0; i < buffers.size(); ++i) {
      const ExecGraph::Value& v = g.values[k.args[i]];
      if (v.dtype != buffers[i].dtype || v.shape != buffers[i].shape)
        fail(where, " is inconsistent: kernel '", k.name, "' (", k.func, ") was compiled for ",
             value_str(buffers[i]), " as buffer ", i, " but the graph gives it ", value_str(v),
             "; the file was changed after export: export the model again");
    }
  }
}

}  // namespace

std::string write_kernel_manifest(const std::vector<KernelSignature>& kernels,
                                  const std::string& prefix) {
  std::string out = prefix + kManifestBegin + "\n";
  for (const KernelSignature& k : kernels) {
    out += prefix + k.func;
    for (const ExecGraph::Value& b : k.buffers) {
      out += std::string(" ") + dtype_name(b.dtype) + "[";
      for (size_t d = 0; d < b.shape.size(); ++d)
        out += (d ? "," : "") + std::to_string(b.shape[d]);
      out += "]";
    }
    out += "\n";
  }
  return out + prefix + kManifestEnd + "\n";
}

std::vector<KernelSignature> read_kernel_manifest(const std::string& code,
                                                  const std::string& prefix,
                                                  const std::string& where) {
  const std::string begin = prefix + kManifestBegin + "\n", end = prefix + kManifestEnd + "\n";
  size_t at = code.find(begin);
  if (at == std::string::npos)
    fail(where,
         " has no record of what its code was compiled for (written by an older Ember, "
         "or damaged); export the model again");
  auto bad = [&](const std::string& line) {
    fail(where, " has a malformed kernel record ('", line.substr(0, 80),
         "'); the file is damaged: export the model again");
  };
  std::vector<KernelSignature> out;
  at += begin.size();
  while (true) {
    size_t stop = code.find('\n', at);
    if (stop == std::string::npos) bad(code.substr(at, 80));
    std::string line = code.substr(at, stop + 1 - at);
    at = stop + 1;
    if (line == end) return out;
    if (line.compare(0, prefix.size(), prefix) != 0) bad(line);
    std::istringstream words(line.substr(prefix.size()));
    KernelSignature k;
    if (!(words >> k.func)) bad(line);
    for (std::string w; words >> w;) {
      size_t open = w.find('[');
      if (open == std::string::npos || w.back() != ']') bad(line);
      ExecGraph::Value v;
      try {
        v.dtype = dtype_from_name(w.substr(0, open));
      } catch (const Error&) {
        bad(line);
      }
      std::string dims = w.substr(open + 1, w.size() - open - 2);
      for (size_t i = 0; i < dims.size();) {
        size_t comma = dims.find(',', i);
        std::string d = dims.substr(i, comma == std::string::npos ? std::string::npos : comma - i);
        char* tail = nullptr;
        long long n = std::strtoll(d.c_str(), &tail, 10);
        if (d.empty() || *tail != '\0' || n < 0) bad(line);
        v.shape.push_back(n);
        if (comma == std::string::npos) break;
        i = comma + 1;
      }
      k.buffers.push_back(std::move(v));
    }
    out.push_back(std::move(k));
  }
}

// ------------------------------------------------------------------------------ save
void save_artifact(const Artifact& a, const std::string& path) {
  if (!a.graph) fail("save_artifact: the artifact has no graph");
  // Parameters: each at a 64-byte aligned offset of the params section.
  std::vector<size_t> offsets;
  std::string params;
  for (const auto& p : a.graph->params) {
    if (!p.data.defined()) fail("save_artifact: parameter '", p.name, "' has no data");
    params.resize(align_up(params.size()), '\0');
    offsets.push_back(params.size());
    params.append(static_cast<const char*>(p.data.data()), p.data.nbytes());
  }
  std::vector<std::pair<std::string, const std::string*>> sections;
  std::string graph = graph_json(a, offsets);
  sections.emplace_back("graph", &graph);
  sections.emplace_back("params", &params);
  for (const auto& [kind, bytes] : a.code) {
    if (kind.empty() || kind.size() > 8) fail("save_artifact: bad code section kind '", kind, "'");
    sections.emplace_back(kind, &bytes);
  }

  std::string head(kMagic, sizeof(kMagic));
  put<uint32_t>(head, kArtifactVersion);
  put<uint32_t>(head, static_cast<uint32_t>(sections.size()));
  size_t offset = align_up(kHeaderBytes + kEntryBytes * sections.size() + 8);
  for (const auto& [kind, bytes] : sections) {
    char name[8] = {};
    std::memcpy(name, kind.data(), kind.size());
    head.append(name, 8);
    put<uint64_t>(head, offset);
    put<uint64_t>(head, bytes->size());
    put<uint64_t>(head, fnv1a(bytes->data(), bytes->size()));
    offset = align_up(offset + bytes->size());
  }
  put<uint64_t>(head, fnv1a(head.data(), head.size()));

  // Write to a new file with a unique name in the same directory, then rename it over
  // `path`: a failed export never leaves half a file where a good one was, two exports to
  // one path never share a temporary, and a link planted at a predictable name is never
  // followed (O_EXCL | O_NOFOLLOW create the file, or fail).
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    tmp = path + ".tmp-" + random_suffix();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && (errno != EEXIST || attempt == 100))
      fail("cannot write the artifact '", path, "': cannot create '", tmp,
           "': ", std::strerror(errno));
  }
  bool ok = write_all(fd, head.data(), head.size());
  size_t at = head.size();
  for (const auto& [kind, bytes] : sections) {
    std::string pad(align_up(at) - at, '\0');
    ok = ok && write_all(fd, pad.data(), pad.size()) && write_all(fd, bytes->data(), bytes->size());
    at = align_up(at) + bytes->size();
  }
  ok = ok && ::fsync(fd) == 0;
  int err = errno;
  ok = ::close(fd) == 0 && ok;
  if (!ok) {
    ::unlink(tmp.c_str());
    fail("cannot write the artifact '", path, "': ", std::strerror(err), " (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    fail("cannot write the artifact '", path, "': cannot rename '", tmp,
         "' to it: ", std::strerror(err));
  }
}

// ------------------------------------------------------------------------------ read
namespace {

// Checks the header and section table at `data`, which holds the first `avail` bytes of a
// file of `size` bytes, as far as `avail` allows; returns the section count.
uint32_t check_header(const char* data, uint64_t avail, uint64_t size, const std::string& where) {
  if (size < sizeof(kMagic) || avail < sizeof(kMagic) ||
      std::memcmp(data, kMagic, sizeof(kMagic)) != 0)
    fail(where,
         " is not an Ember artifact (it does not start with \"EMBERLIB\"); "
         "create one with lib.export(path) or `ember compile`");
  if (size < kHeaderBytes) fail(where, " is truncated: the file ends inside its header");
  if (avail < kHeaderBytes) return 0;
  uint32_t version = get<uint32_t>(data + 8);
  if (version != kArtifactVersion)
    fail(where, " has format version ", version, ", but this Ember reads version ",
         kArtifactVersion,
         "; export the model again with this Ember version (or load it "
         "with the version that wrote it)");
  uint32_t count = get<uint32_t>(data + 12);
  if (count > kMaxSections) fail(where, " is corrupted: its header claims ", count, " sections");
  const size_t table_end = kHeaderBytes + kEntryBytes * count;
  if (size < table_end + 8) fail(where, " is truncated: the file ends inside its section table");
  if (avail < table_end + 8) return count;
  if (fnv1a(data, table_end) != get<uint64_t>(data + table_end))
    fail(where, " is corrupted: the checksum of its header does not match");
  for (uint32_t s = 0; s < count; ++s) {
    const char* entry = data + kHeaderBytes + kEntryBytes * s;
    uint64_t offset = get<uint64_t>(entry + 8), bytes = get<uint64_t>(entry + 16);
    if (offset > size || bytes > size - offset)
      fail(where, " is truncated: section '", std::string(entry, strnlen(entry, 8)),
           "' needs bytes up to ", offset + bytes, " but the file has ", size,
           " bytes; copy or export it again");
  }
  return count;
}

// Reads n bytes at `offset`; false on a short read.
bool read_at(std::ifstream& in, uint64_t offset, char* out, uint64_t n) {
  in.clear();
  in.seekg(static_cast<std::streamoff>(offset));
  return n == 0 || static_cast<bool>(in.read(out, static_cast<std::streamsize>(n)));
}

}  // namespace

Artifact read_artifact(const std::string& path, const std::string& sha256) {
  const std::string where = "artifact '" + path + "'";
  std::string want_digest;
  if (!sha256.empty()) {
    for (char c : sha256)
      want_digest += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (want_digest.size() != 64 ||
        want_digest.find_first_not_of("0123456789abcdef") != std::string::npos)
      fail("the expected SHA-256 digest of ", where, " must be 64 hex digits, got '", sha256, "'");
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0) fail("cannot open ", where, ": no such file");
  if (!S_ISREG(st.st_mode)) fail("cannot read ", where, ": it is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open ", where, ": it is not readable");
  const uint64_t size = static_cast<uint64_t>(st.st_size);

  // The header and section table first: a file that is not an artifact, or whose table
  // is damaged, is refused before the rest of it is read (or memory is taken for it).
  char head[kHeaderBytes];
  const uint64_t head_bytes = std::min<uint64_t>(size, kHeaderBytes);
  if (!read_at(in, 0, head, head_bytes)) fail("cannot read ", where, ": read error");
  const uint32_t count = check_header(head, head_bytes, size, where);
  std::string table(kHeaderBytes + kEntryBytes * count + 8, '\0');
  if (!read_at(in, 0, table.data(), table.size())) fail("cannot read ", where, ": read error");
  check_header(table.data(), table.size(), size, where);

  // One 64-byte aligned buffer for the whole file: parameters view it in place. Everything
  // below checks this buffer, not what was read above (the file may have changed since).
  Tensor file = Tensor::empty({static_cast<int64_t>(size)}, DType::Bool);
  const char* data = static_cast<const char*>(file.data());
  if (!read_at(in, 0, static_cast<char*>(file.data()), size))
    fail("cannot read ", where, ": read error (did the file change while it was read?)");
  if (!want_digest.empty()) {
    std::string digest = sha256_hex(data, size);
    if (digest != want_digest)
      fail(where, " has SHA-256 ", digest, ", not the expected ", want_digest,
           ": it is not the file you meant to load (or it was changed); refusing to load it");
  }
  const uint32_t sections = check_header(data, size, size, where);

  Artifact a;
  a.info.file_bytes = size;
  std::string graph;
  const char* params = nullptr;
  uint64_t params_size = 0;
  for (uint32_t s = 0; s < sections; ++s) {
    const char* entry = data + kHeaderBytes + kEntryBytes * s;
    std::string kind(entry, strnlen(entry, 8));
    uint64_t offset = get<uint64_t>(entry + 8), bytes = get<uint64_t>(entry + 16);
    if (offset > size || bytes > size - offset)
      fail(where, " is truncated: section '", kind, "' needs bytes up to ", offset + bytes,
           " but the file has ", size, " bytes; copy or export it again");
    if (fnv1a(data + offset, bytes) != get<uint64_t>(entry + 24))
      fail(where, " is corrupted: the checksum of section '", kind,
           "' does not match; copy or export it again");
    a.info.sections.emplace_back(kind, bytes);
    if (kind == "graph") {
      graph.assign(data + offset, bytes);
    } else if (kind == "params") {
      params = data + offset;
      params_size = bytes;
    } else if (kind == "cpu.so" || kind == "ptx") {
      a.code.emplace_back(kind, std::string(data + offset, bytes));
    } else {
      fail(where, " has a section of unknown kind '", kind,
           "'; it was written by a newer Ember: load it with that version");
    }
  }
  if (graph.empty() || !params) fail(where, " lacks its graph or params section");
  if (a.code.size() > 1)
    fail(where, " is corrupted: it holds ", a.code.size(), " code sections; a model has one");
  const bool gpu_code = !a.code.empty() && a.code[0].first == "ptx";
  read_graph(graph, where, file.owner(), params, params_size, gpu_code, a);
  return a;
}

std::shared_ptr<LoadedLibrary> load_library(const std::string& path, const LoadOptions& options) {
  Artifact a = read_artifact(path, options.sha256);
  const std::string where = "artifact '" + path + "'";
  // Before any code is loaded: the graph must be what the code was compiled for.
  check_kernels_against_code(*a.graph, a.code, where);
  auto lib = std::make_shared<LoadedLibrary>();
  std::shared_ptr<cuda::CudaModule> gpu;
  bool has_code = false;
  for (const auto& [kind, bytes] : a.code) {
    if (kind == "cpu.so") {
      has_code = true;
      if (options.load_code) {  // (inspecting reads the file on any machine)
        check_cpu_features(a.info, where);
        lib->module = LibraryModule::from_bytes(bytes, a.info.imports);
      }
    } else if (kind == "ptx") {
      has_code = true;
      // Loading needs no GPU: the executor loads the PTX into one (and says when none is).
      // Each launch symbol must be an entry of the PTX, or the GPU machine would find out.
      for (const auto& [func, d] : a.info.launch)
        if (bytes.find(".entry " + d.symbol + "(") == std::string::npos)
          fail(where, " is corrupted: kernel '", func, "' launches PTX entry '", d.symbol,
               "', which its PTX does not define; export the model again");
      // PTX is text until a GPU loads it: reading it runs nothing. The module gets the PTX
      // as it was built, without the manifest comments export appended ("\n" + manifest).
      std::string ptx = bytes.substr(0, bytes.rfind("\n// " + std::string(kManifestBegin)));
      gpu = std::make_shared<cuda::CudaModule>(ptx, "", a.info.arch, a.info.launch);
      lib->module = gpu;
    }
  }
  if (!has_code && !a.graph->kernels.empty()) fail(where, " holds no code for its kernels");
  // Resolve every kernel now, so a mismatch surfaces at load rather than at first run. A GPU
  // kernel has no host entry point (get_function throws by design): check its launch dims.
  for (const auto& k : a.graph->kernels) {
    if (gpu) {
      if (!gpu->kernels().count(k.func))
        fail(where, " is corrupted: kernel '", k.name, "' has no launch dimensions");
    } else if (lib->module) {
      lib->module->get_function(k.func);
    }
  }
  lib->graph = std::move(a.graph);
  lib->info = std::move(a.info);
  return lib;
}

// ------------------------------------------------------------------------------ .npy
namespace {
const char* npy_descr(DType t) {
  switch (t) {
    case DType::Float32:
      return "<f4";
    case DType::Float64:
      return "<f8";
    case DType::Int32:
      return "<i4";
    case DType::Int64:
      return "<i8";
    case DType::Bool:
      return "|b1";
  }
  EMBER_CHECK(false, "unknown dtype");
}

// The value of `key` in NumPy's header dict ("{'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }"), as its raw text.
std::string npy_field(const std::string& header, const std::string& key, const std::string& where) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) fail(where, ": the .npy header has no '", key, "'");
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) fail(where, ": the .npy header is malformed");
  size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) fail(where, ": the .npy header is malformed");
  char open = header[start];
  size_t stop = open == '('    ? header.find(')', start)
                : open == '\'' ? header.find('\'', start + 1)
                               : header.find_first_of(",}", start);
  if (stop == std::string::npos) fail(where, ": the .npy header is malformed");
  if (open == '(' || open == '\'') ++stop;  // keep the closing character
  return header.substr(start, stop - start);
}
}  // namespace

Tensor load_npy(const std::string& path) {
  const std::string where = "'" + path + "'";
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open ", where, ": no such file, or it is not readable");
  char pre[10];
  if (!in.read(pre, 10) || std::memcmp(pre, "\x93NUMPY", 6) != 0)
    fail(where, " is not a .npy file (save arrays with numpy.save)");
  uint32_t header_len;
  int major = static_cast<unsigned char>(pre[6]);
  if (major == 1) {
    header_len = get<uint16_t>(pre + 8);
  } else if (major == 2 || major == 3) {
    char more[2];
    if (!in.read(more, 2)) fail(where, " is truncated");
    char len[4] = {pre[8], pre[9], more[0], more[1]};
    header_len = get<uint32_t>(len);
  } else {
    fail(where, " has .npy format version ", major, "; Ember reads versions 1 to 3");
  }
  if (header_len > (1u << 20)) fail(where, " has an impossibly long .npy header");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) fail(where, " is truncated");

  std::string descr = npy_field(header, "descr", where);
  DType dtype = DType::Float32;
  bool found = false;
  for (DType t : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool})
    if (descr == std::string("'") + npy_descr(t) + "'") {
      dtype = t;
      found = true;
    }
  if (!found)
    fail(where, " holds dtype ", descr,
         ", which Ember does not support; save a little-endian "
         "float32, float64, int32, int64 or bool array");
  if (npy_field(header, "fortran_order", where) != "False")
    fail(where, " is in Fortran order; save np.ascontiguousarray(a) instead");
  std::string shape_text = npy_field(header, "shape", where);
  Shape shape;
  for (size_t i = 1; i < shape_text.size();) {
    size_t j = shape_text.find_first_of(",)", i);
    std::string dim = shape_text.substr(i, j - i);
    if (dim.find_first_not_of(' ') != std::string::npos) {
      char* stop = nullptr;
      long long d = std::strtoll(dim.c_str(), &stop, 10);
      if (d < 0 || d > (1ll << 40)) fail(where, " has a bad shape ", shape_text);
      shape.push_back(d);
    }
    if (j == std::string::npos) break;
    i = j + 1;
  }
  // The data must be in the file: check its size before allocating for it.
  const int64_t bytes = checked_nbytes(shape, dtype_bytes(dtype), where + " (a .npy file)");
  const std::streamoff data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const std::streamoff file_end = in.tellg();
  in.seekg(data_start);
  if (data_start < 0 || file_end < data_start || file_end - data_start < bytes)
    fail(where, " is truncated: its data is shorter than ", dtype_name(dtype), shape_str(shape),
         " (", bytes, " bytes)");
  Tensor t = Tensor::empty(shape, dtype);
  if (t.nbytes() > 0 &&
      !in.read(static_cast<char*>(t.data()), static_cast<std::streamsize>(t.nbytes())))
    fail(where, " is truncated: its data is shorter than ", dtype_name(dtype), shape_str(shape));
  return t;
}

void save_npy(const std::string& path, const Tensor& t) {
  if (!t.defined()) fail("save_npy: the tensor is undefined");
  std::string header =
      std::string("{'descr': '") + npy_descr(t.dtype()) + "', 'fortran_order': False, 'shape': (";
  const Shape& shape = t.shape();
  for (size_t i = 0; i < shape.size(); ++i)  // "(2, 3)", but "(2,)" for one dimension
    header += std::to_string(shape[i]) + (shape.size() == 1      ? ","
                                          : i + 1 < shape.size() ? ", "
                                                                 : "");
  header += "), }";
  // The data starts at a multiple of 64 bytes; the header ends with '\n'.
  size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string pre = "\x93NUMPY";
  pre += '\x01';
  pre += '\x00';
  put<uint16_t>(pre, static_cast<uint16_t>(header.size()));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot write '", path, "'");
  out << pre << header;
  out.write(static_cast<const char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
  if (!out.flush()) fail("cannot write '", path, "' (disk full?)");
}

}  // namespace ember::runtime
