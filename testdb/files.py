"""Reading input files safely: UTF-8 with a clear error, paths confined to a root."""

from __future__ import annotations

import hashlib
import os

from testdb.errors import InputError, SourceLoc

MAX_FILE_BYTES = 64 * 1024 * 1024


def read_text(path: str, shown: str | None = None) -> str:
    """Read a UTF-8 text file; a BOM is dropped; errors name the file (and line for bad bytes)."""
    shown = shown or path
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise InputError(f"file is {size} bytes, over the {MAX_FILE_BYTES} byte limit",
                             SourceLoc(shown))
        with open(path, "rb") as fh:
            data = fh.read()
    except InputError:
        raise
    except IsADirectoryError:
        raise InputError("is a directory, expected a file", SourceLoc(shown)) from None
    except FileNotFoundError:
        raise InputError("no such file", SourceLoc(shown), "check the path") from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", SourceLoc(shown)) from None
    return decode(data, shown)


def decode(data: bytes, shown: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not valid UTF-8 (byte 0x{data[exc.start]:02x})", SourceLoc(shown, line),
                         "save the file as UTF-8") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise InputError("file holds NUL bytes; is it a binary file?", SourceLoc(shown, line))
    return text


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def confined(root: str, rel: str) -> str:
    """``root/rel`` resolved, refusing paths (``..``, absolute, symlinks) that leave ``root``."""
    base = os.path.realpath(root)
    full = os.path.realpath(os.path.join(base, rel))
    if os.path.isabs(rel) or (full != base and not full.startswith(base + os.sep)):
        raise InputError(f"path {rel!r} leaves the checkout root", SourceLoc(rel),
                         "use a path inside --root")
    return full
