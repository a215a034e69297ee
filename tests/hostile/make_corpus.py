#!/usr/bin/env python3
"""A corpus of hostile base images, one OCI layout per kind of entry that
escapes or abuses the root it is unpacked into (issue 13).

    make_corpus.py OUT-DIR OUTSIDE-DIR

writes OUT-DIR/KIND (an OCI layout, image tagged `base`) for every KIND
below and prints one line per kind:
KIND<TAB>ENTRY-NAME-AS-REPORTED<TAB>WHY<TAB>CLASS, WHY the start of the reason
the report gives, CLASS `escape` (escapes the root or lies: refused) or
`privileged` (what every distribution base holds: counted, refused only
with --strict-base).
OUTSIDE-DIR is an absolute folder that links in the corpus point into, so
that a test can look there for stray files after extracting."""
import gzip, hashlib, io, json, os, sys, tarfile

out, outside = sys.argv[1], sys.argv[2]


def reg(name, data=b"x\n", mode=0o644):
    ti = tarfile.TarInfo(name)
    ti.size, ti.mode = len(data), mode
    return ti, data


def link(name, target, kind=tarfile.SYMTYPE):
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname = kind, target
    return ti, None


def special(name, kind, major=0, minor=0):
    ti = tarfile.TarInfo(name)
    ti.type, ti.devmajor, ti.devminor = kind, major, minor
    return ti, None


def folder(name):
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode = tarfile.DIRTYPE, 0o755
    return ti, None


deep = "/".join(["d" * 200] * 22)  # 4,421 bytes: over PATH_MAX
DOTDOT, ABS, HL_OUT, HL_MISSING = ("name with a `..` component", "absolute name",
                                   "hard link to a name outside the root",
                                   "hard link to a file that the layer does not have before it")
UNDER, DEV, SUID, WH = ("entry under a symbolic link of the layer", "device node", "setuid or setgid file",
                        "whiteout of `.`, `..` or the root")
# KIND: (entries, the name the report gives for the hostile one, its class:
# the reason the report gives, layers/tar/tarcheck.c)
KINDS = {
    "dotdot": ([reg("../ibstray-dotdot")], "../ibstray-dotdot", DOTDOT),
    "absolute": ([reg(outside + "/ibstray-absolute")], outside + "/ibstray-absolute", ABS),
    "hardlink-out": ([link("etc/hl", "../../etc/passwd", tarfile.LNKTYPE)], "etc/hl", HL_OUT),
    "hardlink-absolute": ([link("etc/hl", "/etc/passwd", tarfile.LNKTYPE)], "etc/hl", HL_OUT),
    # A hard link inside the root to a file the layer does not have: what
    # it links is whatever the extraction finds there (a lower layer's
    # file, or one a symbolic link of this layer points at).
    "hardlink-missing": ([folder("etc"), link("etc/hl", "etc/shadow", tarfile.LNKTYPE)], "etc/hl", HL_MISSING),
    "hardlink-forward": ([folder("etc"), link("etc/hl", "etc/later", tarfile.LNKTYPE), reg("etc/later")],
                         "etc/hl", HL_MISSING),
    "hardlink-through-link": ([link("lnk", outside), link("ibstray-hl", "lnk/ibstray-target", tarfile.LNKTYPE)],
                              "ibstray-hl", HL_MISSING),
    "symlink-out": ([folder("etc"), link("etc/out", "../../../../" + outside.lstrip("/"))], "etc/out",
                    "symbolic link that leaves the root"),
    "chardev": ([folder("dev"), special("dev/mem2", tarfile.CHRTYPE, 1, 1)], "dev/mem2", DEV),
    "blockdev": ([folder("dev"), special("dev/sda9", tarfile.BLKTYPE, 8, 0)], "dev/sda9", DEV),
    "fifo": ([folder("tmp"), special("tmp/fifo", tarfile.FIFOTYPE)], "tmp/fifo", "FIFO"),
    "setuid": ([folder("bin"), reg("bin/su2", b"#!/bin/sh\n", 0o4755)], "bin/su2", SUID),
    "setgid": ([folder("bin"), reg("bin/sg2", b"#!/bin/sh\n", 0o2755)], "bin/sg2", SUID),
    "duplicate": ([folder("etc"), reg("etc/motd", b"one\n"), reg("etc/motd", b"two\n")], "etc/motd",
                  "the same path twice in the layer"),
    "whiteout-dotdot": ([folder("etc"), reg("etc/.wh..", b"")], "etc/.wh..", WH),
    "whiteout-root": ([reg(".wh.", b"")], ".wh.", WH),
    "long-name": ([reg(deep)], deep[:200], "name longer than PATH_MAX, or a component longer than NAME_MAX"),
    # A PAX record whose length field lies about where it ends.
    "pax-lie": ([], "etc/pax", "malformed header: "),
    # Writing through a link: a symlink to OUTSIDE, then a file, a whiteout
    # or a hard link under it (what an extractor must never follow).
    "through-link-file": ([link("lnk", outside), reg("lnk/ibstray-file")], "lnk/ibstray-file", UNDER),
    "through-link-whiteout": ([link("lnk", outside), reg("lnk/.wh.ibstray-wh", b"")], "lnk/.wh.ibstray-wh", UNDER),
    "through-link-opaque": ([link("lnk", outside), reg("lnk/.wh..wh..opq", b"")], "lnk/.wh..wh..opq", UNDER),
    "through-link-hardlink": ([reg("ibstray-src"), link("lnk", outside),
                               link("lnk/ibstray-hl", "ibstray-src", tarfile.LNKTYPE)], "lnk/ibstray-hl", UNDER),
}


def layer_bytes(kind, entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, data in [folder("usr"), reg("usr/ok.txt")] + entries:
            ti.mtime = 0
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
        if kind == "pax-lie":
            # An 'x' header whose record says 99 bytes but holds 17.
            body = b"99 path=etc/pax\n"
            x = tarfile.TarInfo("././@PaxHeader")
            x.type, x.size = tarfile.XHDTYPE, len(body)
            t.addfile(x, io.BytesIO(body))
            ti, data = reg("etc/pax")
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def put(root, data):
    d = hashlib.sha256(data).hexdigest()
    with open(f"{root}/blobs/sha256/{d}", "wb") as f:
        f.write(data)
    return "sha256:" + d


def layout(root, tar):
    os.makedirs(f"{root}/blobs/sha256")
    gz = gzip.compress(tar, mtime=0)
    layer = put(root, gz)
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(tar).hexdigest()]}}).encode()
    cd = put(root, config)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd,
                                      "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer,
                                       "size": len(gz)}]}).encode()
    md = put(root, manifest)
    with open(f"{root}/oci-layout", "w") as f:
        f.write('{"imageLayoutVersion":"1.0.0"}')
    with open(f"{root}/index.json", "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                                       "digest": md, "size": len(manifest),
                                                       "annotations": {"org.opencontainers.image.ref.name": "base"}}]}, f)


PRIVILEGED = {"chardev", "blockdev", "fifo", "setuid", "setgid"}
for kind, (entries, shown, why) in KINDS.items():
    layout(f"{out}/{kind}", layer_bytes(kind, entries))
    print(f"{kind}\t{shown}\t{why}\t{'privileged' if kind in PRIVILEGED else 'escape'}")
layout(f"{out}/clean", layer_bytes("clean", []))
