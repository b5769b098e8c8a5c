// The tree half of the channel reductions whose order emu/block_sum.h
// models: lane sums combined in shared memory, s[t] += s[t + stride] for
// stride = Lanes/2, ..., 1, each addition one fp32 rounding (__fadd_rn, never
// contracted). Every thread of the block must call it; all get the total.
#pragma once

#include <cuda_runtime.h>

namespace mpverify::gpu::detail {

template <int Lanes>
__device__ float block_tree_sum(float lane_sum, float* shared) {
  const int t = static_cast<int>(threadIdx.x);
  shared[t] = lane_sum;
  __syncthreads();
  for (int stride = Lanes / 2; stride >= 1; stride /= 2) {
    if (t < stride) shared[t] = __fadd_rn(shared[t], shared[t + stride]);
    __syncthreads();
  }
  const float total = shared[0];
  __syncthreads();  // the caller may reuse `shared` at once
  return total;
}

}  // namespace mpverify::gpu::detail
