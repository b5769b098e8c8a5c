// The end of a sweep, once every run of the plan finished: each candidate's DIR/<candidate>/ensemble.json
// (what `train --seeds` writes, so gate, compare-runs and the reports read it), then every candidate gated
// against the plan's baseline (metrics/parity_gate.h), into DIR/sweep.json and DIR/summary.md. Ensembles
// are read by their names relative to DIR, so nothing written depends on where DIR is or how it was named.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweep/sweep_plan.h"

namespace mpverify::sweep {

// Writes the files above and returns sweep.json's content:
//   {"plan": <the plan>, "runs": N, "seeds": [...], "baseline": NAME or null,
//    "candidates": [{"name", "axes", "role": "baseline" | "candidate" | "run" (no gate),
//                    "gate": <gate --json's object> | {"error": why}}, ...]}
// `configs`: each candidate's shared configuration (sweep/sweep_directory.h).
nlohmann::ordered_json finish_sweep(const SweepPlan& plan, const std::filesystem::path& out,
                                    const std::vector<nlohmann::json>& configs);

// The table printed at the end and written to summary.md: a row per candidate with its mean, the
// difference to the baseline, the confidence interval and the verdict.
std::string summary_table(const nlohmann::ordered_json& summary);

// 0 when every gated candidate is equivalent (or the plan has no gate), 1 when one is not equivalent, 3 when
// one is inconclusive and none is not equivalent, 2 when a gate could not read its runs.
int sweep_exit_code(const nlohmann::ordered_json& summary);

}  // namespace mpverify::sweep
