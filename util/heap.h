/* The heap policy of the programs (imgbuild, imgverify): set once, first
 * thing in main, never by the library. */
#ifndef IB_HEAP_H
#define IB_HEAP_H

/* Blocks of 256 KiB and more are mapped on their own and given back when
 * freed.  glibc's default moves that threshold up to the largest mapped
 * block ever freed (up to 32 MiB): after a 16 MiB file text or a view's
 * table, every buffer up to that size comes from the heap, whose pages a
 * free rarely returns, in each thread's arena.  A cold build over CUDA's
 * libraries peaked at 66.9 MiB of its own that way, 45.1 MiB with the
 * threshold fixed (issue 18's bound is 64 MiB); its page faults rose only
 * where a stream made its buffers anew for every fatbin entry
 * (kernels/payload.h: an inspection's streams now share theirs). */
void ib_heap_bound (void);

#endif
