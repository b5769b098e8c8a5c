// The rounding options that `round` and `eval` share: --rounding, --tininess,
// --seed, --random-bits, registered and turned into a RoundingContext in one place.
#pragma once

#include <cstdint>
#include <string>

#include "cli/commands.h"
#include "formats/rounding.h"

namespace mpverify::cli {

struct RoundingOptions {
  std::string rounding = "rne", tininess = "after";
  std::uint64_t seed = 0;
  int random_bits = 32;

  void add_to(CLI::App* app, const std::string& seed_help) {
    app->add_option("--rounding", rounding, "rne, rtz, up, down, rna, odd, stochastic")->capture_default_str();
    app->add_option("--tininess", tininess, "Tininess detection: after (x86, default) or before rounding")
        ->check(CLI::IsMember({"after", "before"}))
        ->capture_default_str();
    app->add_option("--seed", seed, seed_help)->capture_default_str();
    app->add_option("--random-bits", random_bits, "Random bits per stochastic rounding (1..32)")
        ->check(CLI::Range(1, 32))
        ->capture_default_str();
  }

  // The context for one rounding; `random` is set per case by the caller.
  formats::RoundingContext context() const {
    const auto mode = formats::parse_rounding(rounding);
    if (!mode) throw UsageError("--rounding '" + rounding + "': expected rne, rtz, up, down, rna, odd or stochastic");
    return {*mode, tininess == "after" ? formats::Tininess::after_rounding : formats::Tininess::before_rounding,
            random_bits, 0};
  }
};

}  // namespace mpverify::cli
