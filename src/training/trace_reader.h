// Recorded runs read as replay traces (training/scaler_replay.h): bare lines,
// CSV or JSON lines with named columns, DeepSpeed's and Megatron's logs, and
// a Monitor (or `mpverify train`) run directory. Used by
// `mpverify replay-scalers --trace`.
//
// format     what it reads
// ---------  -----------------------------------------------------------------
// lines      one step per line: 0/1 (found_inf) or an amax; `#` comments
// csv        a header line naming the columns step, found_inf, scale, amax,
//            amin (the smallest nonzero |x|), optimizer (a name: several rows
//            per step, one per optimizer or loss); others are ignored;
//            found_inf is 0/1/true/false; an empty cell is unknown
// jsonl      one object per line with the same keys (found_inf a boolean or
//            0/1); a Monitor's steps.jsonl is this
// deepspeed  DeepSpeed's log: the engine's progress lines `step=N, skipped=K`
//            (steps_per_print=1, one per step) and its overflow lines
//            `Attempted loss scale: X, ...` (the scale the overflowing step
//            ran with; DynamicLossScaler prints int(X)). Clean steps record
//            no scale.
// megatron   Megatron-LM's iteration lines (`iteration N/ M | ... loss scale:
//            X | ... number of skipped iterations: K |`, --log-interval 1):
//            X is the scale after iteration N, so the one iteration N + 1 ran
//            with; printed with one decimal
// monitor    a run directory: its steps.jsonl (step, scale, found_inf, ...)
#pragma once

#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "training/scaler_replay.h"

namespace mpverify::training {

enum class TraceFormat { automatic, lines, csv, jsonl, deepspeed, megatron, monitor };

// auto, lines, csv, jsonl, deepspeed, megatron, monitor.
std::vector<std::string> trace_format_names();
// nullopt for an unknown name.
std::optional<TraceFormat> parse_trace_format(std::string_view name);
std::string trace_format_name(TraceFormat format);

struct ReadTrace {
  TraceFormat format = TraceFormat::lines;  // the one read (detected for automatic)
  std::vector<TraceStep> steps;
};

// The text's format when `format` is automatic: JSON lines when the first
// line that is not blank or a comment opens an object, Megatron or DeepSpeed
// when a line carries their fields, CSV when the first line is a header with
// a known column, else bare lines.
TraceFormat detect_trace_format(std::string_view text);

// Throws TraceError ("line N: ...") for a malformed line, a log without
// per-step lines, or columns that give no found_inf, scale or amax.
ReadTrace read_trace(std::istream& in, TraceFormat format = TraceFormat::automatic);

// A file, `-` for standard input, or a run directory (its steps.jsonl).
// Throws TraceError naming the path when it cannot be read.
ReadTrace read_trace_path(const std::string& path, TraceFormat format = TraceFormat::automatic);

}  // namespace mpverify::training
