// The `_ember` extension: the whole compiler and runtime, one bind_* function per area.
#include "bindings.h"

PYBIND11_MODULE(_ember, m) {
  m.doc() = "Ember tensor compiler (C++ core). Use the `ember` package, not this module.";
  ember::python::register_errors(m);
  // Runtime first: IR constants and build results return its Tensor type.
  ember::python::bind_runtime(m);
  ember::python::bind_ir(m);
  ember::python::bind_build(m);
  ember::python::bind_deploy(m);
}
