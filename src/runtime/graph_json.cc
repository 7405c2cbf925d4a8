// The graph section as JSON (nlohmann/json), kept readable and versionable: one line per
// top-level field and per list item.
#include "graph_json.h"

#include <cmath>
#include <limits>

#include "container.h"
#include "ember/support/checked_math.h"
#include "ember/support/error.h"
#include "nlohmann/json.hpp"

namespace ember::runtime {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// Bounds a damaged file must not get past: nesting (the graph nests 4 deep; the parser's
// recursion must stay shallow) and one value's bytes (1 PB: a corrupted shape must not ask
// for it).
constexpr int kMaxDepth = 32;
constexpr int64_t kMaxValueBytes = int64_t{1} << 50;

// ------------------------------------------------------------------------------ write
// Objects with ", " and ": ", lists packed ("[1,3,224,224]"); nlohmann writes the scalars.
void write_item(const ordered_json& j, std::string& out) {
  if (j.is_object()) {
    out += '{';
    const char* sep = "";
    for (const auto& field : j.items()) {
      out += sep + ordered_json(field.key()).dump() + ": ";
      write_item(field.value(), out);
      sep = ", ";
    }
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      if (i) out += ',';
      write_item(j[i], out);
    }
    out += ']';
  } else {
    out += j.dump();
  }
}

// One line per top-level field and per item of a list of objects.
std::string layout(const ordered_json& root) {
  std::string out = "{";
  const char* sep = "";
  for (const auto& field : root.items()) {
    out += sep + ordered_json(field.key()).dump() + ": ";
    sep = ",\n ";
    const ordered_json& v = field.value();
    if (!v.is_array() || v.empty() || !v.front().is_object()) {
      write_item(v, out);
      continue;
    }
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      out += i ? ",\n  " : "\n  ";
      write_item(v[i], out);
    }
    out += ']';
  }
  return out + "}\n";
}

ordered_json launch_json(const ArtifactInfo& info) {
  ordered_json launch = ordered_json::array();
  for (const auto& [func, d] : info.launch)
    launch.push_back({{"func", func},
                      {"grid", d.grid},
                      {"block", d.block},
                      {"num_params", d.num_params},
                      {"symbol", d.symbol}});
  return launch;
}

ordered_json kernels_json(const Artifact& a) {
  ordered_json kernels = ordered_json::array();
  const std::vector<KernelReport>& reports = a.info.kernels;
  for (size_t i = 0; i < a.graph->kernels.size(); ++i) {
    const ExecGraph::Kernel& k = a.graph->kernels[i];
    KernelReport none;
    const KernelReport& r = i < reports.size() ? reports[i] : none;
    ordered_json item = {{"func", k.func},         {"name", k.name},
                         {"args", k.args},         {"num_inputs", k.num_inputs},
                         {"ops", r.ops},           {"anchor", r.anchor},
                         {"patterns", r.patterns}, {"schedule", k.schedule}};
    ordered_json schedule_knobs = ordered_json::object();
    for (const auto& [name, value] : k.schedule_knobs) schedule_knobs[name] = value;
    item["schedule_knobs"] = schedule_knobs;
    if (!k.symbols.empty()) item["symbols"] = k.symbols;  // (run-time extents)
    if (!r.workload.empty()) {                            // built with a tuning log
      ordered_json knobs = ordered_json::object();
      for (const auto& [name, value] : r.knobs) knobs[name] = value;
      item["workload"] = r.workload;
      item["tuned"] = r.tuned;
      item["tuning_note"] = r.tuning_note;
      item["knobs"] = knobs;
    }
    kernels.push_back(std::move(item));
  }
  return kernels;
}

// A value: its shape (at the symbols' maxima) and dtype, and its run-time dimensions if any.
ordered_json value_json(const ExecGraph::Value& v) {
  ordered_json item = {{"shape", v.shape}, {"dtype", dtype_name(v.dtype)}};
  if (v.dims.empty()) return item;
  ordered_json dims = ordered_json::array();
  for (const ExecGraph::Dim& d : v.dims)
    dims.push_back({{"coef", d.coef}, {"offset", d.offset}, {"symbols", d.symbols}});
  item["dims"] = dims;
  return item;
}

