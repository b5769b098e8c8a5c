// Lost updates (swamping): how many of an optimizer step's updates u vanish
// when added to the weights w, w <- fl(w + u).
//
// "Without master weights" is the fp16-pure recipe: the weights are stored in
// the low weight format, so w is first rounded (nearest-even) to that format
// (a no-op for a model's stored weights) and the update is lost when
// fl_low(w + u) == w. "With master weights" is the o2 recipe: an fp32 master
// copy of w receives the update, w is used as given (a float), and the update
// is lost only when fl32(w + u) == w. In both cases u is the float update as
// given (the optimizer computes it in fp32) and the sum w + u is rounded once
// (emu::add_arrays, whose swamping counters these are).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "formats/format.h"

namespace mpverify::record {

struct LostUpdateCounts {
  int precision = 0;             // p of the format the weights are stored in
  std::uint64_t elements = 0;
  std::uint64_t updates = 0;     // u != 0 with w and u finite: the denominator
  std::uint64_t lost = 0;        // ... and fl(w + u) == w != 0, exactly (emu/lost_update.h)
  // The two ratio bounds (formats::Format::lost_update_ratio_needed/_sufficient), counted for what they are:
  std::uint64_t ratio_needed = 0;      // updates with |w| / |u| >= 2^p: every lost update to a normal w is one
  std::uint64_t ratio_sufficient = 0;  // updates with |w| / |u| > 2^(p+1): each of these is lost
  double lost_rate = 0;                // lost / updates (0 when updates is 0)
  double ratio_needed_rate = 0;        // ratio_needed / updates
  double ratio_sufficient_rate = 0;    // ratio_sufficient / updates
};

struct LostUpdateStats {
  LostUpdateCounts without_master;  // weights stored in weight_format
  LostUpdateCounts with_master;     // fp32 master weights
};

// The update a step applied to each weight, as a float: after - before in double, rounded once to float
// (what torch's `(after.double() - before.double()).float()` gives). Throws std::invalid_argument when the
// sizes differ.
std::vector<float> applied_update(std::span<const float> before, std::span<const float> after);
// The same into `u` (of the same size as both).
void applied_update(std::span<const float> before, std::span<const float> after, std::span<float> u);

// lost_rate and the two ratio rates from the counts (0 when there are no updates).
void set_rates(LostUpdateCounts& c);

// The counts of two parts of one tensor (or of several tensors) added, with their rates; `into`'s precision
// becomes `part`'s.
void add_counts(LostUpdateCounts& into, const LostUpdateCounts& part);

// Throws std::invalid_argument when w and u differ in size.
LostUpdateStats lost_updates(std::span<const float> w, std::span<const float> u,
                             const formats::Format& weight_format);

// lost_updates(before, applied_update(before, after), weight_format), the same counts, taken a block of
// elements at a time: the update and the weights rounded to the format live in two small buffers that stay
// in the cache, where the whole-tensor copies of a large model (hundreds of megabytes) cost more in fresh
// pages and memory traffic than the counting itself. Throws std::invalid_argument when the sizes differ.
LostUpdateStats lost_updates_of_step(std::span<const float> before, std::span<const float> after,
                                     const formats::Format& weight_format);

// How the lost updates are found, with identical counts (tests hold them together):
//  - adding: every w + u rounded once by the emulator (emu::add_arrays);
//  - spacing: without adding, from the gap between w and its neighbour in the format (the definition in
//    lost_updates.cpp), for formats with IEEE encoding and overflow, subnormals and every value a float
//    (fp32, fp16, bf16, eXmY up to 8 exponent and 23 fraction bits), when every w is a value of it;
//  - automatic: spacing where it applies, else adding.
// spacing (and automatic) take 8 elements at a time with AVX2 where the CPU has it, for the spacing rule and
// the two ratio counts; spacing_portable is the same without those kernels, their reference.
enum class LostUpdatePath { automatic, adding, spacing, spacing_portable };

// One side: w used as given, stored in `format` (fp32 for master weights). Paths spacing and spacing_portable throw
// std::invalid_argument where it does not apply.
LostUpdateCounts lost_update_counts(std::span<const float> w, std::span<const float> u, const formats::Format& format,
                                    LostUpdatePath path = LostUpdatePath::automatic);

}  // namespace mpverify::record
