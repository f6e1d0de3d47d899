#!/usr/bin/env python3
"""mkcpio.py: a gzip'd initramfs (cpio "newc") from a directory tree.

    mkcpio.py ROOT OUT.gz [--node PATH:c|b:MAJOR:MINOR:MODE ...]

Every entry is owned by root with mtime 0 whoever runs this, so the image
is reproducible and needs no root to build; device nodes (the kernel needs
/dev/console before init runs) are written as cpio entries, never created
with mknod. Directories come before their contents; hard links are stored
as separate files.
"""

import gzip
import os
import stat
import sys


def header(ino, mode, size, namesize, nlink=1, rmaj=0, rmin=0):
    fields = (ino, mode, 0, 0, nlink, 0, size, 0, 0, rmaj, rmin, namesize, 0)
    return b"070701" + b"".join(b"%08X" % f for f in fields)


def pad(n):
    return b"\0" * ((4 - n % 4) % 4)


class Writer:
    def __init__(self, f):
        self.f = f
        self.ino = 1

    def entry(self, name, mode, data=b"", rmaj=0, rmin=0):
        nb = name.encode() + b"\0"
        h = header(self.ino, mode, len(data), len(nb), 2 if stat.S_ISDIR(mode) else 1, rmaj, rmin)
        self.ino += 1
        self.f.write(h + nb + pad(len(h) + len(nb)))
        self.f.write(data + pad(len(data)))

    def tree(self, root):
        for d, dirs, files in os.walk(root):
            dirs.sort()
            rel = os.path.relpath(d, root)
            if rel != ".":
                self.entry(rel, stat.S_IFDIR | (os.lstat(d).st_mode & 0o7777))
            for n in sorted(files) + sorted(x for x in dirs if os.path.islink(os.path.join(d, x))):
                p = os.path.join(d, n)
                name = os.path.normpath(os.path.join(rel, n))
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    self.entry(name, stat.S_IFLNK | 0o777, os.readlink(p).encode())
                elif stat.S_ISREG(st.st_mode):
                    with open(p, "rb") as f:
                        self.entry(name, stat.S_IFREG | (st.st_mode & 0o7777), f.read())
                else:
                    raise SystemExit(f"mkcpio: {p}: only files, directories and symlinks are supported")

    def node(self, spec):
        try:
            path, kind, major, minor, mode = spec.split(":")
            m = {"c": stat.S_IFCHR, "b": stat.S_IFBLK}[kind] | int(mode, 8)
            self.entry(path.lstrip("/"), m, rmaj=int(major), rmin=int(minor))
        except (ValueError, KeyError):
            raise SystemExit(f"mkcpio: bad --node '{spec}' (PATH:c|b:MAJOR:MINOR:MODE, e.g. /dev/console:c:5:1:600)")

    def trailer(self):
        self.entry("TRAILER!!!", 0)


def main(argv):
    if len(argv) < 2 or len(argv) % 2:
        raise SystemExit(__doc__.strip().splitlines()[2].strip())
    root, out, rest = argv[0], argv[1], argv[2:]
    nodes = [rest[i + 1] for i in range(0, len(rest), 2) if rest[i] == "--node"]
    if len(nodes) * 2 != len(rest):
        raise SystemExit("mkcpio: only --node options may follow ROOT and OUT")
    tmp = out + ".tmp"
    try:
        with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
            w = Writer(gz)
            w.tree(root)
            for n in nodes:
                w.node(n)
            w.trailer()
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


if __name__ == "__main__":
    main(sys.argv[1:])
