// The default study (the main job, `mpverify study`): FP32 against mixed
// precision on the MNIST CNN, end to end, into a Markdown report with SVG
// figures and the HTML page of every report next to it.
//
// What runs (all sides on the same seeds 1..N, so the gate pairs them; N is
// the first look at which the gate in rounds decides, or --seeds):
//  - baseline "fp32-ref": the fp32 recipe on the ref backend (Eigen FP32);
//  - candidate "o2-emu": o2 (fp16 compute, fp32 master weights) with the
//    dynamic `torch` loss scaler (GradScaler's defaults) on the emulator;
//  - candidate "o2-gpu": the same on the CUDA backend, when a GPU is usable
//    (gpu::gpu_unavailable_reason() empty); otherwise the report says that no
//    GPU was present and why, and that side was not run.
// Seed 1 of every side runs with the recorders on (per-step rates, exponent
// histograms); the other seeds run with --no-recorders, which changes no
// number the training computes (the recorders only observe) and keeps the
// job within a few minutes on 2 cores. Runs go `jobs` at a time on threads
// (Trainer objects are independent; every run is bitwise the same whatever
// the number of threads).
//
// The verdict is the parity gate's library call (metrics/parity_gate.h) on
// held-out test accuracy, margin `margin` points, alpha `alpha`, paired on
// the seeds, in rounds (`looks`): the study stops at the first look that
// decides, and the last look always decides. The mean training loss over the
// last 10% of the steps is gated too (margin `loss_margin`, one fixed-count
// TOST on every seed run), reported alongside. With --seeds N (no rounds) the
// accuracy verdict may be "inconclusive".
//
// Output: the run directories under `out` (DIR/fp32-ref/seed-<s>/ ... and each
// side's ensemble.json, what `train --seeds` writes), `report` (Markdown), the
// figures next to it (<stem>-loss.svg, -scale.svg, -underflow.svg,
// -lost-updates.svg, -gradients.svg) and index.html in the report's directory
// (report/html_page.h, every *.md there, this report first). The report holds
// no time, host or path outside its own directory: the same seeds give the
// same bytes. Wall times go to the progress callback and the returned result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/sequential_design.h"

namespace mpverify::report {

struct StudyConfig {
  std::filesystem::path out = "runs/study";
  std::filesystem::path report = "reports/study.md";
  // In rounds (the default): after each look's seeds (1..n on every side) the accuracy gate runs in rounds
  // (metrics/sequential_design.h) and the study trains up to the next look only while it is undecided.
  std::vector<std::size_t> looks = {5, 10, 15, 20};
  metrics::Spending spending = metrics::Spending::obrien_fleming;
  std::size_t seeds = 0;     // > 0: exactly seeds 1..seeds and the fixed-count gate instead of rounds
  std::size_t steps = 150;
  std::string backend = "auto";  // the candidate: emu, gpu, or auto (emu, and gpu when usable)
  std::string data = "mnist";
  std::filesystem::path data_dir;  // empty: the loader's default
  std::size_t train_size = 8000, test_size = 2000;
  std::size_t jobs = 2;      // runs at a time
  double margin = 1.0;       // accuracy, percentage points
  double loss_margin = 0.02; // mean training loss over the tail
  double alpha = 0.05;
};

struct StudyRun {
  std::string side;  // "fp32-ref", "o2-emu", "o2-gpu"
  std::uint64_t seed = 0;
  bool recorders = false;
  double wall_seconds = 0;
  nlohmann::json summary;  // the run's summary.json
};

struct StudyResult {
  std::size_t seeds_run = 0;  // seeds 1..seeds_run ran on every side
  std::vector<StudyRun> runs;
  std::string gpu_reason;  // why the GPU side did not run ("" when it ran)
  nlohmann::ordered_json json;  // --json: verdicts, runs (with wall times), files
  std::vector<std::filesystem::path> files;  // written, besides the run directories
};

// Checks the configuration (and that the data can be loaded) without writing
// anything; std::invalid_argument (or data::DataFileError) naming the setting.
void validate_study(const StudyConfig& config);

// validate_study, then the runs, the gate, the figures, the report and the
// page. `progress` receives one line per phase and per finished run.
StudyResult run_study(const StudyConfig& config, const std::function<void(const std::string&)>& progress = {});

}  // namespace mpverify::report
