/* kernels/dcp2: the DCP2 math on the CPU.  Combining the partial attention
 * of every shard gives full attention, for both exchanges, with interleave 1
 * and 16, an empty shard, base-2 LSEs; each rank ends with its own heads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dcp2/dcp2_math.h"
#include "tests/unit/test.h"

void
dcp2_groups_and_ownership (struct test_ctx *t)
{
  /* TP 4, DCP 2: groups {0,1} and {2,3}. */
  int group[4], rank[4];
  for (int r = 0; r < 4; r++)
    {
      group[r] = dcp2_group_of (r, 2);
      rank[r] = dcp2_rank_in_group (r, 2);
    }
  CHECK (t, group[0] == 0 && group[1] == 0 && group[2] == 1 && group[3] == 1);
  CHECK (t, rank[0] == 0 && rank[1] == 1 && rank[2] == 0 && rank[3] == 1);
  /* Interleave 16 over dcp 2: 0-15 on rank 0, 16-31 on rank 1, 32-47 on 0. */
  CHECK (t, dcp2_owner (15, 2, 16) == 0 && dcp2_owner (16, 2, 16) == 1 && dcp2_owner (32, 2, 16) == 0);
  CHECK (t, dcp2_owner (5, 2, 1) == 1);
  long pos[1000];
  for (int dcp = 1; dcp <= 4; dcp++)
    for (int il = 1; il <= 16; il *= 4)
      for (long L = 0; L < 70; L += 7)
        {
          long sum = 0;
          for (int r = 0; r < dcp; r++)
            {
              long n = dcp2_local_positions (L, r, dcp, il, pos);
              CHECK (t, n == dcp2_local_len (L, r, dcp, il));
              sum += n;
            }
          CHECK (t, sum == L);
        }
  /* Fewer tokens than ranks: an empty shard. */
  CHECK (t, dcp2_local_len (1, 1, 2, 1) == 0);
}

struct problem
{
  int B, H, D;
  long L;
  int dcp, il;
  bool base2;
};

static double
max_diff (const double *a, const double *b, size_t n)
{
  double m = 0;
  for (size_t i = 0; i < n; i++)
    m = isnan (a[i]) || isnan (b[i]) ? INFINITY : fmax (m, fabs (a[i] - b[i]));
  return m;
}

