// One recorded trace fed to a strategy: the trace format is in
// training/loss_scaler.h. Used by `mpverify replay-scalers`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "training/loss_scaler.h"

namespace mpverify::training {

// A malformed trace: the message starts with "line N: ".
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How a recorded scale was printed, so that a check compares like with like.
enum class ScalePrecision {
  exact,         // the value itself (CSV, JSON lines, FP16_Optimizer's float)
  one_decimal,   // Megatron's `loss scale: {:.1f}`
  integer_part,  // DeepSpeed's DynamicLossScaler logs int(cur_scale)
};

struct TraceStep {
  int line = 0;      // in the file, from 1
  double value = 0;  // a bare line: 0/1 for found_inf, or an amax (>= 0, inf or nan)
  // A bare line's value is read by the strategy's drive; a step read from
  // named columns (bare = false) holds only what its columns say.
  bool bare = true;
  std::optional<double> found_inf{};  // 0 or 1
  std::optional<double> amax{};
  std::optional<double> scale{};  // the scale the step ran with, as recorded
  ScalePrecision scale_precision = ScalePrecision::exact;
  std::optional<std::int64_t> step{};  // the step number the trace gives
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
// than 0 or 1, or a step without the column its drive reads; `name` is the
// strategy's, for that message.
Replay replay(Scaler& scaler, std::span<const TraceStep> trace, const std::string& name);

// A recorded scale trajectory held against a strategy's rule: the first step
// whose recorded scale differs from the scale the rule runs it with (compared
// at the precision the trace printed it with), or where the rule aborts the
// run while the trace goes on.
struct CheckResult {
  std::size_t steps = 0;           // replayed
  std::size_t steps_compared = 0;  // with a recorded scale
  struct Difference {
    std::size_t index = 0;  // in the trace, from 0
    TraceStep recorded;
    double expected = 0;
    bool aborted = false;  // the rule stops the run at this step
  };
  std::optional<Difference> first_difference;
};
// Throws TraceError as replay() does, and when no step records a scale.
CheckResult check_trace(Scaler& scaler, std::span<const TraceStep> trace, const std::string& name);

}  // namespace mpverify::training
