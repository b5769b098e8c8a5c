// mpverify study [--out DIR] [--report reports/study.md] [--looks 5,10,15,20 | --seeds N] [--steps N]
//                [--backend emu|gpu|auto] [--json]
// The main job: FP32 against o2 mixed precision on the MNIST CNN, the parity
// verdict, and the report with its figures (report/study.h does the work).
#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "report/study.h"

namespace mpverify::cli {

void add_study_command(CLI::App& root, std::vector<Command>& commands) {
  struct Options {
    report::StudyConfig config;
    std::string out = "runs/study", report = "reports/study.md", data_dir, looks = "5,10,15,20",
                spending = "obrien-fleming";
    bool json = false, progress = false, quiet = false;
  };
  auto o = std::make_shared<Options>();
  auto* app = root.add_subcommand(
      "study",
      "The default study, end to end: the MNIST CNN trained in fp32 on the reference backend and in o2 with\n"
      "dynamic loss scaling (torch) on the emulator (and on the GPU when one is usable), the same seeds on both\n"
      "sides, the recorders on for seed 1, the parity gate on test accuracy, and a Markdown report with SVG\n"
      "figures plus index.html (every report of its directory on one self-contained page).\n"
      "It trains in rounds: seeds up to each look of --looks, then the gate in rounds (gate --sequential), and\n"
      "stops at the first look that decides; the last look always decides. --seeds N runs N seeds at once\n"
      "instead, with the fixed-count gate (which may say inconclusive).\n"
      "Example: mpverify study --looks 5,10,15,20 --steps 150 --out runs/study --report reports/study.md");
  report::StudyConfig& c = o->config;
  app->add_option("--out", o->out, "Directory for the run directories (its fp32-ref/, o2-emu/, o2-gpu/ are replaced)")
      ->capture_default_str();
  app->add_option("--report", o->report, "The Markdown report; figures and index.html are written next to it")
      ->capture_default_str();
  auto* looks = app->add_option("--looks", o->looks,
                                 "Rounds: the looks, seeds per side, at which the gate in rounds decides or asks for "
                                 "the next")
                    ->capture_default_str();
  app->add_option("--spending", o->spending, "Rounds: how alpha is spent over the looks: obrien-fleming or pocock")
      ->capture_default_str();
  auto* seeds = app->add_option("--seeds", c.seeds,
                                 "No rounds: exactly seeds 1..N on every side (at least 2), one fixed-count gate")
                    ->excludes(looks);
  app->add_option("--steps", c.steps, "Training steps per run")->capture_default_str();
  app->add_option("--backend", c.backend, "The o2 side: emu, gpu, or auto (emu, plus gpu when one is usable)")
      ->capture_default_str();
  app->add_option("--jobs", c.jobs, "Runs trained at a time (threads)")->capture_default_str();
  app->add_option("--data", c.data, "Data set: mnist, synthetic or sklearn-digits (see 'train --help')")
      ->capture_default_str();
  app->add_option("--data-dir", o->data_dir, "Where the data set's files are (default: the loader's)");
  app->add_option("--train-size", c.train_size, "At most this many training images")->capture_default_str();
  app->add_option("--test-size", c.test_size, "At most this many test images")->capture_default_str();
  app->add_option("--margin", c.margin, "Accuracy margin, percentage points")->capture_default_str();
  app->add_option("--loss-margin", c.loss_margin, "Margin of the tail-mean training loss")->capture_default_str();
  app->add_option("--alpha", c.alpha, "The gate's alpha")->capture_default_str();
  app->add_flag("--json", o->json, "Print the verdicts, runs (with wall times) and files as JSON on standard output");
  app->add_flag("--progress", o->progress, "Progress lines on standard error even when it is not a terminal");
  app->add_flag("--quiet", o->quiet, "No progress lines");
  commands.push_back({app, [o, seeds]() {
    report::StudyConfig config = o->config;
    config.out = o->out;
    config.report = o->report;
    config.data_dir = o->data_dir;
    with_usage_errors([&] {
      // 0 means rounds inside the configuration; given on the command line it is too few seeds.
      if (seeds->count() && config.seeds < 2)
        throw std::invalid_argument("--seeds " + std::to_string(config.seeds) +
                                    ": the paired gate needs at least 2 seeds per side (use 2 or more)");
      try {
        config.looks = metrics::parse_looks(o->looks);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("--looks '" + o->looks + "': " + e.what());
      }
      const auto spending = metrics::parse_spending(o->spending);
      if (!spending) throw std::invalid_argument("--spending must be obrien-fleming or pocock, not '" + o->spending + "'");
      config.spending = *spending;
      report::validate_study(config);
    });
    const bool show = !o->quiet && (o->progress || ::isatty(2));
    const report::StudyResult result = report::run_study(config, [&](const std::string& line) {
      if (show) std::cerr << line << std::endl;
    });
    if (o->json) {
      std::cout << result.json.dump(2) << "\n";
    } else {
      std::cout << result.json["line"].get<std::string>() << "\n";
      for (const auto& f : result.files) std::cout << "wrote " << f.string() << "\n";
    }
    return 0;
  }});
}

}  // namespace mpverify::cli
