// Experiment 5: GAN FID parity. The DCGAN (nn::make_dcgan) trained
// on MNIST in fp32 on the reference backend and in o2 mixed precision with
// the torch loss scaler on the fp16 emulator, the same seeds on both sides
// (same initial weights, batches and latent codes), then:
//  - FID and KID of each run's generated images against the 2000 held-out
//    MNIST test images, at equal N, through our feature extractor (trained
//    here, seeded, or read from a file; the report names its sha256), with
//    the bootstrap interval of each FID (metrics/gan_evaluation.h);
//  - the parity gate on FID (paired over seeds; and per seed, on the
//    bootstrap standard errors) and the same equivalence test on KID, with
//    margins of k standard deviations of the fp32 runs' values over the seeds;
//  - whether the generators are converged: the fp32 runs' mean FID against
//    the FID of real images vs the held-out real images (the floor a perfect
//    generator would reach at this N), said in the report's headline;
//  - FID at a few points over training on both sides (the literature's
//    "FID tracked FP32 over training");
//  - sample grids from the same latent codes on both sides, their absolute
//    difference, loss curves (discriminator and generator) and the loss scale.
// Writes the run directories, the report and its figures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "training/trainer.h"

namespace mpverify::experiments {

struct GanParityConfig {
  std::filesystem::path report = "reports/gan_parity.md";
  std::filesystem::path runs = "runs/gan_parity";
  std::filesystem::path data_dir;   // MNIST's files; empty: the loader's default
  std::filesystem::path extractor;  // a feature extractor file; empty: train one into RUNS/extractor/
  std::uint64_t extractor_seed = 1;
  std::size_t extractor_steps = 400;
  std::size_t seeds = 2;            // seeds 1..seeds on every side
  std::size_t steps = 150;          // DCGAN steps per run (batch 64)
  std::size_t checkpoints = 3;      // FID at steps k * steps / checkpoints, k = 1..checkpoints
  std::size_t train_size = 8000;    // MNIST training images used (at most 8000)
  std::size_t fid_samples = 2000;   // generated images per FID/KID (the test split holds 2000 real ones)
  std::size_t bootstrap = 10;       // FID bootstrap replicates per run (>= 2)
  std::size_t kid_subsets = 20;
  std::size_t grid = 64;            // images in each sample grid (<= fid_samples)
  // The equivalence margins on FID and KID: margin_sd (k) times the fp32
  // runs' standard deviation over the seeds (gan_margin). k = 2: two fp32
  // runs that differ only in their seed are more than 2 sd apart in 16% of
  // pairs, so a shift inside the margin is one that re-seeding the fp32
  // recipe itself often produces (docs/experiments.md, the report).
  double margin_sd = 2.0;
  // The generators count as unconverged when the fp32 runs' mean FID exceeds
  // unconverged_ratio times the real-vs-real FID (real_reference_fid).
  double unconverged_ratio = 10.0;
  double alpha = 0.05;
  bool with_o1 = false;             // also the o1 recipe (fp32 weights, fp16 compute) on the emulator
  std::size_t jobs = 2;
  // Train nothing: read the runs a previous run with the same settings left
  // in `runs` (checked against these settings and the extractor's sha256)
  // and write the report again (e.g. with other margins).
  bool report_only = false;
};

struct GanRunResult {
  std::string side;  // "fp32-ref", "o2-emu", "o1-emu"
  std::uint64_t seed = 0;
  nlohmann::json summary;      // the run's summary.json (with "evaluation" and "checkpoints")
  double wall_seconds = 0;     // not in the report (it holds no times)
};

struct GanParityResult {
  std::vector<GanRunResult> runs;
  std::vector<std::filesystem::path> files;  // everything written for the report
  nlohmann::ordered_json json;               // what --json prints
};

// Throws std::invalid_argument (the command's exit 2) for settings out of
// range, and data::DataFileError / io::FileError when MNIST or the extractor
// file cannot be read, before anything is written.
void validate_gan_parity(const GanParityConfig& config);

// Trains, evaluates and writes the report (see above). `progress` (may be
// empty) gets one line per phase and per finished run.
GanParityResult run_gan_parity(const GanParityConfig& config, const std::function<void(const std::string&)>& progress);

// The DCGAN training configuration of one side and seed (what ran; tests
// train a small version of it). `side` is "fp32-ref", "o2-emu" or "o1-emu".
struct GanSide {
  std::string name, title, recipe, scaler;
  bool emulated = false;
};
std::vector<GanSide> gan_sides(const GanParityConfig& config);
// k times the sample standard deviation (N - 1 denominator) of the baseline's
// values (its runs' FIDs or KIDs over the seeds); NaN when there are fewer
// than 2, a value is missing (NaN: a diverged run, and the gate then says
// "not equivalent" whatever the margin) or the values are all equal.
double gan_margin(double k, const std::vector<double>& baseline_values);
// The FID of real images against the held-out real images, through the
// extractor: the first min(fid_samples, train_size) of the runs' training
// images against the 2000 test images (the runs' own data split). A perfect
// generator's FID would sit about here at this N (FID is biased by N).
double real_reference_fid(const GanParityConfig& config, const std::filesystem::path& extractor);
// Whether the generators are unconverged by the report's criterion:
// fp32_mean_fid > ratio * real_fid (false when either is not finite).
bool gan_unconverged(double fp32_mean_fid, double real_fid, double ratio);
// The training configuration of one run (recorders off; Adam lr 2e-4,
// beta1 0.5, beta2 0.999; batch 64; the MNIST test split of 2000 images).
training::TrainConfig gan_train_config(const GanParityConfig& config, const GanSide& side, std::uint64_t seed);

}  // namespace mpverify::experiments
