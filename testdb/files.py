"""Reading input files safely: UTF-8 with a clear error, paths confined to a root."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile

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


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Write via a temp file in the same directory and os.replace: a reader never sees half a
    file, an interrupted write leaves the old one, and no temp file is left behind."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str, text: str) -> None:
    """A user-named output file, written atomically (see write_bytes_atomic)."""
    # A symlink keeps pointing where it did: the file it names is replaced, not the link.
    path = os.path.realpath(path)
    if os.path.exists(path) and not os.path.isfile(path):
        # /dev/stdout, a FIFO, a device: write through it; renaming over it would replace the
        # device node itself (as root, `-o /dev/stdout` broke /dev/stdout for everyone).
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    write_bytes_atomic(path, text.encode("utf-8"))


_SEAL = b"testdb-cache\0"


def write_cache(path: str, payload: bytes) -> None:
    """A cache file: magic, sha256 of the payload, payload; written atomically. A cache that
    cannot be written only costs speed, so failures are ignored."""
    with contextlib.suppress(OSError):
        write_bytes_atomic(path, _SEAL + hashlib.sha256(payload).digest() + payload)


def read_cache(path: str) -> bytes | None:
    """The payload of a cache file, or None when missing or damaged: damaged bytes (a full
    disk, a copy cut short) never reach an unpickler, where a flipped length byte can make
    it allocate gigabytes."""
    try:
        with open(path, "rb") as fh:
            blob = fh.read()
    except OSError:
        return None
    n = len(_SEAL)
    payload = blob[n + 32:]
    if blob[:n] != _SEAL or hashlib.sha256(payload).digest() != blob[n:n + 32]:
        return None
    return payload
