// The floating-point environment guard (formats/fp_environment.h): the library's entry points refuse a
// thread with flush-to-zero, denormals-are-zero or a directed rounding mode, and
// ScopedDefaultFpEnvironment sets the defaults for its lifetime and gives the caller's back bit for bit.
// The environment is set here with the instructions themselves (MXCSR, fesetround), not with the code
// under test.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "emu/quantize.h"
#include "formats/format.h"
#include "formats/fp_environment.h"
#include "refs/gemm_ref.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>

namespace mpverify {
namespace {

constexpr unsigned kDaz = 1u << 6, kFtz = 1u << 15;

// Sets MXCSR bits and a rounding mode for the test's length, then restores them whatever happens.
class ForeignEnvironment {
 public:
  ForeignEnvironment(unsigned set_bits, int rounding) : mxcsr_(_mm_getcsr()), rounding_(std::fegetround()) {
    std::fesetround(rounding);
    _mm_setcsr(_mm_getcsr() | set_bits);
  }
  ~ForeignEnvironment() {
    std::fesetround(rounding_);
    _mm_setcsr(mxcsr_);
  }

 private:
  unsigned mxcsr_;
  int rounding_;
};

std::string refusal_of_quantize() {
  std::vector<float> in{1.0f}, out(1);
  try {
    emu::quantize(in, out, emu::QuantizeSpec{formats::parse_format("fp16")});
  } catch (const formats::FpEnvironmentError& e) {
    return e.what();
  }
  return "";
}

TEST(FpEnvironment, TheDefaultsAreReadAsDefaults) {
  const formats::FpEnvironment env = formats::current_fp_environment();
  EXPECT_TRUE(env.is_default()) << formats::describe(env);
  EXPECT_NO_THROW(formats::check_fp_environment("test"));
}

TEST(FpEnvironment, FlushToZeroIsRefusedWithTheCauseAndTheFix) {
  ForeignEnvironment foreign(kFtz, FE_TONEAREST);
  const formats::FpEnvironment env = formats::current_fp_environment();
  EXPECT_TRUE(env.flush_to_zero);
  EXPECT_FALSE(env.denormals_are_zero);
  const std::string message = refusal_of_quantize();
  EXPECT_NE(message.find("emu::quantize"), std::string::npos) << message;
  EXPECT_NE(message.find("flush-to-zero"), std::string::npos) << message;
  EXPECT_NE(message.find("-ffast-math"), std::string::npos) << message;
  EXPECT_NE(message.find("ScopedDefaultFpEnvironment"), std::string::npos) << message;
}

TEST(FpEnvironment, DenormalsAreZeroAndDirectedRoundingAreRefused) {
  {
    ForeignEnvironment foreign(kDaz, FE_TONEAREST);
    EXPECT_NE(refusal_of_quantize().find("denormals-are-zero"), std::string::npos);
  }
  for (int mode : {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO}) {
    ForeignEnvironment foreign(0, mode);
    EXPECT_NE(refusal_of_quantize().find("rounding mode"), std::string::npos) << mode;
  }
  EXPECT_EQ(refusal_of_quantize(), "");  // and the defaults are back
}

TEST(FpEnvironment, TheReferencesRefuseToo) {
  ForeignEnvironment foreign(kFtz | kDaz, FE_TONEAREST);
  const ops::GemmShape shape{1, 1, 1};
  std::vector<float> a{1.0f}, b{1.0f}, c(1);
  EXPECT_THROW(refs::gemm_ref(shape, a, b, c), formats::FpEnvironmentError);
}

// Under FTZ the reference product 2^-70 * 2^-70 = 2^-140 (a binary32 subnormal, exact) would be 0; inside
// the scope it is 2^-140, and the caller's MXCSR (its sticky flags included) and rounding mode come back.
TEST(FpEnvironment, TheScopeSetsTheDefaultsAndRestoresTheCallersBits) {
  ForeignEnvironment foreign(kFtz | kDaz | 0x3fu /* every sticky exception flag */, FE_UPWARD);
  const unsigned before = _mm_getcsr();
  volatile float tiny = 0x1p-70f;
  ASSERT_EQ(tiny * tiny, 0.0f) << "FTZ is not in effect: the test proves nothing";
  {
    formats::ScopedDefaultFpEnvironment scope;
    EXPECT_TRUE(formats::current_fp_environment().is_default());
    const ops::GemmShape shape{1, 1, 1};
    std::vector<float> a{0x1p-70f}, b{0x1p-70f}, c(1);
    refs::gemm_ref(shape, a, b, c);
    EXPECT_EQ(c[0], std::ldexp(1.0f, -140));
  }
  EXPECT_EQ(_mm_getcsr(), before);
  EXPECT_EQ(std::fegetround(), FE_UPWARD);
}

}  // namespace
}  // namespace mpverify
#endif
