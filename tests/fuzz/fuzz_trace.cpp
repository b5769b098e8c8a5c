// Scaler traces and logs (training::read_trace: bare lines, CSV, JSON lines, DeepSpeed and Megatron logs,
// and the format detection) and what replay-scalers does with a trace: replay it under a strategy and
// check its recorded scales (training::replay, training::check_trace).
// Input: the first byte picks the format (auto, lines, csv, jsonl, deepspeed, megatron) and the
// strategy; the rest is the trace's text.
#include <cstddef>
#include <cstdint>
#include <sstream>

#include "fuzz_support.h"
#include "training/loss_scaler.h"
#include "training/scaler_replay.h"
#include "training/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  if (size == 0) return 0;
  using training::TraceFormat;
  constexpr TraceFormat formats[] = {TraceFormat::automatic, TraceFormat::lines,     TraceFormat::csv,
                                     TraceFormat::jsonl,     TraceFormat::deepspeed, TraceFormat::megatron};
  const TraceFormat format = formats[data[0] % 6];
  std::istringstream in(std::string(fuzz::text_of(data + 1, size - 1)));
  training::ReadTrace trace;
  try {
    trace = training::read_trace(in, format);
  } catch (const training::TraceError&) {
    return 0;
  }
  const std::vector<std::string> names = training::scaler_names();
  const std::string& name = names[(data[0] / 6) % names.size()];
  training::ScalerOptions options;
  if (name == "static") options["scale"] = "128";  // the one strategy without a default
  try {
    auto scaler = training::make_scaler(name, options);
    (void)training::replay(*scaler, trace.steps, name);
    auto fresh = training::make_scaler(name, options);
    (void)training::check_trace(*fresh, trace.steps, name);
  } catch (const training::TraceError&) {
  }
  return 0;
}
