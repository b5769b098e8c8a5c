// A fixed, seeded, stratified train/test split of a labelled data set (the
// real data sets come as one pool; the split is ours).
//
// Class c with n_c of the N examples gives the test set t_c examples, where
// t_c = floor(n_c T / N) plus one for the classes with the largest remainders
// (n_c T mod N, ties to the lower class) until sum t_c = T: each class's share
// of the test set equals its share of the pool to within one example. Which
// examples of class c go to the test set: the first t_c of the class's
// examples (in pool order) after a Fisher-Yates shuffle driven by Philox
// stream (0x5B17 << 48) + c under `seed`. The train and test sets are then
// each put in a seeded order (streams (0x5B17 << 48) + 2^32 and + 2^32 + 1,
// applied to the examples in pool order), so any prefix of either set is a
// random sample of it rather than one class.
//
// The same (pool, test_size, seed) gives bitwise the same split on every
// platform (integer arithmetic and data/random.h only).
#pragma once

#include <cstddef>
#include <cstdint>

#include "data/dataset.h"

namespace mpverify::data {

// Throws std::invalid_argument for an invalid pool (data::validate) or
// test_size > pool.size().
Split stratified_split(const Dataset& pool, std::size_t test_size, std::uint64_t seed);

}  // namespace mpverify::data
