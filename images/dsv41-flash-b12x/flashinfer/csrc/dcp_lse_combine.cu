// Stand-in of a FlashInfer kernel that the base ships only as PTX (built for
// compute_120): on a GB10 it would be JIT-compiled at the first request.
// The dsv41-flash-dcp2 definition prebakes it from this very source.
#include "dcp_common.cuh"

extern "C" __global__ void dcp_lse_combine(const float *lse, const float *out, float *merged_out,
                                           float *merged_lse, int rows, int dim) {
  int r = blockIdx.x;
  if (r >= rows) return;
  float l0 = lse[2 * r], l1 = lse[2 * r + 1];
  float l = dcp_lse_merge(l0, l1);
  float w0 = l0 == -INFINITY ? 0.f : expf(l0 - l), w1 = l1 == -INFINITY ? 0.f : expf(l1 - l);
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    float a = w0 == 0.f ? 0.f : w0 * out[(2 * r) * dim + d];
    float b = w1 == 0.f ? 0.f : w1 * out[(2 * r + 1) * dim + d];
    merged_out[r * dim + d] = a + b;
  }
  if (threadIdx.x == 0) merged_lse[r] = l;
}
