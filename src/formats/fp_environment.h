// The host's floating-point environment, which the exact paths depend on.
//
// The emulator rounds with the hardware where the result is provably the same
// (emu/native_rounding.h: round-to-odd in double, then one hardware rounding),
// and the Eigen references are plain binary32/binary64 arithmetic. Both assume
// IEEE 754 defaults: round to nearest even, subnormals kept. A host program
// linked with -ffast-math (GCC links crtfastmath.o, whose start-up code sets
// MXCSR's flush-to-zero and denormals-are-zero bits), or one that called
// torch.set_flush_denormal(True) or fesetround(), changes those results
// silently. So the library's entry points check the environment and refuse a
// foreign one (check_fp_environment), and the Python module sets the defaults
// for the length of each call and restores the caller's afterwards
// (ScopedDefaultFpEnvironment).
#pragma once

#include <stdexcept>
#include <string>

namespace mpverify::formats {

// What the library needs to know of the calling thread's environment.
struct FpEnvironment {
  bool round_to_nearest = true;    // fegetround() == FE_TONEAREST (x87 and SSE agree, as fesetround sets both)
  bool flush_to_zero = false;      // x86 MXCSR.FTZ (bit 15), AArch64 FPCR.FZ (bit 24)
  bool denormals_are_zero = false; // x86 MXCSR.DAZ (bit 6); AArch64 has one bit for both
  bool is_default() const { return round_to_nearest && !flush_to_zero && !denormals_are_zero; }
};

FpEnvironment current_fp_environment();

// "rounding toward zero, flush-to-zero, denormals-are-zero", or "IEEE 754 defaults".
std::string describe(const FpEnvironment& env);

struct FpEnvironmentError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws FpEnvironmentError naming `entry` (the function that refused), what is set, the likely cause and
// the two fixes, when the calling thread's environment is not the IEEE defaults. A few nanoseconds: called
// once per array or product, never per element.
void check_fp_environment(const char* entry);

// Sets round-to-nearest and clears FTZ/DAZ for its lifetime, then restores the caller's environment, flags
// included. Threads the library starts inside inherit the defaults (pthread_create copies the environment).
class ScopedDefaultFpEnvironment {
 public:
  ScopedDefaultFpEnvironment();
  ~ScopedDefaultFpEnvironment();
  ScopedDefaultFpEnvironment(const ScopedDefaultFpEnvironment&) = delete;
  ScopedDefaultFpEnvironment& operator=(const ScopedDefaultFpEnvironment&) = delete;

 private:
  unsigned long saved_control_ = 0;  // MXCSR or FPCR as read on entry
  int saved_rounding_ = 0;           // fegetround() on entry
};

}  // namespace mpverify::formats
