// The parts of the `mpverify._core` extension module, one file each; the
// Python package (mpverify/__init__.py) wraps them with documented functions.
#pragma once

#include <pybind11/pybind11.h>

#include "emu/counters.h"

namespace mpverify::python {

void bind_formats(pybind11::module_& m);   // bind_formats.cpp: formats, round, block quantize
void bind_analysis(pybind11::module_& m);  // bind_analysis.cpp: tensor statistics, analyze, lost updates
void bind_training(pybind11::module_& m);  // bind_training.cpp: scalers, the recorders, the run log
void bind_metrics(pybind11::module_& m);   // bind_metrics.cpp: the parity gate, FID, KID
void bind_gemm(pybind11::module_& m);      // bind_gemm.cpp: emulated GEMMs (mpverify.torch.emulate)

// A rounding's counters (emu/counters.h) as a dict.
pybind11::dict counters_dict(const emu::Counters& c);

}  // namespace mpverify::python
