// DCP2 kernels: decode attention over one rank's KV shard, the log-sum-exp
// combine, the a2a pack, the ag_rs rescale.  Prebaked into the image as SASS
// (sm_121a for the GB10, sm_90a for the H200s of the test machine) and run by
// the smoke test (kernels/dcp2/dcp2_smoke.c) inside the built container.
//
// Layouts (row-major): q [B, H, D]; k, v [B, L, H, D] (L: this rank's tokens);
// o [B, H, D]; lse [B, H] fp32; packet [dcp, B, H/dcp, D + 4] fp32 (the LSE in
// lane D, three pad lanes keep rows 16-byte aligned).  LSEs are natural logs,
// or base-2 logs when base2 is set (scores then scaled by log2(e)).
// The math is mirrored on the CPU by dcp2_math.c, which the tests check.
#include <cuda_bf16.h>
#include <math_constants.h>

#define LSE_LANES 4

template <typename T> __device__ __forceinline__ float to_f(T x);
template <> __device__ __forceinline__ float to_f<float>(float x) { return x; }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float ex(float x, int base2) { return base2 ? exp2f(x) : expf(x); }
__device__ __forceinline__ float lg(float x, int base2) { return base2 ? log2f(x) : logf(x); }

// Sum over the block; every thread gets the result.
__device__ float block_sum(float x, float *scratch) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffff, x, o);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  float t = 0.f;
  for (int w = 0; w < (int)(blockDim.x / 32); w++) t += scratch[w];
  return t;
}

// One block per (b, h): online softmax over the shard's tokens.  An empty
// shard gives lse = -inf and o = 0/0 = NaN, on purpose: the combine must not
// let it leak.
template <typename T>
__device__ void attn_partial(const T *q, const T *k, const T *v, T *o, float *lse, int B, int H, int D, int L,
                             int base2) {
  __shared__ float scratch[32];
  int b = blockIdx.x / H, h = blockIdx.x % H;
  if (b >= B) return;
  const float scale = rsqrtf((float)D) * (base2 ? 1.4426950408889634f : 1.f);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  float m = -CUDART_INF_F, l = 0.f;
  const T *qp = q + ((size_t)b * H + h) * D;
  for (int t = 0; t < L; t++) {
    const T *kp = k + (((size_t)b * L + t) * H + h) * D;
    const T *vp = v + (((size_t)b * L + t) * H + h) * D;
    float part = 0.f;
    for (int d = threadIdx.x; d < D; d += blockDim.x) part += to_f(qp[d]) * to_f(kp[d]);
    float s = block_sum(part, scratch) * scale;
    float mn = fmaxf(m, s);
    float corr = ex(m - mn, base2), p = ex(s - mn, base2);
    l = l * corr + p;
    for (int i = 0, d = threadIdx.x; d < D; i++, d += blockDim.x) acc[i] = acc[i] * corr + p * to_f(vp[d]);
    m = mn;
  }
  T *op = o + ((size_t)b * H + h) * D;
  for (int i = 0, d = threadIdx.x; d < D; i++, d += blockDim.x) op[d] = from_f<T>(acc[i] / l);
  if (threadIdx.x == 0) lse[b * H + h] = L ? m + lg(l, base2) : -CUDART_INF_F;
}

// The combine of N partial results of one (b, h): m = max L_i (0 if all are
// -inf), L = m + log sum exp(L_i - m), w_i = exp(L_i - L); a zero weight
// contributes exactly 0.
__device__ float combine_lse(const float *lses, int n, int stride, int base2, float *w) {
  float m = -CUDART_INF_F;
  for (int i = 0; i < n; i++) m = fmaxf(m, lses[i * stride]);
  if (m == -CUDART_INF_F) m = 0.f;
  float s = 0.f;
  for (int i = 0; i < n; i++) s += ex(lses[i * stride] - m, base2);
  float L = m + lg(s, base2);
  for (int i = 0; i < n; i++) w[i] = s > 0.f ? ex(lses[i * stride] - L, base2) : 0.f;
  return L;
}

// packet [n, B, Hs, D+4] -> out [B, Hs, D], lse_out [B, Hs]; one block per (b, h).
template <typename T>
__device__ void a2a_combine(const float *packet, T *out, float *lse_out, int n, int B, int Hs, int D, int base2) {
  int b = blockIdx.x / Hs, h = blockIdx.x % Hs;
  if (b >= B) return;
  int row = D + LSE_LANES;
  size_t plane = (size_t)B * Hs * row;
  const float *p = packet + ((size_t)b * Hs + h) * row;
  float w[8];
  float L = combine_lse(p + D, n, (int)plane, base2, w);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0.f;
    for (int i = 0; i < n; i++)
      if (w[i] > 0.f) acc += w[i] * p[i * plane + d];
#ifdef DCP2_PLANTED_ERROR
    acc += 0.05f; // a test-only build of the kernels: the smoke test must catch it
#endif
    out[((size_t)b * Hs + h) * D + d] = from_f<T>(acc);
  }
  if (threadIdx.x == 0) lse_out[b * Hs + h] = L;
}

