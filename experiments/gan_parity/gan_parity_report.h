// The GAN FID parity experiment's report (gan_parity_experiment.h): the
// gates, the figures and the Markdown, all read back from the run
// directories that run_gan_parity wrote (so the report says only what the
// files hold, and the same files give the same bytes).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "gan_parity/gan_parity_experiment.h"

namespace mpverify::experiments {

// Reads config.runs (every side's ensemble.json and seed directories),
// evaluates the gates, writes the report and its figures next to it, and
// fills result.files and result.json. `extractor` is the feature extractor
// file the runs used (named in the report by file name and sha256 only).
GanParityResult write_gan_parity_report(const GanParityConfig& config, const std::vector<GanSide>& sides,
                                        const std::filesystem::path& extractor, GanParityResult result,
                                        const std::function<void(const std::string&)>& say);

}  // namespace mpverify::experiments
