// What `mpverify replay-scalers` prints and draws for a replay: the per-step
// table and summary (text), the JSON, and the SVG of the scales (--plot).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "training/scaler_replay.h"

namespace mpverify::cli {

// One strategy's replay of one optimizer's rows (optimizer "" when the trace
// names none).
struct ReplayLane {
  std::string strategy, optimizer;
  training::Replay replay;
  std::string label() const { return optimizer.empty() ? strategy : strategy + "/" + optimizer; }
};

struct ReplayResults {
  training::ReplayMode mode;
  std::vector<std::string> optimizers;  // empty: the trace names none
  std::vector<ReplayLane> lanes;        // strategy-major, each strategy's optimizers in order
};

// A scale in its shortest round-trip decimal form ("65536", "0.5"); "?" if it cannot be written.
std::string scale_text(double v);
// The first line of a replay's or a check's text: where the found_inf-driven strategies' overflow came from.
std::string overflow_source_line(const training::ReplayMode& mode);

// Written to `os` as they are made, not built whole: a trace of millions of steps prints hundreds of megabytes.
void write_replay_text(std::ostream& os, const ReplayResults& results);
// The JSON document, as nlohmann::json's dump(2) of it would print it.
void write_replay_json(std::ostream& os, const ReplayResults& results);
// log2 scale per step, one polyline per lane, the skipped steps marked.
std::string replay_svg(const ReplayResults& results);

}  // namespace mpverify::cli
