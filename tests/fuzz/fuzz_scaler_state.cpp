// A framework's saved loss-scaler state (training/scaler_state.h: `replay-scalers --initial-state`,
// mpverify.Scaler(state=...)), then the restored strategy stepped on found_inf flags. Input: the state's JSON
// up to the first NUL byte; the bytes after it are the steps (bit 0: found_inf), at most 4096. Every strategy
// with a state reads the same JSON; stepping stops where the framework aborts the run. Beyond the documented
// refusal (std::invalid_argument), a finding is also a restored scale that is not finite and >= 0, or a scale
// that leaves that range while stepping (UBSan reports a counter that overflows on its own).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "fuzz_support.h"
#include "io/json_text.h"
#include "training/loss_scaler.h"
#include "training/scaler_state.h"

namespace {

void check_scale(double scale, const std::string& strategy, std::size_t step) {
  if (!std::isfinite(scale) || scale < 0) {
    std::cerr << "fuzz_scaler_state: " << strategy << " scale " << scale << " at step " << step << "\n";
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  const auto parts = fuzz::parts_of(fuzz::text_of(data, size));
  nlohmann::json state;
  try {
    state = io::parse_json_text(parts[0]);
  } catch (const io::JsonTextError&) {
    return 0;
  }
  const std::string_view steps = parts.size() > 1 ? parts[1].substr(0, 4096) : std::string_view();
  for (const std::string& name : training::strategies_with_state()) {
    std::unique_ptr<training::Scaler> scaler;
    try {
      scaler = training::make_scaler_from_state(name, {}, state);
    } catch (const std::invalid_argument&) {
      continue;
    }
    check_scale(scaler->scale(), name, 0);
    auto& loss = dynamic_cast<training::LossScaler&>(*scaler);
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const training::StepResult r = loss.step((static_cast<unsigned char>(steps[i]) & 1) != 0);
      check_scale(loss.scale(), name, i + 1);
      if (r.aborted) break;  // the framework raises here (DeepSpeed at its minimum): no step follows
    }
  }
  return 0;
}
