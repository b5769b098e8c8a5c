// mpverify replay-scalers --trace FILE --strategies A,B,... [--strategy-opt S.KEY=V]...
//                         [--config FILE.json] [--json]
// One recorded trace (found_inf flags or amax values, one step per line; see
// training/loss_scaler.h) fed to several loss-scale strategies, their scale
// trajectories and skipped steps side by side.
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
#include "training/loss_scaler.h"
#include "training/scaler_replay.h"

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
  std::ifstream in(path);
  if (!in) throw UsageError("--config: cannot read '" + path + "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("--config " + path + ": " + e.what());
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

}  // namespace

void add_replay_scalers_command(CLI::App& root, std::vector<Command>& commands) {
  struct Options {
    std::string trace, strategies, config;
    std::vector<std::string> strategy_opts;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  std::string known;
  for (const auto& n : training::scaler_names()) known += (known.empty() ? "" : ", ") + n;
  auto* app = root.add_subcommand(
      "replay-scalers",
      "Feed one recorded trace to several loss-scale strategies and print, per step, the scale each ran with\n"
      "and whether it skipped the step, then a summary.\n"
      "Trace: one step per line, 0/1 (found_inf) or an amax (a number >= 0, inf, nan) for delayed, current\n"
      "and mxfp8; blank lines and # comments are ignored.\n"
      "apex is legacy (Apex's amp was removed upstream); deepspeed.optimizer=fp16 is FP16_Optimizer (no ZeRO),\n"
      "zero (the default) DynamicLossScaler; delayed.kernel=bulk (the default, PyTorch's) or per-tensor.\n"
      "Example: mpverify replay-scalers --trace flags.txt --strategies torch,deepspeed,megatron "
      "--strategy-opt deepspeed.consecutive_hysteresis=true");
  app->add_option("--trace", o->trace, "Trace file, or - for standard input")->required();
  app->add_option("--strategies", o->strategies, "Comma-separated, of: " + known)->required();
  app->add_option("--strategy-opt", o->strategy_opts,
                  "STRATEGY.KEY=VALUE, repeatable (e.g. deepspeed.hysteresis=2, torch.init=2^16); overrides --config");
  app->add_option("--config", o->config, R"(JSON file: {"STRATEGY": {"KEY": VALUE, ...}, ...})");
  app->add_flag("--json", o->json, "Print JSON: each strategy's steps, and a summary");

  commands.push_back({app, [o] {
    const std::vector<std::string> names = split_names(o->strategies);
    std::map<std::string, training::ScalerOptions> options;
    if (!o->config.empty()) options = read_config(o->config);
    for (const auto& text : o->strategy_opts) {
      try {
        const training::ScalerOption opt = training::parse_scaler_option(text);
        options[opt.strategy][opt.key] = opt.value;
      } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--strategy-opt: ") + e.what());
      }
    }
    for (const auto& [strategy, keys] : options)
      if (std::find(names.begin(), names.end(), strategy) == names.end())
        throw UsageError("options given for '" + strategy + "', which --strategies does not name");

    std::vector<std::unique_ptr<training::Scaler>> scalers;
    for (const auto& name : names) {
      try {
        const auto it = options.find(name);
        scalers.push_back(training::make_scaler(name, it == options.end() ? training::ScalerOptions{} : it->second));
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
    }

    // Everything is read and replayed before anything is printed, so a
    // malformed line leaves standard output empty.
    std::vector<training::TraceStep> trace;
    try {
      if (o->trace == "-") {
        trace = training::parse_trace(std::cin);
      } else {
        std::ifstream in(o->trace);
        if (!in) throw UsageError("--trace: cannot read '" + o->trace + "'");
        trace = training::parse_trace(in);
      }
      if (trace.empty())
        throw UsageError("--trace " + o->trace +
                         ": no steps (every line blank or a comment); a trace has one step per line, a found_inf "
                         "flag (0 or 1) or an amax");
      std::vector<Replay> replays;
      for (std::size_t s = 0; s < names.size(); ++s) replays.push_back(training::replay(*scalers[s], trace, names[s]));
      if (o->json)
        print_json(names, replays);
      else
        print_text(names, replays, trace.size());
    } catch (const training::TraceError& e) {
      throw UsageError("--trace " + o->trace + ": " + e.what());
    }
    return 0;
  }});
}

}  // namespace mpverify::cli
