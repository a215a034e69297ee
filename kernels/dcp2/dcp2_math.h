/* The DCP2 math on the CPU, in double precision: token ownership, the
 * partial attention of one rank's shard, the log-sum-exp combine, the a2a
 * packet and the ag_rs rescale.  The smoke program uses it to shard the
 * inputs and to lay out the exchanges; the unit tests prove with it that
 * combining the shards' partial results gives full attention, empty shards
 * and base-2 LSEs included.  dcp2_kernels.cu does the same on the GPU. */
#ifndef IB_DCP2_MATH_H
#define IB_DCP2_MATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DCP2_LSE_LANES 4

/* Consecutive ranks form DCP groups: color = rank / dcp, key = rank % dcp. */
static inline int dcp2_group_of (int rank, int dcp) { return rank / dcp; }
static inline int dcp2_rank_in_group (int rank, int dcp) { return rank % dcp; }

/* KV position POS is owned by DCP rank (pos / interleave) % dcp. */
static inline int dcp2_owner (long pos, int dcp, int interleave) { return (int) ((pos / interleave) % dcp); }
/* How many of L positions rank R owns. */
long dcp2_local_len (long L, int r, int dcp, int interleave);
/* The positions rank R owns, in order; returns their count. */
long dcp2_local_positions (long L, int r, int dcp, int interleave, long *out);

/* q [B,H,D], k/v [B,L,H,D] -> o [B,H,D], lse [B,H] (natural or base-2 log).
 * L = 0 gives lse = -inf and o = NaN, as the GPU kernel does. */
void dcp2_attention (const double *q, const double *k, const double *v, double *o, double *lse, int B, int H, int D,
                     long L, bool base2);

/* N partial results (o [n][B*H*D], lse [n][B*H]) -> the combined o, lse. */
void dcp2_combine (const double *o, const double *lse, int n, int B, int H, int D, bool base2, double *out,
                   double *lse_out);

/* o [B,H,D], lse [B,H] -> packet [dcp, B, H/dcp, D+4] and back (rank j's
 * packets of every rank, combined over the n = dcp sources). */
void dcp2_pack (const double *o, const double *lse, int B, int H, int D, int dcp, double *packet);
void dcp2_unpack_combine (const double *packets /* [src][dcp,B,Hs,D+4] of all ranks */, int dcp, int rank, int B,
                          int H, int D, bool base2, double *out /* [B,Hs,D] */, double *lse_out /* [B,Hs] */);

/* ag_rs: rank R's o scaled by exp(lse_r - L), laid out [dcp, B, Hs, D]. */
void dcp2_agrs_rescale (const double *o, const double *lse_all /* [dcp,B,H] */, int rank, int dcp, int B, int H,
                        int D, bool base2, double *out);

/* Deterministic inputs: a splitmix64 stream mapped to [-1, 1). */
void dcp2_fill (double *x, size_t n, uint64_t seed);

/* fp32 <-> bf16 (round to nearest even), as the GPU converts. */
uint16_t dcp2_to_bf16 (float x);
float dcp2_from_bf16 (uint16_t x);

/* |got - want| <= atol + rtol * |want| everywhere; NaN never passes.
 * Returns the largest |got - want| (INFINITY when something failed). */
double dcp2_max_error (const float *got, const float *want, size_t n, double rtol, double atol, bool *ok);

#endif
