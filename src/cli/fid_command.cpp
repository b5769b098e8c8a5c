// mpverify fid A B [--extractor FILE] [--json] [--seed S] [--kid-subsets K] [--kid-subset-size M]
//                  [--bootstrap B] [--level L] [--route R]
// FID and KID between two feature matrices (.npy, N x D, any float dtype),
// with an optional bootstrap interval for the FID. The mathematics is
// src/metrics/ (fid.h, kid.h, fid_bootstrap.h, which define every field);
// this file reads the files and prints.
//
// Image sets (metrics/image_features.h: an .npy of N x 1 x H x W or N x H x W
// images in [0, 1], or mnist-test / mnist-train) pass through the feature
// extractor given by --extractor (our MNIST CNN's penultimate layer) first.
// A statistics file (.npz with mu and sigma, pytorch-fid's --save-stats and
// clean-fid's format; metrics/fid_statistics.h) stands for a set's Gaussian:
// FID only (KID and the bootstrap need the features themselves).
//
// Exit codes: 0; 2 for unusable input (missing file, neither features nor
// images, different D, fewer than 2 rows, a non-finite feature, an image set
// without --extractor or of another size than the extractor's, a pixel
// outside [0, 1], a statistics file without mu [d] / sigma [d, d] as float32
// or float64, finite and symmetric, --bootstrap with a statistics file, bad
// options), with nothing on standard output.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/count_option.h"
#include "cli/json_value.h"
#include "io/npy.h"
#include "metrics/fid.h"
#include "metrics/fid_bootstrap.h"
#include "metrics/fid_statistics.h"
#include "metrics/gan_evaluation.h"
#include "metrics/image_features.h"
#include "metrics/kid.h"

