#include "metrics/fid_statistics_gate.h"

#include <algorithm>
#include <map>
#include <regex>
#include <stdexcept>

#include "metrics/ensemble.h"
#include "metrics/fid_statistics.h"

namespace mpverify::metrics {

namespace {

namespace fs = std::filesystem;

// DIR/seed-<s>.npz by seed; InputError for anything that cannot be a run's statistics.
std::map<std::int64_t, fs::path> statistics_files(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError("'" + dir.string() + "' is not a directory: with --fid-reference each side is a directory of "
                     "per-run FID statistics, seed-<s>.npz (mu, sigma)");
  const std::regex name(R"(seed-(-?[0-9]{1,18})\.npz)");
  std::map<std::int64_t, fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string file = e.path().filename().string();
    if (e.path().extension() != ".npz") continue;
    std::smatch m;
    if (!std::regex_match(file, m, name))
      throw InputError("'" + e.path().string() + "': a statistics file in a side's directory must be named "
                       "seed-<s>.npz (s the run's integer seed); rename it or move it out");
    const std::int64_t seed = std::stoll(m[1].str());
    if (const auto [it, fresh] = files.emplace(seed, e.path()); !fresh)
      throw InputError("'" + dir.string() + "' holds two statistics files for seed " + std::to_string(seed) + " (" +
                       it->second.filename().string() + ", " + file + ")");
  }
  if (ec) throw InputError("'" + dir.string() + "': cannot list the directory: " + ec.message());
  if (files.empty())
    throw InputError("'" + dir.string() + "' holds no seed-<s>.npz: with --fid-reference each side is a directory of "
                     "per-run FID statistics (mu, sigma), one seed-<s>.npz per run");
  return files;
}

}  // namespace

ValueFile fid_statistics_values(const fs::path& dir, const GaussianStats& reference, const std::string& reference_name,
                                TraceRoute route) {
  ValueFile v;
  v.name = dir.string();
  for (const auto& [seed, file] : statistics_files(dir)) {
    GaussianStats run;
    try {
      run = read_fid_statistics(file);
    } catch (const std::invalid_argument& e) {
      throw InputError(e.what());
    }
    if (run.dims() != reference.dims())
      throw InputError(file.string() + ": d = " + std::to_string(run.dims()) + " features but the reference '" +
                       reference_name + "' has d = " + std::to_string(reference.dims()) +
                       ": the run's and the reference's statistics must come from the same feature extractor");
    ValueRecord r;
    r.seed = seed;
    r.value = frechet_distance(run, reference, route).fid;
    r.source = file.string();
    v.records.push_back(std::move(r));
  }
  return v;
}

GateResult evaluate_fid_statistics_gate(const fs::path& baseline, const fs::path& candidate, const fs::path& reference,
                                        const GateOptions& options) {
  if (options.metric != GateMetric::fid)
    throw InputError(std::string("--fid-reference computes FIDs: give --metric fid, not ") + to_string(options.metric));
  GaussianStats ref;
  try {
    ref = read_fid_statistics(reference);
  } catch (const std::invalid_argument& e) {
    throw InputError(std::string("--fid-reference: ") + e.what());
  }
  const ValueFile b = fid_statistics_values(baseline, ref, reference.string());
  const ValueFile c = fid_statistics_values(candidate, ref, reference.string());
  GateResult g = evaluate_gate(b, c, options);
  g.unit = "FID";
  g.notes.push_back("each run's FID computed from its statistics file against the reference '" + reference.string() +
                    "' (nuclear-norm route)");
  g.notes.push_back("statistics files do not record N: the gate cannot check that every run's statistics (and the "
                    "reference's) were made from the same number of images, which FID's bias needs");
  return g;
}

}  // namespace mpverify::metrics
