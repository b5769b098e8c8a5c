#include "emu/block_grid.h"

#include <string>

namespace mpverify::emu::detail {

namespace {

std::string shape_text(std::span<const std::size_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::size_t product(std::span<const std::size_t> dims) {
  std::size_t p = 1;
  for (std::size_t d : dims) p *= d;
  return p;
}

// The axis as an index into shape, or BlockShapeError.
std::size_t resolve_axis(std::span<const std::size_t> shape, int axis) {
  const auto rank = static_cast<int>(shape.size());
  if (axis < -rank || axis >= rank)
    throw BlockShapeError("block quantization: axis " + std::to_string(axis) + " is outside a tensor of rank " +
                          std::to_string(rank) + " (shape " + shape_text(shape) + ")");
  return static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
}

}  // namespace

BlockGrid::BlockGrid(std::size_t elements, std::span<const std::size_t> shape, int axis, const BlockScheme& scheme)
    : elements_(elements), block_rows_(scheme.block_rows), block_cols_(scheme.block_cols) {
  if (product(shape) != elements)
    throw BlockShapeError("block quantization: shape " + shape_text(shape) + " holds " +
                          std::to_string(product(shape)) + " elements, the tensor has " + std::to_string(elements));
  if (shape.empty()) throw BlockShapeError("block quantization: a tensor of rank 0 has no axis to block along");
  const std::size_t a = resolve_axis(shape, axis);
  outer_ = product(shape.first(a));
  axis_len_ = shape[a];
  inner_ = product(shape.subspan(a + 1));
  scale_shape_.assign(shape.begin(), shape.end());

  if (block_rows_ == 0 && block_cols_ == 0) {  // one scale for the whole tensor
    kind_ = Kind::whole;
    scale_shape_.assign(shape.size(), 1);
    block_count_ = 1;
    return;
  }
  if (block_rows_ == 0 || block_cols_ == 0)
    throw BlockShapeError("block quantization: scheme " + scheme.name + " has a block of " +
                          std::to_string(block_rows_) + " x " + std::to_string(block_cols_) +
                          " (0 x 0 means the whole tensor; otherwise both must be positive)");
  scale_shape_[a] = blocks_along(axis_len_, block_cols_);
  if (block_rows_ == 1) {
    kind_ = Kind::runs;
  } else {
    if (shape.size() != 2)
      throw BlockShapeError("block quantization: " + std::to_string(block_rows_) + " x " +
                            std::to_string(block_cols_) + " tiles (scheme " + scheme.name +
                            ") need a 2-D tensor, got shape " + shape_text(shape));
    kind_ = a == 1 ? Kind::tiles_axis_last : Kind::tiles_axis_first;
    scale_shape_[1 - a] = blocks_along(shape[1 - a], block_rows_);
  }
  block_count_ = product(scale_shape_);
}

}  // namespace mpverify::emu::detail
