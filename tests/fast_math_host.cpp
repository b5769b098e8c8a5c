// A host program built and linked with -ffast-math, as a user's might be: GCC links crtfastmath.o, whose
// start-up code sets MXCSR's flush-to-zero and denormals-are-zero bits before main. The library must
// refuse to compute in it (a silent change of results otherwise), and compute exactly inside a
// ScopedDefaultFpEnvironment. Exit 0 when all holds; the reason on stderr and exit 1 otherwise.
#include <cmath>
#include <cstdio>
#include <vector>

#include "emu/quantize.h"
#include "formats/format.h"
#include "formats/fp_environment.h"
#include "refs/gemm_ref.h"

namespace {

int fail(const char* why) {
  std::fprintf(stderr, "fast_math_host: %s\n", why);
  return 1;
}

}  // namespace

int main() {
  using namespace mpverify;
  const formats::FpEnvironment env = formats::current_fp_environment();
  if (!env.flush_to_zero || !env.denormals_are_zero)
    return fail("-ffast-math did not set FTZ and DAZ at start-up: the host proves nothing");

  std::vector<float> in{0x1p-20f}, out(1);
  try {
    emu::quantize(in, out, emu::QuantizeSpec{formats::parse_format("fp16")});
    return fail("emu::quantize ran under flush-to-zero");
  } catch (const formats::FpEnvironmentError&) {
  }
  const ops::GemmShape shape{1, 1, 1};
  std::vector<float> a{0x1p-70f}, b{0x1p-70f}, c(1);
  try {
    refs::gemm_ref(shape, a, b, c);
    return fail("refs::gemm_ref ran under flush-to-zero");
  } catch (const formats::FpEnvironmentError&) {
  }

  {
    formats::ScopedDefaultFpEnvironment scope;
    emu::quantize(in, out, emu::QuantizeSpec{formats::parse_format("fp16")});
    // 2^-20 is an fp16 subnormal (fp16's smallest normal is 2^-14), exactly representable.
    if (out[0] != 0x1p-20f) return fail("fp16 of 2^-20 inside the scope is not 2^-20");
    refs::gemm_ref(shape, a, b, c);
    if (c[0] != 0x1p-140f) return fail("the reference product 2^-70 * 2^-70 inside the scope is not 2^-140");
  }
  const formats::FpEnvironment after = formats::current_fp_environment();
  if (!after.flush_to_zero || !after.denormals_are_zero) return fail("the scope did not restore FTZ and DAZ");
  std::puts("fast_math_host: refused under FTZ/DAZ, exact inside the scope, environment restored");
  return 0;
}