ordered_json graph_body(const Artifact& a, const std::vector<size_t>& param_offsets) {
  const ExecGraph& g = *a.graph;
  ordered_json values = ordered_json::array(), inputs = ordered_json::array(),
               params = ordered_json::array(), views = ordered_json::array(),
               fusion = ordered_json::array();
  for (const ExecGraph::Value& v : g.values) values.push_back(value_json(v));
  for (const ExecGraph::Input& in : g.inputs)
    inputs.push_back({{"name", in.name}, {"value", in.value}});
  for (size_t i = 0; i < g.params.size(); ++i)
    params.push_back({{"name", g.params[i].name},
                      {"value", g.params[i].value},
                      {"offset", param_offsets[i]},
                      {"nbytes", g.params[i].data.nbytes()}});
  for (const ExecGraph::View& v : g.views) views.push_back({{"dst", v.dst}, {"src", v.src}});
  for (const FusionEdge& e : a.info.fusion)
    fusion.push_back({{"producer", e.producer},
                      {"consumer", e.consumer},
                      {"fused", e.fused},
                      {"reason", e.reason}});
  ordered_json body = {
      {"values", values}, {"inputs", inputs},     {"params", params}, {"kernels", kernels_json(a)},
      {"views", views},   {"outputs", g.outputs}, {"fusion", fusion}};
  // Only a graph with run-time shapes has symbols, so a static graph's file is as before.
  if (g.symbols.empty()) return body;
  ordered_json symbols = ordered_json::array();
  for (const ExecGraph::Symbol& s : g.symbols)
    symbols.push_back({{"name", s.name}, {"min", s.min}, {"max", s.max}});
  body["symbols"] = symbols;
  return body;
}

}  // namespace

std::string write_graph_json(const Artifact& a, const std::vector<size_t>& param_offsets) {
  const ArtifactInfo& info = a.info;
  ordered_json root = {
      {"ember_version", info.ember_version}, {"target", info.target},   {"cpu", info.cpu},
      {"features", info.features},           {"imports", info.imports}, {"arch", info.arch},
      {"launch", launch_json(info)}};
  const ordered_json body = graph_body(a, param_offsets);  // (items() does not keep it alive)
  for (const auto& field : body.items()) root[field.key()] = field.value();
  if (!info.tuning.log.empty())
    root["tuning"] = {{"log", info.tuning.log},
                      {"cpu", info.tuning.cpu},
                      {"vector_bits", info.tuning.vector_bits},
                      {"threads", info.tuning.threads}};
  try {
    return layout(root);
  } catch (const json::type_error& e) {  // a name that is not UTF-8
    fail("save_artifact: the model's graph cannot be written as JSON (", e.what(),
         "); names of inputs, params and kernels must be UTF-8");
  }
}

