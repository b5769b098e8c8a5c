// The headers most unit suites include, compiled once per build into a precompiled header that every unit
// suite reuses (tests/CMakeLists.txt, mpverify_suite_headers). Parsing them was about half the compile time
// of a small suite: bias_add_test.cpp took 4.7 s, of which 2.8 s went to parsing (-fsyntax-only).
// Only third-party and standard headers: the project's own change too often to be worth rebuilding this.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>
