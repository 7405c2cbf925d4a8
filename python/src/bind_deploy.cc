// Deployment bindings: loading a saved artifact into a LoadedLibrary that ember.GraphModule
// runs. Depends only on ember_runtime, so the runtime-only module has it too (exporting is
// Library.export, in bind_build.cc).
#include <pybind11/stl.h>

#include <memory>

#include "bindings.h"
#include "ember/runtime/artifact.h"
#include "ember/support/error.h"

namespace py = pybind11;
using namespace py::literals;

namespace ember::python {

namespace {

using runtime::LoadedLibrary;

py::tuple shape_tuple(const runtime::Shape& shape) {
  py::tuple out(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) out[i] = py::int_(shape[i]);
  return out;
}

// Paths may be str or os.PathLike.
std::string path_arg(py::handle value, const std::string& what) {
  py::object path;
  try {
    path = py::module_::import("os").attr("fspath")(value);
  } catch (py::error_already_set&) {
    fail(what, " must be a path (str or os.PathLike), got ", describe(value));
  }
  return str_arg(path, what);
}

// "so" or "ptx": the kind of code the file holds, loaded or not; "none" without code.
std::string code_kind(const LoadedLibrary& lib) {
  if (lib.module) return lib.module->type_key();
  for (const auto& [kind, bytes] : lib.info.sections)
    if (kind == "cpu.so") return "so";
  return "none";
}

}  // namespace

py::list kernel_reports(const std::vector<runtime::KernelReport>& kernels,
                        const std::vector<runtime::ExecGraph::Kernel>& compiled) {
  py::list out;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const runtime::KernelReport& k = kernels[i];
    py::dict d("func"_a = k.func, "name"_a = k.name, "ops"_a = k.ops, "anchor"_a = k.anchor,
               "patterns"_a = k.patterns);
    if (i < compiled.size()) {  // the template and knobs that scheduled it
      py::dict knobs;
      for (const auto& [name, value] : compiled[i].schedule_knobs) knobs[name.c_str()] = value;
      d["schedule"] = compiled[i].schedule;
      d["schedule_knobs"] = knobs;
      d["schedule_label"] = runtime::schedule_label(compiled[i]);
    }
    if (!k.workload.empty()) {  // built with a tuning table (also kept in model files)
      d["workload"] = k.workload;
      d["tuned"] = k.tuned;
      d["tuning_note"] = k.tuning_note;
      py::dict knobs;
      for (const auto& [name, value] : k.knobs) knobs[name.c_str()] = value;
      d["knobs"] = knobs;
    }
    out.append(d);
  }
  return out;
}

py::object tuning_info(const runtime::TuningInfo& t) {
  if (t.log.empty()) return py::none();
  return py::dict("log"_a = t.log, "cpu"_a = t.cpu, "vector_bits"_a = t.vector_bits,
                  "threads"_a = t.threads);
}

py::list graph_symbols(const runtime::ExecGraph& g) {
  py::list out;
  for (const runtime::ExecGraph::Symbol& s : g.symbols)
    out.append(py::make_tuple(s.name, s.min, s.max));
  return out;
}

py::list fusion_edges(const std::vector<runtime::FusionEdge>& edges) {
  py::list out;
  for (const auto& e : edges) out.append(py::make_tuple(e.producer, e.consumer, e.fused, e.reason));
  return out;
}

