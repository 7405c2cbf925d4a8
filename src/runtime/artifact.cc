// The model file (format in artifact.h): the sections a model has, in the container
// (container.h); the graph section is graph_json.h's, the manifest check manifest.h's.
#include "ember/runtime/artifact.h"

#include <string>

#include "container.h"
#include "ember/runtime/cpu_features.h"
#include "ember/runtime/cuda.h"
#include "ember/runtime/library_module.h"
#include "ember/runtime/manifest.h"
#include "ember/support/error.h"
#include "graph_json.h"

namespace ember::runtime {

void save_artifact(const Artifact& a, const std::string& path) {
  if (!a.graph) fail("save_artifact: the artifact has no graph");
  // Parameters: each at a 64-byte aligned offset of the params section.
  std::vector<size_t> offsets;
  std::string params;
  for (const auto& p : a.graph->params) {
    if (!p.data.defined()) fail("save_artifact: parameter '", p.name, "' has no data");
    params.resize(container::align_up(params.size()), '\0');
    offsets.push_back(params.size());
    params.append(static_cast<const char*>(p.data.data()), p.data.nbytes());
  }
  std::string graph = write_graph_json(a, offsets);
  std::vector<std::pair<std::string, const std::string*>> sections = {{"graph", &graph},
                                                                      {"params", &params}};
  for (const auto& [kind, bytes] : a.code) sections.emplace_back(kind, &bytes);
  container::write(path, sections);
}

Artifact read_artifact(const std::string& path, const std::string& sha256) {
  const std::string where = "artifact '" + path + "'";
  container::File file = container::read(path, sha256, where);
  Artifact a;
  a.info.file_bytes = file.size;
  const container::Section* graph = nullptr;
  const container::Section* params = nullptr;
  for (const container::Section& s : file.sections) {
    a.info.sections.emplace_back(s.kind, s.size);
    if (s.kind == "graph") {
      graph = &s;
    } else if (s.kind == "params") {
      params = &s;
    } else if (s.kind == "cpu.so" || s.kind == "ptx") {
      a.code.emplace_back(s.kind, std::string(s.data, s.size));
    } else {
      fail(where, " has a section of unknown kind '", s.kind,
           "'; it was written by a newer Ember: load it with that version");
    }
  }
  if (!graph || graph->size == 0 || !params) fail(where, " lacks its graph or params section");
  if (a.code.size() > 1)
    fail(where, " is corrupted: it holds ", a.code.size(), " code sections; a model has one");
  const bool gpu_code = !a.code.empty() && a.code[0].first == "ptx";
  read_graph_json(std::string(graph->data, graph->size), where, file.buffer.owner(), params->data,
                  params->size, gpu_code, a);
  return a;
}

namespace {

// The GPU module of a "ptx" section. Loading needs no GPU: the executor loads the PTX into
// one (and says when none is). PTX is text until then: reading it runs nothing.
std::shared_ptr<cuda::CudaModule> ptx_module(const std::string& bytes, const ArtifactInfo& info,
                                             const std::string& where) {
  // Each launch symbol must be an entry of the PTX, or the GPU machine would find out.
  for (const auto& [func, d] : info.launch)
    if (bytes.find(".entry " + d.symbol + "(") == std::string::npos)
      fail(where, " is corrupted: kernel '", func, "' launches PTX entry '", d.symbol,
           "', which its PTX does not define; export the model again");
  // The module gets the PTX as it was built, without the manifest comments export
  // appended ("\n" + manifest).
  std::string ptx = bytes.substr(0, bytes.rfind("\n// " + std::string(kManifestBegin)));
  return std::make_shared<cuda::CudaModule>(ptx, "", info.arch, info.launch);
}

}  // namespace

std::shared_ptr<LoadedLibrary> load_library(const std::string& path, const LoadOptions& options) {
  Artifact a = read_artifact(path, options.sha256);
  const std::string where = "artifact '" + path + "'";
  if (a.code.empty() && !a.graph->kernels.empty()) fail(where, " holds no code for its kernels");
  auto lib = std::make_shared<LoadedLibrary>();
  std::shared_ptr<cuda::CudaModule> gpu;
  if (!a.code.empty()) {
    const auto& [kind, bytes] = a.code[0];
    // Before any code is loaded: the graph must be what the code was compiled for.
    check_kernels_against_manifest(*a.graph, bytes, kind == "ptx" ? "// " : "", where);
    if (kind == "ptx") {
      lib->module = gpu = ptx_module(bytes, a.info, where);
    } else if (options.load_code) {  // (inspecting reads the file on any machine)
      check_cpu_features(a.info.features, a.info.cpu, where);
      lib->module = LibraryModule::from_bytes(bytes, a.info.imports);
    }
  }
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

}  // namespace ember::runtime
