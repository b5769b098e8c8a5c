// mpverify replay-scalers --trace FILE (--strategies A,B,... | --check S) [--log-format F]
//                         [--strategy-opt S.KEY=V]... [--config FILE.json] [--json]
// One recorded trace (found_inf flags or amax values; the formats are in
// training/trace_reader.h) fed to several loss-scale strategies, their scale
// trajectories and skipped steps side by side; or one strategy's rule held
// against the scales the trace recorded.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/json_value.h"
#include "io/json_text.h"
#include "training/loss_scaler.h"
#include "training/scaler_replay.h"
#include "training/trace_reader.h"

namespace mpverify::cli {

namespace {

using training::Replay;

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  std::stringstream ss(text);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name.empty()) continue;
    if (std::find(names.begin(), names.end(), name) != names.end())
      throw UsageError("--strategies: '" + name + "' named twice");
    names.push_back(name);
  }
  if (names.empty()) throw UsageError("--strategies: name at least one strategy");
  return names;
}

// {"deepspeed": {"hysteresis": 2, "consecutive_hysteresis": true}, ...}
std::map<std::string, training::ScalerOptions> read_config(const std::string& path) {
  nlohmann::json j;
  try {
    j = io::read_json_file(path);
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("--config: ") + e.what());
  }
  if (!j.is_object()) throw UsageError("--config: expected an object of strategies, each an object of keys");
  std::map<std::string, training::ScalerOptions> options;
  for (const auto& [strategy, keys] : j.items()) {
    if (!keys.is_object()) throw UsageError("--config: '" + strategy + "' must map to an object of keys");
    for (const auto& [key, value] : keys.items())
      options[strategy][key] = value.is_string() ? value.get<std::string>() : value.dump();
  }
  return options;
}

std::string scale_text(double v) {
  char text[64];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return ec == std::errc() ? std::string(text, end) : std::string("?");
}

void print_text(const std::vector<std::string>& names, const std::vector<Replay>& replays, std::size_t steps) {
  // A cell: the scale used, " S" when skipped, " ABORT" at the abort.
  auto cell = [&](std::size_t s, std::size_t k) -> std::string {
    if (k >= replays[s].steps.size()) return "";
    const auto& r = replays[s].steps[k];
    return scale_text(r.scale) + (r.aborted ? " ABORT" : r.skipped ? " S" : "");
  };
  std::vector<std::size_t> width(names.size());
  for (std::size_t s = 0; s < names.size(); ++s) {
    width[s] = std::max<std::size_t>(names[s].size(), 8);
    for (std::size_t k = 0; k < replays[s].steps.size(); ++k) width[s] = std::max(width[s], cell(s, k).size());
  }
  std::string out;
  auto pad = [](const std::string& text, std::size_t w) {
    return text + std::string(w - std::min(w, text.size()), ' ');
  };
  out += pad("step", 7);
  for (std::size_t s = 0; s < names.size(); ++s) out += "  " + pad(names[s], width[s]);
  auto end_line = [&out] {
    while (out.ends_with(' ')) out.pop_back();
    out += "\n";
  };
  end_line();
  for (std::size_t k = 0; k < steps; ++k) {
    out += pad(std::to_string(k), 7);
    for (std::size_t s = 0; s < names.size(); ++s) out += "  " + pad(cell(s, k), width[s]);
    end_line();
  }
  out += "\nsummary (S = skipped; scale = the scale the step ran with)\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-12s %13s %13s  %-24s %s\n", "strategy", "skipped_steps", "steps_at_min",
                "final_scale", "aborted_at_step");
  out += line;
  for (std::size_t s = 0; s < names.size(); ++s) {
    const Replay& r = replays[s];
    std::snprintf(line, sizeof line, "%-12s %13zu %13zu  %-24s %s\n", names[s].c_str(), r.skipped_steps,
                  r.steps_at_min, scale_text(r.final_scale).c_str(),
                  r.aborted_at ? std::to_string(*r.aborted_at).c_str() : "-");
    out += line;
  }
  std::cout << out;
}

void print_json(const std::vector<std::string>& names, const std::vector<Replay>& replays) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object(), summary = nlohmann::ordered_json::object();
  for (std::size_t s = 0; s < names.size(); ++s) {
    const Replay& r = replays[s];
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const auto& step : r.steps) {
      nlohmann::ordered_json j{{"step", step.step}, {"scale", json_number(step.scale)}, {"skipped", step.skipped}};
      if (step.aborted) j["aborted"] = true;
      steps.push_back(std::move(j));
    }
    out[names[s]] = std::move(steps);
    summary[names[s]] = {{"skipped_steps", r.skipped_steps},
                         {"steps_at_min", r.steps_at_min},
                         {"final_scale", json_number(r.final_scale)},
                         {"aborted_at_step", r.aborted_at ? nlohmann::ordered_json(*r.aborted_at) : nullptr}};
  }
  out["summary"] = std::move(summary);
  std::cout << out.dump(2) << "\n";
}

