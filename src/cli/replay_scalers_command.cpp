// mpverify replay-scalers --trace FILE (--strategies A,B,... | --check S) [--log-format F]
//                         [--strategy-opt S.KEY=V]... [--config FILE.json] [--json]
//                         [--overflow-from auto|amax|found_inf] [--grad-format fp16|bf16]
//                         [--optimizer NAME] [--initial-state FILE.json] [--plot FILE.svg]
// One recorded trace (found_inf flags or amax values; the formats are in
// training/trace_reader.h) fed to several loss-scale strategies, their scale
// trajectories and skipped steps side by side; or one strategy's rule held
// against the scales the trace recorded.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/json_value.h"
#include "cli/replay_scalers_output.h"
#include "io/json_text.h"
#include "report/output_files.h"
#include "training/loss_scaler.h"
#include "training/scaler_replay.h"
#include "training/scaler_state.h"
#include "training/trace_reader.h"

namespace mpverify::cli {

namespace {

using training::Replay;

// A lane's name: a strategy, or a strategy with its own settings, STRATEGY@KEY=VALUE[@KEY=VALUE...]
// (torch@init=2^20), so that two settings of one strategy replay side by side.
std::string base_strategy(const std::string& name) { return name.substr(0, name.find('@')); }

// The settings a lane's name carries (none for a bare strategy).
training::ScalerOptions own_settings(const std::string& name) {
  training::ScalerOptions own;
  for (std::size_t at = name.find('@'); at != std::string::npos;) {
    const std::size_t next = name.find('@', at + 1);
    const std::string setting = name.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    const std::size_t eq = setting.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == setting.size())
      throw UsageError("'" + name + "': '" + setting + "' is not KEY=VALUE (a strategy's own settings are "
                       "STRATEGY@KEY=VALUE[@KEY=VALUE...], e.g. torch@init=2^20)");
    if (!own.emplace(setting.substr(0, eq), setting.substr(eq + 1)).second)
      throw UsageError("'" + name + "' sets " + setting.substr(0, eq) + " twice");
    at = next;
  }
  return own;
}

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  std::stringstream ss(text);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name.empty()) continue;
    if (std::find(names.begin(), names.end(), name) != names.end())
      throw UsageError("--strategies: '" + name + "' named twice; to replay two settings of one strategy side by "
                       "side, give each its own: " + base_strategy(name) + "@KEY=VALUE (e.g. torch,torch@init=2^20)");
    own_settings(name);  // refuses a malformed setting before anything is read
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

// Exit status when some strategy stopped the run; the full output is printed.
constexpr int kExitAborted = 3;

struct ReplayOptions {
  std::string trace, strategies, config, check, log_format = "auto";
  std::vector<std::string> strategy_opts;
  bool json = false;
  std::string grad_format = "fp16", overflow_from = "auto", optimizer, initial_state, plot;
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
    if (std::none_of(names.begin(), names.end(), [&](const std::string& n) { return base_strategy(n) == strategy; }))
      throw UsageError("options given for '" + strategy + "', which " +
                       (o.check.empty() ? "--strategies" : "--check") + " does not name");
  return options;
}

// A lane's options: its strategy's (--config, --strategy-opt), then the settings its name carries over them.
training::ScalerOptions lane_options(const std::string& name,
                                     const std::map<std::string, training::ScalerOptions>& options) {
  const auto it = options.find(base_strategy(name));
  training::ScalerOptions keys = it == options.end() ? training::ScalerOptions{} : it->second;
  for (const auto& [key, value] : own_settings(name)) keys[key] = value;
  return keys;
}