namespace mpverify::cli {

namespace {

namespace fs = std::filesystem;

struct Features {
  std::string path;
  std::string kind;  // "features", "images" or "statistics"
  io::DoubleArray array;  // N x D features (for an image set: the extractor's); empty for statistics
  std::optional<metrics::GaussianStats> stats;  // a statistics file's mu and sigma
};

// A shape as Python writes a tuple: (2, 3), (5,).
std::string tuple_shape_text(const std::vector<std::size_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  text += shape.size() == 1 ? ",)" : ")";
  return text;
}

// The extractor is loaded once, when the first image set needs it.
struct ExtractorSource {
  std::string file;
  std::optional<metrics::LoadedExtractor> loaded;
  metrics::LoadedExtractor& get(const std::string& where) {
    if (file.empty())
      throw UsageError(where + " is an image set: give --extractor FILE (the FID feature extractor, made by "
                               "`mpverify feature-extractor --out FILE`) to turn its images into features");
    if (!loaded) {
      try {
        loaded = metrics::load_extractor(file);
      } catch (const std::exception& e) {
        throw UsageError("--extractor " + file + ": " + e.what());
      }
    }
    return *loaded;
  }
};

Features image_features(const metrics::ImageSet& set, ExtractorSource& source, const std::string& where) {
  metrics::LoadedExtractor& x = source.get(where);
  try {
    metrics::check_extractor_size(set.name, set.height, set.width);
  } catch (const std::invalid_argument& e) {
    throw UsageError(where + ": " + e.what());
  }
  Features f{set.name, "images", {}, std::nullopt};
  f.array.values = metrics::image_features(*x.extractor, set);
  f.array.shape = {set.count, training::kFeatureDim};
  return f;
}

Features read_input(const std::string& path, const char* which, ExtractorSource& source,
                    const std::string& data_dir) {
  std::string where = which;
  where += " ('" + path + "')";
  if (metrics::is_mnist_image_set_name(path)) {
    source.get(where);  // before loading MNIST: a missing --extractor is the first thing to say
    metrics::ImageSet set;
    try {
      set = metrics::load_image_set(path, data_dir);
    } catch (const std::exception& e) {
      throw UsageError(where + ": " + e.what());
    }
    return image_features(set, source, where);
  }
  const fs::path file(path);
  std::error_code ec;
  if (!fs::exists(file, ec))
    throw UsageError(where + ": no such file (give an .npy of N x D features or of N x 1 x H x W images, an .npz "
                             "of FID statistics mu and sigma, or mnist-test / mnist-train)");
  if (!fs::is_directory(file, ec) && metrics::is_fid_statistics_file(file)) {
    Features f{path, "statistics", {}, {}};
    try {
      f.stats = metrics::read_fid_statistics(file);
    } catch (const std::invalid_argument& e) {
      throw UsageError(which + std::string(": ") + e.what());
    }
    return f;
  }
  if (fs::is_directory(file, ec) || file.extension() != ".npy")
    throw UsageError(where + ": not an .npy or .npz file; give N x D features or N x 1 x H x W / N x H x W images "
                             "in [0, 1] as .npy, FID statistics (mu, sigma) as .npz, or the image sets mnist-test / "
                             "mnist-train");
  io::DoubleArray array;
  try {
    array = io::read_npy_f64(file);
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
  if (array.shape.size() == 2) return {path, "features", std::move(array), {}};
  if (array.shape.size() == 3 || array.shape.size() == 4) {
    metrics::ImageSet set;
    try {
      set = metrics::image_set_from_array(path, array);
    } catch (const std::invalid_argument& e) {
      throw UsageError(where + ": " + e.what());
    }
    return image_features(set, source, where);
  }
  throw UsageError(where + ": shape " + tuple_shape_text(array.shape) +
                   " is not N x D (features) nor N x 1 x H x W / N x H x W (images)");
}

std::string number_text(double v, const char* format = "%.10g") {
  char text[64];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

struct FidOptions {
  std::string a, b, route = "nuclear-norm", extractor, data_dir;
  bool json = false;
  std::uint64_t seed = 0;
  std::size_t kid_subsets = 100, kid_subset_size = 0, bootstrap = 0;
  double level = 0.95;
};

// The trace route from --route, after the other options are checked.
metrics::TraceRoute checked_route(const FidOptions& o) {
  metrics::TraceRoute route;
  try {
    route = metrics::parse_trace_route(o.route);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--route: ") + e.what());
  }
  if (o.bootstrap == 1) throw UsageError("--bootstrap: at least 2 replicates (or 0 for none)");
  if (!(o.level > 0.0 && o.level < 1.0)) throw UsageError("--level must be in (0, 1), e.g. 0.95");
  if (o.kid_subsets == 0) throw UsageError("--kid-subsets must be at least 1");
  return route;
}

// FID, KID and (with --bootstrap) the FID's bootstrap interval of two feature
// sets; without KID (nullopt) when a side is a statistics file.
struct FidReport {
  metrics::FidResult f;
  std::optional<metrics::KidResult> k;
  std::optional<metrics::FidBootstrap> boot;
};

// A side's Gaussian: the statistics file's, or fitted to the features.
metrics::GaussianStats side_stats(const Features& f, const char* name) {
  if (f.stats) return *f.stats;
  const metrics::FeatureMatrix m{f.array.values, f.array.shape[0], f.array.shape[1], name};
  return metrics::gaussian_stats(m);
}

// FID from mu and sigma when at least one side is a statistics file.
FidReport measure_statistics(const Features& fa, const Features& fb, metrics::TraceRoute route) {
  FidReport r;
  try {
    const metrics::GaussianStats a = side_stats(fa, "A"), b = side_stats(fb, "B");
    if (a.dims() != b.dims())
      throw UsageError("A ('" + fa.path + "') has d = " + std::to_string(a.dims()) + " features but B ('" + fb.path +
                       "') has d = " + std::to_string(b.dims()) +
                       ": both sides must come from the same feature extractor");
    r.f = metrics::frechet_distance(a, b, route);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return r;
}

FidReport measure(const FidOptions& o, const Features& fa, const Features& fb, metrics::TraceRoute route) {
  if (fa.stats || fb.stats) return measure_statistics(fa, fb, route);
  const metrics::FeatureMatrix a{fa.array.values, fa.array.shape[0], fa.array.shape[1], "A"};
  const metrics::FeatureMatrix b{fb.array.values, fb.array.shape[0], fb.array.shape[1], "B"};
  FidReport r;
  metrics::FidResult& f = r.f;
  metrics::KidResult& k = r.k.emplace();
  std::optional<metrics::FidBootstrap>& boot = r.boot;
  // Every error from here on is the input's (rows, D, values, subset sizes).
  try {
    f = metrics::fid(a, b, route);
    k = metrics::kernel_inception_distance(
        a, b, {.subsets = o.kid_subsets, .subset_size = o.kid_subset_size, .seed = o.seed});
    if (o.bootstrap > 0)
      boot = metrics::fid_bootstrap(
          a, b, {.replicates = o.bootstrap, .level = o.level, .seed = o.seed, .route = route});
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return r;
}

// --json: one document with every field of the FID, the KID and the bootstrap.
nlohmann::ordered_json fid_json(const FidOptions& o, const Features& fa, const Features& fb,
                                const ExtractorSource& source, const FidReport& r) {
  const metrics::FidResult& f = r.f;
  const std::optional<metrics::KidResult>& k = r.k;
  const std::optional<metrics::FidBootstrap>& boot = r.boot;
  nlohmann::ordered_json j;
  j["a"] = fa.path;
  j["b"] = fb.path;
  j["a_kind"] = fa.kind;
  j["b_kind"] = fb.kind;
  j["extractor"] = source.loaded ? source.loaded->record.to_json() : nlohmann::json(nullptr);
  j["n_a"] = f.n_a;
  j["n_b"] = f.n_b;
  j["dims"] = f.dims;
  j["fid"] = json_number(f.fid);
  j["fid_raw"] = json_number(f.fid_raw);
  j["mean_term"] = json_number(f.mean_term);
  j["trace_a"] = json_number(f.trace_a);
  j["trace_b"] = json_number(f.trace_b);
  j["trace_sqrt"] = json_number(f.trace_sqrt);
  j["route"] = metrics::to_string(f.route);
  j["clamped_eigenvalues"] = {{"count", f.clamping.count},
                              {"largest_magnitude", json_number(f.clamping.largest_magnitude)},
                              {"largest_relative", json_number(f.clamping.largest_relative)}};
  // KID needs the features themselves: null when a side is a statistics file.
  j["kid"] = k ? json_number(k->kid) : nlohmann::json(nullptr);
  j["kid_stderr"] = k ? json_number(k->kid_stderr) : nlohmann::json(nullptr);
  j["kid_stderr_definition"] =
      "standard deviation of the per-subset MMD^2 estimates, 1/K denominator "
      "(torch-fidelity's kernel_inception_distance_std); not divided by sqrt(K)";
  j["kid_subsets"] = k ? nlohmann::json(k->subsets) : nlohmann::json(nullptr);
  j["kid_subset_size"] = k ? nlohmann::json(k->subset_size) : nlohmann::json(nullptr);
  j["seed"] = o.seed;
  if (boot)
    j["fid_bootstrap"] = {{"replicates", boot->replicates},
                          {"level", boot->level},
                          {"low", json_number(boot->low)},
                          {"high", json_number(boot->high)},
                          {"standard_error", json_number(boot->standard_error)}};
  else
    j["fid_bootstrap"] = nullptr;
  return j;
}

// The human-readable report.
std::string fid_text(const FidOptions& o, const Features& fa, const Features& fb, const ExtractorSource& source,
                     const FidReport& r) {
  const metrics::FidResult& f = r.f;
  const std::optional<metrics::KidResult>& k = r.k;
  const std::optional<metrics::FidBootstrap>& boot = r.boot;
  const auto side = [&](const Features& x, std::size_t n) {
    return x.stats ? x.path + " (statistics: mu [" + std::to_string(f.dims) + "], sigma [" + std::to_string(f.dims) +
                         ", " + std::to_string(f.dims) + "])\n"
                   : x.path + " (" + std::to_string(n) + " x " + std::to_string(f.dims) + ")\n";
  };
  std::string out = "A: " + side(fa, f.n_a) + "B: " + side(fb, f.n_b);
  if (source.loaded)
    out += "image sets through the extractor " + source.loaded->record.file + " (sha256 " +
           source.loaded->record.sha256 + ")\n";
  out += "FID " + number_text(f.fid) + "  (" + metrics::to_string(f.route) +
         " route; ||mu_a - mu_b||^2 " + number_text(f.mean_term, "%.6g") + ", Tr S_a " +
         number_text(f.trace_a, "%.6g") + ", Tr S_b " + number_text(f.trace_b, "%.6g") +
         ", Tr((S_a S_b)^1/2) " + number_text(f.trace_sqrt, "%.6g") + ")\n";
  if (f.clamping.count == 0)
    out += "  no negative eigenvalue needed clamping\n";
  else
    out += "  " + std::to_string(f.clamping.count) +
           " negative eigenvalues (rounding) set to 0; largest |value| " +
           number_text(f.clamping.largest_magnitude, "%.3g") + ", " +
           number_text(f.clamping.largest_relative, "%.3g") + " of its matrix's largest\n";
  if (boot)
    out += "  bootstrap: " + number_text(100.0 * boot->level, "%g") + "% interval [" +
           number_text(boot->low, "%.6g") + ", " + number_text(boot->high, "%.6g") +
           "], standard error " + number_text(boot->standard_error, "%.3g") + " (" +
           std::to_string(boot->replicates) + " replicates)\n";
  if (k)
    out += "KID " + number_text(k->kid, "%.6g") + " +- " + number_text(k->kid_stderr, "%.3g") +
           "  (mean and standard deviation over " + std::to_string(k->subsets) + " subsets of " +
           std::to_string(k->subset_size) + " rows, seed " + std::to_string(o.seed) + ")\n";
  else
    out += "KID not computed: it needs the features, and a statistics file holds only mu and sigma\n";
  out += "FID is biased by the sample size: compare FIDs only at equal N (KID is unbiased).\n";
  if (fa.stats || fb.stats) out += "A statistics file does not record its N: make both sides' statistics at equal N.\n";
  return out;
}

int run_fid(const FidOptions& o) {
  const metrics::TraceRoute route = checked_route(o);
  ExtractorSource source{o.extractor, {}};
  const Features fa = read_input(o.a, "A", source, o.data_dir);
  const Features fb = read_input(o.b, "B", source, o.data_dir);
  if (o.bootstrap > 0 && (fa.stats || fb.stats))
    throw UsageError(std::string("--bootstrap resamples the features' rows, but ") + (fa.stats ? "A ('" : "B ('") +
                     (fa.stats ? fa.path : fb.path) +
                     "') is a statistics file (mu, sigma only): drop --bootstrap or give the features (.npy)");
  const FidReport r = measure(o, fa, fb, route);
  if (o.json)
    std::cout << fid_json(o, fa, fb, source, r).dump(2) << "\n";
  else
    std::cout << fid_text(o, fa, fb, source, r);
  return 0;
}

}  // namespace

void add_fid_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<FidOptions>();
  auto* app = root.add_subcommand(
      "fid",
      "FID and KID between two feature matrices (.npy, N x D, float16/32/64), e.g. features of generated and of\n"
      "held-out real images. FID = ||mu_a - mu_b||^2 + Tr(S_a + S_b - 2 (S_a S_b)^1/2) in FP64 with N - 1\n"
      "covariances, the trace term from symmetric eigen-decompositions (no complex sqrtm); negative eigenvalues\n"
      "left by rounding are set to 0 and reported. KID: unbiased MMD^2, kernel (x.y/d + 1)^3, mean and standard\n"
      "deviation over seeded random subsets (torch-fidelity's defaults). FID is biased by N: compare FIDs only at\n"
      "equal N (and the same extractor), or compare KID. Image sets (N x 1 x H x W or N x H x W .npy in [0, 1], e.g.\n"
      "samples.npy, or mnist-test / mnist-train) pass through --extractor's features first. Either side may be a\n"
      "FID statistics file instead (.npz with mu [d] and sigma [d, d], float32 or float64, as pytorch-fid --save-stats\n"
      "and clean-fid write it): FID only, no KID or bootstrap; sigma must be symmetric within 1e-4 of its largest\n"
      "variance. A statistics file does not record N: compare statistics made at equal N.\n"
      "Exit code 0; 2 for unusable input.\n"
      "Example: mpverify fid generated.npy real.npy --bootstrap 200 --json\n"
      "         mpverify fid generated.npy real_stats.npz   (pytorch-fid --save-stats of the real images)");
  app->add_option("A", o->a,
                  "The first set (e.g. generated): N_a x D features (.npy), an image set (.npy of images, "
                  "mnist-test, mnist-train), or FID statistics (.npz with mu and sigma)")
      ->required()
      ->type_name("SET");
  app->add_option("B", o->b, "The second set (e.g. held-out real), as A")->required()->type_name("SET");
  app->add_option("--extractor", o->extractor,
                  "The feature extractor for image sets (mpverify feature-extractor --out FILE; 28 x 28 images)")
      ->type_name("FILE");
  app->add_option("--data-dir", o->data_dir, "Where MNIST's files are for mnist-test / mnist-train "
                                             "(default: as train --data mnist)")
      ->type_name("DIR");
  app->add_flag("--json", o->json, "Print one JSON document (fid, kid, kid_stderr, n_a, n_b, dims, ...)");
  app->add_option("--seed", o->seed, "Seed of the KID subsets and the bootstrap (default 0)")->type_name("S");
  app->add_option("--kid-subsets", o->kid_subsets, "KID: number of random subsets (default 100)")
      ->type_name("K")
      ->check(count_from_to(1, 1000000, "each subset is one KID estimate"));
  app->add_option("--kid-subset-size", o->kid_subset_size,
                  "KID: rows per subset, drawn without replacement (default min(1000, N_a, N_b))")
      ->type_name("M");
  app->add_option("--bootstrap", o->bootstrap,
                  "Also a bootstrap interval for the FID from B replicates (rows resampled with replacement; "
                  "default 0: none)")
      ->type_name("B")
      ->check(count_from_to(0, 100000, "each replicate computes one FID, O(d^3)"));
  app->add_option("--level", o->level, "Level of the bootstrap's percentile interval (default 0.95)")->type_name("L");
  app->add_option("--route", o->route,
                  "FID trace term: nuclear-norm (default; noise stays at eps) or symmetric-eigen "
                  "(eigenvalues of S_a^1/2 S_b S_a^1/2)")
      ->type_name("ROUTE");

  commands.push_back({app, [o] { return run_fid(*o); }});
}

}  // namespace mpverify::cli