// Exit status when some strategy stopped the run; the full output is printed.
constexpr int kExitAborted = 3;

struct ReplayOptions {
  std::string trace, strategies, config, check, log_format = "auto";
  std::vector<std::string> strategy_opts;
  bool json = false;
};

// --config, then --strategy-opt, each key refused unless its strategy is named.
std::map<std::string, training::ScalerOptions> strategy_options(const ReplayOptions& o,
                                                                const std::vector<std::string>& names) {
  std::map<std::string, training::ScalerOptions> options;
  if (!o.config.empty()) options = read_config(o.config);
  for (const auto& text : o.strategy_opts) {
    try {
      const training::ScalerOption opt = training::parse_scaler_option(text);
      options[opt.strategy][opt.key] = opt.value;
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--strategy-opt: ") + e.what());
    }
  }
  for (const auto& [strategy, keys] : options)
    if (std::find(names.begin(), names.end(), strategy) == names.end())
      throw UsageError("options given for '" + strategy + "', which " +
                       (o.check.empty() ? "--strategies" : "--check") + " does not name");
  return options;
}

std::vector<std::unique_ptr<training::Scaler>> make_scalers(
    const std::vector<std::string>& names, const std::map<std::string, training::ScalerOptions>& options) {
  std::vector<std::unique_ptr<training::Scaler>> scalers;
  for (const auto& name : names) {
    try {
      const auto it = options.find(name);
      scalers.push_back(training::make_scaler(name, it == options.end() ? training::ScalerOptions{} : it->second));
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  return scalers;
}

training::ReadTrace read_trace(const ReplayOptions& o) {
  const auto format = training::parse_trace_format(o.log_format);
  if (!format) {
    std::string known;
    for (const auto& n : training::trace_format_names()) known += (known.empty() ? "" : ", ") + n;
    throw UsageError("--log-format: unknown format '" + o.log_format + "' (formats: " + known + ")");
  }
  training::ReadTrace t;
  try {
    t = training::read_trace_path(o.trace, *format);
  } catch (const training::TraceError& e) {
    throw UsageError("--trace " + o.trace + ": " + e.what());
  }
  if (t.steps.empty())
    throw UsageError("--trace " + o.trace + " (" + training::trace_format_name(t.format) +
                     "): no steps (every line blank or a comment, or no line of the format); a trace has one step "
                     "per line, a found_inf flag (0 or 1) or an amax, or named columns (see --log-format)");
  return t;
}

std::string step_name(const training::TraceStep& t, std::size_t index) {
  std::string s = "step " + (t.step ? std::to_string(*t.step) : std::to_string(index));
  return s + " (line " + std::to_string(t.line) + ")";
}

// --check: exit 1 at the first step whose recorded scale the rule does not give.
int run_check(const std::string& name, training::Scaler& scaler, const training::ReadTrace& trace,
              const ReplayOptions& o) {
  training::CheckResult c;
  try {
    c = training::check_trace(scaler, trace.steps, name);
  } catch (const training::TraceError& e) {
    throw UsageError("--trace " + o.trace + ": " + e.what());
  }
  const auto& d = c.first_difference;
  if (o.json) {
    nlohmann::ordered_json j{{"check", name},
                             {"format", training::trace_format_name(trace.format)},
                             {"steps", c.steps},
                             {"steps_compared", c.steps_compared},
                             {"agrees", !d.has_value()}};
    if (d) {
      j["first_difference"] = {{"index", d->index},
                               {"step", d->recorded.step ? nlohmann::ordered_json(*d->recorded.step)
                                                         : nlohmann::ordered_json(d->index)},
                               {"line", d->recorded.line},
                               {"recorded_scale", d->recorded.scale ? json_number(*d->recorded.scale) : nullptr},
                               {"rule_scale", json_number(d->expected)},
                               {"rule_aborts", d->aborted}};
    } else {
      j["first_difference"] = nullptr;
    }
    std::cout << j.dump(2) << "\n";
  } else if (!d) {
    std::cout << name << ": the recorded scales follow the rule (" << c.steps_compared << " of " << c.steps
              << " steps record a scale; all agree)\n";
  } else if (d->aborted) {
    std::cout << name << ": differs at " << step_name(d->recorded, d->index)
              << ": the rule stops the run here (its abort), and the trace goes on\n";
  } else {
    std::cout << name << ": differs at " << step_name(d->recorded, d->index) << ": recorded scale "
              << scale_text(*d->recorded.scale) << ", the rule runs the step with " << scale_text(d->expected) << "\n";
  }
  return d ? 1 : 0;
}

int run(const ReplayOptions& o) {
  if (o.check.empty() == o.strategies.empty())
    throw UsageError(o.check.empty() ? "name the strategies to replay (--strategies A,B) or one to check (--check S)"
                                     : "--check holds one strategy against the trace: give it without --strategies");
  const std::vector<std::string> names = o.check.empty() ? split_names(o.strategies) : std::vector{o.check};
  const auto options = strategy_options(o, names);
  auto scalers = make_scalers(names, options);

  // Everything is read and replayed before anything is printed, so a
  // malformed line leaves standard output empty.
  const training::ReadTrace trace = read_trace(o);
  if (!o.check.empty()) return run_check(names[0], *scalers[0], trace, o);
  std::vector<Replay> replays;
  try {
    for (std::size_t s = 0; s < names.size(); ++s)
      replays.push_back(training::replay(*scalers[s], trace.steps, names[s]));
  } catch (const training::TraceError& e) {
    throw UsageError("--trace " + o.trace + ": " + e.what());
  }
  if (o.json)
    print_json(names, replays);
  else
    print_text(names, replays, trace.steps.size());
  // A run the framework would have stopped (DeepSpeed's raise at the minimum,
  // fairseq's FloatingPointError) is not a clean replay: scripts see it.
  const bool aborted = std::any_of(replays.begin(), replays.end(), [](const Replay& r) { return r.aborted_at; });
  return aborted ? kExitAborted : 0;
}

}  // namespace

void add_replay_scalers_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<ReplayOptions>();
  std::string known;
  for (const auto& n : training::scaler_names()) known += (known.empty() ? "" : ", ") + n;
  std::string formats;
  for (const auto& n : training::trace_format_names()) formats += (formats.empty() ? "" : ", ") + n;
  auto* app = root.add_subcommand(
      "replay-scalers",
      "Feed one recorded trace to several loss-scale strategies and print, per step, the scale each ran with\n"
      "and whether it skipped the step, then a summary (exit 3 when a strategy aborts the run: DeepSpeed's\n"
      "raise at the minimum, fairseq's FloatingPointError); or (--check) hold a recorded scale trajectory\n"
      "against one strategy's rule: exit 1 naming the first step where they differ, 0 when they agree.\n"
      "Trace: one step per line, 0/1 (found_inf) or an amax (a number >= 0, inf, nan) for delayed, current\n"
      "and mxfp8; blank lines and # comments are ignored. Or CSV / JSON lines with the columns step, found_inf,\n"
      "scale, amax; DeepSpeed's log (steps_per_print=1); Megatron's log (--log-interval 1); a Monitor run\n"
      "directory (its steps.jsonl). The format is detected unless --log-format names it.\n"
      "apex is legacy (Apex's amp was removed upstream); deepspeed.optimizer=fp16 is FP16_Optimizer (no ZeRO),\n"
      "zero (the default) DynamicLossScaler; delayed.kernel=bulk (the default, PyTorch's) or per-tensor.\n"
      "Example: mpverify replay-scalers --trace flags.txt --strategies torch,deepspeed,megatron "
      "--strategy-opt deepspeed.consecutive_hysteresis=true\n"
      "Example: mpverify replay-scalers --trace train.log --check megatron --strategy-opt megatron.init=2^16");
  app->add_option("--trace", o->trace, "Trace file, a run directory, or - for standard input")->required();
  app->add_option("--strategies", o->strategies, "Comma-separated, of: " + known);
  app->add_option("--check", o->check, "One strategy whose rule the trace's recorded scales must follow");
  app->add_option("--log-format", o->log_format, "The trace's format: " + formats + " (default auto: detected)");
  app->add_option("--strategy-opt", o->strategy_opts,
                  "STRATEGY.KEY=VALUE, repeatable (e.g. deepspeed.hysteresis=2, torch.init=2^16); overrides --config");
  app->add_option("--config", o->config, R"(JSON file: {"STRATEGY": {"KEY": VALUE, ...}, ...})");
  app->add_flag("--json", o->json, "Print JSON: each strategy's steps and a summary, or the check's verdict");

  commands.push_back({app, [o] { return run(*o); }});
}

}  // namespace mpverify::cli
