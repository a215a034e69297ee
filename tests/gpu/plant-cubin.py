#!/usr/bin/env python3
"""Plant a fault into one cubin of a fatbin (uncompressed entries, as nvcc
-fatbin writes them), keeping everything the static kernel gate reads (the
entry headers, the ELF symbol table, the kernel names) intact.

  plant-cubin.py IN OUT --sm 90 --kernel NAME smem BYTES
      the kernel's .nv.shared.NAME section claims BYTES of static shared
      memory (more than a GPU allows): the driver's loader or the probe's
      attribute check must refuse it
  plant-cubin.py IN OUT --sm 90 --kernel NAME corrupt
      the kernel's .nv.info.NAME attributes are overwritten with garbage
  plant-cubin.py IN OUT --sm 90 --kernel NAME threads N
      the kernel's launch bounds (EIATTR_MAX_THREADS in .nv.info.NAME) say N
      threads a block, fewer than its launch recipe's block: the launch
      must fail, naming the kernel
  plant-cubin.py IN OUT --sm 90 --kernel NAME rename
      NAME is missing from the sm_90 cubin (its symbol and sections renamed,
      the first letter made `x`): the static gate (another architecture)
      passes, the probe on this GPU finds no such kernel; --sm 0 renames it
      in every cubin: the static kernel gate fails
"""
import argparse
import struct
import sys


def entries(d):
    off = 0
    while off + 16 <= len(d):
        magic, _ver, hs, size = struct.unpack_from('<IHHQ', d, off)
        if magic != 0xBA55ED50:
            off += 8
            continue
        e, stop = off + hs, off + hs + size
        while e < stop:
            kind, _v, ehs, psize = struct.unpack_from('<HHIQ', d, e)
            csize, = struct.unpack_from('<I', d, e + 0x10)
            sm, = struct.unpack_from('<I', d, e + 0x1c)
            yield kind, sm, csize, e + ehs, psize
            e += ehs + psize
        off = stop


def sections(d, base):
    shoff, = struct.unpack_from('<Q', d, base + 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, base + 0x3a)
    hdrs = [base + shoff + i * shentsize for i in range(shnum)]
    stroff, = struct.unpack_from('<Q', d, hdrs[shstrndx] + 0x18)
    for h in hdrs:
        name_off, = struct.unpack_from('<I', d, h)
        start = base + stroff + name_off
        name = d[start:d.index(b'\0', start)].decode()
        yield name, h


def max_threads(d, at, h, n):
    """Set the x of the EIATTR_MAX_THREADS (0x05) attribute of the .nv.info
    section whose header is at H to N; False when the kernel has none."""
    off, = struct.unpack_from('<Q', d, h + 0x18)
    size, = struct.unpack_from('<Q', d, h + 0x20)
    p, end = at + off, at + off + size
    while p + 4 <= end:
        fmt, attr = d[p], d[p + 1]
        if fmt != 4:  # EIFMT_SVAL: a 16-bit length and data; others: 4 bytes
            p += 4
            continue
        length, = struct.unpack_from('<H', d, p + 2)
        if attr == 0x05 and length == 12:
            struct.pack_into('<I', d, p + 4, n)
            return True
        p += 4 + length
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('inp')
    ap.add_argument('out')
    ap.add_argument('--sm', type=int, required=True)
    ap.add_argument('--kernel', required=True)
    ap.add_argument('fault', choices=['smem', 'corrupt', 'threads', 'rename'])
    ap.add_argument('bytes', nargs='?', type=int, default=256 * 1024)
    # (for threads: the block size the bounds allow)
    a = ap.parse_args()
    d = bytearray(open(a.inp, 'rb').read())
    done = False
    for kind, sm, csize, at, size in entries(d):
        if kind != 2 or (sm != a.sm and a.sm != 0):
            continue
        if csize or d[at:at + 4] != b'\x7fELF':
            sys.exit('plant-cubin: the sm_%d cubin is compressed: build with nvcc -Xfatbin -compress=false' % sm)
        for name, h in sections(d, at):
            if a.fault == 'smem' and name == '.nv.shared.' + a.kernel:
                struct.pack_into('<Q', d, h + 0x20, a.bytes)  # sh_size of a NOBITS section
                done = True
            if a.fault == 'corrupt' and name == '.nv.info.' + a.kernel:
                off, = struct.unpack_from('<Q', d, h + 0x18)
                size, = struct.unpack_from('<Q', d, h + 0x20)
                d[at + off:at + off + size] = bytes([0xA5]) * size
                done = True
            if a.fault == 'threads' and name == '.nv.info.' + a.kernel:
                done = max_threads(d, at, h, a.bytes) or done
        if a.fault == 'rename':
            # every name of the kernel in the cubin (its symbol and the
            # sections named after it end with NAME and a NUL)
            old, new = a.kernel.encode() + b'\0', b'x' + a.kernel.encode()[1:] + b'\0'
            n = d[at:at + size].count(old)
            d[at:at + size] = d[at:at + size].replace(old, new)
            done = done or n > 0
    if not done:
        sys.exit('plant-cubin: no sm_%d cubin with a section for %s' % (a.sm, a.kernel) if a.sm else 'plant-cubin: no cubin names %s' % a.kernel)
    open(a.out, 'wb').write(d)
    print('plant-cubin: %s: sm_%d %s: %s' % (a.out, a.sm, a.kernel, a.fault))


main()
