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
import ctypes
import re
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


def lz4_decompress(src, n):
    """The N bytes that the raw LZ4 block SRC decompresses to: liblz4's
    where it is (Python's standard library has no LZ4), else in Python."""
    try:
        lib = ctypes.CDLL("liblz4.so.1")
        dst = ctypes.create_string_buffer(n)
        if lib.LZ4_decompress_safe(src, dst, len(src), n) == n:
            return dst.raw
    except OSError:
        pass
    out, i = bytearray(), 0
    while i < len(src) and len(out) < n:
        tok = src[i]
        i += 1
        lit = tok >> 4
        if lit == 15:
            while True:
                lit += src[i]
                i += 1
                if src[i - 1] != 255:
                    break
        out += src[i:i + lit]
        i += lit
        if i >= len(src):
            break
        off = src[i] | src[i + 1] << 8
        i += 2
        ml = (tok & 15) + 4
        if tok & 15 == 15:
            while True:
                ml += src[i]
                i += 1
                if src[i - 1] != 255:
                    break
        start = len(out) - off
        if off >= ml:
            out += out[start:start + ml]
        else:
            for _ in range(ml):
                out.append(out[-off])
    return bytes(out[:n])


def lz4_compress_zeros(t):
    """A raw LZ4 block of T whose runs of zeros are matches at offset 1 and
    everything else literals: a mostly-zero buffer takes a few bytes.  The
    format's rules: the last match ends 12 bytes or more before the end, the
    block ends with literals."""
    def length(v):
        return b'\xff' * (v // 255) + bytes([v % 255])

    def seq(lits, match):
        tok = (min(len(lits), 15) << 4) | (min(match - 4, 15) if match else 0)
        out = bytes([tok]) + (length(len(lits) - 15) if len(lits) >= 15 else b'') + lits
        if match:
            out += struct.pack('<H', 1) + (length(match - 4 - 15) if match - 4 >= 15 else b'')
        return out
    n, blk, lit0 = len(t), bytearray(), 0
    for m in re.finditer(rb'\x00{32,}', t):
        s, e = m.start() + 1, min(m.end(), n - 12)
        if e - s < 16:
            continue
        blk += seq(t[lit0:s], e - s)
        lit0 = e
    blk += seq(t[lit0:], 0)
    return bytes(blk)


def cubin_skeleton(c):
    """The cubin C with only its frame kept: its ELF, program and section
    headers and the section names (cuobjdump reads them; the symbol tables
    of torch's cubins alone would not travel); the rest zeroed."""
    t = bytearray(len(c))
    if c[:4] != b'\x7fELF' or len(c) < 64:
        return bytes(t)
    t[:64] = c[:64]
    phoff, shoff = struct.unpack_from('<QQ', c, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from('<HHHH', c, 0x36)
    t[phoff:phoff + phentsize * phnum] = c[phoff:phoff + phentsize * phnum]
    t[shoff:shoff + shentsize * shnum] = c[shoff:shoff + shentsize * shnum]
    shstrndx, = struct.unpack_from('<H', c, 0x3e)
    if shstrndx < shnum:
        _name, _typ, _fl, _ad, off, size = struct.unpack_from('<IIQQQQ', c, shoff + shstrndx * shentsize)
        t[off:off + size] = c[off:off + size]
    return bytes(t)


def zeros_payload(d, out, e, ehs, psize):
    """A compressed entry's code, zeroed, would not decompress, and cuobjdump
    decompresses every entry it lists and reads a cubin's ELF: the payload
    becomes an LZ4 block of the entry's uncompressed size holding the
    cubin's skeleton (cubin_skeleton); a PTX entry, zeros.  The header's
    stored size (0x10) becomes the block's length; the entry keeps its
    place, kind, architecture and flags (what the listing shows), and its
    padded size, so the layout is the file's own."""
    kind, = struct.unpack_from('<H', d, e)
    csize, = struct.unpack_from('<I', d, e + 0x10)
    flags, = struct.unpack_from('<Q', d, e + 0x28) if ehs >= 0x30 else (0,)
    usize, = struct.unpack_from('<Q', d, e + 0x38) if ehs >= 0x40 else (0,)
    if not (flags & 0xA000 or (csize and usize > csize)):
        return
    if flags & 0x8000:
        sys.exit(f"entry at {e}: zstd-compressed entries are not handled (only LZ4)")
    body = bytes(usize)
    if kind == 2:
        body = cubin_skeleton(lz4_decompress(d[e + ehs:e + ehs + csize], usize))
    block = lz4_compress_zeros(body)
    if len(block) > psize:
        block = lz4_compress_zeros(body[:64] + bytes(usize - 64))
    if len(block) > psize:
        sys.exit(f"entry at {e}: {usize} bytes take {len(block)} as LZ4, more than its {psize}")
    out[e + ehs:e + ehs + psize] = bytes(psize)
    out[e + ehs:e + ehs + len(block)] = block
    struct.pack_into('<I', out, e + 0x10, len(block))


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
                zeros_payload(d, out, e, ehs, psize)
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
