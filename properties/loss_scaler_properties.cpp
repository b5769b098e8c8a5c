// Properties of every loss-scale strategy on random found_inf traces (and of
// the FP8 strategies on random amax traces), with random settings: small
// growth intervals and initial scales up to the top of the number type, so
// that growth, backoff, floors, caps, overflow to inf and aborts all happen.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "check_count.h"
#include "generators.h"
#include "training/loss_scaler.h"
#include "training/scaler_replay.h"

namespace {

using namespace mpverify::training;
using mpverify::properties::expect_checks;
namespace gen = mpverify::properties::gen;

std::string pow2(int k) { return "2^" + std::to_string(k); }

struct Setup {
  std::string name;
  ScalerOptions options;
};

// A found_inf strategy with random keys. Initial scales never start below
// the floor (Megatron asserts it; Apex and DeepSpeed apply the floor only on
// backoff, so a start below it is below it by the user's choice).
rc::Gen<Setup> loss_scaler_setup() {
  const std::vector<std::string> names{"none", "static", "torch", "apex", "keras", "deepspeed", "megatron"};
  return rc::gen::exec([names] {
    Setup s{*rc::gen::elementOf(names), {}};
    auto& o = s.options;
    const auto interval = [] { return std::to_string(*gen::uniform(1, 5)); };
    // Half the time near the top of the number type, where growth overflows.
    const auto init = [](int lo, int top) {
      return pow2(*gen::coin() ? *gen::uniform(top - 6, top) : *gen::uniform(lo, top));
    };
    if (s.name == "none") {
      o["skip"] = *gen::coin() ? "true" : "false";
    } else if (s.name == "static") {
      o["scale"] = pow2(*gen::uniform(-10, 20));
      o["skip"] = *gen::coin() ? "true" : "false";
    } else if (s.name == "torch") {
      o["init"] = init(-140, 127);
      o["interval"] = interval();
      o["growth"] = *rc::gen::elementOf(std::vector<std::string>{"2", "3"});
      o["backoff"] = *rc::gen::elementOf(std::vector<std::string>{"0.5", "0.3"});
    } else if (s.name == "apex") {
      const int min = *rc::gen::elementOf(std::vector<int>{-1, 0, 10});  // -1: no floor
      o["min"] = min < 0 ? "0" : pow2(min);
      o["init"] = pow2(*gen::uniform(std::max(min, -20), 30));
      o["max"] = pow2(*gen::uniform(24, 40));
      o["interval"] = interval();
    } else if (s.name == "keras") {
      o["variant"] = *gen::coin() ? "keras3" : "tf-keras";
      o["init"] = init(0, 127);
      o["interval"] = interval();
    } else if (s.name == "deepspeed") {
      const int min = *rc::gen::elementOf(std::vector<int>{0, 10});
      o["min"] = pow2(min);
      o["init"] = init(min, 1023);
      o["interval"] = interval();
      o["hysteresis"] = std::to_string(*gen::uniform(1, 3));
      o["consecutive_hysteresis"] = *gen::coin() ? "true" : "false";
      o["raise_error_at_min_scale"] = *gen::coin() ? "true" : "false";
    } else {
      const int min = *rc::gen::elementOf(std::vector<int>{-10, 0});
      o["min"] = pow2(min);
      o["init"] = init(min, 127);
      o["interval"] = interval();
      o["hysteresis"] = std::to_string(*gen::uniform(1, 3));
      o["backoff"] = *rc::gen::elementOf(std::vector<std::string>{"0.5", "0.3"});
    }
    return s;
  });
}

// found_inf flags, with a random density of overflows from none to all.
rc::Gen<std::vector<TraceStep>> flag_trace() {
  return rc::gen::exec([] {
    const int density = *gen::uniform(0, 10);
    const auto draws = *rc::gen::container<std::vector<int>>(*gen::uniform(0, 400), gen::uniform(0, 9));
    std::vector<TraceStep> trace;
    for (std::size_t k = 0; k < draws.size(); ++k)
      trace.push_back({static_cast<int>(k) + 1, draws[k] < density ? 1.0 : 0.0});
    return trace;
  });
}

// Printed only when a case fails.
void show(const Setup& s) {
  std::string text = s.name;
  for (const auto& [k, v] : s.options) text += " " + k + "=" + v;
  RC_LOG() << text << "\n";
}

// The strategies that can grow to +inf: no finiteness guard and no cap.
bool can_reach_inf(const Setup& s) {
  if (s.name == "keras") return s.options.at("variant") == "keras3";
  return s.name == "deepspeed" || s.name == "megatron";
}

RC_GTEST_PROP(LossScalerProperties, SkipsExactlyTheFoundInfSteps, ()) {
  auto& checks = expect_checks(100);
  const Setup s = *loss_scaler_setup();
  show(s);
  const auto trace = *flag_trace();
  auto scaler = make_scaler(s.name, s.options);
  const Replay r = replay(*scaler, trace, s.name);
  // Only a fixed scale told to apply non-finite steps (skip=false) skips none.
  const bool skips = !s.options.contains("skip") || s.options.at("skip") == "true";
  std::size_t found_inf = 0;
  for (const ReplayStep& step : r.steps) {
    const bool flag = trace[step.step].value == 1;
    RC_ASSERT(step.skipped == (flag && skips));
    found_inf += flag ? 1 : 0;
  }
  RC_ASSERT(r.skipped_steps == (skips ? found_inf : 0));
  // The replay runs every step, unless a DeepSpeed raise ended it.
  RC_ASSERT(r.steps.size() == (r.aborted_at ? *r.aborted_at + 1 : trace.size()));
  checks.count();
}

RC_GTEST_PROP(LossScalerProperties, ScaleStaysAboveItsFloorAndFiniteOrInfForever, ()) {
  auto& checks = expect_checks(100);
  const Setup s = *loss_scaler_setup();
  show(s);
  const auto trace = *flag_trace();
  auto scaler = make_scaler(s.name, s.options);
  const double floor = scaler->floor();
  const Replay r = replay(*scaler, trace, s.name);
  for (std::size_t k = 0; k < r.steps.size(); ++k) {
    const double used = r.steps[k].scale;
    RC_ASSERT(used >= floor);
    RC_ASSERT(!std::isnan(used));
    if (std::isinf(used)) {
      // Only where documented, and then by a growth (after a clean step)
      // from a scale whose doubling overflows the number type; once +inf,
      // +inf for good (inf/2 = inf).
      RC_ASSERT(can_reach_inf(s));
      RC_ASSERT(k > 0);
      const double before = r.steps[k - 1].scale;
      if (!std::isinf(before)) {
        RC_ASSERT(trace[k - 1].value == 0.0);
        // x * 2 is exact until it overflows: at x >= 2^127 in fp32 (Keras,
        // Megatron), x >= 2^1023 in double (DeepSpeed).
        RC_ASSERT(before >= (s.name == "deepspeed" ? 0x1p1023 : 0x1p127));
      }
      for (std::size_t j = k; j < r.steps.size(); ++j) RC_ASSERT(std::isinf(r.steps[j].scale));
      break;
    }
  }
  // A step with found_inf never raises the scale; a clean one never lowers it.
  for (std::size_t k = 1; k < r.steps.size(); ++k) {
    if (trace[k - 1].value == 1)
      RC_ASSERT(r.steps[k].scale <= r.steps[k - 1].scale);
    else
      RC_ASSERT(r.steps[k].scale >= r.steps[k - 1].scale);
  }
  // DeepSpeed aborts only on an overflow at its minimum.
  if (r.aborted_at) {
    RC_ASSERT(s.name == "deepspeed");
    RC_ASSERT(trace[*r.aborted_at].value == 1.0);
    RC_ASSERT(r.steps.back().scale == floor);
  }
  checks.count();
}

RC_GTEST_PROP(LossScalerProperties, TrajectoriesAreDeterministic, ()) {
  auto& checks = expect_checks(100);
  const Setup s = *loss_scaler_setup();
  const auto trace = *flag_trace();
  auto a = make_scaler(s.name, s.options), b = make_scaler(s.name, s.options);
  const Replay ra = replay(*a, trace, s.name), rb = replay(*b, trace, s.name);
  RC_ASSERT(ra.steps.size() == rb.steps.size());
  for (std::size_t k = 0; k < ra.steps.size(); ++k) {
    // Bit for bit: the same value, or both NaN (none occur; see above).
    RC_ASSERT(ra.steps[k].scale == rb.steps[k].scale);
    RC_ASSERT(ra.steps[k].skipped == rb.steps[k].skipped);
    RC_ASSERT(ra.steps[k].aborted == rb.steps[k].aborted);
  }
  RC_ASSERT(ra.final_scale == rb.final_scale);
  checks.count();
}

// amaxes weighted toward the edges: 0, inf, nan, subnormal and huge values.
rc::Gen<float> amax() {
  return rc::gen::weightedOneOf<float>({
      {6, rc::gen::map(gen::uniform(-149, 127), [](int e) { return std::ldexp(1.5f, e) * 0.75f; })},
      {1, rc::gen::just(0.0f)},
      {1, rc::gen::just(std::numeric_limits<float>::infinity())},
      {1, rc::gen::just(std::numeric_limits<float>::quiet_NaN())},
      {1, rc::gen::just(std::numeric_limits<float>::max())},
  });
}

RC_GTEST_PROP(LossScalerProperties, Fp8ScalesAreFinitePositiveAndPowersOfTwoWhenAsked, ()) {
  auto& checks = expect_checks(100);
  const auto amaxes = *rc::gen::container<std::vector<float>>(*gen::uniform(1, 200), amax());
  DelayedConfig dc;
  dc.history = *gen::uniform(1, 8);
  dc.algo = *gen::coin() ? AmaxAlgo::max : AmaxAlgo::most_recent;
  dc.margin = static_cast<float>(*gen::uniform(0, 3));
  dc.fp8_max = *gen::coin() ? kE4M3Max : kE5M2Max;
  DelayedScaler delayed(dc);
  CurrentConfig cc;
  cc.pow2 = *gen::coin();
  for (float a : amaxes) {
    const double d = delayed.step(a).scale_used;
    RC_ASSERT(std::isfinite(d) && d > 0);
    const double c = current_scale(a, cc);
    RC_ASSERT(std::isfinite(c) && c > 0);
    if (cc.pow2) {
      int e = 0;
      RC_ASSERT(std::frexp(c, &e) == 0.5);
    }
    // MXFP8: a power of two in E8M0's range, NaN exactly for a NaN amax,
    // 2^127 (E8M0 code 0xFE, as Transformer Engine) for an infinite one, and
    // the least one that keeps amax within 448 * X.
    const double x = mxfp8_block_scale(a);
    if (std::isnan(a)) {
      RC_ASSERT(std::isnan(x));
      continue;
    }
    if (std::isinf(a)) {
      RC_ASSERT(x == 0x1p127);
      continue;
    }
    int e = 0;
    RC_ASSERT(std::frexp(x, &e) == 0.5);
    RC_ASSERT(x >= 0x1p-127 && x <= 0x1p127);
    if (x > 0x1p-127) RC_ASSERT(a <= 448.0 * x && a > 448.0 * x / 2);
  }
  RC_ASSERT(std::isfinite(delayed.scale()) && delayed.scale() > 0);
  checks.count();
}

}  // namespace
