// How numbers and sentences are written in reports: one place, so that every
// report prints a figure the same way (and the same figure gives the same bytes).
#pragma once

#include <string>

namespace mpverify::report {

// printf "%.*f".
std::string fixed(double value, int digits);
// printf "%.4g": four significant digits, for rates and scales.
std::string general(double value);
// A fraction as a percentage with two decimals, without the sign: 0.1234 -> "12.34".
std::string percent(double fraction);
// A power of two as "2^k" (k may be negative); anything else as general().
std::string power_of_two_text(double value);
// Starts with a capital and ends with a full stop.
std::string sentence(std::string text);
// Appends " text |" to a Markdown table row (piecewise: GCC 12's false
// -Wrestrict on "literal" + string).
void add_cell(std::string& row, const std::string& text);

}  // namespace mpverify::report
