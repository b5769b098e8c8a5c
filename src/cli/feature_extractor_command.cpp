// mpverify feature-extractor --out FILE [--seed S] [--steps N]
// Rebuilds the FID/KID feature extractor: our CNN trained on the MNIST
// training split, deterministically for the seed, saved as safetensors
// (training/feature_extractor.h documents the tensors and the features).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "training/feature_extractor.h"

namespace mpverify::cli {

void add_feature_extractor_command(CLI::App& root, std::vector<Command>& commands) {
  struct Options {
    training::FeatureExtractorOptions fx;
    std::string out;
    bool force = false, json = false, quiet = false;
  };
  auto o = std::make_shared<Options>();
  auto* app = root.add_subcommand(
      "feature-extractor",
      "Train the feature extractor of FID and KID: the `cnn` model of `train` on the 8000 MNIST training\n"
      "images, fp32 on the ref backend, deterministic for --seed, saved as safetensors (float32 weights and batch-norm\n"
      "running statistics; the features are the 784 activations before the last layer, in evaluation mode).\n"
      "Example: mpverify feature-extractor --out fid-cnn.safetensors   (the default 2000 steps: about a minute on one core)");
  app->add_option("--out", o->out, "The safetensors file to write")->required();
  app->add_option("--seed", o->fx.seed, "Seed of the initial weights and the batches")->capture_default_str();
  app->add_option("--steps", o->fx.steps, "Training steps")->capture_default_str();
  app->add_option("--batch-size", o->fx.batch_size, "Examples per step")->capture_default_str();
  app->add_option("--data-dir", o->fx.data_dir, "MNIST's files (default: $MPVERIFY_MNIST_DIR or the source tree's .data/)");
  app->add_flag("--force", o->force, "Replace an existing file");
  app->add_flag("--json", o->json, "Print {file, metadata} as JSON");
  app->add_flag("--quiet", o->quiet, "No progress line");
  commands.push_back({app, [o] {
    const std::filesystem::path out = o->out;
    if (std::filesystem::exists(out) && !o->force)
      throw UsageError("--out " + o->out + " already exists; pass --force to replace it");
    if (out.has_parent_path() && !std::filesystem::is_directory(out.parent_path()))
      throw UsageError("--out " + o->out + ": the directory " + out.parent_path().string() + " does not exist");
    const bool show = !o->quiet && ::isatty(2);
    std::optional<training::FeatureExtractor> fx;
    with_usage_errors([&] {
      fx.emplace(training::FeatureExtractor::train(o->fx, [&](std::size_t step) {
        if (show && (step % 10 == 9 || step + 1 == o->fx.steps)) {
          std::fprintf(stderr, "\rstep %zu/%zu", step + 1, o->fx.steps);
          std::fflush(stderr);
        }
      }));
    });
    if (show) std::fprintf(stderr, "\n");
    fx->save(out);
    if (o->json) {
      std::cout << nlohmann::json{{"file", o->out}, {"metadata", fx->metadata()}}.dump(2) << "\n";
    } else {
      std::cout << "feature extractor: " << o->out << "  test accuracy " << fx->metadata().at("test_accuracy")
                << "  (seed " << o->fx.seed << ", " << o->fx.steps << " steps)\n";
    }
    return 0;
  }});
}

}  // namespace mpverify::cli
