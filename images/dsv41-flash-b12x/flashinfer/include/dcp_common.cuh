// Shared helpers of the stand-in FlashInfer DCP kernels.
#pragma once

// fp32 log-sum-exp of two partial results; -inf marks an empty shard.
__device__ __forceinline__ float dcp_lse_merge(float a, float b) {
  float m = fmaxf(a, b);
  if (m == -INFINITY) return -INFINITY;
  return m + logf(expf(a - m) + expf(b - m));
}
