// mpverify._core: the C++ library as a Python extension module.
#include <pybind11/pybind11.h>

#include "bindings.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "mpverify's C++ core; use the `mpverify` package, which documents and wraps it.";
  mpverify::python::bind_formats(m);
  mpverify::python::bind_analysis(m);
  mpverify::python::bind_training(m);
  mpverify::python::bind_metrics(m);
  mpverify::python::bind_gemm(m);
}
