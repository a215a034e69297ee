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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('inp')
    ap.add_argument('out')
    ap.add_argument('--sm', type=int, required=True)
    ap.add_argument('--kernel', required=True)
    ap.add_argument('fault', choices=['smem', 'corrupt'])
    ap.add_argument('bytes', nargs='?', type=int, default=256 * 1024)
    a = ap.parse_args()
    d = bytearray(open(a.inp, 'rb').read())
    done = False
    for kind, sm, csize, at, _size in entries(d):
        if kind != 2 or sm != a.sm:
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
    if not done:
        sys.exit('plant-cubin: no sm_%d cubin with a section for %s' % (a.sm, a.kernel))
    open(a.out, 'wb').write(d)
    print('plant-cubin: %s: sm_%d %s: %s' % (a.out, a.sm, a.kernel, a.fault))


main()
