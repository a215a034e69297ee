#!/usr/bin/env python3
"""Make SYMBOL an undefined .dynsym entry that no relocation binds, as a
linker leaves one behind (libtorch_python.so's PyExc_FutureWarning): every
dynamic relocation of FILE that names it becomes R_*_NONE against symbol 0.

Usage: unbind.py FILE SYMBOL   (64-bit little-endian ELF, edited in place)"""
import struct, sys

path, name = sys.argv[1], sys.argv[2].encode()
b = bytearray(open(path, "rb").read())
shoff, = struct.unpack_from("<Q", b, 0x28)
shentsize, shnum = struct.unpack_from("<HH", b, 0x3A)
sh = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
SHT_RELA, SHT_REL, SHT_DYNSYM = 4, 9, 11
dynsym = next(i for i, s in enumerate(sh) if s[1] == SHT_DYNSYM)
strtab = sh[sh[dynsym][6]]
def sym_name(k):
    st_name, = struct.unpack_from("<I", b, sh[dynsym][4] + 24 * k)
    start = strtab[4] + st_name
    return bytes(b[start:b.index(0, start)])
n_syms = sh[dynsym][5] // 24
index = next(k for k in range(1, n_syms) if sym_name(k) == name)
changed = 0
for s in sh:
    if s[1] in (SHT_RELA, SHT_REL) and s[6] == dynsym:
        ent = 24 if s[1] == SHT_RELA else 16
        for off in range(s[4], s[4] + s[5], ent):
            info, = struct.unpack_from("<Q", b, off + 8)
            if info >> 32 == index:
                struct.pack_into("<Q", b, off + 8, 0)
                changed += 1
open(path, "wb").write(b)
print(f"unbind: {changed} relocations of {name.decode()} made R_NONE")
