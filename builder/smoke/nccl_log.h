/* What NCCL's own log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET,ENV)
 * says about a run: the version loaded, each communicator (its id, ranks,
 * nodes, channel counts), the transport every peer pair connected through
 * ("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read", SHM/direct/direct,
 * NET/Socket/0, NET/IB/0/GDRDMA, NVLS) and over how many channels, the
 * settings NCCL took from its environment or nccl.conf, and its warnings.
 *
 * Peer pairs are keyed by rank and device as NCCL prints them: since NCCL
 * 2.22 connections are made when a collective first needs them, so a line
 * cannot always be tied to one communicator; a pair's transports are those
 * of every communicator that connected it. */
#ifndef IB_NCCL_LOG_H
#define IB_NCCL_LOG_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

struct ib_nccl_pair
{
  char from[32], to[32]; /* "0[0]": rank[device] */
  char *transport;       /* "P2P/CUMEM/read" (first seen) */
  char *others;          /* other transports seen for the pair, ", "-separated, or NULL */
  int channels;          /* distinct channel numbers */
  unsigned long long channel_mask;
};

struct ib_nccl_comm
{
  char id[40];   /* commId (or the comm pointer) */
  int nranks, nnodes;
  int coll_channels, nvls_channels, p2p_channels; /* -1: not logged */
};

struct ib_nccl_log
{
  char version[48]; /* "2.28.3+cuda13.0", "" when not logged */
  size_t n_pairs, n_comms, n_settings, n_warnings;
  struct ib_nccl_pair *pairs;
  struct ib_nccl_comm *comms;
  char **settings; /* "NCCL_P2P_DISABLE=1" */
  char **warnings; /* NCCL WARN lines, without the prefix */
};

void ib_nccl_log_parse (const char *text, struct ib_nccl_log *out);
void ib_nccl_log_clear (struct ib_nccl_log *l);

/* Does TRANSPORT ("P2P/CUMEM/read") count as EXPECTED ("P2P", "NET/IB",
 * "NET/Socket", "SHM", "NVLS"; case-insensitive, by prefix)? */
bool ib_nccl_transport_is (const char *transport, const char *expected);

/* The first pair whose transport is not EXPECTED, or NULL. */
const struct ib_nccl_pair *ib_nccl_log_unexpected (const struct ib_nccl_log *l, const char *expected);

/* The first warning worth quoting for a failure (not the name-resolution
 * noise of a machine without DNS), or NULL. */
const char *ib_nccl_log_cause (const struct ib_nccl_log *l);

/* {"version","communicators":[...],"pairs":[...],"settings":[...],"warnings":[...]} */
cJSON *ib_nccl_log_json (const struct ib_nccl_log *l);

/* The smoke program's bandwidth lines ("nccl all-gather (all ranks) ranks 4
 * 1048576 B  52.1 us  algbw 20.12 GB/s  busbw 15.09 GB/s", nccl-tests'
 * algbw and busbw) as [{"collective","ranks","bytes","us","algbw_gbs",
 * "busbw_gbs"}]. */
cJSON *ib_nccl_bandwidth_json (const char *text);

/* TEXT without NCCL's INFO lines (malloc'd): what is shown to people. */
char *ib_nccl_log_strip_info (const char *text);

#endif
