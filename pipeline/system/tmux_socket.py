"""Where a tmux server's socket is, and removing it once the server that batonpass started is gone."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import time
from pathlib import Path

__all__ = ["remove_socket_file", "socket_file"]


def socket_file(socket_name: str | None, socket_path: str | None) -> Path:
    """``-S``'s path, or ``-L``'s name (``default``) in tmux's folder (``$TMUX_TMPDIR`` or /tmp, then
    ``tmux-UID``), as tmux itself places it."""
    if socket_path:
        return Path(socket_path)
    folder = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
    return folder / (socket_name or "default")


def remove_socket_file(path: Path) -> None:
    """Remove the socket of a server just killed, and nothing else: only a socket, and only once no server
    answers on it (the killed one may take a moment to close it; given 0.5 s, a server still answering is
    not ours to remove)."""
    for _ in range(50):
        try:
            if not stat.S_ISSOCK(path.lstat().st_mode):
                return
            with socket.socket(socket.AF_UNIX) as probe:
                probe.connect(str(path))
        except FileNotFoundError:
            return
        except OSError:  # ECONNREFUSED: nobody listens
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return
        time.sleep(0.01)
