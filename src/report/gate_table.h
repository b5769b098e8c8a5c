// The parity gate's results as Markdown table rows, the same in every report
// that gates (the study, the accuracy-parity experiment, the GAN experiment).
#pragma once

#include <string>

#include "metrics/parity_gate.h"

namespace mpverify::report {

// "| metric | candidate | verdict | candidate − baseline | 90% CI | margin | method |" and its rule
// (the interval's level is 1 − 2 alpha: TOST at alpha; a row of the gate in rounds names its look's level).
std::string gate_table_header(double alpha);
// One row of that table (ends without a newline).
std::string gate_table_row(const metrics::GateResult& gate);

}  // namespace mpverify::report
