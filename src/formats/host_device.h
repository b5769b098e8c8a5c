// MPVERIFY_HOST_DEVICE marks the few header-only definitions that the CPU
// emulator and the CUDA kernels share (Philox, TwoSum, what a lost update is),
// so each has one definition that both sides compile.
#pragma once

#if defined(__CUDACC__)
#define MPVERIFY_HOST_DEVICE __host__ __device__
#else
#define MPVERIFY_HOST_DEVICE
#endif