std::vector<std::unique_ptr<training::Scaler>> make_scalers(
    const std::vector<std::string>& names, const std::map<std::string, training::ScalerOptions>& options) {
  std::vector<std::unique_ptr<training::Scaler>> scalers;
  for (const auto& name : names) {
    try {
      scalers.push_back(training::make_scaler(base_strategy(name), lane_options(name, options)));
    } catch (const std::invalid_argument& e) {
      throw UsageError(name == base_strategy(name) ? std::string(e.what()) : "'" + name + "': " + e.what());
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
              const ReplayOptions& o, const training::ReplayMode& mode) {
  training::CheckResult c;
  try {
    c = training::check_trace(scaler, trace.steps, name, mode);
  } catch (const training::TraceError& e) {
    throw UsageError("--trace " + o.trace + ": " + e.what());
  }
  const auto& d = c.first_difference;
  if (o.json) {
    nlohmann::ordered_json j{{"check", name},
                             {"format", training::trace_format_name(trace.format)},
                             {"steps", c.steps},
                             {"steps_compared", c.steps_compared},
                             {"overflow_from", mode.overflow_from == training::OverflowSource::amax ? "amax" : "found_inf"},
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
    std::cout << overflow_source_line(mode) << name << ": the recorded scales follow the rule (" << c.steps_compared
              << " of " << c.steps << " steps record a scale; all agree)\n";
  } else if (d->aborted) {
    std::cout << overflow_source_line(mode) << name << ": differs at " << step_name(d->recorded, d->index)
              << ": the rule stops the run here (its abort), and the trace goes on\n";
  } else {
    std::cout << overflow_source_line(mode) << name << ": differs at " << step_name(d->recorded, d->index) << ": recorded scale "
              << scale_text(*d->recorded.scale) << ", the rule runs the step with " << scale_text(d->expected) << "\n";
  }
  return d ? 1 : 0;
}

// --overflow-from and --grad-format. auto reads amax when the trace has an amax column, except under --check
// when it also recorded found_inf: a check asks whether the run's own scales follow the rule, and the run
// decided its overflows itself (its bias and LayerNorm gradients may be fp32, which an amax cannot tell).
training::ReplayMode replay_mode(const ReplayOptions& o, const training::ReadTrace& trace) {
  training::ReplayMode mode;
  const auto format = training::parse_grad_format(o.grad_format);
  if (!format) throw UsageError("--grad-format: '" + o.grad_format + "' is not a gradient format (fp16, bf16)");
  mode.grad_format = *format;
  const bool recorded_found_inf = std::any_of(trace.steps.begin(), trace.steps.end(),
                                              [](const training::TraceStep& t) { return t.found_inf.has_value(); });
  if (o.overflow_from == "auto" && !o.check.empty() && recorded_found_inf)
    mode.overflow_from = training::OverflowSource::found_inf;
  else if (o.overflow_from == "auto") mode.overflow_from = training::default_overflow_source(trace.steps);
  else if (o.overflow_from == "amax") mode.overflow_from = training::OverflowSource::amax;
  else if (o.overflow_from == "found_inf") mode.overflow_from = training::OverflowSource::found_inf;
  else throw UsageError("--overflow-from: '" + o.overflow_from + "' is not auto, amax or found_inf");
  return mode;
}

// The trace's rows per optimizer; with --optimizer, only that one's.
std::vector<std::pair<std::string, std::vector<training::TraceStep>>> optimizer_groups(
    const ReplayOptions& o, training::ReadTrace& trace) {
  auto groups = training::split_by_optimizer(std::move(trace.steps));  // the trace's steps move into the groups
  std::string known;
  for (const auto& g : groups) known += (known.empty() ? "" : ", ") + g.first;
  if (!o.optimizer.empty()) {
    const auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == o.optimizer; });
    if (it == groups.end() || it->first.empty())
      throw UsageError("--optimizer " + o.optimizer + ": the trace has no rows of it (" +
                       (groups.front().first.empty() ? std::string("it has no optimizer column")
                                                      : "its optimizers: " + known) + ")");
    std::vector<std::pair<std::string, std::vector<training::TraceStep>>> one;
    one.push_back(std::move(*it));  // moved: an initializer list would copy the steps
    return one;
  }
  if (!o.check.empty() && groups.size() > 1)
    throw UsageError("--check holds one scale trajectory against a rule, and the trace has " +
                     std::to_string(groups.size()) + " optimizers (" + known + "): name one with --optimizer");
  return groups;
}

// --initial-state: {"torch": {...state_dict...}, "torch/D": {...}, ...}; a key
// "STRATEGY/OPTIMIZER" is that optimizer's, "STRATEGY" every optimizer's. With one strategy replayed, the
// saved state itself (torch's GradScaler.state_dict() as JSON, no key naming a strategy) is that one's.
nlohmann::json read_states(const ReplayOptions& o, const std::vector<std::string>& names) {
  if (o.initial_state.empty()) return nlohmann::json::object();
  nlohmann::json j;
  try {
    j = io::read_json_file(o.initial_state);
  } catch (const std::runtime_error& e) {
    throw UsageError("--initial-state: " + std::string(e.what()));
  }
  if (!j.is_object())
    throw UsageError("--initial-state " + o.initial_state +
                     ": expected an object of saved states, e.g. {\"torch\": {\"scale\": 65536, \"_growth_tracker\": 3}}");
  auto replayed = [&](const std::string& strategy) {
    return std::any_of(names.begin(), names.end(),
                       [&](const std::string& n) { return n == strategy || base_strategy(n) == strategy; });
  };
  const bool names_a_strategy = std::any_of(j.items().begin(), j.items().end(), [&](const auto& item) {
    return replayed(item.key().substr(0, item.key().find('/')));
  });
  if (names.size() == 1 && !names_a_strategy && !j.empty()) return nlohmann::json{{names.front(), j}};
  for (const auto& [key, state] : j.items()) {
    const std::string strategy = key.substr(0, key.find('/'));
    if (!replayed(strategy))
      throw UsageError("--initial-state " + o.initial_state + ": a state for '" + key + "', and '" + strategy +
                       "' is not replayed (its key is STRATEGY or STRATEGY/OPTIMIZER; a lane named with its "
                       "settings, STRATEGY@KEY=VALUE, by that name or its strategy's)");
  }
  return j;
}

// One lane's instance for one optimizer: from its saved state, if the file gives one (keyed by the lane's
// name, else its strategy's; with /OPTIMIZER for that optimizer's alone).
std::unique_ptr<training::Scaler> lane_scaler(const std::string& name, const std::string& optimizer,
                                              const std::map<std::string, training::ScalerOptions>& options,
                                              const nlohmann::json& states) {
  const training::ScalerOptions keys = lane_options(name, options);
  const std::string base = base_strategy(name);
  const nlohmann::json* state = nullptr;
  for (const std::string& key : {name + "/" + optimizer, name, base + "/" + optimizer, base})
    if (!state && (key.back() != '/') && states.contains(key)) state = &states[key];
  try {
    return state ? training::make_scaler_from_state(base, keys, *state) : training::make_scaler(base, keys);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string(state ? "--initial-state: " : "") + e.what());
  }
}

