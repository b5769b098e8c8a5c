#include "metrics/parity_gate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "metrics/sequential_gate.h"

namespace mpverify::metrics {

namespace {

using nlohmann::json;

// The warm-up the loss envelope leaves out: the first ceil(10%) of the steps,
// where every run's loss falls fast from its own initialisation and the
// envelope's width says little.
constexpr double kEnvelopeWarmupFraction = 0.1;

std::string file_of(const RunDirectory& run, const char* file = "summary.json") {
  std::string s = "'";
  s += run.name;
  s += "/";
  s += file;
  s += "'";
  return s;
}

[[noreturn]] void bad(const RunDirectory& run, const std::string& what, const char* file = "summary.json") {
  throw InputError(file_of(run, file) + ": " + what);
}

std::string number_text(double v, const char* format = "%.4g") {
  char text[64];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

// A number that must be finite (nlohmann reads 1e999 as inf).
double finite_number(const RunDirectory& run, const json& v, const std::string& key) {
  if (!v.is_number()) bad(run, key + " is " + v.dump() + ", expected a number");
  const double x = v.get<double>();
  if (!std::isfinite(x)) bad(run, key + " is not a finite number");
  return x;
}

// The divergence the summary itself declares; "" when none.
std::string summary_divergence(const RunDirectory& run) {
  const json& s = run.summary;
  if (const auto a = s.find("aborted"); a != s.end()) {
    if (!a->is_boolean()) bad(run, "\"aborted\" is " + a->dump() + ", expected true or false");
    if (a->get<bool>()) return "summary.json: aborted is true (the loss scaler gave up)";
  }
  if (const auto f = s.find("final_loss"); f != s.end()) {
    if (f->is_null()) return "summary.json: final_loss is null (non-finite)";
    finite_number(run, *f, "final_loss");
  }
  return "";
}

const json& evaluation_of(const RunDirectory& run, const char* metric) {
  const auto e = run.summary.find("evaluation");
  if (e == run.summary.end() || !e->is_object()) {
    std::string m = "has no \"evaluation\" object, which --metric ";
    m += metric;
    m += " reads (a run from a `train` without evaluation? rerun it with the current mpverify)";
    bad(run, m);
  }
  return *e;
}

std::string keys_of(const json& object) {
  std::string keys;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (!keys.empty()) keys += ", ";
    keys += it.key();
  }
  return keys.empty() ? "nothing" : keys;
}

// The evaluation's `key`: nullopt when null (the run diverged); bad input when absent.
std::optional<double> evaluation_value(const RunDirectory& run, const json& evaluation, const char* key,
                                       const char* metric) {
  const auto v = evaluation.find(key);
  if (v == evaluation.end()) {
    std::string m = "evaluation has no \"";
    m += key;
    m += "\" (it has: " + keys_of(evaluation) + "); does --metric ";
    m += metric;
    m += " match these runs? (accuracy: mlp/cnn runs; fid: dcgan runs)";
    bad(run, m);
  }
  if (v->is_null()) return std::nullopt;
  std::string name = "evaluation.";
  name += key;
  return finite_number(run, *v, name);
}

// The config values that make two runs the same experiment.
const std::vector<std::string> kSharedConfigKeys = {"model", "data", "train_size", "steps", "batch_size", "optimizer"};
// ... and those that must also agree within a side (one recipe per side).
const std::vector<std::string> kSideConfigKeys = {"recipe", "scaler", "backend"};

json config_value(const RunDirectory& run, const std::string& key) {
  const auto c = run.summary.find("config");
  if (c == run.summary.end()) return nullptr;
  const auto v = c->find(key);
  return v == c->end() ? json(nullptr) : *v;
}

void check_same(const std::vector<const RunDirectory*>& runs, const std::vector<std::string>& keys,
                const std::string& why) {
  for (const std::string& key : keys)
    for (const RunDirectory* run : runs) {
      const json a = config_value(*runs.front(), key), b = config_value(*run, key);
      if (a != b)
        throw InputError("mismatched configs: " + file_of(*runs.front()) + " has config." + key + " = " + a.dump() +
                         " but " + file_of(*run) + " has " + b.dump() + " (" + why + ")");
    }
}

// summary.evaluation[key] (null when absent); nullopt when the run has no evaluation.
std::optional<json> evaluation_entry(const RunDirectory& run, const char* key) {
  const auto e = run.summary.find("evaluation");
  if (e == run.summary.end() || !e->is_object()) return std::nullopt;
  const auto v = e->find(key);
  return v == e->end() ? json(nullptr) : *v;
}

void check_same_evaluation_size(const std::vector<const RunDirectory*>& runs, const char* key) {
  std::optional<json> first;
  const RunDirectory* first_run = nullptr;
  for (const RunDirectory* run : runs) {
    const std::optional<json> entry = evaluation_entry(*run, key);
    if (!entry) continue;
    json value = *entry;
    // The extractor is its bytes (sha256), whatever the file was called.
    if (std::string(key) == "extractor" && value.is_object() && value.contains("sha256")) value = value["sha256"];
    if (!first) {
      first = value;
      first_run = run;
    } else if (value != *first) {
      std::string m = "mismatched evaluations: ";
      const std::string shown = std::string(key) == "extractor" ? "extractor.sha256" : key;
      m += file_of(*first_run) + " has evaluation." + shown + " = " + first->dump() + " but " + file_of(*run) +
           " has " + value.dump();
      const std::string k = key;
      if (k == "n" || k == "n_real")
        m += " (FIDs from different sample sizes differ by their bias alone: evaluate both sides with the same n "
             "and the same test split)";
      else if (k == "extractor")
        m += " (FIDs through different feature extractors are not comparable: evaluate both sides with the same "
             "--extractor file)";
      else
        m += " (accuracies on different test sets are not comparable)";
      throw InputError(m);
    }
  }
}

struct Side {
  const Ensemble* ensemble;  // nullptr for a value file
  const char* name;  // "baseline" / "candidate"
  std::vector<RunOutcome> outcomes;
  std::vector<std::vector<std::optional<double>>> curves;  // loss only
};

std::optional<std::vector<std::int64_t>> pairable_seeds(const Side& b, const Side& c) {
  std::set<std::int64_t> sb, sc;
  for (const RunOutcome& o : b.outcomes) {
    if (!o.seed || !sb.insert(*o.seed).second) return std::nullopt;
  }
  for (const RunOutcome& o : c.outcomes) {
    if (!o.seed || !sc.insert(*o.seed).second) return std::nullopt;
  }
  if (sb != sc || sb.size() < 2) return std::nullopt;
  return std::vector<std::int64_t>(sb.begin(), sb.end());
}

std::string seeds_text(const std::vector<std::int64_t>& seeds) {
  std::string t;
  for (std::int64_t s : seeds) {
    if (!t.empty()) t += ",";
    t += std::to_string(s);
  }
  return t;
}

LossEnvelope compute_envelope(const Side& b, const Side& c, double margin, std::int64_t steps) {
  LossEnvelope e;
  const auto warmup = static_cast<std::int64_t>(std::ceil(kEnvelopeWarmupFraction * static_cast<double>(steps)));
  e.first_step = std::min(warmup, steps - 1);
  e.last_step = steps - 1;
  e.expected_outside_fraction = 2.0 / static_cast<double>(b.curves.size() + 1);
  for (std::int64_t s = e.first_step; s < steps; ++s) {
    const auto k = static_cast<std::size_t>(s);
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    bool finite = true;
    for (const auto& curve : b.curves) {
      if (!curve[k]) finite = false;
      else {
        lo = std::min(lo, *curve[k]);
        hi = std::max(hi, *curve[k]);
      }
    }
    for (const auto& curve : c.curves) {
      ++e.points;
      if (!finite) continue;  // a baseline run non-finite here: no envelope at this step
      const bool out = !curve[k] || *curve[k] < lo || *curve[k] > hi;
      const bool out_widened = !curve[k] || *curve[k] < lo - margin || *curve[k] > hi + margin;
      e.outside += out;
      e.outside_widened += out_widened;
      if (out_widened && !e.first_step_outside_widened) e.first_step_outside_widened = s;
    }
  }
  return e;
}

std::string interval_text(const EquivalenceResult& t) {
  std::string text = "[";
  text += number_text(t.lower);
  text += ", ";
  text += number_text(t.upper);
  text += "]";
  return text;
}

std::string level_text(double alpha) { return number_text(100 * (1 - 2 * alpha), "%.4g") + "%"; }

}  // namespace

const char* to_string(GateMetric metric) {
  switch (metric) {
    case GateMetric::accuracy: return "accuracy";
    case GateMetric::fid: return "fid";
    case GateMetric::loss: return "loss";
    case GateMetric::kid: return "kid";
    case GateMetric::custom: return "custom";
  }
  return "?";
}

const char* to_string(Direction direction) {
  switch (direction) {
    case Direction::unspecified: return "unspecified";
    case Direction::higher_is_better: return "higher";
    case Direction::lower_is_better: return "lower";
  }
  return "?";
}

std::optional<GateMetric> parse_gate_metric(const std::string& name) {
  if (name == "accuracy") return GateMetric::accuracy;
  if (name == "fid") return GateMetric::fid;
  if (name == "loss") return GateMetric::loss;
  if (name == "kid") return GateMetric::kid;
  return std::nullopt;
}

Direction direction_of_name(const std::string& name) {
  // Names a run's evaluation commonly uses, by what they measure: errors, losses and distances are lower-is-
  // better; scores and rates of success higher-is-better.
  static const std::vector<std::string> lower{"loss", "test_loss", "val_loss", "eval_loss", "perplexity", "ppl",
                                              "test_perplexity", "val_perplexity", "bpc", "bits_per_char",
                                              "error", "test_error", "error_rate", "wer", "cer", "fid", "kid", "mse",
                                              "rmse", "mae", "nll"};
  static const std::vector<std::string> higher{"accuracy", "test_accuracy", "val_accuracy", "acc", "top1",
                                               "top5", "bleu", "rouge", "f1", "auc", "auroc", "precision", "recall",
                                               "exact_match", "psnr", "ssim", "inception_score"};
  for (const std::string& n : lower)
    if (n == name) return Direction::lower_is_better;
  for (const std::string& n : higher)
    if (n == name) return Direction::higher_is_better;
  return Direction::unspecified;
}

Direction natural_direction(GateMetric metric) {
  switch (metric) {
    case GateMetric::accuracy: return Direction::higher_is_better;
    case GateMetric::fid:
    case GateMetric::kid:
    case GateMetric::loss: return Direction::lower_is_better;
    case GateMetric::custom: return Direction::unspecified;
  }
  return Direction::unspecified;
}

std::vector<const RunDirectory*> comparable_runs(const Ensemble& baseline, const Ensemble& candidate) {
  std::vector<const RunDirectory*> all, side_b, side_c;
  for (const RunDirectory& r : baseline.runs) side_b.push_back(&r);
  for (const RunDirectory& r : candidate.runs) side_c.push_back(&r);
  all = side_b;
  all.insert(all.end(), side_c.begin(), side_c.end());
  for (const RunDirectory* r : all)
    if (!r->summary.contains("config") || !r->summary["config"].is_object())
      bad(*r, "has no \"config\" object (not written by `mpverify train`?)");
  check_same(all, kSharedConfigKeys, "baseline and candidate must train the same model on the same data for as long");
  check_same(side_b, kSideConfigKeys, "one side must be one recipe");
  check_same(side_c, kSideConfigKeys, "one side must be one recipe");
  return all;
}

int gate_exit_code(Verdict verdict) {
  switch (verdict) {
    case Verdict::equivalent: return 0;
    case Verdict::not_equivalent: return 1;
    case Verdict::inconclusive: return 3;
  }
  return 2;
}

namespace {

void check_gate_options(const GateOptions& options) {
  if (!(std::isfinite(options.margin) && options.margin > 0))
    throw InputError("--margin must be a finite number > 0 (in the metric's unit; accuracy: percentage points)");
  if (!(options.alpha > 0 && options.alpha < 0.5)) throw InputError("--alpha must lie in (0, 0.5)");
  if (!(options.loss_tail_fraction > 0 && options.loss_tail_fraction <= 1))
    throw InputError("the loss tail fraction must lie in (0, 1]");
  const Direction natural = natural_direction(options.metric);
  if (natural != Direction::unspecified && options.direction != Direction::unspecified &&
      options.direction != natural)
    throw InputError(std::string("--metric ") + to_string(options.metric) + " is " +
                     (natural == Direction::higher_is_better ? "higher" : "lower") +
                     "-is-better; drop the contradicting direction flag");
  if (options.metric == GateMetric::custom && options.metric_name.empty())
    throw InputError("a custom metric needs its name");
}

// The result's name, unit and direction from the options.
void name_result(GateResult& g, const GateOptions& options) {
  g.metric = options.metric;
  g.metric_name = options.metric == GateMetric::custom ? options.metric_name : to_string(options.metric);
  g.direction = options.direction != Direction::unspecified ? options.direction : natural_direction(options.metric);
  g.margin = options.margin;
  g.alpha = options.alpha;
}

// --metric loss: the runs' step count, the loss key and the tail gated (into g).
std::int64_t prepare_loss_gate(GateResult& g, const std::vector<const RunDirectory*>& all,
                               const GateOptions& options) {
  const json s = config_value(*all.front(), "steps");
  if (!s.is_number_integer() || s.get<std::int64_t>() < 1)
    bad(*all.front(), "config.steps is " + s.dump() + ", expected an integer >= 1 (the loss gate needs it)");
  const std::int64_t steps = s.get<std::int64_t>();
  for (const RunDirectory* r : all)
    if (!r->steps) bad(*r, "was not read (read the runs with their steps for --metric loss)", "steps.jsonl");
  g.loss_key = options.loss_key;
  if (g.loss_key.empty()) {
    const json& first = all.front()->steps->front();
    g.loss_key = first.contains("loss") || !first.contains("loss_g") ? "loss" : "loss_g";
  }
  g.unit = g.loss_key;
  g.loss_tail_steps = static_cast<std::size_t>(
      std::max<double>(1, std::ceil(options.loss_tail_fraction * static_cast<double>(steps))));
  g.loss_tail_first_step = steps - static_cast<std::int64_t>(g.loss_tail_steps);
  return steps;
}

// Held-out test accuracy in percentage points.
void accuracy_outcome(const RunDirectory& run, const char* metric, RunOutcome& o) {
  const json& e = evaluation_of(run, metric);
  o.value = evaluation_value(run, e, "test_accuracy", metric);
  if (o.value && (*o.value < 0 || *o.value > 1))
    bad(run, "evaluation.test_accuracy is " + number_text(*o.value) + ", expected a fraction in [0, 1]");
  if (o.value) *o.value *= 100;
  else if (o.divergence.empty()) o.divergence = "summary.json: evaluation.test_accuracy is null (diverged)";
}

// The FID and, when the run has one, its bootstrap standard error.
void fid_outcome(const RunDirectory& run, const char* metric, RunOutcome& o) {
  const json& e = evaluation_of(run, metric);
  o.value = evaluation_value(run, e, "fid", metric);
  if (o.value && *o.value < 0) bad(run, "evaluation.fid is negative");
  if (!o.value && o.divergence.empty()) o.divergence = "summary.json: evaluation.fid is null (diverged)";
  if (const auto se = e.find("fid_stderr"); se != e.end() && !se->is_null()) {
    o.stderr_value = finite_number(run, *se, "evaluation.fid_stderr");
    if (*o.stderr_value < 0) bad(run, "evaluation.fid_stderr is negative");
  }
  if (const auto n = e.find("fid_bootstrap_replicates"); n != e.end() && n->is_number_integer())
    o.replicates = n->get<std::int64_t>();
}

// The KID (its kid_stderr is no standard error: parity_gate.h).
void kid_outcome(const RunDirectory& run, const char* metric, RunOutcome& o) {
  const json& e = evaluation_of(run, metric);
  o.value = evaluation_value(run, e, "kid", metric);
  if (!o.value && o.divergence.empty()) o.divergence = "summary.json: evaluation.kid is null (diverged)";
}

// Any other figure of the run's evaluation (test_loss, perplexity, a user's own), in its own unit.
void named_outcome(const RunDirectory& run, const std::string& name, RunOutcome& o) {
  const json& e = evaluation_of(run, name.c_str());
  o.value = evaluation_value(run, e, name.c_str(), name.c_str());
  if (!o.value && o.divergence.empty()) o.divergence = "summary.json: evaluation." + name + " is null (diverged)";
}

// The mean loss over the tail; the run's loss curve is kept on its side (for the envelope).
void loss_outcome(const RunDirectory& run, const GateResult& g, std::int64_t steps, Side& side, RunOutcome& o) {
  side.curves.push_back(read_loss_curve(run, g.loss_key, steps, !o.divergence.empty()));
  const auto& curve = side.curves.back();
  double sum = 0;
  for (std::int64_t s = g.loss_tail_first_step; s < steps; ++s) {
    const auto& v = curve[static_cast<std::size_t>(s)];
    if (!v) {
      if (o.divergence.empty())
        o.divergence = "steps.jsonl: " + g.loss_key + " is non-finite at step " + std::to_string(s);
      break;
    }
    sum += *v;
  }
  if (o.divergence.empty()) o.value = sum / static_cast<double>(g.loss_tail_steps);
}

// Every run's value of the metric (or why it has none) into its side's outcomes.
void read_outcomes(Side& side, const GateResult& g, const GateOptions& options, std::int64_t steps) {
  const char* metric = to_string(options.metric);
  for (const RunDirectory& run : side.ensemble->runs) {
    RunOutcome o;
    o.run = run.name;
    o.seed = run.seed;
    o.divergence = summary_divergence(run);
    if (options.metric == GateMetric::accuracy) accuracy_outcome(run, metric, o);
    else if (options.metric == GateMetric::fid) fid_outcome(run, metric, o);
    else if (options.metric == GateMetric::kid) kid_outcome(run, metric, o);
    else if (options.metric == GateMetric::custom) named_outcome(run, options.metric_name, o);
    else loss_outcome(run, g, steps, side, o);
    if (!o.divergence.empty()) o.value.reset();
    side.outcomes.push_back(std::move(o));
  }
}

// After the values, so that a run lacking the metric is reported as that.
void check_evaluation_sizes(const std::vector<const RunDirectory*>& all, GateMetric metric) {
  if (metric != GateMetric::loss)  // fid, kid: n; accuracy and the evaluation's other figures: test_size
    check_same_evaluation_size(all, metric == GateMetric::accuracy || metric == GateMetric::custom ? "test_size" : "n");
  // FIDs (and KIDs) compare only at the same real set size and through the
  // same extractor (its file's sha256; runs without these fields pass as before).
  if (metric == GateMetric::fid || metric == GateMetric::kid) {
    check_same_evaluation_size(all, "n_real");
    check_same_evaluation_size(all, "extractor");
  }
}

// The seeds to pair on (none: Welch, or fewer than 2 runs on a side).
std::optional<std::vector<std::int64_t>> choose_pairing(const Side& b, const Side& c, const GateOptions& options) {
  const bool enough = b.outcomes.size() >= 2 && c.outcomes.size() >= 2;
  std::optional<std::vector<std::int64_t>> seeds;
  if (enough && options.pairing != Pairing::welch) seeds = pairable_seeds(b, c);
  if (options.pairing == Pairing::paired && !seeds)
    throw InputError(!enough ? "--method paired needs >= 2 runs per side"
                             : "--method paired needs the same set of >= 2 distinct seeds on both sides "
                               "(summary.config.seed, or a value file's seed column); these differ (or a run has "
                               "no seed)");
  return seeds;
}

// accept_single_run with one run per side: each value needs its standard
// error and replicate count; bad input otherwise (the user asked for a test
// these runs cannot give).
void check_single_run_errors(const Side& b, const Side& c, const GateOptions& options) {
  if (options.metric == GateMetric::kid)
    throw InputError("--accept-single-run: KID's kid_stderr is the spread of one subset's estimate, not a standard "
                     "error of the KID; give >= 2 runs per side");
  if (options.metric == GateMetric::accuracy || options.metric == GateMetric::loss)
    throw InputError(std::string("--accept-single-run: --metric ") + to_string(options.metric) +
                     " carries no standard error per run; give >= 2 runs per side");
  for (const Side* side : {&b, &c}) {
    const RunOutcome& o = side->outcomes.front();
    if (!o.divergence.empty()) continue;  // the divergence decides
    if (!o.stderr_value)
      throw InputError("'" + o.run + "': --accept-single-run needs each value's standard error (a run's "
                       "evaluation.fid_stderr, or a value file's stderr and replicates columns); or give >= 2 runs "
                       "per side");
    if (!o.replicates || *o.replicates < 2)
      throw InputError("'" + o.run + "': --accept-single-run needs how many replicates the standard error came from "
                       "(evaluation.fid_bootstrap_replicates, or a value file's replicates column), at least 2: the "
                       "t quantile's degrees of freedom are replicates - 1");
  }
}

// A diverged run decides, whatever the statistics say: true (and g's verdict
// and reason set) when one did.
bool diverged_run_decides(GateResult& g, const Side& b, const Side& c) {
  for (const Side* side : {&c, &b})
    for (const RunOutcome& o : side->outcomes)
      if (!o.divergence.empty()) {
        g.verdict = Verdict::not_equivalent;
        g.reason = std::string(side->name) + " run '" + o.run + "' diverged (" + o.divergence +
                   "): a diverged run never passes";
        return true;
      }
  return false;
}

// The equivalence test (single FID, paired or Welch) on the sides' values, into g.test and g.notes.
void run_equivalence_test(GateResult& g, const Side& b, const Side& c, const GateOptions& options,
                          double resolution, const std::optional<std::vector<std::int64_t>>& seeds) {
  EquivalenceOptions eo{options.margin, options.alpha};
  eo.resolution = resolution;
  if (b.outcomes.size() == 1 && c.outcomes.size() == 1) {  // accept_single_run (checked)
    const RunOutcome &ob = b.outcomes[0], &oc = c.outcomes[0];
    const double df = replicates_df(static_cast<std::size_t>(*ob.replicates), static_cast<std::size_t>(*oc.replicates));
    g.test = stderr_t_tost(*ob.value, *ob.stderr_value, *oc.value, *oc.stderr_value, df, eo);
    g.notes.push_back(
        "one run per side (--accept-single-run): the interval covers each value's own sampling noise (its standard "
        "error, t with min(replicates) - 1 = " + number_text(df) + " degrees of freedom), not seed-to-seed "
        "variance (train >= 2 seeds per side to cover it)");
  } else if (seeds) {
    std::map<std::int64_t, double> vb, vc;
    for (const RunOutcome& o : b.outcomes) vb[*o.seed] = *o.value;
    for (const RunOutcome& o : c.outcomes) vc[*o.seed] = *o.value;
    std::vector<double> xb, xc;
    for (std::int64_t s : *seeds) {
      xb.push_back(vb[s]);
      xc.push_back(vc[s]);
    }
    g.test = paired_tost(xb, xc, eo);
    g.paired_seeds = *seeds;
    g.notes.push_back("paired on seeds " + seeds_text(*seeds) + " (summary.config.seed): both sides ran the same seeds");
  } else {
    std::vector<double> xb, xc;
    for (const RunOutcome& o : b.outcomes) xb.push_back(*o.value);
    for (const RunOutcome& o : c.outcomes) xc.push_back(*o.value);
    g.test = welch_tost(xb, xc, eo);
    g.notes.push_back(options.pairing == Pairing::welch ? "Welch (unpaired), as --method welch asked"
                                                        : "Welch (unpaired): the two sides ran different seed sets");
  }
}

// With a direction, which way the candidate left the margin.
std::string worse_or_better(const GateResult& g) {
  if (g.direction == Direction::unspecified) return "";
  const bool higher = g.test->difference > 0;
  const bool worse = higher == (g.direction == Direction::lower_is_better);
  return worse ? ": the candidate is worse" : ": the candidate is better (by more than the margin)";
}

// Why the test decided as it did: where its interval lies against the margin.
std::string verdict_reason(const GateResult& g, const GateOptions& options) {
  const std::string ci = level_text(options.alpha) + " interval " + interval_text(*g.test);
  const std::string m = number_text(options.margin);
  switch (g.verdict) {
    case Verdict::equivalent: return "the " + ci + " lies inside (-" + m + ", " + m + ")";
    case Verdict::not_equivalent:
      return "the " + ci + " lies entirely outside [-" + m + ", " + m + "]" + worse_or_better(g);
    case Verdict::inconclusive: return "the " + ci + " is neither inside (-" + m + ", " + m + ") nor entirely outside it";
  }
  return g.reason;
}

}  // namespace

namespace {

// Accuracy moves in steps of 100/test_size points: the spread a zero sample
// spread stands for (equivalence.h); 0 (continuous) for the other metrics.
// Every run has an evaluation (the values came from it) and the same
// test_size (checked before).
double accuracy_resolution(const RunDirectory& first_run, GateMetric metric) {
  if (metric != GateMetric::accuracy) return 0;
  if (const auto n = evaluation_entry(first_run, "test_size"); n && n->is_number() && n->get<double>() >= 1)
    return 100.0 / n->get<double>();
  return 0;
}

// Fewer than 2 runs on a side, and no single-run test asked for: no verdict.
void too_few_runs(GateResult& g, const Side& b, const Side& c) {
  const std::size_t nb = b.outcomes.size(), nc = c.outcomes.size();
  g.verdict = Verdict::inconclusive;
  g.reason = "fewer than 2 runs on a side (baseline " + std::to_string(nb) + ", candidate " + std::to_string(nc) +
             "): one run shows no seed-to-seed spread, so no interval can be trusted; need more seeds: >= 2 runs "
             "per side (10 or more recommended)";
  if (nb == 1 && nc == 1)
    g.reason += ", or --accept-single-run to test on each value's own standard error (FID's bootstrap error; "
                "seed-to-seed variance then not covered)";
}

// In rounds (sequential_gate.h): runs in seed order; a diverged run still decides first.
void decide_sequential(GateResult& g, Side& b, Side& c, const GateOptions& options, double resolution) {
  order_by_seed(b.outcomes, "baseline");
  order_by_seed(c.outcomes, "candidate");
  g.baseline_runs = b.outcomes;
  g.candidate_runs = c.outcomes;
  start_rounds(g, options);
  if (diverged_run_decides(g, b, c)) return;
  decide_in_rounds(g, b.outcomes, c.outcomes, options, resolution);
}

// From the sides' outcomes to the verdict: pairing, divergence, the test.
void decide(GateResult& g, Side& b, Side& c, const GateOptions& options, double resolution) {
  if (options.sequential) return decide_sequential(g, b, c, options, resolution);
  const bool single = b.outcomes.size() == 1 && c.outcomes.size() == 1;
  const std::optional<std::vector<std::int64_t>> seeds = choose_pairing(b, c, options);
  if (single && options.accept_single_run) check_single_run_errors(b, c, options);
  g.baseline_runs = b.outcomes;
  g.candidate_runs = c.outcomes;
  if (diverged_run_decides(g, b, c)) return;
  if (b.outcomes.size() < 2 || c.outcomes.size() < 2) {
    if (!(single && options.accept_single_run)) return too_few_runs(g, b, c);
  }
  run_equivalence_test(g, b, c, options, resolution, seeds);
  g.verdict = g.test->verdict;
  g.reason = verdict_reason(g, options);
}

// A value file's record as a run outcome: named file:line (or its source), a non-finite value diverged.
RunOutcome file_outcome(const ValueFile& file, const ValueRecord& r) {
  RunOutcome o;
  o.run = r.source.empty() ? file.name + ":" + std::to_string(r.line) : r.source;
  o.seed = r.seed;
  o.value = r.value;
  o.stderr_value = r.stderr_value;
  o.replicates = r.replicates;
  if (!r.value) o.divergence = "the value is " + r.non_finite + ", not a finite number";
  return o;
}

}  // namespace

GateResult evaluate_gate(const Ensemble& baseline, const Ensemble& candidate, const GateOptions& options) {
  check_gate_options(options);
  GateResult g;
  name_result(g, options);
  // A figure of the runs' evaluation by a common name knows its direction (a value file's column states it).
  if (g.direction == Direction::unspecified && options.metric == GateMetric::custom)
    g.direction = direction_of_name(options.metric_name);
  g.baseline = baseline.name;
  g.candidate = candidate.name;

  const std::vector<const RunDirectory*> all = comparable_runs(baseline, candidate);
  std::int64_t steps = 0;
  if (options.metric == GateMetric::loss) steps = prepare_loss_gate(g, all, options);
  else if (options.metric == GateMetric::custom) g.unit = options.metric_name;
  else g.unit = options.metric == GateMetric::accuracy ? "points" : options.metric == GateMetric::fid ? "FID" : "KID";

  Side b{&baseline, "baseline", {}, {}}, c{&candidate, "candidate", {}, {}};
  for (Side* side : {&b, &c}) read_outcomes(*side, g, options, steps);
  check_evaluation_sizes(all, options.metric);
  if (options.metric == GateMetric::loss) g.envelope = compute_envelope(b, c, options.margin, steps);
  decide(g, b, c, options, accuracy_resolution(*all.front(), options.metric));
  return g;
}

GateResult evaluate_gate(const ValueFile& baseline, const ValueFile& candidate, const GateOptions& options) {
  check_gate_options(options);
  for (const ValueFile* f : {&baseline, &candidate})
    if (f->has_steps)
      throw InputError("'" + f->name + "' is a curve (it has a step column): give one value per seed, or gate the "
                       "curves with --mode curve or --mode mlperf");
  GateResult g;
  name_result(g, options);
  g.baseline = baseline.name;
  g.candidate = candidate.name;
  g.unit = g.metric_name;
  Side b{nullptr, "baseline", {}, {}}, c{nullptr, "candidate", {}, {}};
  b.outcomes.reserve(baseline.records.size());
  c.outcomes.reserve(candidate.records.size());
  for (const ValueRecord& r : baseline.records) b.outcomes.push_back(file_outcome(baseline, r));
  for (const ValueRecord& r : candidate.records) c.outcomes.push_back(file_outcome(candidate, r));
  decide(g, b, c, options, 0);
  return g;
}

const char* leaning_toward(const EquivalenceResult& t) {
  if (t.verdict != Verdict::inconclusive || !std::isfinite(t.difference) || std::fabs(t.difference) == t.margin)
    return nullptr;
  return std::fabs(t.difference) < t.margin ? "equivalent" : "not equivalent";
}

std::string gate_verdict_line(const GateResult& g) {
  std::string line = g.verdict == Verdict::equivalent       ? "EQUIVALENT"
                     : g.verdict == Verdict::not_equivalent ? "NOT EQUIVALENT"
                                                            : "INCONCLUSIVE";
  line += " (" + g.metric_name + (g.golden ? ", curve" : g.mlperf ? ", mlperf" : "") + "): ";
  if (!g.test) return line + g.reason + (g.sequential ? "; " + rounds_text(g) : "");
  const EquivalenceResult& t = *g.test;
  line += "candidate - baseline = " + number_text(t.difference) + " " + g.unit + ", " + level_text(t.alpha) +
          " CI " + interval_text(t) + ", margin ±" + number_text(t.margin) + "; ";
  if (t.method == EquivalenceMethod::paired)
    line += "paired TOST on " + std::to_string(t.n_baseline) + " seeds";
  else if (t.method == EquivalenceMethod::welch)
    line += "Welch TOST, n = " + std::to_string(t.n_baseline) + " / " + std::to_string(t.n_candidate) +
            ", df = " + number_text(t.df, "%.3g");
  else
    line += "one run per side (--accept-single-run), on the standard errors, t with df = " + number_text(t.df) +
            " (seed-to-seed variance not covered)";
  if (g.sequential) return line + "; " + rounds_text(g);
  line += ", alpha " + number_text(t.alpha);
  if (t.resolution_spread > 0)
    line += "; no spread between the runs, so their spread is taken to be the rounding to the accuracy's steps of " +
            number_text(t.resolution_spread) + " points (one test example)";
  if (g.verdict == Verdict::inconclusive && !(t.standard_error > 0)) {
    line += "; no spread between the runs (standard error 0), so no estimate of their noise: identical runs, or a "
            "metric too coarse to show it (e.g. accuracy on a small test set); use more seeds or a larger test set";
  } else if (g.verdict == Verdict::inconclusive) {
    line += "; need more seeds";
    if (t.seeds_needed)
      line += ": about " + std::to_string(*t.seeds_needed) +
              (t.method == EquivalenceMethod::paired ? " pairs" : " per side") +
              " if the observed difference and spread hold";
    else if (t.method == EquivalenceMethod::stderr_t)
      line += " (>= 2 runs per side)";
    if (const char* lean = leaning_toward(t))
      line += std::string("; the observed difference lies ") +
              (std::string(lean) == "equivalent" ? "inside" : "outside") + " the margin, so more seeds would point to " +
              (std::string(lean) == "equivalent" ? "EQUIVALENT" : "NOT EQUIVALENT");
  }
  return line;
}

namespace {

nlohmann::ordered_json golden_json(const GoldenCheck& c) {
  using oj = nlohmann::ordered_json;
  return {{"rtol", c.rtol},
          {"max_relative_deviation", std::isfinite(c.max_relative_deviation) ? oj(c.max_relative_deviation) : oj(nullptr)},
          {"worst_step", c.worst_step ? oj(*c.worst_step) : oj(nullptr)},
          {"worst_seed", c.worst_seed ? oj(*c.worst_seed) : oj(nullptr)},
          {"pairs", c.pairs},
          {"steps_compared", c.steps_compared},
          {"steps_outside", c.steps_outside}};
}

nlohmann::ordered_json sequential_json(const SequentialGate& s) {
  using oj = nlohmann::ordered_json;
  oj looks = oj::array();
  for (const LookResult& look : s.outcome.looks)
    looks.push_back({{"n", look.n},
                     {"level", look.level},
                     {"verdict", to_string(look.test.verdict)},
                     {"difference", look.test.difference},
                     {"ci_lower", look.test.lower},
                     {"ci_upper", look.test.upper}});
  const auto optional_count = [](const std::optional<std::size_t>& n) { return n ? oj(*n) : oj(nullptr); };
  return {{"looks", s.design.looks},
          {"spending", to_string(s.design.spending)},
          {"levels", s.levels},
          {"available", s.available},
          {"evaluated", looks},
          {"decided_at_look", s.outcome.decided_at ? oj(*s.outcome.decided_at + 1) : oj(nullptr)},
          {"undecided_at_last", s.outcome.undecided_at_last},
          {"next_look", optional_count(s.outcome.next_look)},
          {"more_per_side", s.outcome.next_look ? oj(*s.outcome.next_look - s.available) : oj(nullptr)}};
}

nlohmann::ordered_json mlperf_json(const MlperfCheck& m) {
  using oj = nlohmann::ordered_json;
  auto steps = [](const std::vector<double>& v) {
    oj a = oj::array();
    for (double x : v) a.push_back(std::isfinite(x) ? oj(x) : oj(nullptr));  // null: never reached
    return a;
  };
  auto finite = [](double x) { return std::isfinite(x) ? oj(x) : oj(nullptr); };
  return {{"target", m.target},       {"reached", m.reached},
          {"baseline_trimmed", steps(m.baseline_trimmed)}, {"candidate_trimmed", steps(m.candidate_trimmed)},
          {"mean_baseline", m.mean_baseline}, {"mean_candidate", m.mean_candidate},
          {"sd_baseline", m.sd_baseline},     {"sd_candidate", m.sd_candidate},
          {"t", finite(m.t)},                 {"df", m.df},
          {"p_slower", m.p_slower}};
}

}  // namespace

nlohmann::ordered_json gate_json(const GateResult& g) {
  using oj = nlohmann::ordered_json;
  auto optional_number = [](const std::optional<double>& v) { return v ? oj(*v) : oj(nullptr); };
  oj j;
  j["verdict"] = to_string(g.verdict);
  j["exit_code"] = gate_exit_code(g.verdict);
  j["line"] = gate_verdict_line(g);
  j["reason"] = g.reason;
  j["mode"] = g.golden ? "curve" : g.mlperf ? "mlperf" : "tost";
  j["metric"] = g.metric_name;
  j["unit"] = g.unit;
  j["direction"] = g.direction == Direction::unspecified ? oj(nullptr) : oj(to_string(g.direction));
  j["baseline"] = g.baseline;
  j["candidate"] = g.candidate;
  j["margin"] = g.margin;
  j["alpha"] = g.alpha;
  j["ci_level"] = 1 - 2 * g.alpha;
  if (g.test) {
    const EquivalenceResult& t = *g.test;
    j["method"] = to_string(t.method);
    j["n_baseline"] = t.n_baseline;
    j["n_candidate"] = t.n_candidate;
    j["mean_baseline"] = t.mean_baseline;
    j["mean_candidate"] = t.mean_candidate;
    j["sd_baseline"] = t.sd_baseline;
    j["sd_candidate"] = t.sd_candidate;
    j["sd_difference"] = t.method == EquivalenceMethod::paired ? oj(t.sd_difference) : oj(nullptr);
    j["difference"] = t.difference;
    j["standard_error"] = t.standard_error;
    j["df"] = std::isfinite(t.df) ? oj(t.df) : oj(nullptr);
    j["quantile"] = t.quantile;
    j["ci_lower"] = t.lower;
    j["ci_upper"] = t.upper;
    j["p_lower"] = t.p_lower;
    j["p_upper"] = t.p_upper;
    j["seeds_needed"] = t.seeds_needed ? oj(*t.seeds_needed) : oj(nullptr);
    const char* lean = leaning_toward(t);
    j["leaning_toward"] = lean ? oj(lean) : oj(nullptr);
    j["resolution_spread"] = t.resolution_spread > 0 ? oj(t.resolution_spread) : oj(nullptr);
  } else {
    j["method"] = nullptr;
    j["n_baseline"] = g.baseline_runs.size();
    j["n_candidate"] = g.candidate_runs.size();
  }
  j["paired_seeds"] = g.paired_seeds;
  j["notes"] = g.notes;
  for (const auto& [key, runs] : {std::pair{"baseline_runs", &g.baseline_runs}, {"candidate_runs", &g.candidate_runs}}) {
    oj list = oj::array();
    for (const RunOutcome& o : *runs)
      list.push_back({{"run", o.run},
                      {"seed", o.seed ? oj(*o.seed) : oj(nullptr)},
                      {"value", optional_number(o.value)},
                      {"stderr", optional_number(o.stderr_value)},
                      {"diverged", !o.divergence.empty()},
                      {"divergence", o.divergence.empty() ? oj(nullptr) : oj(o.divergence)}});
    j[key] = list;
  }
  if (g.sequential) j["sequential"] = sequential_json(*g.sequential);
  if (g.golden) j["golden"] = golden_json(*g.golden);
  if (g.mlperf) j["mlperf"] = mlperf_json(*g.mlperf);
  if (g.metric == GateMetric::loss && !g.golden && !g.mlperf) {
    oj loss = {{"key", g.loss_key}, {"tail_steps", g.loss_tail_steps}, {"tail_first_step", g.loss_tail_first_step}};
    if (g.envelope) {
      const LossEnvelope& e = *g.envelope;
      loss["envelope"] = {{"first_step", e.first_step},
                          {"last_step", e.last_step},
                          {"points", e.points},
                          {"outside", e.outside},
                          {"outside_widened", e.outside_widened},
                          {"outside_fraction", e.points ? oj(static_cast<double>(e.outside) / static_cast<double>(e.points)) : oj(nullptr)},
                          {"expected_outside_fraction", e.expected_outside_fraction},
                          {"first_step_outside_widened",
                           e.first_step_outside_widened ? oj(*e.first_step_outside_widened) : oj(nullptr)}};
    }
    j["loss"] = loss;
  }
  return j;
}

}  // namespace mpverify::metrics
