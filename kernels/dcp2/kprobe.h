/* The kernel probe, inside the container: each cubin of the manifest that
 * imgbuild wrote (kernels/kplan.h) is loaded the way the CUDA runtime loads
 * a library (cuLibraryLoadData, no JIT), its kernel looked up
 * (cuLibraryGetKernel, where "no kernel image" shows), its attributes read
 * (registers, static and largest dynamic shared memory, threads per block)
 * and checked against the GPU, and the kernel launched once when it takes
 * no arguments or the manifest gives a launch recipe.  One line per probe
 * on stdout:
 *   kprobe-gpu INDEX NAME MAJOR.MINOR SHARED-OPTIN
 *   kprobe GPU pass|fail FILE SYMBOL ARCH REGS SHARED MAX-DYNAMIC THREADS LAUNCH ERROR
 * (tab-separated; LAUNCH "launched" or "not launched: why"; ERROR "" on a
 * pass, else "STEP: CUDA error").  Uses only libc and the CUDA driver,
 * loaded with dlopen, so that it runs in any image. */
#ifndef DCP2_KPROBE_H
#define DCP2_KPROBE_H

/* Run the probes of DIR/manifest; the number that failed, or -1 when the
 * probe could not run at all (its message on stderr).  Must run in a
 * process that has not initialised CUDA and exits afterwards. */
int kprobe_run (const char *dir);

#endif
