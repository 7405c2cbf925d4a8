// The `_ember_runtime` extension: the runtime alone (no LLVM), for runtime-only builds.
#include "bindings.h"

PYBIND11_MODULE(_ember_runtime, m) {
  m.doc() = "Ember runtime (tensors, graph executor) without the compiler.";
  ember::python::register_errors(m);
  ember::python::bind_runtime(m);
  ember::python::bind_deploy(m);
}
