/* Deterministic parallel gzip: one gzip member whose bytes depend only on
 * the input and the level, never on the thread count, the machine or how
 * the input was cut into writes.
 *
 * The contract, which is the format of every layer imgbuild writes:
 *  - the input is cut into blocks of IB_PGZIP_BLOCK bytes (a constant: the
 *    last block holds the rest, and an empty input is one empty block);
 *  - each block is deflated on its own as raw deflate at LEVEL, windowBits
 *    15, memLevel 8, default strategy, primed (deflateSetDictionary) with the
 *    last 32 KiB of the input before it; every block but the last ends with
 *    Z_SYNC_FLUSH (so it ends on a byte boundary), the last with Z_FINISH;
 *  - the blocks follow one fixed 10-byte header, the one zlib writes for
 *    deflateInit2 (..., 15 + 16, ...): no name, mtime 0, XFL from the level,
 *    OS 3 (Unix); then the CRC-32 and ISIZE of the whole input.
 * The same scheme as pigz, so the ratio is about gzip's (the dictionary
 * keeps matches across blocks).  Blocks are deflated by THREADS workers;
 * at most 2 * THREADS blocks are in memory at once, and the output goes to
 * the sink in order, on the caller's thread. */
#ifndef IB_PGZIP_H
#define IB_PGZIP_H

#include <stddef.h>

#include "util/error.h"

#define IB_PGZIP_BLOCK (1u << 20)
/* 2 blocks of input and output a thread: at most 256 MiB at 64 threads. */
#define IB_PGZIP_MAX_THREADS 64

struct ib_pgzip;

/* Where the compressed bytes go, in order, on the thread that called
 * ib_pgzip_write or ib_pgzip_finish.  Returns 0, or -1 with *ERR. */
typedef int (*ib_pgzip_sink_fn) (void *data, const void *buf, size_t len, ib_error_t *err);

/* LEVEL 1..9; THREADS 1..IB_PGZIP_MAX_THREADS (1: deflate on the caller's
 * thread, no thread started).  Fails (IB_EENV) when a thread cannot start. */
int ib_pgzip_new (int level, int threads, ib_pgzip_sink_fn sink, void *data, struct ib_pgzip **out,
                  ib_error_t *err);
int ib_pgzip_write (struct ib_pgzip *z, const void *buf, size_t len, ib_error_t *err);
/* Deflate what is left and write the trailer.  Nothing may be written after. */
int ib_pgzip_finish (struct ib_pgzip *z, ib_error_t *err);
/* Stops the workers; safe after a failure, before or without finish. */
void ib_pgzip_free (struct ib_pgzip *z);

/* The number of online CPUs (at least 1, at most IB_PGZIP_MAX_THREADS):
 * the default thread count. */
int ib_pgzip_default_threads (void);

#endif
