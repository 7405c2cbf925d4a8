// The kernel manifest (manifest.h): writing and reading its text, and checking a graph
// against it.
#include "ember/runtime/manifest.h"

#include <cstdlib>
#include <map>
#include <sstream>

#include "ember/support/error.h"

namespace ember::runtime {

namespace {
std::string value_str(const ExecGraph::Value& v) {
  return dtype_name(v.dtype) + shape_str(v.shape);
}

// The buffers kernel `k` passes its function, in order: its inputs, its shape_args (an
// int64 array of one value per symbol) when it takes symbols, its outputs.
std::vector<ExecGraph::Value> passed_buffers(const ExecGraph& g, const ExecGraph::Kernel& k) {
  std::vector<ExecGraph::Value> out;
  for (int a : k.args) out.push_back(g.values[a]);
  if (!k.symbols.empty())
    out.insert(out.begin() + k.num_inputs,
               {{static_cast<int64_t>(k.symbols.size())}, DType::Int64, {}});
  return out;
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

// The graph's kernels must be what the code was compiled for, buffer by buffer: a graph
// changed after export would have the code read or write past its buffers.
void check_kernels_against_manifest(const ExecGraph& g, const std::string& code,
                                    const std::string& prefix, const std::string& where) {
  std::map<std::string, std::vector<ExecGraph::Value>> compiled;
  for (KernelSignature& k : read_kernel_manifest(code, prefix, where))
    compiled[k.func] = std::move(k.buffers);
  for (const ExecGraph::Kernel& k : g.kernels) {
    auto it = compiled.find(k.func);
    if (it == compiled.end())
      fail(where, " is inconsistent: kernel '", k.name, "' calls function '", k.func,
           "', which its code does not have; the file was changed after export: export the "
           "model again");
    const auto& buffers = it->second;
    const std::vector<ExecGraph::Value> passed = passed_buffers(g, k);
    if (buffers.size() != passed.size())
      fail(where, " is inconsistent: kernel '", k.name, "' passes ", passed.size(),
           " buffers but its code takes ", buffers.size(),
           "; the file was changed after export: export the model again");
    for (size_t i = 0; i < buffers.size(); ++i) {
      const ExecGraph::Value& v = passed[i];
      if (v.dtype != buffers[i].dtype || v.shape != buffers[i].shape)
        fail(where, " is inconsistent: kernel '", k.name, "' (", k.func, ") was compiled for ",
             value_str(buffers[i]), " as buffer ", i, " but the graph gives it ", value_str(v),
             "; the file was changed after export: export the model again");
    }
  }
}

}  // namespace ember::runtime
