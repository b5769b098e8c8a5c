// One recorded trace fed to a strategy: the trace format is in
// training/loss_scaler.h. Used by `mpverify replay-scalers`.
#pragma once

#include <cstddef>
#include <istream>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "training/loss_scaler.h"

namespace mpverify::training {

// A malformed trace: the message starts with "line N: ".
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TraceStep {
  int line = 0;      // in the file, from 1
  double value = 0;  // 0/1 for found_inf, or an amax (>= 0, inf or nan)
};

// Throws TraceError for a line that is not a number >= 0, inf or nan.
std::vector<TraceStep> parse_trace(std::istream& in);

struct ReplayStep {
  std::size_t step = 0;
  double scale = 0;  // the scale the step ran with
  bool skipped = false;
  bool aborted = false;
};

struct Replay {
  std::vector<ReplayStep> steps;  // ends at the aborting step, if any
  std::size_t skipped_steps = 0;
  std::size_t steps_at_min = 0;  // steps run at the strategy's floor (0 where it has none)
  double final_scale = 0;        // what a next step would run with
  std::optional<std::size_t> aborted_at;
};

// Throws TraceError when a found_inf-driven strategy meets a value other
// than 0 or 1; `name` is the strategy's, for that message.
Replay replay(Scaler& scaler, std::span<const TraceStep> trace, const std::string& name);

}  // namespace mpverify::training