std::vector<ReplayLane> replay_lanes(const ReplayOptions& o, const std::vector<std::string>& names,
                                     const std::map<std::string, training::ScalerOptions>& options,
                                     const std::vector<std::pair<std::string, std::vector<training::TraceStep>>>& groups,
                                     const training::ReplayMode& mode) {
  const nlohmann::json states = read_states(o, names);
  std::vector<ReplayLane> lanes;
  for (const auto& name : names)
    for (const auto& [optimizer, steps] : groups) {
      // One independent instance per optimizer: each keeps its own scale.
      auto scaler = lane_scaler(name, optimizer, options, states);
      try {
        lanes.push_back({name, optimizer, training::replay(*scaler, steps, name, mode)});
      } catch (const training::TraceError& e) {
        throw UsageError("--trace " + o.trace + ": " + e.what());
      }
    }
  return lanes;
}

// The SVG is written (atomically: a temporary file renamed) before anything is printed.
void write_plot(const std::string& path, const ReplayResults& results) {
  std::vector<std::filesystem::path> written;
  try {
    report::write_output(path, replay_svg(results), written);
  } catch (const std::exception& e) {
    throw UsageError("--plot " + path + ": cannot write it (" + e.what() + "); give a writable path");
  }
}

int run(const ReplayOptions& o) {
  if (o.check.empty() == o.strategies.empty())
    throw UsageError(o.check.empty() ? "name the strategies to replay (--strategies A,B) or one to check (--check S)"
                                     : "--check holds one strategy against the trace: give it without --strategies");
  if (!o.check.empty() && !o.plot.empty()) throw UsageError("--plot draws a replay: give it with --strategies");
  const std::vector<std::string> names = o.check.empty() ? split_names(o.strategies) : std::vector{o.check};
  const auto options = strategy_options(o, names);
  make_scalers(names, options);  // refuses bad keys before the trace is read

  // Everything is read and replayed before anything is printed, so a
  // malformed line leaves standard output empty.
  training::ReadTrace trace = read_trace(o);
  const training::ReplayMode mode = replay_mode(o, trace);
  std::vector<std::pair<std::string, std::vector<training::TraceStep>>> groups;
  try {
    groups = optimizer_groups(o, trace);
  } catch (const training::TraceError& e) {
    throw UsageError("--trace " + o.trace + ": " + e.what());
  }
  if (!o.check.empty()) {
    trace.steps = std::move(groups.front().second);
    auto scaler = lane_scaler(names[0], groups.front().first, options, read_states(o, names));
    return run_check(names[0], *scaler, trace, o, mode);
  }
  ReplayResults results;
  results.mode = mode;
  if (!groups.front().first.empty())
    for (const auto& g : groups) results.optimizers.push_back(g.first);
  results.lanes = replay_lanes(o, names, options, groups, mode);
  if (!o.plot.empty()) write_plot(o.plot, results);
  if (o.json) write_replay_json(std::cout, results);
  else write_replay_text(std::cout, results);
  // A run the framework would have stopped (DeepSpeed's raise at the minimum,
  // fairseq's FloatingPointError) is not a clean replay: scripts see it.
  const bool aborted =
      std::any_of(results.lanes.begin(), results.lanes.end(), [](const ReplayLane& l) { return l.replay.aborted_at; });
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
      "scale, amax, amin, optimizer; DeepSpeed's log (steps_per_print=1); Megatron's log (--log-interval 1);\n"
      "a Monitor run directory (its steps.jsonl). The format is detected unless --log-format names it.\n"
      "With an amax column (the unscaled gradient's max |x|) the fp16/bf16 strategies decide each step's\n"
      "overflow themselves: amax x their current scale rounded to fp16 (or bf16) overflows, or the amax is\n"
      "inf/nan; so they skip different steps. delayed, current and mxfp8 count the steps whose amax x scale\n"
      "overflows their FP8 format (E4M3 448, E5M2 57344) or rounds to 0 there (flushed: the whole tensor), and\n"
      "with an amin column (the smallest nonzero |x|) the steps where some element flushes (underflow).\n"
      "An optimizer column (several rows per step: a GAN's D and G, apex's per-loss scalers) replays one\n"
      "independent scaler per optimizer name; the outputs give each strategy/optimizer.\n"
      "apex is legacy (Apex's amp was removed upstream); deepspeed.optimizer=fp16 is FP16_Optimizer (no ZeRO),\n"
      "zero (the default) DynamicLossScaler; delayed.kernel=bulk (the default, PyTorch's) or per-tensor.\n"
      "Example: mpverify replay-scalers --trace flags.txt --strategies torch,deepspeed,megatron "
      "--strategy-opt deepspeed.consecutive_hysteresis=true\n"
      "Example: mpverify replay-scalers --trace train.log --check megatron --strategy-opt megatron.init=2^16");
  app->add_option("--trace", o->trace, "Trace file, a run directory, or - for standard input")->required();
  app->add_option("--strategies", o->strategies,
                  "Comma-separated, of: " + known + "; a strategy with its own settings, STRATEGY@KEY=VALUE"
                  "[@KEY=VALUE...], replays beside the same strategy with others (torch,torch@init=2^20)");
  app->add_option("--check", o->check, "One strategy whose rule the trace's recorded scales must follow");
  app->add_option("--log-format", o->log_format, "The trace's format: " + formats + " (default auto: detected)");
  app->add_option("--strategy-opt", o->strategy_opts,
                  "STRATEGY.KEY=VALUE, repeatable (e.g. deepspeed.hysteresis=2, torch.init=2^16); overrides --config");
  app->add_option("--config", o->config, R"(JSON file: {"STRATEGY": {"KEY": VALUE, ...}, ...})");
  app->add_flag("--json", o->json, "Print JSON: each strategy's steps and a summary, or the check's verdict");
  app->add_option("--overflow-from", o->overflow_from,
                  "Where the fp16/bf16 strategies' overflow comes from: amax (each step's unscaled gradient amax x "
                  "the strategy's own scale, rounded to --grad-format), found_inf (the recorded flag), or auto (the "
                  "default: amax when the trace has an amax column)");
  app->add_option("--grad-format", o->grad_format,
                  "The gradient format an amax-decided overflow is judged in: fp16 (default: overflows from 65520) "
                  "or bf16");
  app->add_option("--optimizer", o->optimizer,
                  "Replay (or --check) only the rows of this optimizer of a trace with an optimizer column");
  app->add_option("--initial-state", o->initial_state,
                  "JSON file of saved scaler states to start from, keyed by strategy (or STRATEGY/OPTIMIZER): torch's "
                  "and NeMo's GradScaler.state_dict() (scale, growth_factor, backoff_factor, growth_interval, "
                  "_growth_tracker[, _hysteresis_tracker]), Megatron's DynamicGradScaler (scale, growth_tracker, "
                  "hysteresis_tracker), DeepSpeed's loss scaler (cur_scale, cur_iter, last_overflow_iter, "
                  "cur_hysteresis)");
  app->add_option("--plot", o->plot, "Also write an SVG: the scale per step per strategy (log2 axis), skipped "
                                      "steps marked with a cross");

  commands.push_back({app, [o] { return run(*o); }});
}

}  // namespace mpverify::cli