namespace {

// ------------------------------------------------------------------------------ read
// Typed access to the parsed graph; every mismatch names the field path.
class GraphReader {
 public:
  explicit GraphReader(std::string where) : where_(std::move(where)) {}
  [[noreturn]] void error(const std::string& path, const std::string& what) const {
    fail(where_, " is corrupted: the graph section is inconsistent: ", path, " ", what,
         "; the file is damaged or was written by an incompatible Ember");
  }
  const json& field(const json& obj, const std::string& key, const std::string& path) const {
    if (!obj.is_object()) error(path, "is not an object");
    auto it = obj.find(key);
    if (it == obj.end()) error(path + "." + key, "is missing");
    return *it;
  }
  const json* optional(const json& obj, const std::string& key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  const json& array(const json& obj, const std::string& key, const std::string& path) const {
    const json& v = field(obj, key, path);
    if (!v.is_array()) error(path + "." + key, "is not a list");
    return v;
  }
  int64_t integer(const json& v, const std::string& path) const {
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      error(path, "holds an integer out of range");
    if (v.is_number_integer()) return v.get<int64_t>();
    // The parser makes an integer past 64 bits a double.
    if (v.is_number_float() && std::fabs(v.get<double>()) >= 0x1p63)
      error(path, "holds an integer out of range");
    error(path, "is not an integer");
  }
  int64_t integer(const json& obj, const std::string& key, const std::string& path) const {
    return integer(field(obj, key, path), path + "." + key);
  }
  std::string string(const json& v, const std::string& path) const {
    if (!v.is_string()) error(path, "is not a string");
    return v.get<std::string>();
  }
  std::string string(const json& obj, const std::string& key, const std::string& path) const {
    return string(field(obj, key, path), path + "." + key);
  }
  std::vector<std::string> strings(const json& obj, const std::string& key,
                                   const std::string& path) const {
    std::vector<std::string> out;
    for (const json& item : array(obj, key, path)) {
      if (!item.is_string()) error(path + "." + key, "holds a non-string");
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  /// A value id: an integer in [0, n).
  int id(const json& v, int n, const std::string& path) const {
    int64_t i = integer(v, path);
    if (i < 0 || i >= n) error(path, "is not a value id in [0, " + std::to_string(n) + ")");
    return static_cast<int>(i);
  }

 private:
  std::string where_;
};

std::string index_path(const std::string& list, size_t i) {
  return list + "[" + std::to_string(i) + "]";
}

// nlohmann's errors become ember::Error naming the file; the depth bound is ours.
json parse(const std::string& text, const std::string& where) {
  auto malformed = [&](const std::string& what) {
    fail(where, ": the graph section is malformed (", what,
         "); the file is damaged or was not written by Ember");
  };
  json::parser_callback_t bound_depth = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxDepth) malformed("nesting too deep");
    return true;
  };
  try {
    return json::parse(text, bound_depth);
  } catch (const json::exception& e) {  // a parse error, or a number out of range (406)
    std::string what = e.what();        // "[json.exception.parse_error.101] parse error at ..."
    size_t tag = what.find("] ");
    malformed(tag == std::string::npos ? what : what.substr(tag + 2));
  }
  return json();  // not reached
}

// The GPU launch table ("arch", "launch"): required with PTX code, optional otherwise (CPU
// artifacts from before the table lack it). The bounds are CUDA's, so a damaged table is
// an error here rather than a failed launch on the GPU machine.
cuda::LaunchDims read_launch_entry(const json& entry, const GraphReader& r,
                                   const std::string& path) {
  cuda::LaunchDims d;
  auto dims = [&](const std::string& key, std::array<int64_t, 3>& out) {
    const json& items = r.array(entry, key, path);
    if (items.size() != 3) r.error(path + "." + key, "does not have 3 dimensions");
    for (size_t j = 0; j < 3; ++j) {
      // (An unsigned number past 2^63 reads as negative: refused too.)
      out[j] = items[j].is_number_integer() ? items[j].get<int64_t>() : 0;
      if (out[j] < 1 || out[j] >= (int64_t{1} << 31))
        r.error(path + "." + key, "holds a dimension that is not a positive 32-bit integer");
    }
  };
  dims("grid", d.grid);
  dims("block", d.block);
  if (d.grid[1] > 65535 || d.grid[2] > 65535) r.error(path + ".grid", "exceeds CUDA's limits");
  if (d.block[0] * d.block[1] * d.block[2] > 1024)
    r.error(path + ".block", "has more than 1024 threads");
  int64_t num_params = r.integer(entry, "num_params", path);
  if (num_params < 0 || num_params > 65536) r.error(path + ".num_params", "is out of range");
  d.num_params = static_cast<int>(num_params);
  d.symbol = r.string(entry, "symbol", path);
  if (d.symbol.empty()) r.error(path + ".symbol", "is empty");
  return d;
}

void read_launch_table(const json& root, const GraphReader& r, bool gpu_code, ArtifactInfo& info) {
  const json* arch = gpu_code ? &r.field(root, "arch", "graph") : r.optional(root, "arch");
  if (arch) info.arch = r.string(*arch, "graph.arch");
  const bool sm = info.arch.size() > 3 && info.arch.compare(0, 3, "sm_") == 0 &&
                  info.arch.find_first_not_of("0123456789", 3) == std::string::npos;
  if (gpu_code && !sm) r.error("graph.arch", "is '" + info.arch + "', not a GPU architecture");
  if (!gpu_code && !r.optional(root, "launch")) return;
  const json& launch = r.array(root, "launch", "graph");
  for (size_t i = 0; i < launch.size(); ++i) {
    std::string path = index_path("launch", i);
    std::string func = r.string(launch[i], "func", path);
    if (!info.launch.emplace(func, read_launch_entry(launch[i], r, path)).second)
      r.error(path + ".func", "'" + func + "' appears twice");
  }
}

// The graph's symbols ("symbols", absent in a static graph and in files from before
// run-time shapes); the executor checks their ranges.
void read_symbols(const json& root, const GraphReader& r, ExecGraph& g) {
  if (!r.optional(root, "symbols")) return;
  const json& symbols = r.array(root, "symbols", "graph");
  for (size_t i = 0; i < symbols.size(); ++i) {
    std::string path = index_path("symbols", i);
    g.symbols.push_back({r.string(symbols[i], "name", path), r.integer(symbols[i], "min", path),
                         r.integer(symbols[i], "max", path)});
  }
}

// Symbol ids: integers in [0, number of symbols).
std::vector<int> read_symbol_ids(const json& obj, const std::string& key, const GraphReader& r,
                                 const std::string& path, size_t num_symbols) {
  std::vector<int> ids;
  const json& items = r.array(obj, key, path);
  for (size_t i = 0; i < items.size(); ++i) {
    int64_t s = r.integer(items[i], index_path(path + "." + key, i));
    if (s < 0 || static_cast<uint64_t>(s) >= num_symbols)
      r.error(index_path(path + "." + key, i),
              "is not a symbol id in [0, " + std::to_string(num_symbols) + ")");
    ids.push_back(static_cast<int>(s));
  }
  return ids;
}

// A value's run-time dimensions ("dims", optional): one per dimension of its shape; the
// executor checks them against the shape and the symbols' ranges.
void read_dims(const json& j, const GraphReader& r, const std::string& path, size_t num_symbols,
               ExecGraph::Value& v) {
  if (!r.optional(j, "dims")) return;
  const json& dims = r.array(j, "dims", path);
  if (dims.size() != v.shape.size()) r.error(path + ".dims", "does not match the shape's rank");
  for (size_t d = 0; d < dims.size(); ++d) {
    std::string at = index_path(path + ".dims", d);
    v.dims.push_back({r.integer(dims[d], "coef", at), r.integer(dims[d], "offset", at),
                      read_symbol_ids(dims[d], "symbols", r, at, num_symbols)});
  }
}

// Bound every dimension and the byte size, so no shape can overflow or ask for absurd
// memory before the executor sees it.
ExecGraph::Value read_value(const json& j, const GraphReader& r, const std::string& path,
                            size_t num_symbols) {
  ExecGraph::Value v;
  const json& shape = r.array(j, "shape", path);
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t dim = r.integer(shape[d], path + ".shape");
    if (dim < 0) r.error(path + ".shape", "has a bad dimension");
    v.shape.push_back(dim);
  }
  std::string dtype = r.string(j, "dtype", path);
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
  read_dims(j, r, path, num_symbols, v);
  return v;
}

// A param views its bytes of the params section (`params`, `params_size` bytes of `buffer`).
ExecGraph::Param read_param(const json& p, const GraphReader& r, const std::string& path,
                            const ExecGraph& g, const std::shared_ptr<void>& buffer,
                            const char* params, uint64_t params_size) {
  int value = r.id(r.field(p, "value", path), static_cast<int>(g.values.size()), path + ".value");
  const ExecGraph::Value& v = g.values[value];
  int64_t offset = r.integer(p, "offset", path), nbytes = r.integer(p, "nbytes", path);
  if (nbytes != checked_nbytes(v.shape, dtype_bytes(v.dtype), path))
    r.error(path + ".nbytes", "does not match the value's shape and dtype");
  if (offset < 0 || offset % static_cast<int64_t>(container::kAlign) != 0 ||
      static_cast<uint64_t>(offset) > params_size ||
      static_cast<uint64_t>(nbytes) > params_size - static_cast<uint64_t>(offset))
    r.error(path + ".offset", "is not an aligned range inside the params section");
  return {r.string(p, "name", path), value,
          NDArray::view(buffer, const_cast<char*>(params) + offset, v.shape, v.dtype)};
}

// A kernel and its report; with GPU code, its launch entry must take its arguments.
void read_kernel(const json& k, const GraphReader& r, const std::string& path, bool gpu_code,
                 ExecGraph& g, ArtifactInfo& info) {
  const int n = static_cast<int>(g.values.size());
  ExecGraph::Kernel kern;
  kern.func = r.string(k, "func", path);
  kern.name = r.string(k, "name", path);
  const json& args = r.array(k, "args", path);
  for (size_t j = 0; j < args.size(); ++j)
    kern.args.push_back(r.id(args[j], n, index_path(path + ".args", j)));
  int64_t num_inputs = r.integer(k, "num_inputs", path);
  if (num_inputs < 0 || num_inputs > static_cast<int64_t>(args.size()))
    r.error(path + ".num_inputs", "is out of range");
  kern.num_inputs = static_cast<int>(num_inputs);
  if (r.optional(k, "schedule")) {  // (files saved before schedules were recorded have none)
    kern.schedule = r.string(k, "schedule", path);
    const json& knobs = r.field(k, "schedule_knobs", path);
    if (!knobs.is_object()) r.error(path + ".schedule_knobs", "is not an object");
    for (const auto& [name, value] : knobs.items())
      kern.schedule_knobs.emplace_back(name, r.integer(value, path + ".schedule_knobs." + name));
  }
  if (r.optional(k, "symbols"))  // (a kernel with run-time extents)
    kern.symbols = read_symbol_ids(k, "symbols", r, path, g.symbols.size());
  if (gpu_code) {
    auto launch = info.launch.find(kern.func);
    if (launch == info.launch.end())
      r.error(path + ".func", "'" + kern.func + "' has no entry in graph.launch");
    // (A kernel that takes symbols takes its shape_args too.)
    const size_t params = kern.args.size() + (kern.symbols.empty() ? 0 : 1);
    if (launch->second.num_params != static_cast<int>(params))
      r.error(path + ".args", "do not match the " + std::to_string(launch->second.num_params) +
                                  " parameters of the kernel's launch entry");
  }
  KernelReport report{kern.func, kern.name, r.strings(k, "ops", path), r.string(k, "anchor", path),
                      r.strings(k, "patterns", path)};
  if (r.optional(k, "workload")) {  // built with a tuning log
    report.workload = r.string(k, "workload", path);
    const json& tuned = r.field(k, "tuned", path);
    if (!tuned.is_boolean()) r.error(path + ".tuned", "is not true or false");
    report.tuned = tuned.get<bool>();
    report.tuning_note = r.string(k, "tuning_note", path);
    const json& knobs = r.field(k, "knobs", path);
    if (!knobs.is_object()) r.error(path + ".knobs", "is not an object");
    for (const auto& [name, value] : knobs.items())
      report.knobs.emplace_back(name, r.integer(value, path + ".knobs." + name));
  }
  info.kernels.push_back(std::move(report));
  g.kernels.push_back(std::move(kern));
}

void read_views_and_outputs(const json& root, const GraphReader& r, ExecGraph& g) {
  const int n = static_cast<int>(g.values.size());
  const json& views = r.array(root, "views", "graph");
  for (size_t i = 0; i < views.size(); ++i) {
    std::string path = index_path("views", i);
    int dst = r.id(r.field(views[i], "dst", path), n, path + ".dst");
    int src = r.id(r.field(views[i], "src", path), n, path + ".src");
    const auto &d = g.values[dst], &s = g.values[src];
    if (dst == src || d.dtype != s.dtype || shape_numel(d.shape) != shape_numel(s.shape))
      r.error(path, "is not a view of the same bytes");
    g.views.push_back({dst, src});
  }
  const json& outputs = r.array(root, "outputs", "graph");
  for (size_t i = 0; i < outputs.size(); ++i)
    g.outputs.push_back(r.id(outputs[i], n, index_path("outputs", i)));
}

void read_fusion(const json& root, const GraphReader& r, ArtifactInfo& info) {
  const json& fusion = r.array(root, "fusion", "graph");
  for (size_t i = 0; i < fusion.size(); ++i) {
    std::string path = index_path("fusion", i);
    const json& fused = r.field(fusion[i], "fused", path);
    if (!fused.is_boolean()) r.error(path + ".fused", "is not true or false");
    info.fusion.push_back({r.string(fusion[i], "producer", path),
                           r.string(fusion[i], "consumer", path), fused.get<bool>(),
                           r.string(fusion[i], "reason", path)});
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

void read_graph(const json& root, const std::string& where, const std::shared_ptr<void>& buffer,
                const char* params, uint64_t params_size, bool gpu_code, Artifact& a) {
  GraphReader r(where);
  auto g = std::make_shared<ExecGraph>();
  ArtifactInfo& info = a.info;
  if (!root.is_object()) r.error("graph", "is not an object");
  info.ember_version = r.string(root, "ember_version", "graph");
  info.target = r.string(root, "target", "graph");
  info.cpu = r.string(root, "cpu", "graph");
  info.features = r.string(root, "features", "graph");
  info.imports = r.strings(root, "imports", "graph");
  read_launch_table(root, r, gpu_code, info);
  read_symbols(root, r, *g);
  const json& values = r.array(root, "values", "graph");
  for (size_t i = 0; i < values.size(); ++i)
    g->values.push_back(read_value(values[i], r, index_path("values", i), g->symbols.size()));
  const int n = static_cast<int>(g->values.size());
  const json& inputs = r.array(root, "inputs", "graph");
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string path = index_path("inputs", i);
    g->inputs.push_back({r.string(inputs[i], "name", path),
                         r.id(r.field(inputs[i], "value", path), n, path + ".value")});
  }
  const json& params_json = r.array(root, "params", "graph");
  for (size_t i = 0; i < params_json.size(); ++i)
    g->params.push_back(
        read_param(params_json[i], r, index_path("params", i), *g, buffer, params, params_size));
  const json& kernels = r.array(root, "kernels", "graph");
  for (size_t i = 0; i < kernels.size(); ++i)
    read_kernel(kernels[i], r, index_path("kernels", i), gpu_code, *g, info);
  read_views_and_outputs(root, r, *g);
  read_fusion(root, r, info);
  if (const json* t = r.optional(root, "tuning")) {  // built with a tuning log
    info.tuning = {r.string(*t, "log", "graph.tuning"), r.string(*t, "cpu", "graph.tuning"),
                   r.integer(*t, "vector_bits", "graph.tuning"),
                   r.integer(*t, "threads", "graph.tuning")};
    if (info.tuning.log.empty()) r.error("graph.tuning.log", "is empty");
  }
  check_value_roles(*g, r);
  a.graph = std::move(g);
}

}  // namespace

void read_graph_json(const std::string& text, const std::string& where,
                     const std::shared_ptr<void>& buffer, const char* params, uint64_t params_size,
                     bool gpu_code, Artifact& a) {
  const json root = parse(text, where);
  try {
    read_graph(root, where, buffer, params, params_size, gpu_code, a);
  } catch (const json::exception& e) {  // every access is checked first: this is a guard
    fail(where, " is corrupted: the graph section is inconsistent (", e.what(),
         "); the file is damaged or was written by an incompatible Ember");
  }
}

}  // namespace ember::runtime
