#include "swamping/update_census.h"

#include <cmath>
#include <stdexcept>

#include "emu/lost_update.h"
#include "emu/quantize.h"

namespace mpverify::experiments {

std::string parameter_of_gradient(std::string_view layer, std::string_view tensor) {
  std::string_view suffix;
  if (tensor == "dw") suffix = "w";
  else if (tensor == "db") suffix = "b";
  else if (tensor == "dgamma") suffix = "gamma";
  else if (tensor == "dbeta") suffix = "beta";
  else return {};
  std::string name(layer);
  name += '.';
  name += suffix;
  return name;
}

UpdateCensus::UpdateCensus(formats::Format format) : format_(std::move(format)) {
  profile_.first_log2 = format_.precision() - 1;
}

CensusCount UpdateCensus::total() const {
  CensusCount t;
  for (const CensusStep& s : steps_) {
    t.updates += s.all.updates;
    t.lost += s.all.lost;
  }
  return t;
}

CensusStep& UpdateCensus::step_entry(std::size_t step) {
  if (steps_.empty() || steps_.back().step != step) {
    if (!steps_.empty() && steps_.back().step > step)
      throw std::logic_error("UpdateCensus: updates of step " + std::to_string(step) + " after step " +
                             std::to_string(steps_.back().step));
    steps_.push_back(CensusStep{});
    steps_.back().step = step;
  }
  return steps_.back();
}

void UpdateCensus::check_previous(const std::string& parameter, std::span<const float> master_now) {
  const auto it = pending_.find(parameter);
  if (it == pending_.end()) return;
  const Pending& p = it->second;
  if (p.before.size() != master_now.size())
    throw std::logic_error("UpdateCensus: parameter " + parameter + " changed size");
  std::uint64_t unchanged = 0, unchanged_kept = 0, changed_lost = 0;
  for (std::size_t i = 0; i < p.u.size(); ++i) {
    if (!(p.u[i] != 0 && std::isfinite(p.u[i]) && std::isfinite(p.before[i]))) continue;
    // Bitwise: a weight that went from +0 to -0 changed its bits but not its value;
    // the lost-update definition compares values, so compare values here too.
    const bool same = master_now[i] == p.before[i];
    unchanged += same;
    // A u added to w = 0 that rounds to 0 leaves w unchanged by underflow, which
    // is not a lost update (emu/lost_update.h): no disagreement there.
    unchanged_kept += same && !p.lost[i] && p.before[i] != 0;
    changed_lost += !same && p.lost[i];
  }
  CensusStep& s = steps_.at(p.step_index);
  s.unchanged = s.unchanged.value_or(0) + unchanged;
  s.unchanged_but_counted_kept = s.unchanged_but_counted_kept.value_or(0) + unchanged_kept;
  s.changed_but_counted_lost = s.changed_but_counted_lost.value_or(0) + changed_lost;
  pending_.erase(it);
}

void UpdateCensus::on_store(std::string_view layer, std::string_view tensor, nn::Role role, nn::Pass,
                            std::span<const float> exact, std::span<const float> stored, const formats::Format&) {
  if (role == nn::Role::weight && tensor == "value") {
    const std::string name(layer);
    // Every step shows each parameter's weights once, before its forward
    // pass: a parameter shown again starts the next step (skipped steps
    // included, so that step_ is the trainer's step index).
    if (!started_) {
      started_ = true;
    } else if (!shown_.insert(name).second) {
      ++step_;
      shown_.clear();
      shown_.insert(name);
    }
    if (shown_.empty()) shown_.insert(name);
    // The previous update of this parameter against what the optimizer left.
    check_previous(name, exact);
    before_[name] = emu::quantized_copy(exact, format_);
    grad_kind_.erase(name);
    return;
  }
  if (role == nn::Role::weight_grad) {
    const std::string name = parameter_of_gradient(layer, tensor);
    if (name.empty()) return;
    std::vector<std::uint8_t>& kind = grad_kind_[name];
    kind.assign(exact.size(), kGradNonzero);
    for (std::size_t i = 0; i < exact.size(); ++i)
      kind[i] = exact[i] == 0 ? kGradZero : stored[i] == 0 ? kGradUnderflowed : kGradNonzero;
    return;
  }
  if (role == nn::Role::update && tensor == "update") {
    const std::string name(layer);
    const auto w = before_.find(name);
    if (w == before_.end()) throw std::logic_error("UpdateCensus: an update of " + name + " before its weights");
    const auto g = grad_kind_.find(name);
    add_updates(step_, name, w->second, exact,
                g == grad_kind_.end() ? std::span<const std::uint8_t>{} : std::span<const std::uint8_t>(g->second));
    before_.erase(w);
    return;
  }
}

void UpdateCensus::add_updates(std::size_t step, const std::string& parameter, std::span<const float> w_given,
                               std::span<const float> u, std::span<const std::uint8_t> grad_kind) {
  if (w_given.size() != u.size() || (!grad_kind.empty() && grad_kind.size() != u.size()))
    throw std::invalid_argument("UpdateCensus: " + parameter + ": w, u and the gradient flags differ in size");
  const std::vector<float> w = emu::quantized_copy(w_given, format_);
  CensusStep& s = step_entry(step);
  const std::size_t step_index = steps_.size() - 1;
  CensusParameter& par = parameters_[parameter];
  const int p = format_.precision();
  const double at_least = std::ldexp(1.0, p), twice = std::ldexp(1.0, p + 1);
  const double min_normal = format_.min_normal();
  Pending pending{step_index, w, std::vector<float>(u.begin(), u.end()), std::vector<std::uint8_t>(u.size(), 0)};
  for (std::size_t i = 0; i < u.size(); ++i) {
    const double wi = w[i], ui = u[i];
    if (!(ui != 0 && std::isfinite(ui) && std::isfinite(wi))) continue;
    const bool lost = emu::is_lost_update(wi, ui, emu::round_value(format_, wi + ui));
    pending.lost[i] = lost;
    const double aw = std::fabs(wi), au = std::fabs(ui);
    // aw / au compared as aw against a power of two times au: exact in double.
    const bool ge = aw >= at_least * au, gt_twice = aw > twice * au;
    s.all.updates += 1;
    s.all.lost += lost;
    s.ratio_at_least += ge;
    s.ratio_above_twice += gt_twice;
    s.ratio_above += aw > at_least * au;
    par.count.updates += 1;
    par.count.lost += lost;
    const std::uint8_t gk = grad_kind.empty() ? kGradNonzero : grad_kind[i];
    if (lost) {
      s.lost_grad_zero += gk == kGradZero;
      s.lost_grad_underflowed += gk == kGradUnderflowed;
      s.lost_grad_nonzero += gk == kGradNonzero;
      par.lost_grad_zero += gk == kGradZero;
      par.lost_grad_underflowed += gk == kGradUnderflowed;
    }
    const WeightClass wc = aw == 0 ? WeightClass::zero : aw < min_normal ? WeightClass::subnormal : WeightClass::normal;
    const RatioRegion region = !ge ? RatioRegion::below : gt_twice ? RatioRegion::above : RatioRegion::between;
    CensusCount& r = regions_[static_cast<int>(wc)][static_cast<int>(region)];
    r.updates += 1;
    r.lost += lost;
    if (wc == WeightClass::normal) {
      // The ratio's bin: floor((log2 aw - log2 au - first) * kBinsPerOctave).
      // log2 in double is not exact; a value within rounding of a bin edge may
      // land in the neighbouring bin, which moves it by 1/16 of a binade on a
      // figure and changes no table (the regions above are exact comparisons).
      const double lr = (std::log2(aw) - std::log2(au) - profile_.first_log2) * kBinsPerOctave;
      if (lr >= 0 && lr < kRatioBins) {
        int exponent = 0;
        const double m = 2 * std::frexp(aw, &exponent);  // in [1, 2)
        const int part = std::min(kBinadeParts - 1, static_cast<int>((m - 1) * kBinadeParts));
        CensusCount& b = profile_.bins[static_cast<std::size_t>(part)][static_cast<std::size_t>(lr)];
        b.updates += 1;
        b.lost += lost;
      }
    }
  }
  pending_[parameter] = std::move(pending);
}

}  // namespace mpverify::experiments
