// The stochastic-rounding streams of a reduction: every rounding draws
// formats::stochastic_draw(seed, stream, element index), and each kind of
// rounding has its own streams, so the simulation and the MPI ring (where
// each rank knows only its own steps) draw the same bits.
#pragma once

#include <cstdint>

namespace mpverify::collective {

inline std::uint64_t input_stream(std::uint64_t rank) { return rank; }                            // rank r's input
inline std::uint64_t division_stream(std::uint64_t rank) { return (std::uint64_t{1} << 32) + rank; }  // its division
inline std::uint64_t addition_stream(std::uint64_t hop) { return (std::uint64_t{2} << 32) + hop; }  // ring hop j
inline std::uint64_t tree_stream(std::uint64_t level, std::uint64_t node) {                       // tree node
  return (std::uint64_t{3} << 32) + (level << 20) + node;
}
inline std::uint64_t post_division_stream() { return std::uint64_t{4} << 32; }

}  // namespace mpverify::collective
