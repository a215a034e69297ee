#!/usr/bin/env python3
"""fatbin-select.py IN OUT SM...: the entries of the fatbin containers in IN
(a .nv_fatbin section as `objcopy -O binary` writes it) whose SM is one of
SM..., as containers again in OUT.  The arm64 stand-in base takes NCCL's
device code from the x86-64 library (device code is the same for any host)
and keeps only what a GB10 runs (sm_120 SASS and compute_120 PTX), a sixth
of it.  Formats: kernels/cudabin.h."""
import struct
import sys

MAGIC = 0xBA55ED50


def containers(b):
    off = 0
    while off + 16 <= len(b):
        magic, version, hsize, size = struct.unpack_from('<IHHQ', b, off)
        if magic != MAGIC:  # padding between containers
            off += 8
            continue
        yield version, b[off:off + hsize], b[off + hsize:off + hsize + size]
        off += hsize + size


def entries(body):
    off = 0
    while off + 16 <= len(body):
        _kind, _version, hsize, psize = struct.unpack_from('<HHIQ', body, off)
        sm = struct.unpack_from('<I', body, off + 0x1C)[0]
        yield sm, body[off:off + hsize + psize]
        off += hsize + psize


def main():
    src, dst, sms = sys.argv[1], sys.argv[2], {int(s) for s in sys.argv[3:]}
    b = open(src, 'rb').read()
    out, kept = bytearray(), 0
    for version, head, body in containers(b):
        sel = b''.join(e for sm, e in entries(body) if sm in sms)
        if not sel:
            continue
        kept += 1
        out += struct.pack('<IHHQ', MAGIC, version, len(head), len(sel)) + head[16:] + sel
        out += b'\0' * (-len(out) % 8)
    if not kept:
        sys.exit(f'fatbin-select: no entry of SM {sorted(sms)} in {src}')
    open(dst, 'wb').write(out)


main()