/* Shard, attend per shard, exchange both ways, compare with full attention. */
static void
check_problem (struct test_ctx *t, struct problem p)
{
  size_t nq = (size_t) p.B * p.H * p.D, nkv = (size_t) p.B * p.L * p.H * p.D, nl = (size_t) p.B * p.H;
  int Hs = p.H / p.dcp, row = p.D + DCP2_LSE_LANES;
  double *q = malloc (nq * 8), *k = malloc (nkv * 8 + 8), *v = malloc (nkv * 8 + 8);
  dcp2_fill (q, nq, 1);
  dcp2_fill (k, nkv, 2);
  dcp2_fill (v, nkv, 3);
  double *full_o = malloc (nq * 8), *full_l = malloc (nl * 8);
  dcp2_attention (q, k, v, full_o, full_l, p.B, p.H, p.D, p.L, p.base2);
  double *o = malloc (nq * 8 * p.dcp), *l = malloc (nl * 8 * p.dcp);
  size_t pk = (size_t) p.dcp * p.B * Hs * row;
  double *packets = malloc (pk * 8 * p.dcp);
  long *pos = malloc (sizeof (long) * (size_t) (p.L + 1));
  bool saw_nan = false;
  for (int r = 0; r < p.dcp; r++)
    {
      long n = dcp2_local_positions (p.L, r, p.dcp, p.il, pos);
      size_t rowsz = (size_t) p.H * p.D;
      double *kl = malloc ((size_t) p.B * n * rowsz * 8 + 8), *vl = malloc ((size_t) p.B * n * rowsz * 8 + 8);
      for (int b = 0; b < p.B; b++)
        for (long x = 0; x < n; x++)
          {
            memcpy (kl + ((size_t) b * n + x) * rowsz, k + ((size_t) b * p.L + pos[x]) * rowsz, rowsz * 8);
            memcpy (vl + ((size_t) b * n + x) * rowsz, v + ((size_t) b * p.L + pos[x]) * rowsz, rowsz * 8);
          }
      dcp2_attention (q, kl, vl, o + r * nq, l + r * nl, p.B, p.H, p.D, n, p.base2);
      saw_nan |= n == 0 && isnan (o[r * nq]);
      dcp2_pack (o + r * nq, l + r * nl, p.B, p.H, p.D, p.dcp, packets + r * pk);
      free (kl);
      free (vl);
    }
  if (p.L < p.dcp)
    CHECK (t, saw_nan); /* the empty shard's NaN is there, and must not leak */
  /* A plain combine over all heads. */
  double *co = malloc (nq * 8), *cl = malloc (nl * 8);
  dcp2_combine (o, l, p.dcp, p.B, p.H, p.D, p.base2, co, cl);
  CHECK (t, max_diff (co, full_o, nq) < 1e-12);
  CHECK (t, max_diff (cl, full_l, nl) < 1e-12);
  /* a2a and ag_rs: each rank its own heads. */
  double *ao = malloc ((size_t) p.B * Hs * p.D * 8), *al = malloc ((size_t) p.B * Hs * 8);
  double *scaled = malloc (nq * 8 * p.dcp), *want = malloc ((size_t) p.B * Hs * p.D * 8);
  for (int r = 0; r < p.dcp; r++)
    dcp2_agrs_rescale (o + r * nq, l, r, p.dcp, p.B, p.H, p.D, p.base2, scaled + r * nq);
  for (int r = 0; r < p.dcp; r++)
    {
      dcp2_unpack_combine (packets, p.dcp, r, p.B, p.H, p.D, p.base2, ao, al);
      for (int b = 0; b < p.B; b++)
        memcpy (want + (size_t) b * Hs * p.D, full_o + ((size_t) b * p.H + (size_t) r * Hs) * p.D,
                (size_t) Hs * p.D * 8);
      CHECK (t, max_diff (ao, want, (size_t) p.B * Hs * p.D) < 1e-12);
      for (int b = 0; b < p.B; b++)
        for (int h = 0; h < Hs; h++)
          CHECK (t, fabs (al[b * Hs + h] - full_l[b * p.H + r * Hs + h]) < 1e-12);
      /* ag_rs: the reduce-scatter's sum of everyone's chunk r. */
      size_t chunk = (size_t) p.B * Hs * p.D;
      double worst = 0;
      for (size_t i = 0; i < chunk; i++)
        {
          double s = 0;
          for (int src = 0; src < p.dcp; src++)
            s += scaled[src * nq + (size_t) r * chunk + i];
          worst = fmax (worst, isnan (s) ? INFINITY : fabs (s - want[i]));
        }
      CHECK (t, worst < 1e-12);
    }
  free (q), free (k), free (v), free (full_o), free (full_l), free (o), free (l), free (packets), free (pos);
  free (co), free (cl), free (ao), free (al), free (scaled), free (want);
}

void
dcp2_combine_equals_full_attention (struct test_ctx *t)
{
  check_problem (t, (struct problem){ 2, 4, 8, 37, 2, 1, false });
  check_problem (t, (struct problem){ 2, 4, 8, 37, 2, 16, false });
  check_problem (t, (struct problem){ 3, 8, 16, 50, 4, 16, true });
  check_problem (t, (struct problem){ 2, 4, 8, 1, 2, 1, false }); /* an empty shard */
  check_problem (t, (struct problem){ 2, 4, 8, 1, 2, 1, true });
  check_problem (t, (struct problem){ 1, 2, 4, 3, 1, 1, false }); /* dcp 1 */
}

void
dcp2_base2_lse_is_log2 (struct test_ctx *t)
{
  double q[4] = { 1, 0, 0, 0 }, k[8] = { 1, 0, 0, 0, 0, 0, 0, 0 }, v[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
  double o[4], le, l2;
  dcp2_attention (q, k, v, o, &le, 1, 1, 4, 2, false);
  dcp2_attention (q, k, v, o, &l2, 1, 1, 4, 2, true);
  /* Scores 0.5 and 0: LSE = log(e^0.5 + 1), and its base-2 form. */
  CHECK (t, fabs (le - log (exp (0.5) + 1)) < 1e-12);
  CHECK (t, fabs (l2 - le / log (2)) < 1e-12);
}

void
dcp2_bf16_rounding (struct test_ctx *t)
{
  CHECK (t, dcp2_from_bf16 (dcp2_to_bf16 (1.0f)) == 1.0f);
  CHECK (t, dcp2_to_bf16 (1.00390625f) == 0x3f80); /* halfway: to even */
  CHECK (t, dcp2_to_bf16 (1.01171875f) == 0x3f82);
  CHECK (t, isnan (dcp2_from_bf16 (dcp2_to_bf16 (NAN))));
  bool ok;
  float a[2] = { 1.0f, NAN }, b[2] = { 1.0f, 1.0f };
  dcp2_max_error (a, b, 2, 0.1, 0.1, &ok);
  CHECK (t, !ok);
}
