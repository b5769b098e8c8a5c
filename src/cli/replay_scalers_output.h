// What `mpverify replay-scalers` prints and draws for a replay: the per-step
// table and summary (text), the JSON, and the SVG of the scales (--plot).
#pragma once

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

std::string replay_text(const ReplayResults& results);
std::string replay_json(const ReplayResults& results);
// log2 scale per step, one polyline per lane, the skipped steps marked.
std::string replay_svg(const ReplayResults& results);

}  // namespace mpverify::cli
