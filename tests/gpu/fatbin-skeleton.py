#!/usr/bin/env python3
"""A shared object's skeleton for NVIDIA's cuobjdump on a machine the object
cannot be carried to (libtorch_cuda.so is 1.18 GB, the device run carries
64 MiB): the ELF header, its program and section headers, the section-name
table and every fatbin header and entry header of .nv_fatbin kept byte for
byte; everything else, the entries' code included, zeroed, so the file
compresses to almost nothing.  `cuobjdump --list-elf --list-ptx` reads the
entries' headers only; tests/gpu/cuobjdump-lists.sh holds its listing of the
skeleton to `imgverify --kernels --json` of the real file.

  fatbin-skeleton.py IN OUT [SAMPLE N]
      prints the number of entries kept; with SAMPLE, also a fatbin of N
      of IN's PTX entries, evenly spaced, whole (cuobjdump --dump-ptx reads
      their .version; all of torch's PTX, 321 MB compressed, would not
      travel), and SAMPLE.offsets, the file offset of each one's code in IN,
      in order, to match imgverify's entries.
"""
import struct
import sys


def sections(d):
    shoff, = struct.unpack_from('<Q', d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3a)
    hdrs = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]
    names = hdrs[shstrndx]
    for h in hdrs:
        n = d[names[4] + h[0]:d.index(b'\0', names[4] + h[0])].decode()
        yield n, h[4], h[5], h[1]  # name, offset, size, type


def main(src, dst):
    d = open(src, 'rb').read()
    if d[:4] != b'\x7fELF' or d[4] != 2:
        sys.exit(f"{src}: not a 64-bit ELF file")
    out = bytearray(len(d))
    phoff, = struct.unpack_from('<Q', d, 0x20)
    phentsize, phnum = struct.unpack_from('<HH', d, 0x36)
    shoff, = struct.unpack_from('<Q', d, 0x28)
    shentsize, shnum = struct.unpack_from('<HH', d, 0x3a)

    def keep(off, n):
        out[off:off + n] = d[off:off + n]

    keep(0, 64)
    keep(phoff, phentsize * phnum)
    keep(shoff, shentsize * shnum)
    entries = 0
    ptx = []  # (header offset, header size, payload size, payload offset)
    for name, off, size, typ in sections(d):
        if typ == 3:  # SHT_STRTAB: the section names (and symbol names, harmless)
            keep(off, size)
        if name not in ('.nv_fatbin', '__nv_relfatbin'):
            continue
        p, stop = off, off + size
        while p + 16 <= stop:
            magic, _ver, hs, fsize = struct.unpack_from('<IHHQ', d, p)
            if magic != 0xBA55ED50:
                p += 8
                continue
            keep(p, hs)
            e, end = p + hs, p + hs + fsize
            while e < end:
                _kind, _v, ehs, psize = struct.unpack_from('<HHIQ', d, e)
                keep(e, ehs)
                entries += 1
                if _kind == 1 and name == '.nv_fatbin':
                    ptx.append((e, ehs, psize))
                e += ehs + psize
            p = end
    open(dst, 'wb').write(out)
    print(entries)
    return d, ptx


def sample(d, ptx, path, n):
    step = max(1, len(ptx) // n)
    chosen = ptx[::step][:n]
    body = b''.join(d[e:e + ehs + psize] for e, ehs, psize in chosen)
    with open(path, 'wb') as f:
        f.write(struct.pack('<IHHQ', 0xBA55ED50, 1, 16, len(body)) + body)
    with open(path + '.offsets', 'w') as f:
        f.writelines(f"{e + ehs}\n" for e, ehs, _ in chosen)


if __name__ == '__main__':
    if len(sys.argv) not in (3, 5):
        sys.exit(__doc__)
    d, ptx = main(sys.argv[1], sys.argv[2])
    if len(sys.argv) == 5:
        sample(d, ptx, sys.argv[3], int(sys.argv[4]))
