// The parts of the `mpverify._core` extension module, one file each; the
// Python package (mpverify/__init__.py) wraps them with documented functions.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "emu/block_quantize.h"
#include "emu/counters.h"
#include "formats/fp_environment.h"

namespace mpverify::python {

// Every binding that computes runs under the IEEE 754 defaults and gives the caller's floating-point
// environment back afterwards (formats/fp_environment.h): a Python host may have set flush-to-zero
// (torch.set_flush_denormal(True), or an extension module built with -ffast-math).
inline auto exact_fp() { return pybind11::call_guard<formats::ScopedDefaultFpEnvironment>(); }

void bind_formats(pybind11::module_& m);   // bind_formats.cpp: formats, round, block quantize
void bind_analysis(pybind11::module_& m);  // bind_analysis.cpp: tensor statistics, analyze, lost updates
void bind_training(pybind11::module_& m);  // bind_training.cpp: scalers, the recorders, the run log
void bind_metrics(pybind11::module_& m);   // bind_metrics.cpp: the parity gate, FID, KID
void bind_gemm(pybind11::module_& m);      // bind_gemm.cpp: emulated GEMMs (mpverify.torch.emulate)

// A site's counters (emu/counters.h) as a dict: the rounding's, and an accumulation's (updates, lost
// updates, truncated terms).
pybind11::dict counters_dict(const emu::Counters& c);
// A block quantization's counters (emu/block_quantize.h) as a dict.
pybind11::dict block_counters_dict(const emu::BlockCounters& c);
// A block scheme by name (emu::block_schemes); tile "16x16" makes NVFP4's 2-D weight tiles, "" none.
// std::invalid_argument naming the schemes for an unknown name, or a tile the scheme cannot take.
emu::BlockScheme block_scheme(const std::string& name, const std::string& tile);

}  // namespace mpverify::python
