#include "report/gate_table.h"

#include "report/text_format.h"

namespace mpverify::report {

std::string gate_table_header(double alpha) {
  return "| metric | candidate | verdict | candidate − baseline | " + general(100 * (1 - 2 * alpha)) +
         "% CI | margin | method |\n|---|---|---|---:|---|---|---|\n";
}

std::string gate_table_row(const metrics::GateResult& g) {
  std::string row = "| " + g.metric_name + " | " + g.candidate + " | ";
  row += metrics::to_string(g.verdict);
  row += " | ";
  if (g.test) {
    const int digits = g.metric == metrics::GateMetric::accuracy ? 3 : 5;
    row += fixed(g.test->difference, digits) + " | [" + fixed(g.test->lower, digits) + ", " +
           fixed(g.test->upper, digits) + "]";
    // A look of the gate in rounds tests at its own share of alpha: its interval's level is not the header's.
    if (g.sequential) row += " (" + general(100 * (1 - 2 * g.test->alpha)) + "%)";
    row += " | ±" + general(g.margin) + " " + g.unit + " | " + metrics::to_string(g.test->method) + ", n = " +
           std::to_string(g.test->n_candidate);
    if (g.sequential && g.sequential->outcome.decided_at)
      row += ", look " + std::to_string(*g.sequential->outcome.decided_at + 1) + " of " +
             std::to_string(g.sequential->design.looks.size());
    row += " |";
  } else {
    row += "- | - | ±" + general(g.margin) + " " + g.unit + " | " + g.reason + " |";
  }
  return row;
}

}  // namespace mpverify::report
