// Build bindings: ember::build and the Library it returns, plus codegen queries.
#include <pybind11/stl.h>

#include <algorithm>
#include <map>
#include <memory>

#include "bindings.h"
#include "ember/codegen/build.h"
#include "ember/codegen/codegen.h"
#include "ember/codegen/machine.h"
#include "ember/codegen/target.h"
#include "ember/codegen/tuning.h"
#include "ember/passes/tuning.h"
#include "ember/support/error.h"

namespace py = pybind11;
using namespace py::literals;

namespace ember::python {

namespace {

// Schedule knobs from a dict {"tile_rows": 4, ...} (missing keys: the schedule's choice).
passes::ScheduleKnobs knobs_arg(py::handle h) {
  if (!py::isinstance<py::dict>(h)) fail("schedule knobs must be a dict, got ", describe(h));
  passes::ScheduleKnobs k;
  for (auto item : h.cast<py::dict>()) {
    std::string key = str_arg(item.first, "schedule knobs: a key");
    auto& fields = passes::ScheduleKnobs::fields;
    auto f = std::find_if(fields.begin(), fields.end(), [&](auto& f) { return key == f.first; });
    if (f == fields.end()) {
      std::string names;
      for (auto& n : fields) names += (names.empty() ? "" : ", ") + std::string(n.first);
      fail("unknown schedule knob '", key, "'; the knobs are ", names);
    }
    k.*(f->second) = item.second.cast<int64_t>();
  }
  return k;
}

py::dict knobs_dict(const passes::ScheduleKnobs& k) {
  py::dict out;
  for (auto& f : passes::ScheduleKnobs::fields) out[f.first] = k.*(f.second);
  return out;
}

ir::Function function_arg(py::handle h, const char* what) {
  if (!py::isinstance<ir::FunctionNode>(h))
    fail(what, " must be an ir.Function, got ", describe(h));
  return h.cast<std::shared_ptr<ir::FunctionNode>>();
}

// Schedule tuning (python/ember/tuning/): workloads, knob spaces, one kernel alone.
void bind_tuning(py::module_& m) {
  m.attr("_schedule_template_version") = passes::kScheduleTemplateVersion;
  m.def("_extract_workloads", [](const Library& lib) {
    py::list out;
    for (auto& w : extract_workloads(lib))
      out.append(py::dict("key"_a = w.key,
                          "group"_a = std::const_pointer_cast<ir::FunctionNode>(w.group),
                          "name"_a = w.info.name, "anchor"_a = w.info.anchor, "ops"_a = w.info.ops,
                          "count"_a = w.count));
    return out;
  });
  m.def("_workload_key", [](py::handle group) {
    return passes::workload_key(function_arg(group, "workload_key: group"));
  });
  m.def("_knob_space", [](py::handle group, py::handle target) {
    ir::Function g = function_arg(group, "knob_space: group");
    const passes::MachineModel machine =
        codegen::machine_model(codegen::parse_target(str_arg(target, "knob_space: target")));
    std::vector<passes::ScheduleKnobs> space;
    {
      py::gil_scoped_release release;
      space = passes::knob_space(g, machine);
    }
    py::list out;
    for (auto& k : space) out.append(knobs_dict(k));
    return out;
  });
  m.def("_build_kernel", [](py::handle group, py::handle target, py::handle knobs) {
    ir::Function g = function_arg(group, "build_kernel: group");
    std::string t = str_arg(target, "build_kernel: target");
    passes::ScheduleKnobs k = knobs_arg(knobs);
    py::gil_scoped_release release;
    return build_kernel(g, t, k);
  });
  m.def("_target_vector_bits", [](py::handle target) {
    return codegen::parse_target(str_arg(target, "target")).resolved_vector_bits();
  });
  m.def("_machine_model", [](py::handle target) {
    const codegen::Target t = codegen::parse_target(str_arg(target, "target"));
    if (t.is_cuda()) fail("machine_model: '", t.str(), "' is not a CPU target; use \"llvm ...\"");
    const passes::MachineModel mm = codegen::machine_model(t);
    return py::dict("cpu"_a = mm.cpu, "source"_a = mm.source, "vector_bits"_a = mm.vector_bits,
                    "vector_registers"_a = mm.vector_registers, "fma_per_cycle"_a = mm.fma_ports,
                    "fma_latency"_a = mm.fma_latency, "fma_datapath_bits"_a = mm.fma_datapath_bits,
                    "loads_per_cycle"_a = mm.load_ports, "l1_bytes"_a = mm.l1_bytes,
                    "l2_bytes"_a = mm.l2_bytes, "l3_bytes"_a = mm.l3_bytes,
                    "int8_dot"_a = mm.int8_dot, "int8_dot_7bit"_a = mm.int8_dot_7bit,
                    "bf16_dot"_a = mm.bf16_dot);
  });
}

}  // namespace

// Library: a compiled model, its sources, reports and export.
static void bind_library(py::module_& m) {
  py::class_<Library, std::shared_ptr<Library>>(m, "Library", "A compiled model.")
      .def(
          "get_source",
          [](const Library& lib, py::handle format) {
            return lib.get_source(str_arg(format, "Library.get_source: the format"));
          },
          "format"_a = "ll", "Generated code: \"ll\" (LLVM IR) or \"asm\" (assembly).")
      .def_readonly("target", &Library::target)
      .def_property_readonly(
          "function",
          [](const Library& lib) {
            return std::const_pointer_cast<ir::FunctionNode>(lib.function);
          },
          "The graph after the passes.")
      .def_property_readonly("kernel_names",
                             [](const Library& lib) {
                               std::vector<std::string> names;
                               for (const auto& kernel : lib.graph->kernels)
                                 names.push_back(kernel.name);
                               return names;
                             })
      .def_property_readonly("input_names",
                             [](const Library& lib) {
                               std::vector<std::string> names;
                               for (const auto& input : lib.graph->inputs)
                                 names.push_back(input.name);
                               return names;
                             })
      .def("_kernels",
           [](const Library& lib) { return kernel_reports(lib.kernels, lib.graph->kernels); })
      .def("_fusion_decisions", [](const Library& lib) { return fusion_edges(lib.fusion); })
      .def("_symbols", [](const Library& lib) { return graph_symbols(*lib.graph); })
      .def("_tuning", [](const Library& lib) { return tuning_info(lib.tuning); })
      .def("_fusion_dot", &Library::fusion_graph)
      .def(
          "export",
          [](const Library& lib, py::handle path) {
            py::object p;
            try {
              p = py::module_::import("os").attr("fspath")(path);
            } catch (py::error_already_set&) {
              fail("Library.export: the path must be a str or os.PathLike, got ", describe(path));
            }
            std::string file = str_arg(p, "Library.export: the path");
            py::gil_scoped_release release;
            lib.export_library(file);
          },
          "path"_a,
          "Saves the model as one artifact file (graph, parameters, code) for ember.load, "
          "the C++ runtime (runtime::load_library) or `ember run`.")
      .def(
          "_create_executor",
          [](const Library& lib, py::handle cuda_graph) {
            return std::make_shared<runtime::GraphExecutor>(lib.graph, lib.module,
                                                            executor_options(cuda_graph));
          },
          "cuda_graph"_a = true);
}

void bind_build(py::module_& m) {
  bind_library(m);
  m.def(
      "_build",
      [](py::handle function, py::handle target, py::handle params, int opt_level,
         std::vector<std::string> disabled, std::vector<std::string> required,
         std::map<std::string, std::string> config, py::handle tuned, py::handle tuning) {
        if (!py::isinstance<ir::FunctionNode>(function))
          fail("ember.build: the model must be an ir.Function, got ", describe(function));
        ir::Function f = function.cast<std::shared_ptr<ir::FunctionNode>>();
        std::string t = str_arg(target, "ember.build: target");
        // Converted only: passes::bind_params checks them against the function.
        std::map<std::string, runtime::NDArray> tensors;
        if (!params.is_none()) {
          if (!py::isinstance<py::dict>(params))
            fail("ember.build: params must be a dict of name -> array, got ", describe(params));
          for (auto item : params.cast<py::dict>()) {
            std::string name = str_arg(item.first, "ember.build: a params key");
            tensors[name] = tensor_copy(item.second, "ember.build: param '" + name + "'");
          }
        }
        passes::PassContext ctx;
        ctx.opt_level = opt_level;
        ctx.disabled_passes = {disabled.begin(), disabled.end()};
        ctx.required_passes = {required.begin(), required.end()};
        ctx.config = config;
        std::map<std::string, passes::ScheduleKnobs> table;
        if (!tuned.is_none())
          for (auto item : tuned.cast<py::dict>())
            table[item.first.cast<std::string>()] = knobs_arg(item.second);
        runtime::TuningInfo info;  // where the table's entries were measured
        if (!tuning.is_none()) {
          auto d = tuning.cast<py::dict>();
          info = {d["log"].cast<std::string>(), d["cpu"].cast<std::string>(),
                  d["vector_bits"].cast<int64_t>(), d["threads"].cast<int64_t>()};
        }
        std::shared_ptr<Library> lib;
        {
          // Compiling touches no Python object: let other Python threads run meanwhile.
          py::gil_scoped_release release;
          lib = build(f, t, tensors, ctx, tuned.is_none() ? nullptr : &table);
        }
        lib->tuning = info;
        return lib;
      },
      "function"_a, "target"_a = "llvm", "params"_a = py::none(), "opt_level"_a = 3,
      "disabled_passes"_a = std::vector<std::string>{},
      "required_passes"_a = std::vector<std::string>{},
      "config"_a = std::map<std::string, std::string>{}, "tuned"_a = py::none(),
      "tuning"_a = py::none());
  m.def("_known_config_keys", &passes::known_config_keys);
  bind_tuning(m);
  m.def("_known_passes", [] {
    std::vector<std::pair<std::string, int>> out;
    for (auto& p : passes::known_passes()) out.emplace_back(p.name, p.opt_level);
    return out;
  });

  m.def(
      "native_vector_lanes",
      [](py::handle dtype) {
        return codegen::native_vector_lanes(
            dtype_from_name(str_arg(dtype, "native_vector_lanes: dtype")));
      },
      "dtype"_a = "float32", "Vector lanes of the host CPU for a dtype (16 float32 with AVX-512).");

  m.def(
      "measure_fma_peak",
      [](py::handle target, double seconds) {
        std::string t = str_arg(target, "measure_fma_peak: target");
        py::gil_scoped_release release;
        return codegen::measure_fma_peak(t, seconds);
      },
      "target"_a = "llvm", "seconds"_a = 0.3,
      "Single-thread float32 FMA peak (GFLOP/s) of code Ember compiles for the target.");
}

}  // namespace ember::python
