// Stand-in of FlashInfer's csrc/trtllm_dcp_alltoall.cu: the kernels that the
// DCP a2a path calls, built for sm_121a (GB10) into libflashinfer_dcp.so.
#include <cstdint>

// Pack [B, H, D] partial outputs and [B, H] LSEs into [dcp, B, H/dcp, D + 4].
extern "C" __global__ void trtllm_dcp_alltoall(const float *out, const float *lse, float *packet, int b, int h,
                                               int d, int dcp) {
  int hd = h / dcp, lanes = d + 4;
  int64_t total = (int64_t)b * h * lanes;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += gridDim.x * (int64_t)blockDim.x) {
    int lane = i % lanes, head = (i / lanes) % h, tok = i / lanes / h;
    int dst = head / hd, hl = head % hd;
    float v = lane < d ? out[((int64_t)tok * h + head) * d + lane] : (lane == d ? lse[tok * h + head] : 0.f);
    packet[(((int64_t)dst * b + tok) * hd + hl) * lanes + lane] = v;
  }
}

extern "C" __global__ void trtllm_dcp_lse_rescale(float *out, const float *lse, const float *total_lse, int rows,
                                                  int d) {
  int r = blockIdx.x;
  if (r >= rows) return;
  float w = lse[r] == -INFINITY ? 0.f : expf(lse[r] - total_lse[r]);
  for (int i = threadIdx.x; i < d; i += blockDim.x) out[r * d + i] = w == 0.f ? 0.f : out[r * d + i] * w;
}

extern "C" int flashinfer_dcp_version(void) { return 70001; }