// What `ember inspect` prints: the model file's header fields, values and sections.
py::dict library_info(const LoadedLibrary& lib) {
  const runtime::ExecGraph& g = *lib.graph;
  auto value = [&](int v) {
    return py::make_tuple(shape_tuple(g.values[v].shape), dtype_name(g.values[v].dtype));
  };
  py::list inputs, outputs, params, sections;
  for (const auto& in : g.inputs) inputs.append(py::make_tuple(in.name, value(in.value)));
  for (int o : g.outputs) outputs.append(value(o));
  size_t param_bytes = 0;
  for (const auto& p : g.params) {
    params.append(py::make_tuple(p.name, value(p.value)));
    param_bytes += p.data.nbytes();
  }
  for (const auto& [kind, bytes] : lib.info.sections) sections.append(py::make_tuple(kind, bytes));
  return py::dict("ember_version"_a = lib.info.ember_version,
                  "format_version"_a = runtime::kArtifactVersion, "target"_a = lib.info.target,
                  "cpu"_a = lib.info.cpu, "features"_a = lib.info.features,
                  "imports"_a = lib.info.imports, "inputs"_a = inputs, "outputs"_a = outputs,
                  "params"_a = params, "param_bytes"_a = param_bytes, "sections"_a = sections,
                  "file_bytes"_a = lib.info.file_bytes, "code"_a = code_kind(lib));
}

void bind_deploy(py::module_& m) {
  py::class_<LoadedLibrary, std::shared_ptr<LoadedLibrary>>(
      m, "LoadedLibrary",
      "A compiled model loaded from an artifact (ember.load): run it with ember.GraphModule.")
      .def_property_readonly("target", [](const LoadedLibrary& lib) { return lib.info.target; })
      .def_property_readonly("input_names",
                             [](const LoadedLibrary& lib) {
                               std::vector<std::string> names;
                               for (const auto& in : lib.graph->inputs) names.push_back(in.name);
                               return names;
                             })
      .def_property_readonly("kernel_names",
                             [](const LoadedLibrary& lib) {
                               std::vector<std::string> names;
                               for (const auto& k : lib.graph->kernels) names.push_back(k.name);
                               return names;
                             })
      .def(
          "get_source",
          [](const LoadedLibrary& lib, py::handle format) {
            std::string f = str_arg(format, "LoadedLibrary.get_source: the format");
            if (!lib.module)
              fail("this model was opened for inspection only: it has no '", f, "' source");
            return lib.module->get_source(f);
          },
          "format"_a = "ll")
      // The same report entries as Library._kernels / _fusion_decisions.
      .def("_kernels",
           [](const LoadedLibrary& lib) {
             return kernel_reports(lib.info.kernels, lib.graph->kernels);
           })
      .def("_fusion_decisions",
           [](const LoadedLibrary& lib) { return fusion_edges(lib.info.fusion); })
      .def("_symbols", [](const LoadedLibrary& lib) { return graph_symbols(*lib.graph); })
      .def("_tuning", [](const LoadedLibrary& lib) { return tuning_info(lib.info.tuning); })
      .def("_info", &library_info)
      .def(
          "_create_executor",
          [](const LoadedLibrary& lib, py::handle cuda_graph) {
            if (!lib.module && !lib.graph->kernels.empty())
              fail(
                  "this model was opened for inspection only (its code is not loaded); load it "
                  "with ember.load(path) to run it");
            return std::make_shared<runtime::GraphExecutor>(lib.graph, lib.module,
                                                            executor_options(cuda_graph));
          },
          "cuda_graph"_a = true);

  m.def(
      "_load",
      [](py::handle path, py::handle sha256, bool load_code) {
        runtime::LoadOptions options;
        std::string p = path_arg(path, "ember.load: the path");
        if (!sha256.is_none()) options.sha256 = str_arg(sha256, "ember.load: sha256");
        options.load_code = load_code;
        py::gil_scoped_release release;
        return runtime::load_library(p, options);
      },
      "path"_a, "sha256"_a = py::none(), "load_code"_a = true,
      "Loads an artifact written by Library.export (with load_code=False: reads and checks it "
      "without loading its code, for inspection).");
  // Where this build found nlohmann/json (CMakeLists.txt), which the runtime's sources need:
  // ember.deploy.ship_runtime_headers copies it for a machine that lacks it.
  m.attr("_nlohmann_json_include_dir") = EMBER_NLOHMANN_JSON_INCLUDE_DIR;
}

}  // namespace ember::python
