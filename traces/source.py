"""Reading a trace file into text, with every failure turned into an :class:`InputError` naming the file.

Trace files come from other machines and other people: the path may be missing or a directory, the
file empty, gzip-compressed (``.swf.gz`` from the Parallel Workloads Archive), saved with a byte-order
mark or CRLF line ends, or not text at all.  This module is the one place that knows all of that.

Lines are split on ``\\n`` only (a trailing ``\\r`` is dropped), never with :meth:`str.splitlines`,
which also breaks on form feeds, ``\\x1c``-``\\x1e``, NEL and U+2028 that may sit inside a job name
and would shift every later line number.
"""

from __future__ import annotations

import gzip
import os
import zlib

from greenslurm.clustermodel.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 64 * 1024


def read_bytes(path: str, limit: int | None = None) -> bytes:
    """The raw bytes of ``path`` (at most ``limit`` of them), gunzipped when the file is gzip data."""
    if os.path.exists(path) and not os.path.isdir(path) and not os.path.isfile(path):
        raise InputError("not a regular file (a device, pipe or socket)", path=path)   # /dev/zero never ends
    try:
        with open(path, "rb") as handle:
            data = handle.read() if limit is None else handle.read(limit)
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a trace file", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=path) from None
    if data.startswith(GZIP_MAGIC):
        data = _gunzip(data, path, partial=limit is not None)
    return data


def _gunzip(data: bytes, path: str, partial: bool) -> bytes:
    if partial:   # only a prefix was read: decompress what is there
        try:
            return zlib.decompressobj(wbits=31).decompress(data, SNIFF_BYTES)
        except zlib.error:
            raise InputError("gzip data is corrupt", path=path) from None
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error):
        raise InputError("gzip data is corrupt or truncated", path=path) from None


def decode_text(data: bytes, path: str) -> str:
    """UTF-8 text (a leading byte-order mark is dropped); InputError names the line of a bad byte.

    >>> decode_text(b"\\xef\\xbb\\xbfa|b", "t.txt")
    'a|b'
    >>> decode_text(b"ok\\nbad \\xff here\\n", "t.txt")
    Traceback (most recent call last):
    ...
    greenslurm.clustermodel.errors.InputError: t.txt:2: not UTF-8 text (byte 0xff at column 5)
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at column {column})",
                         path=path, line=line) from None


def read_text(path: str) -> str:
    """The whole file as text; InputError for a missing file, a directory, an empty file, bad bytes."""
    data = read_bytes(path)
    if not data.strip():
        raise InputError("empty file" if not data else "file holds only white space", path=path)
    if b"\x00" in data:
        line = data.count(b"\n", 0, data.index(b"\x00")) + 1
        raise InputError("binary data (NUL byte), not a text trace", path=path, line=line)
    return decode_text(data, path)


def split_lines(text: str) -> list[str]:
    """Lines split on ``\\n`` only, with a trailing ``\\r`` removed; the last empty piece dropped.

    >>> split_lines("a\\r\\nb\\x1cc\\n\\nd\\n")
    ['a', 'b\\x1cc', '', 'd']
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines
