// The NCHW shape of the per-channel ops (bias add, batch normalisation):
// channel c owns M = n*h*w elements, visited in the order n, then h*w (the
// order of the emulated and GPU reductions over a channel).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mpverify::ops {

struct ChannelShape {
  int n = 1, c = 1, h = 1, w = 1;

  std::size_t size() const { return channel_elements() * static_cast<std::size_t>(c); }
  std::size_t spatial() const { return static_cast<std::size_t>(h) * static_cast<std::size_t>(w); }
  // M: the elements of one channel, the length of its reductions.
  std::size_t channel_elements() const { return static_cast<std::size_t>(n) * spatial(); }
  // Flat NCHW index of the i-th element (0 <= i < M) of channel ch.
  std::size_t index(int ch, std::size_t i) const {
    return (i / spatial() * static_cast<std::size_t>(c) + static_cast<std::size_t>(ch)) * spatial() + i % spatial();
  }
  // Throws std::invalid_argument unless every dimension is at least 1.
  void check_dims(std::string_view op) const {
    if (n >= 1 && c >= 1 && h >= 1 && w >= 1) return;
    std::string message(op);
    message += ": every dimension of n, c, h, w must be at least 1";
    throw std::invalid_argument(message);
  }
};

}  // namespace mpverify::ops
