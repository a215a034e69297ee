/* Shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.c, built by
 * `make fuzzers`, run by `make fuzz` and tests/integration/fuzz.sh).
 *
 * A harness feeds one parser the bytes libFuzzer gives it, the way the
 * product feeds it: a string, a file on disk or a file descriptor.  Inputs
 * of several files are split on FUZZ_SEP lines, so that a seed is readable
 * and the mutator can reach each part.  A harness aborts (a crash libFuzzer
 * keeps) when a parser breaks a property the product relies on; errors the
 * parser reports are expected and released. */
#ifndef IB_FUZZ_H
#define IB_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#define FUZZ_SEP "\n%%\n"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* DATA as a NUL-terminated string (bytes after an embedded NUL are kept in
 * the buffer but the parsers see up to it, as they would from a file). */
char *fuzz_text (const uint8_t *data, size_t size);
/* Split TEXT in place on FUZZ_SEP lines into at most MAX parts (the
 * newline before a separator belongs to it); the missing ones are "". */
void fuzz_split (char *text, char **parts, int max);
/* A scratch folder made once per process (on /dev/shm when it can be,
 * else under $TMPDIR), removed at exit. */
const char *fuzz_scratch (void);
/* Write LEN bytes to SCRATCH/NAME (creating its folder). */
void fuzz_write (const char *name, const void *buf, size_t len);
/* rm -rf PATH */
void fuzz_remove_tree (const char *path);
/* One memory file per process, refilled with DATA: an fd for the parsers
 * that read with pread. */
int fuzz_memfd (const uint8_t *data, size_t size);
/* Harnesses linked with confine.c (-Wl,--wrap=open,--wrap=opendir): while
 * CONFINED, the parser may open files and walk folders only under the
 * scratch folder, so that a mutated `tree /` or `COPY / …` does not walk
 * the machine, and no mutated path opens a device or a FIFO. */
void fuzz_confine (int confined);
/* Abort with a message: a property the product relies on does not hold. */
void fuzz_fail (const char *fmt, ...) __attribute__ ((format (printf, 1, 2), noreturn));

#endif
