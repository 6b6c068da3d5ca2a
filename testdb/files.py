"""Reading input files safely: UTF-8 with a clear error, paths confined to a root."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import marshal
import os
import stat
import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from testdb.errors import InputError

# testdb.errors (dataclasses, enum, json) is imported only when an error is raised: a warm
# answer reads its cache files through this module and starts faster without it.

MAX_FILE_BYTES = 64 * 1024 * 1024


def read_text(path: str, shown: str | None = None) -> str:
    """Read a UTF-8 text file; a BOM is dropped; errors name the file (and line for bad bytes)."""
    shown = shown or path
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise input_error(f"file is {size} bytes, over the {MAX_FILE_BYTES} byte limit",
                              shown)
        with open(path, "rb") as fh:
            data = fh.read()
    except IsADirectoryError:
        raise input_error("is a directory, expected a file", shown) from None
    except FileNotFoundError:
        raise input_error("no such file", shown, hint="check the path") from None
    except OSError as exc:
        raise input_error(f"cannot read file: {exc.strerror}", shown) from None
    return decode(data, shown)


def input_error(message: str, path: str, line: int = 0, hint: str = "") -> InputError:
    from testdb.errors import InputError, SourceLoc

    return InputError(message, SourceLoc(path, line), hint)


def decode(data: bytes, shown: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise input_error(f"not valid UTF-8 (byte 0x{data[exc.start]:02x})", shown, line,
                          "save the file as UTF-8") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise input_error("file holds NUL bytes; is it a binary file?", shown, line)
    return text


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def confined(root: str, rel: str) -> str:
    """``root/rel`` resolved, refusing paths (``..``, absolute, symlinks) that leave ``root``."""
    base = os.path.realpath(root)
    full = os.path.realpath(os.path.join(base, rel))
    if os.path.isabs(rel) or (full != base and not full.startswith(base + os.sep)):
        raise input_error(f"path {rel!r} leaves the checkout root", rel,
                          hint="use a path inside --root")
    return full


def write_bytes_atomic(path: str, data: bytes, *, mode: int | None = None) -> None:
    """Write via a temp file in the same directory and os.replace: a reader never sees half a
    file, an interrupted write leaves the old one, and no temp file is left behind. The file
    is 0600 (mkstemp's mode) unless ``mode`` is given."""
    write_chunks_atomic(path, (data,), mode=mode)


def write_chunks_atomic(path: str, chunks: Iterable[bytes], *, mode: int | None = None
                        ) -> None:
    """``write_bytes_atomic`` of ``b"".join(chunks)``, each chunk written in turn: joining
    tens of MB of records into one object first cost as much as writing them."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    import tempfile  # here: reading caches (a warm answer) never needs it

    fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:  # write(), not writelines(): a file-like wrapper has it
                fh.write(chunk)
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
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
    write_bytes_atomic(path, text.encode("utf-8"), mode=user_file_mode(path))


def user_file_mode(path: str) -> int:
    """The mode ``>`` or ``cp`` would give: an existing file keeps its own, a new one gets
    0666 less the umask (mkstemp's 0600 made reports unreadable to the rest of a team)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process umask, read without changing it where Linux shows it (os.umask can only
    be read by setting it, which races with other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


_SEAL = b"testdb-cache\0"


def write_cache(path: str, payload: bytes, *, keep: int | None = 8) -> None:
    """A cache file: magic, sha256 of the payload, payload; written atomically. A cache that
    cannot be written only costs speed, so failures are ignored. Of the files of this kind
    (same name up to the first ``-``), the ``keep`` newest stay (None: no pruning)."""
    with contextlib.suppress(OSError):
        write_bytes_atomic(path, _SEAL + hashlib.sha256(payload).digest() + payload)
        if keep is not None:
            prune(path, keep)


def prune(path: str, keep: int) -> None:
    """Remove all but the ``keep`` newest cache files of ``path``'s kind (written or read
    last: ``read_cache`` touches what it reads): every change to the plan is a new content
    key, and without this the cache directory grows without end."""
    d, name = os.path.split(path)
    kind = name.split("-", 1)[0] + "-"
    found = []
    for entry in os.scandir(d):
        if entry.name.startswith(kind) and not entry.name.startswith("."):
            with contextlib.suppress(OSError):
                found.append((entry.stat().st_mtime_ns, entry.path))
    for _, old in sorted(found, reverse=True)[keep:]:
        with contextlib.suppress(OSError):
            os.unlink(old)


def read_cache(path: str) -> bytes | None:
    """The payload of a cache file, or None when missing or damaged: damaged bytes (a full
    disk, a copy cut short) never reach an unpickler, where a flipped length byte can make
    it allocate gigabytes."""
    n = len(_SEAL)
    try:
        with open(path, "rb") as fh:
            head = fh.read(n + 32)  # read apart from the payload: no copy of a large payload
            payload = fh.read()
    except OSError:
        return None
    if head[:n] != _SEAL or hashlib.sha256(payload).digest() != head[n:]:
        return None
    # Used now: ``prune`` keeps the newest files of a kind, so a file read is kept as the
    # newest (the least recently used goes first; the tree's own import graph, which every
    # new diff reads and none writes, was pruned after four of them).
    with contextlib.suppress(OSError):
        os.utime(path)
    return payload


def read_cache_dict(path: str) -> dict[Any, Any]:
    """A cache file holding one marshalled dict, or {} when it is missing, damaged or of
    another shape (a miss costs only speed)."""
    payload = read_cache(path)
    if payload is not None:
        try:
            got = marshal.loads(payload)
        except (ValueError, EOFError, TypeError):
            return {}
        if isinstance(got, dict):
            return got
    return {}


_RECORDS_SEAL = b"testdb-records\0"


def write_records(path: str, meta: bytes, records: list[bytes], *, keep: int = 8) -> None:
    """A cache of many records of which a reader wants a few (see ``Records``): a sealed
    header (``meta``, then each record's offset, length and crc32), then the records. Of the
    files of this kind the ``keep`` newest stay."""
    table, offset = [], 0
    for rec in records:
        table.append((offset, len(rec), zlib.crc32(rec)))
        offset += len(rec)
    header = marshal.dumps((meta, table))
    head = b"".join([_RECORDS_SEAL, hashlib.sha256(header).digest(),
                     len(header).to_bytes(8, "little"), header])
    with contextlib.suppress(OSError):
        write_chunks_atomic(path, itertools.chain((head,), records))
        prune(path, keep)


class Records:
    """Reads a ``write_records`` file: the header is checked when opened, each record when
    read, so a lookup reads (and checks) only what it prints."""

    def __init__(self, fh: BinaryIO, meta: bytes, table: list[tuple[int, int, int]],
                 start: int) -> None:
        self._fh, self.meta, self._table, self._start = fh, meta, table, start

    @classmethod
    def open(cls, path: str) -> Records | None:
        """The records, or None when the file is missing or its header is damaged."""
        try:
            fh = open(path, "rb")  # noqa: SIM115 -- kept open for reads; closed by close()
        except OSError:
            return None
        n = len(_RECORDS_SEAL)
        head = fh.read(n + 40)
        size = int.from_bytes(head[n + 32:n + 40], "little")
        ok = head[:n] == _RECORDS_SEAL and len(head) == n + 40
        header = fh.read(size) if ok and size <= os.fstat(fh.fileno()).st_size else b""
        try:
            if not header or hashlib.sha256(header).digest() != head[n:n + 32]:
                raise ValueError("damaged header")
            meta, table = marshal.loads(header)
        except (ValueError, EOFError, TypeError, OverflowError, MemoryError):
            fh.close()
            return None
        return cls(fh, meta, table, n + 40 + size)

    def __len__(self) -> int:
        return len(self._table)

    def get(self, i: int) -> bytes | None:
        """Record ``i``, or None when its bytes are damaged."""
        offset, length, crc = self._table[i]
        self._fh.seek(self._start + offset)
        data = self._fh.read(length)
        return data if len(data) == length and zlib.crc32(data) == crc else None

    def close(self) -> None:
        self._fh.close()
