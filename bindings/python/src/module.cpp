// The extension module cera._cera: the C++ facade (include/cera/engine.h) bound for the pure-Python
// package `cera` (bindings/python/cera), which adds the keyword-argument API on top. Order
// matters: the error classes first (the other bindings raise them), then the types in the order
// they refer to each other.
#include "bindings.h"

#ifndef CERA_VERSION
#error "CERA_VERSION is defined by bindings/python/CMakeLists.txt"
#endif

NB_MODULE(_cera, m) {
  namespace py = cera::python;
  m.doc() = "cera's C++ facade (include/cera/engine.h); use the package `cera`, which wraps it.";
  m.attr("__version__") = CERA_VERSION;
  py::bind_errors(m);
  py::bind_options(m);
  py::bind_stream(m);
  py::bind_engine(m);
}
