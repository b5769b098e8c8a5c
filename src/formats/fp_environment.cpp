#include "formats/fp_environment.h"

#include <cfenv>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace mpverify::formats {
namespace {

#if defined(__x86_64__) || defined(__i386__)
constexpr unsigned long kDenormalsAreZero = 1ul << 6;  // MXCSR.DAZ
constexpr unsigned long kFlushToZero = 1ul << 15;      // MXCSR.FTZ
unsigned long read_control() { return _mm_getcsr(); }
void write_control(unsigned long v) { _mm_setcsr(static_cast<unsigned>(v)); }
#elif defined(__aarch64__)
constexpr unsigned long kDenormalsAreZero = 1ul << 24;  // FPCR.FZ flushes inputs and outputs alike
constexpr unsigned long kFlushToZero = 1ul << 24;
unsigned long read_control() {
  unsigned long v;
  __asm__ volatile("mrs %0, fpcr" : "=r"(v));
  return v;
}
void write_control(unsigned long v) { __asm__ volatile("msr fpcr, %0" : : "r"(v)); }
#else
// Elsewhere only the rounding mode is checked.
constexpr unsigned long kDenormalsAreZero = 0, kFlushToZero = 0;
unsigned long read_control() { return 0; }
void write_control(unsigned long) {}
#endif

}  // namespace

FpEnvironment current_fp_environment() {
  const unsigned long control = read_control();
  FpEnvironment env;
  env.round_to_nearest = std::fegetround() == FE_TONEAREST;
  env.flush_to_zero = (control & kFlushToZero) != 0;
  env.denormals_are_zero = (control & kDenormalsAreZero) != 0;
  return env;
}

std::string describe(const FpEnvironment& env) {
  if (env.is_default()) return "IEEE 754 defaults";
  std::string s;
  auto add = [&s](const char* what) {
    if (!s.empty()) s += ", ";
    s += what;
  };
  if (!env.round_to_nearest) add("a rounding mode other than round-to-nearest");
  if (env.flush_to_zero) add("flush-to-zero");
  if (env.denormals_are_zero) add("denormals-are-zero");
  return s;
}

void check_fp_environment(const char* entry) {
  const FpEnvironment env = current_fp_environment();
  if (env.is_default()) return;
  std::string message = "mpverify: ";
  message += entry;
  message += " refuses to run: the calling thread's floating-point environment has ";
  message += describe(env);
  message +=
      ", which would silently change the emulator's and the references' results. Usual causes: the host "
      "program was linked with -ffast-math (its start-up code sets flush-to-zero and denormals-are-zero), "
      "or called torch.set_flush_denormal(True) or fesetround(). Fix: build the host without -ffast-math, or "
      "hold a mpverify::formats::ScopedDefaultFpEnvironment around the calls into mpverify "
      "(formats/fp_environment.h)";
  throw FpEnvironmentError(message);
}

ScopedDefaultFpEnvironment::ScopedDefaultFpEnvironment()
    : saved_control_(read_control()), saved_rounding_(std::fegetround()) {
  write_control(saved_control_ & ~(kFlushToZero | kDenormalsAreZero));
  std::fesetround(FE_TONEAREST);
}

ScopedDefaultFpEnvironment::~ScopedDefaultFpEnvironment() {
  std::fesetround(saved_rounding_);
  write_control(saved_control_);
}

}  // namespace mpverify::formats