// o [B, H, D] + lse [B, H] -> packet [dcp, B, H/dcp, D+4]: rank j gets heads j*Hs..
template <typename T>
__device__ void a2a_pack(const T *o, const float *lse, float *packet, int B, int H, int D, int dcp) {
  int Hs = H / dcp, row = D + LSE_LANES;
  int b = blockIdx.x / H, h = blockIdx.x % H;
  if (b >= B) return;
  int dst = h / Hs, hl = h % Hs;
  float *p = packet + (((size_t)dst * B + b) * Hs + hl) * row;
  for (int d = threadIdx.x; d < row; d += blockDim.x)
    p[d] = d < D ? to_f(o[((size_t)b * H + h) * D + d]) : (d == D ? lse[b * H + h] : 0.f);
}

// ag_rs: with every rank's LSEs (lse_all [dcp, B, H]), rescale this rank's
// partial output into head-slice-major out [dcp, B, Hs, D] fp32, ready for a
// reduce-scatter that leaves rank j the sum for its heads; lse_out [B, Hs]
// gets the combined LSE of this rank's own heads.
template <typename T>
__device__ void agrs_rescale(const T *o, const float *lse_all, float *out, float *lse_out, int rank, int dcp, int B,
                             int H, int D, int base2) {
  int Hs = H / dcp;
  int b = blockIdx.x / H, h = blockIdx.x % H;
  if (b >= B) return;
  float w[8];
  float L = combine_lse(lse_all + b * H + h, dcp, B * H, base2, w);
  float wr = w[rank];
  float *dst = out + (((size_t)(h / Hs) * B + b) * Hs + h % Hs) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float x = wr > 0.f ? wr * to_f(o[((size_t)b * H + h) * D + d]) : 0.f;
#ifdef DCP2_PLANTED_ERROR
    x += 0.05f;
#endif
    dst[d] = x;
  }
  if (threadIdx.x == 0 && h / Hs == rank) lse_out[b * Hs + h % Hs] = L;
}

#define DCP2_EXPORT(name, T, sig, call) \
  extern "C" __global__ void __launch_bounds__(128) name sig { call; }

DCP2_EXPORT(dcp2_attn_partial_f32, float,
            (const float *q, const float *k, const float *v, float *o, float *lse, int B, int H, int D, int L, int base2),
            attn_partial<float>(q, k, v, o, lse, B, H, D, L, base2))
DCP2_EXPORT(dcp2_attn_partial_bf16, __nv_bfloat16,
            (const __nv_bfloat16 *q, const __nv_bfloat16 *k, const __nv_bfloat16 *v, __nv_bfloat16 *o, float *lse,
             int B, int H, int D, int L, int base2),
            attn_partial<__nv_bfloat16>(q, k, v, o, lse, B, H, D, L, base2))
DCP2_EXPORT(dcp2_a2a_combine_f32, float,
            (const float *packet, float *out, float *lse_out, int n, int B, int Hs, int D, int base2),
            a2a_combine<float>(packet, out, lse_out, n, B, Hs, D, base2))
DCP2_EXPORT(dcp2_a2a_combine_bf16, __nv_bfloat16,
            (const float *packet, __nv_bfloat16 *out, float *lse_out, int n, int B, int Hs, int D, int base2),
            a2a_combine<__nv_bfloat16>(packet, out, lse_out, n, B, Hs, D, base2))
DCP2_EXPORT(dcp2_a2a_pack_f32, float, (const float *o, const float *lse, float *packet, int B, int H, int D, int dcp),
            a2a_pack<float>(o, lse, packet, B, H, D, dcp))
DCP2_EXPORT(dcp2_a2a_pack_bf16, __nv_bfloat16,
            (const __nv_bfloat16 *o, const float *lse, float *packet, int B, int H, int D, int dcp),
            a2a_pack<__nv_bfloat16>(o, lse, packet, B, H, D, dcp))
DCP2_EXPORT(dcp2_agrs_rescale_f32, float,
            (const float *o, const float *lse_all, float *out, float *lse_out, int rank, int dcp, int B, int H, int D,
             int base2),
            agrs_rescale<float>(o, lse_all, out, lse_out, rank, dcp, B, H, D, base2))
DCP2_EXPORT(dcp2_agrs_rescale_bf16, __nv_bfloat16,
            (const __nv_bfloat16 *o, const float *lse_all, float *out, float *lse_out, int rank, int dcp, int B, int H,
             int D, int base2),
            agrs_rescale<__nv_bfloat16>(o, lse_all, out, lse_out, rank, dcp, B, H, D, base2))
