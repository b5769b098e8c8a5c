#include <gtest/gtest.h>
#include "formats/arithmetic.h"
TEST(Smoke, One) { EXPECT_EQ(1, 1); }
