#include "kernels/dcp2/dcp2_math.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

long
dcp2_local_len (long L, int r, int dcp, int interleave)
{
  long round = (long) dcp * interleave;
  long full = L / round, rest = L % round;
  long start = (long) r * interleave;
  long extra = rest - start;
  return full * interleave + (extra <= 0 ? 0 : extra < interleave ? extra : interleave);
}

long
dcp2_local_positions (long L, int r, int dcp, int interleave, long *out)
{
  long n = 0;
  for (long p = 0; p < L; p++)
    if (dcp2_owner (p, dcp, interleave) == r)
      out[n++] = p;
  return n;
}

static double
ex (double x, bool base2)
{
  return base2 ? exp2 (x) : exp (x);
}

static double
lg (double x, bool base2)
{
  return base2 ? log2 (x) : log (x);
}

void
dcp2_attention (const double *q, const double *k, const double *v, double *o, double *lse, int B, int H, int D,
                long L, bool base2)
{
  double scale = 1.0 / sqrt ((double) D) * (base2 ? 1.4426950408889634 : 1.0);
  double *s = malloc (sizeof (double) * (L ? (size_t) L : 1));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      {
        const double *qp = q + ((size_t) b * H + h) * D;
        double m = -INFINITY, sum = 0;
        for (long t = 0; t < L; t++)
          {
            const double *kp = k + (((size_t) b * L + t) * H + h) * D;
            double dot = 0;
            for (int d = 0; d < D; d++)
              dot += qp[d] * kp[d];
            s[t] = dot * scale;
            m = fmax (m, s[t]);
          }
        for (long t = 0; t < L; t++)
          sum += ex (s[t] - m, base2);
        double *op = o + ((size_t) b * H + h) * D;
        for (int d = 0; d < D; d++)
          {
            double acc = 0;
            for (long t = 0; t < L; t++)
              acc += ex (s[t] - m, base2) * v[(((size_t) b * L + t) * H + h) * D + d];
            op[d] = acc / sum; /* 0/0 = NaN for an empty shard */
          }
        lse[b * H + h] = L ? m + lg (sum, base2) : -INFINITY;
      }
  free (s);
}

/* The combine of one (b, h) over N sources LSES[i * STRIDE]; W gets the
 * weights, zero where a source is empty. */
static double
combine_lse (const double *lses, int n, size_t stride, bool base2, double *w)
{
  double m = -INFINITY, s = 0;
  for (int i = 0; i < n; i++)
    m = fmax (m, lses[i * stride]);
  if (m == -INFINITY)
    m = 0;
  for (int i = 0; i < n; i++)
    s += ex (lses[i * stride] - m, base2);
  double L = m + lg (s, base2);
  for (int i = 0; i < n; i++)
    w[i] = s > 0 ? ex (lses[i * stride] - L, base2) : 0;
  return L;
}

void
dcp2_combine (const double *o, const double *lse, int n, int B, int H, int D, bool base2, double *out,
              double *lse_out)
{
  double w[64];
  size_t plane = (size_t) B * H * D;
  for (int bh = 0; bh < B * H; bh++)
    {
      lse_out[bh] = combine_lse (lse + bh, n, (size_t) B * H, base2, w);
      for (int d = 0; d < D; d++)
        {
          double acc = 0;
          for (int i = 0; i < n; i++)
            if (w[i] > 0)
              acc += w[i] * o[i * plane + (size_t) bh * D + d];
          out[(size_t) bh * D + d] = acc;
        }
    }
}

void
dcp2_pack (const double *o, const double *lse, int B, int H, int D, int dcp, double *packet)
{
  int Hs = H / dcp, row = D + DCP2_LSE_LANES;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      {
        double *p = packet + (((size_t) (h / Hs) * B + b) * Hs + h % Hs) * row;
        for (int d = 0; d < row; d++)
          p[d] = d < D ? o[((size_t) b * H + h) * D + d] : d == D ? lse[b * H + h] : 0;
      }
}

void
dcp2_unpack_combine (const double *packets, int dcp, int rank, int B, int H, int D, bool base2, double *out,
                     double *lse_out)
{
  int Hs = H / dcp, row = D + DCP2_LSE_LANES;
  size_t whole = (size_t) dcp * B * Hs * row, mine = (size_t) rank * B * Hs * row;
  double w[64];
  for (int b = 0; b < B; b++)
    for (int h = 0; h < Hs; h++)
      {
        const double *p = packets + mine + ((size_t) b * Hs + h) * row;
        lse_out[b * Hs + h] = combine_lse (p + D, dcp, whole, base2, w);
        for (int d = 0; d < D; d++)
          {
            double acc = 0;
            for (int i = 0; i < dcp; i++)
              if (w[i] > 0)
                acc += w[i] * p[i * whole + d];
            out[((size_t) b * Hs + h) * D + d] = acc;
          }
      }
}

void
dcp2_agrs_rescale (const double *o, const double *lse_all, int rank, int dcp, int B, int H, int D, bool base2,
                   double *out)
{
  int Hs = H / dcp;
  double w[64];
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      {
        combine_lse (lse_all + b * H + h, dcp, (size_t) B * H, base2, w);
        double *dst = out + (((size_t) (h / Hs) * B + b) * Hs + h % Hs) * D;
        for (int d = 0; d < D; d++)
          dst[d] = w[rank] > 0 ? w[rank] * o[((size_t) b * H + h) * D + d] : 0;
      }
}

void
dcp2_fill (double *x, size_t n, uint64_t seed)
{
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++)
    {
      uint64_t z = (s += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      x[i] = (double) (z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    }
}

uint16_t
dcp2_to_bf16 (float x)
{
  uint32_t u;
  memcpy (&u, &x, 4);
  if ((u & 0x7fffffff) > 0x7f800000)
    return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t) (u >> 16);
}

float
dcp2_from_bf16 (uint16_t x)
{
  uint32_t u = (uint32_t) x << 16;
  float f;
  memcpy (&f, &u, 4);
  return f;
}

double
dcp2_max_error (const float *got, const float *want, size_t n, double rtol, double atol, bool *ok)
{
  double worst = 0;
  *ok = true;
  for (size_t i = 0; i < n; i++)
    {
      double e = fabs ((double) got[i] - (double) want[i]);
      if (isnan (got[i]) || isnan (want[i]) || !(e <= atol + rtol * fabs ((double) want[i])))
        {
          *ok = false;
          worst = INFINITY;
        }
      else if (e > worst)
        worst = e;
    }
  return worst;
}
