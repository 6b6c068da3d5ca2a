"""Atomic file writes: a temp file in the same directory, then os.replace."""

from __future__ import annotations

import os
import tempfile


def write_text_atomic(path: str, text: str) -> None:
    # A symlink keeps pointing where it did: the file it names is replaced, not the link.
    path = os.path.realpath(path)
    if os.path.exists(path) and not os.path.isfile(path):
        # /dev/stdout, a FIFO, a device: write through it; renaming over it would replace the
        # device node itself (as root, `-o /dev/stdout` broke /dev/stdout for everyone).
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
