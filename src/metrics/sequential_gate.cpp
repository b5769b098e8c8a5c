#include "metrics/sequential_gate.h"

#include <algorithm>
#include <cstdio>

namespace mpverify::metrics {

namespace {

std::string short_number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", v);
  return buffer;
}

std::string look_name(const SequentialGate& s, std::size_t k) {
  return "look " + std::to_string(k + 1) + " of " + std::to_string(s.design.looks.size()) + " (" +
         std::to_string(s.design.looks[k]) + " runs per side)";
}

// The seeds both sides share in their first `count` runs, when they are the same distinct seeds; else none.
std::optional<std::vector<std::int64_t>> common_prefix_seeds(const std::vector<RunOutcome>& b,
                                                             const std::vector<RunOutcome>& c, std::size_t count) {
  std::vector<std::int64_t> seeds;
  for (std::size_t i = 0; i < count; ++i) {
    if (*b[i].seed != *c[i].seed || (i > 0 && seeds.back() == *b[i].seed)) return std::nullopt;
    seeds.push_back(*b[i].seed);
  }
  return seeds;
}

std::vector<double> first_values(const std::vector<RunOutcome>& runs, std::size_t n) {
  std::vector<double> values;
  for (std::size_t i = 0; i < n; ++i) values.push_back(*runs[i].value);
  return values;
}

// Why the design decided as it did, or what it waits for.
std::string rounds_reason(const SequentialGate& s, double margin) {
  const SequentialOutcome& o = s.outcome;
  const std::string m = short_number(margin);
  if (!o.decided_at) {
    const std::size_t more = *o.next_look - s.available;
    std::string reason = o.looks.empty() ? "the first look needs " + std::to_string(*o.next_look) +
                                               " runs per side and " + std::to_string(s.available) + " are here"
                                         : look_name(s, o.looks.size() - 1) + " did not decide";
    return reason + ": run " + std::to_string(more) + " more per side (seeds in order) for the look at " +
           std::to_string(*o.next_look) + ", then gate again";
  }
  const LookResult& look = o.looks.back();
  const std::string ci = short_number(100 * (1 - 2 * look.level)) + "% interval [" + short_number(look.test.lower) +
                         ", " + short_number(look.test.upper) + "]";
  const std::string at = "at " + look_name(s, *o.decided_at) + ", the " + ci;
  if (o.undecided_at_last)
    return "equivalence not shown by the last look: " + at + " is not inside (-" + m + ", " + m +
           "), and the design ends there";
  return at + (o.verdict == Verdict::equivalent ? " lies inside (-" + m + ", " + m + ")"
                                                : " lies entirely outside [-" + m + ", " + m + "]");
}

}  // namespace

void order_by_seed(std::vector<RunOutcome>& outcomes, const char* side) {
  for (const RunOutcome& o : outcomes)
    if (!o.seed)
      throw InputError(std::string(side) + " run '" + o.run + "' has no seed: the sequential gate takes runs in seed "
                       "order (summary.config.seed, or a value file's seed column)");
  std::stable_sort(outcomes.begin(), outcomes.end(),
                   [](const RunOutcome& a, const RunOutcome& b) { return *a.seed < *b.seed; });
}

void start_rounds(GateResult& g, const GateOptions& options) {
  SequentialGate s;
  s.design = *options.sequential;
  s.levels = look_levels(s.design, options.alpha);
  s.outcome.verdict = Verdict::not_equivalent;
  g.sequential = s;
  g.notes.push_back("in rounds: " + design_text(s.design) + " of alpha " + short_number(options.alpha) +
                    "; each look's level (both one-sided tests): " + [&] {
                      std::string levels;
                      for (double a : s.levels) levels += (levels.empty() ? "" : ", ") + short_number(a);
                      return levels;
                    }());
}

void decide_in_rounds(GateResult& g, const std::vector<RunOutcome>& b, const std::vector<RunOutcome>& c,
                      const GateOptions& options, double resolution) {
  if (options.accept_single_run)
    throw InputError("--accept-single-run tests one run per side; the sequential gate takes runs in rounds of seeds");
  SequentialGate& s = *g.sequential;
  s.available = std::min(b.size(), c.size());
  std::optional<std::vector<std::int64_t>> seeds;
  if (options.pairing != Pairing::welch) seeds = common_prefix_seeds(b, c, s.available);
  if (options.pairing == Pairing::paired && !seeds)
    throw InputError("--method paired in rounds needs the same distinct seeds, in order, on both sides' first " +
                     std::to_string(s.available) + " runs; these differ");
  s.outcome = run_sequential(s.design, options.alpha, s.available, [&](std::size_t n, double level) {
    EquivalenceOptions eo{options.margin, level, false};
    eo.resolution = resolution;
    const std::vector<double> xb = first_values(b, n), xc = first_values(c, n);
    return seeds ? paired_tost(xb, xc, eo) : welch_tost(xb, xc, eo);
  });
  if (!s.outcome.looks.empty()) g.test = s.outcome.looks.back().test;
  g.verdict = s.outcome.verdict;
  g.reason = rounds_reason(s, options.margin);
  const std::size_t used = s.outcome.looks.empty() ? 0 : s.outcome.looks.back().n;
  if (seeds) {
    g.paired_seeds.assign(seeds->begin(), seeds->begin() + static_cast<std::ptrdiff_t>(used));
    g.notes.push_back("paired on the first seeds in order: both sides ran the same seeds");
  } else {
    g.notes.push_back("Welch (unpaired) at each look: the sides' first runs have different seeds");
  }
  if (used < std::max(b.size(), c.size()))
    g.notes.push_back("runs after the first " + std::to_string(used) +
                      " per side (in seed order) are not used: they wait for the next look");
}

std::string rounds_text(const GateResult& g) {
  const SequentialGate& s = *g.sequential;
  const SequentialOutcome& o = s.outcome;
  std::string text;
  if (!o.looks.empty()) text = look_name(s, o.looks.size() - 1) + " at level " + short_number(o.looks.back().level);
  text += std::string(text.empty() ? "" : ", ") + "in rounds (" + design_text(s.design) + ", alpha " +
          short_number(g.alpha) + ")";
  if (o.undecided_at_last) text += "; equivalence not shown by the last look";
  if (o.next_look)
    text += "; next look at " + std::to_string(*o.next_look) + " runs per side (" +
            std::to_string(*o.next_look - s.available) + " more)";
  return text;
}

}  // namespace mpverify::metrics
