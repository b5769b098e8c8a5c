// Which algorithm a library call runs with, when the library may refuse any of them: the preferred one
// first, then the candidates the library's heuristics list, each tried until one runs. Host code only, so
// the order of attempts is tested without a GPU (tests/gpu_device_test.cpp); conv2d_gpu.cu uses it with
// cuDNN's statuses.
#pragma once

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mpverify::gpu::detail {

// What one attempt came to. `refused` is the library saying it does not support the algorithm for this
// problem, at its workspace query or, although that query succeeded, at the call itself (cuDNN 9 does
// both); any other failure is the attempt's to throw.
enum class Attempt { ran, refused };

// Tries `preferred`, then, only if it was refused, each algorithm of `listed()` (asked once) not tried
// before, in the listed order; returns the first that ran. Throws std::runtime_error naming `what` and every
// algorithm refused when none ran. `name(algo)` spells an algorithm for that message.
template <typename Algo>
Algo run_first_accepted(Algo preferred, const std::function<std::vector<Algo>()>& listed,
                        const std::function<Attempt(Algo)>& attempt, const std::function<std::string(Algo)>& name,
                        const std::string& what) {
  std::vector<Algo> tried{preferred};
  if (attempt(preferred) == Attempt::ran) return preferred;
  for (const Algo algo : listed()) {
    if (std::find(tried.begin(), tried.end(), algo) != tried.end()) continue;
    tried.push_back(algo);
    if (attempt(algo) == Attempt::ran) return algo;
  }
  std::string names;
  for (const Algo algo : tried) names += (names.empty() ? "" : ", ") + name(algo);
  throw std::runtime_error(what + ": no algorithm ran; refused: " + names);
}

}  // namespace mpverify::gpu::detail
