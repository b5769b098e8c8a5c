// Where the blocks of a block-quantized tensor lie (block_quantize.h): the
// tensor seen as a matrix with the quantization axis as its columns, cut into
// block_rows x block_cols blocks, and each block's place in the scale grid.
// Internal to block_quantize.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "emu/block_quantize.h"

namespace mpverify::emu::detail {

// One block: `lines` runs of `line_len` elements, `step` apart within a run,
// the runs `line_step` apart, starting at flat index `first`.
struct Block {
  std::size_t first = 0;
  std::size_t lines = 1;
  std::size_t line_step = 0;
  std::size_t line_len = 0;
  std::size_t step = 1;
  std::size_t scale_index = 0;  // row-major in scale_shape
};

// Calls f(flat index) for every element of the block.
template <typename F>
void for_each_index(const Block& b, F&& f) {
  for (std::size_t l = 0; l < b.lines; ++l) {
    const std::size_t base = b.first + l * b.line_step;
    if (b.step == 1) {
      for (std::size_t j = 0; j < b.line_len; ++j) f(base + j);
    } else {
      for (std::size_t j = 0; j < b.line_len; ++j) f(base + j * b.step);
    }
  }
}

class BlockGrid {
 public:
  // Throws BlockShapeError when `shape` does not hold `elements` elements,
  // `axis` is outside [-rank, rank), or a tile (block_rows > 1) meets a
  // tensor that is not 2-D.
  BlockGrid(std::size_t elements, std::span<const std::size_t> shape, int axis, const BlockScheme& scheme);

  const std::vector<std::size_t>& scale_shape() const { return scale_shape_; }
  std::size_t block_count() const { return block_count_; }

  // Calls f(Block) for every block.
  template <typename F>
  void for_each_block(F&& f) const;

 private:
  enum class Kind { whole, runs, tiles_axis_last, tiles_axis_first };
  Kind kind_ = Kind::runs;
  std::size_t elements_ = 0;
  // The view: outer x axis_len x inner, rows = outer * inner, cols = axis_len.
  std::size_t outer_ = 1, axis_len_ = 1, inner_ = 1;
  std::size_t block_rows_ = 1, block_cols_ = 1;
  std::vector<std::size_t> scale_shape_;
  std::size_t block_count_ = 0;
};

inline std::size_t blocks_along(std::size_t n, std::size_t block) { return (n + block - 1) / block; }

template <typename F>
void BlockGrid::for_each_block(F&& f) const {
  const std::size_t br = block_rows_, bc = block_cols_;
  switch (kind_) {
    case Kind::whole: f(Block{0, 1, 0, elements_, 1, 0}); return;
    case Kind::runs: {  // 1 x bc blocks along the axis, `inner` apart
      const std::size_t nb = blocks_along(axis_len_, bc);
      for (std::size_t o = 0; o < outer_; ++o)
        for (std::size_t cb = 0; cb < nb; ++cb) {
          const std::size_t len = std::min(bc, axis_len_ - cb * bc);
          for (std::size_t i = 0; i < inner_; ++i)
            f(Block{(o * axis_len_ + cb * bc) * inner_ + i, 1, 0, len, inner_, (o * nb + cb) * inner_ + i});
        }
      return;
    }
    case Kind::tiles_axis_last: {  // a 2-D tensor d0 x d1, axis 1: br rows of d0 by bc columns of d1
      const std::size_t d0 = outer_, d1 = axis_len_;
      const std::size_t nrb = blocks_along(d0, br), ncb = blocks_along(d1, bc);
      for (std::size_t rb = 0; rb < nrb; ++rb)
        for (std::size_t cb = 0; cb < ncb; ++cb)
          f(Block{rb * br * d1 + cb * bc, std::min(br, d0 - rb * br), d1, std::min(bc, d1 - cb * bc), 1,
                  rb * ncb + cb});
      return;
    }
    case Kind::tiles_axis_first: {  // a 2-D tensor d0 x d1, axis 0: bc rows of d0 by br columns of d1
      const std::size_t d0 = axis_len_, d1 = inner_;
      const std::size_t nrb = blocks_along(d1, br), ncb = blocks_along(d0, bc);
      for (std::size_t cb = 0; cb < ncb; ++cb)
        for (std::size_t rb = 0; rb < nrb; ++rb)
          f(Block{cb * bc * d1 + rb * br, std::min(bc, d0 - cb * bc), d1, std::min(br, d1 - rb * br), 1,
                  cb * nrb + rb});
      return;
    }
  }
}

}  // namespace mpverify::emu::detail
