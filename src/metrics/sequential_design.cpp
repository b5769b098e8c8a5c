#include "metrics/sequential_design.h"

#include <cmath>
#include <numbers>
#include <sstream>
#include <stdexcept>

namespace mpverify::metrics {

namespace {

constexpr std::size_t kMaxLooks = 20;

// The standard normal's upper tail 1 - Phi(z), from erfc (no cancellation for large z).
double normal_upper_tail(double z) { return 0.5 * std::erfc(z / std::numbers::sqrt2); }

}  // namespace

const char* to_string(Spending spending) {
  return spending == Spending::pocock ? "pocock" : "obrien-fleming";
}

std::optional<Spending> parse_spending(const std::string& name) {
  if (name == "obrien-fleming" || name == "obf") return Spending::obrien_fleming;
  if (name == "pocock") return Spending::pocock;
  return std::nullopt;
}

std::vector<std::size_t> parse_looks(const std::string& text) {
  std::vector<std::size_t> looks;
  std::string item;
  std::istringstream items(text);
  const bool listed = text.find(',') != std::string::npos;
  while (std::getline(items, item, ',')) {
    std::istringstream words(item);
    const std::size_t before = looks.size();
    for (std::string word; words >> word;) {
      // Digits only, and few enough that the count fits (a look past 10^9 runs is no plan).
      if (word.find_first_not_of("0123456789") != std::string::npos || word.size() > 9)
        throw std::invalid_argument("look '" + word + "' is not a count of runs (give counts like 4,8,12,16)");
      looks.push_back(static_cast<std::size_t>(std::stoull(word)));
    }
    if (listed && looks.size() == before) throw std::invalid_argument("an empty look between commas");
  }
  if (listed && text.find_last_not_of(" \t") == text.rfind(','))
    throw std::invalid_argument("an empty look after the last comma");
  check_design({looks, Spending::obrien_fleming});
  return looks;
}

void check_design(const SequentialDesign& design) {
  const std::vector<std::size_t>& looks = design.looks;
  if (looks.empty()) throw std::invalid_argument("no looks given (give counts of runs per side like 4,8,12,16)");
  if (looks.size() > kMaxLooks)
    throw std::invalid_argument(std::to_string(looks.size()) + " looks: at most " + std::to_string(kMaxLooks));
  if (looks.front() < 2)
    throw std::invalid_argument("the first look at " + std::to_string(looks.front()) +
                                " runs: every look needs at least 2 runs per side");
  for (std::size_t k = 1; k < looks.size(); ++k)
    if (looks[k] <= looks[k - 1])
      throw std::invalid_argument("looks must increase: " + std::to_string(looks[k]) + " after " +
                                  std::to_string(looks[k - 1]));
}

double spent_alpha(Spending spending, double alpha, double t) {
  if (!(t > 0)) return 0;
  if (t >= 1) return alpha;
  if (spending == Spending::pocock) return alpha * std::log(1 + (std::numbers::e - 1) * t);
  return 2 * normal_upper_tail(normal_quantile(1 - alpha / 2) / std::sqrt(t));
}

std::vector<double> look_levels(const SequentialDesign& design, double alpha) {
  check_design(design);
  const double last = static_cast<double>(design.looks.back());
  std::vector<double> levels;
  double spent = 0;
  for (std::size_t n : design.looks) {
    const double now = spent_alpha(design.spending, alpha, static_cast<double>(n) / last);
    levels.push_back(now - spent);
    spent = now;
  }
  return levels;
}

SequentialOutcome run_sequential(const SequentialDesign& design, double alpha, std::size_t available,
                                 const std::function<EquivalenceResult(std::size_t n, double level)>& test) {
  const std::vector<double> levels = look_levels(design, alpha);
  SequentialOutcome out;
  for (std::size_t k = 0; k < design.looks.size(); ++k) {
    const std::size_t n = design.looks[k];
    if (n > available) {
      out.next_look = n;
      return out;
    }
    out.looks.push_back({n, levels[k], test(n, levels[k])});
    const Verdict v = out.looks.back().test.verdict;
    const bool last = k + 1 == design.looks.size();
    if (v != Verdict::inconclusive || last) {
      out.verdict = v == Verdict::equivalent ? Verdict::equivalent : Verdict::not_equivalent;
      out.decided_at = k;
      out.undecided_at_last = v == Verdict::inconclusive;
      return out;
    }
  }
  return out;  // unreachable: the last look decides
}

std::string design_text(const SequentialDesign& design) {
  std::string text = "looks at ";
  for (std::size_t k = 0; k < design.looks.size(); ++k) text += (k ? ", " : "") + std::to_string(design.looks[k]);
  text += " runs per side, ";
  text += design.spending == Spending::pocock ? "Pocock-type" : "O'Brien-Fleming-type";
  text += " alpha spending (Lan-DeMets)";
  return text;
}

}  // namespace mpverify::metrics
