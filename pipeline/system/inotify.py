"""Linux inotify, read through the event loop: a file change wakes batonpass within a fraction of a
millisecond, and nothing runs while nothing changes — no worker thread, no polling step.

watchfiles (the portable watcher, used where this is not available) polls its event queue every ``step``
ms from a thread: the latency is ``step``..``2*step`` and the idle cost grows as ``step`` shrinks (measured
here by ``bench/bench_watch.py``). inotify's descriptor is simply waited on with ``anyio.wait_readable``.

Watches are recursive like watchfiles' (every folder under a root gets a watch; a folder created later
gets one when its creation is read, and what it already holds is reported as changed).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct

import anyio

__all__ = ["Inotify", "available"]

IN_MODIFY, IN_ATTRIB, IN_MOVED_FROM, IN_MOVED_TO = 0x2, 0x4, 0x40, 0x80
IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
IN_Q_OVERFLOW, IN_IGNORED, IN_ONLYDIR, IN_ISDIR = 0x4000, 0x8000, 0x01000000, 0x40000000
IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
MASK = (IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF
        | IN_MOVE_SELF)
_HEADER = struct.Struct("iIII")

_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL | None:
    global _libc
    if _libc is None and hasattr(os, "O_CLOEXEC"):
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            lib.inotify_init1, lib.inotify_add_watch  # noqa: B018 - raises AttributeError off Linux
        except (OSError, AttributeError):
            return None
        lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        _libc = lib
    return _libc


def available() -> bool:
    """Whether this system has inotify (Linux) and ``BATON_WATCHER`` does not ask for watchfiles."""
    return os.environ.get("BATON_WATCHER", "") != "watchfiles" and _lib() is not None


class Inotify:
    """One inotify instance watching folder trees. Use as a context manager (it owns a descriptor)."""

    def __init__(self) -> None:
        lib = _lib()
        if lib is None:
            raise OSError("inotify is not available here")
        fd = lib.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        self.fd, self._lib = fd, lib
        self._dirs: dict[int, str] = {}
        self._roots: list[str] = []

    def __enter__(self) -> Inotify:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def add_tree(self, root: str) -> list[str]:
        """Watch ``root`` and every folder under it; returns the files found (for a folder that appeared
        after its parent was watched: what was written there before its watch existed)."""
        self._roots.append(root)
        return self._add_tree(root)

    def _add_tree(self, root: str) -> list[str]:
        found: list[str] = []
        for folder, _, files in os.walk(root):
            wd = self._lib.inotify_add_watch(self.fd, os.fsencode(folder), MASK | IN_ONLYDIR)
            if wd >= 0:
                self._dirs[wd] = folder
            found.extend(os.path.join(folder, f) for f in files)
        return found

    async def changes(self) -> tuple[list[str], bool]:
        """Wait for changes: the paths changed, and whether a folder appeared or went away (then the
        caller's idea of what exists may be out of date)."""
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)
                continue
            return self._parse(data)

    def _parse(self, data: bytes) -> tuple[list[str], bool]:
        paths: list[str] = []
        folders = False
        offset = 0
        while offset + _HEADER.size <= len(data):
            wd, mask, _, size = _HEADER.unpack_from(data, offset)
            raw = data[offset + _HEADER.size: offset + _HEADER.size + size].rstrip(b"\0")
            offset += _HEADER.size + size
            if mask & IN_Q_OVERFLOW:  # events were lost: everything may have changed
                paths.extend(self._roots)
                folders = True
                continue
            folder = self._dirs.get(wd)
            if folder is None:
                continue
            if mask & IN_IGNORED:
                del self._dirs[wd]
                folders = True
                continue
            path = os.path.join(folder, os.fsdecode(raw)) if raw else folder
            paths.append(path)
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF) or mask & IN_ISDIR:
                folders = True
                if mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO):
                    paths.extend(self._add_tree(path))
        return paths, folders
