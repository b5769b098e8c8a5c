// One recorded trace fed to a strategy: the trace format is in
// training/loss_scaler.h. Used by `mpverify replay-scalers`.
//
// Where a found_inf-driven strategy's overflow comes from (ReplayMode):
// `found_inf` reads the recorded flag; `amax` decides it from the step's
// unscaled gradient amax at the strategy's own current scale: the step
// overflows when amax × scale, rounded to the gradient format (fp16 or bf16),
// overflows it (training/scaled_range.h), and a recorded inf or NaN amax
// overflows at any scale. So strategies whose scales differ skip different
// steps. The amax-driven (FP8) strategies count the steps whose amax × scale
// overflows their FP8 format or rounds to zero there (the whole tensor
// flushes), and, from an `amin` column (the smallest nonzero |x|), the steps
// where some nonzero element flushes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "formats/format.h"
#include "training/loss_scaler.h"

namespace mpverify::training {

// A malformed trace: the message starts with "line N: ".
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How a recorded scale was printed, so that a check compares like with like.
enum class ScalePrecision : std::uint8_t {
  exact,         // the value itself (CSV, JSON lines, FP16_Optimizer's float)
  one_decimal,   // Megatron's `loss scale: {:.1f}`
  integer_part,  // DeepSpeed's DynamicLossScaler logs int(cur_scale)
};

// A trace holds one of these a step (a replay holds the whole trace), so the two small fields sit at the end,
// where they share one word. `line` and `value` stay first: callers write {line, value} for a bare step.
struct TraceStep {
  int line = 0;      // in the file, from 1
  double value = 0;  // a bare line: 0/1 for found_inf, or an amax (>= 0, inf or nan)
  std::optional<double> found_inf{};  // 0 or 1
  std::optional<double> amax{};
  std::optional<double> amin{};  // the smallest nonzero |x| of the tensor, if recorded
  std::optional<double> scale{};  // the scale the step ran with, as recorded
  std::optional<std::int64_t> step{};  // the step number the trace gives
  std::optional<std::string> optimizer{};  // which optimizer (or loss) the row is of
  ScalePrecision scale_precision = ScalePrecision::exact;
  // A bare line's value is read by the strategy's drive; a step read from
  // named columns (bare = false) holds only what its columns say.
  bool bare = true;
};

// Throws TraceError for a line that is not a number >= 0, inf or nan.
std::vector<TraceStep> parse_trace(std::istream& in);
std::vector<TraceStep> parse_trace_text(std::string_view text);

enum class OverflowSource { found_inf, amax };
enum class GradFormat { fp16, bf16 };

// fp16, bf16 (nullopt for another name), and back.
std::optional<GradFormat> parse_grad_format(std::string_view name);
std::string grad_format_name(GradFormat format);
const formats::Format& grad_format(GradFormat format);
// The FP8 format an amax-driven strategy scales into (fp8-e4m3 or fp8-e5m2, from its fp8_max).
const formats::Format& fp8_format(const AmaxScaler& scaler);

struct ReplayMode {
  OverflowSource overflow_from = OverflowSource::found_inf;  // for the found_inf-driven strategies
  GradFormat grad_format = GradFormat::fp16;
};

// amax when some step carries an amax from a named column (CSV, JSON lines,
// a run directory), else found_inf: bare lines are flags.
OverflowSource default_overflow_source(std::span<const TraceStep> trace);

struct ReplayStep {
  std::size_t step = 0;
  double scale = 0;  // the scale the step ran with
  bool skipped = false;
  bool aborted = false;
  std::optional<std::int64_t> trace_step{};  // the step number the trace gives
  bool overflow = false;  // found_inf (recorded, or decided from the amax), or the FP8 overflow
  // Decided from the amax / amin (absent where the step has none):
  std::optional<bool> flushed{};    // amax × scale rounds to zero: every element flushes
  std::optional<bool> underflow{};  // amin × scale rounds to zero: some nonzero element flushes
};

struct Replay {
  std::vector<ReplayStep> steps;  // ends at the aborting step, if any
  std::size_t skipped_steps = 0;
  std::size_t steps_at_min = 0;  // steps run at the strategy's floor (0 where it has none)
  double final_scale = 0;        // what a next step would run with
  std::optional<std::size_t> aborted_at;
  // found_inf-driven: the steps that overflowed (recorded found_inf, or
  // decided from the amax). amax-driven: the steps whose amax × scale
  // overflows the FP8 format.
  std::size_t overflow_steps = 0;
  std::optional<std::size_t> flush_steps;      // counted where the steps carry an amax
  std::optional<std::size_t> underflow_steps;  // counted where the steps carry an amin
  std::string range_format;  // the format overflow and flushes are judged in; empty: recorded flags
};

// Throws TraceError when a found_inf-driven strategy meets a value other
// than 0 or 1, or a step without the column its drive reads; `name` is the
// strategy's, for that message.
Replay replay(Scaler& scaler, std::span<const TraceStep> trace, const std::string& name, const ReplayMode& mode = {});

// The rows of each optimizer, in the order the names first appear (one group
// named "" when no row names one). Throws TraceError for a row without a name
// in a trace where others have one.
std::vector<std::pair<std::string, std::vector<TraceStep>>> split_by_optimizer(std::span<const TraceStep> trace);
// The same, taking the steps over (moved, not copied).
std::vector<std::pair<std::string, std::vector<TraceStep>>> split_by_optimizer(std::vector<TraceStep>&& trace);

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
CheckResult check_trace(Scaler& scaler, std::span<const TraceStep> trace, const std::string& name,
                        const ReplayMode& mode = {});

}  // namespace mpverify::training
