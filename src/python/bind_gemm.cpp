// Emulated GEMMs for mpverify.torch.emulate (to be written).
#include <pybind11/pybind11.h>

#include "bindings.h"

namespace py = pybind11;

namespace mpverify::python {

void bind_gemm(py::module_&) {}

}  // namespace mpverify::python
