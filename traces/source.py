"""Reading a trace file into text, with every failure turned into an :class:`InputError` naming the file.

Trace files come from other machines and other people: the path may be missing or a directory, the
file empty, gzip-compressed (``.swf.gz`` from the Parallel Workloads Archive), saved with a byte-order
mark or CRLF line ends, or not text at all.  This module is the one place that knows all of that.

Lines are split on ``\\n`` only (a trailing ``\\r`` is dropped), never with :meth:`str.splitlines`,
which also breaks on form feeds, ``\\x1c``-``\\x1e``, NEL and U+2028 that may sit inside a job name
and would shift every later line number.
"""

from __future__ import annotations

import codecs
import gzip
import os
import shlex
import zlib
from typing import Callable, Iterator

from greenslurm.clustermodel.errors import InputError, missing_path

GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 64 * 1024
PIECE_BYTES = 4 << 20        # a streamed read takes the file about this much at a time
FIRST_PIECE_BYTES = 64 << 10  # ... from this much on, doubling, when it may stop early (a limit)


def read_bytes(path: str, limit: int | None = None) -> bytes:
    """The raw bytes of ``path`` (at most ``limit`` of them), gunzipped when the file is gzip data."""
    with _open_checked(path) as handle:
        try:
            data = handle.read() if limit is None else handle.read(limit)
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
    >>> decode_text(b"\\xef\\xbb\\xbfok\\n\\xff", "t.txt")      # the mark is three bytes of line 1
    Traceback (most recent call last):
    ...
    greenslurm.clustermodel.errors.InputError: t.txt:2: not UTF-8 text (byte 0xff at column 1)
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # the decoder counts from after a byte-order mark
        start = exc.start + (len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0)
        line = data.count(b"\n", 0, start) + 1
        column = start - (data.rfind(b"\n", 0, start) + 1) + 1
        raise InputError(f"not UTF-8 text (byte 0x{data[start]:02x} at column {column})",
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


def _open_checked(path: str):
    """``path`` opened for reading bytes, with read_bytes' errors."""
    if os.path.exists(path) and not os.path.isdir(path) and not os.path.isfile(path):
        raise InputError("not a regular file (a device, pipe or socket)", path=path)   # /dev/zero never ends
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise missing_path(path) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a trace file", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=path) from None


def byte_pieces(path: str, size: int = PIECE_BYTES, first_size: int | None = None) -> Iterator[bytes]:
    """The bytes of ``path`` (gunzipped when gzip data) in pieces of about ``size`` that end at a
    line end (the last one may not); InputError as :func:`read_bytes` gives, a corrupt gzip stream
    when the reading reaches it.  ``first_size``: the first piece's size, each next one twice the
    last up to ``size`` (a reader that may stop early reads little past where it stops)."""
    block_size = min(first_size or size, size)
    with _open_checked(path) as handle:
        try:
            packed = handle.read(len(GZIP_MAGIC)) == GZIP_MAGIC
            handle.seek(0)
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}", path=path) from None
        reader = gzip.GzipFile(fileobj=handle, mode="rb") if packed else handle
        rest: list[bytes] = []      # blocks read since the last line end (none holds one)
        while True:
            try:
                block = reader.read(block_size)
                block_size = min(2 * block_size, size)
            except (OSError, EOFError, zlib.error) as exc:
                if packed:
                    raise InputError("gzip data is corrupt or truncated", path=path) from None
                raise InputError(f"cannot read: {exc.strerror or exc}", path=path) from None
            if not block:
                break
            cut = block.rfind(b"\n") + 1   # only the new block is searched: a long line costs its length once
            if cut == 0:            # no line end yet: a longer piece
                rest.append(block)
                continue
            tail = block[cut:]
            yield b"".join((*rest, block[:cut] if tail else block)) if rest else (block[:cut] if tail else block)
            rest = [tail] if tail else []
        rest = b"".join(rest)
        if rest:
            yield rest


class LineStream:
    r"""A text file's lines (as :func:`split_lines` gives them) a piece at a time, with
    :func:`read_text`'s checks made as the pieces pass: iterate for ``(first line number, lines)``.

    The checks keep read_text's precedence although they see the file a piece at a time: a corrupt
    gzip stream before a NUL byte before a byte that is not UTF-8, and any of these before an
    error the reader raises about a line (give it to :meth:`fail`).  After the last piece,
    :meth:`check_end` raises for an empty file or one of white space only.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
    ...     _ = f.write(b"\xef\xbb\xbfa\r\nb\n\nc")
    >>> stream = LineStream(f.name, piece_bytes=2)
    >>> list(stream)
    [(1, ['a']), (2, ['b']), (3, ['']), (4, ['c'])]
    >>> stream.check_end()
    """

    NUL, NOT_UTF8, CR_ONLY = 1, 2, 3        # the checks' precedence (lower first)

    def __init__(self, path: str, piece_bytes: int | None = None, raw: bool = False,
                 first_piece_bytes: int | None = None) -> None:
        self.path = path
        # raw: a piece of ASCII comes as its bytes (no decoding, no lines: a scanner reads it),
        # any other piece as its decoded text
        self.raw = raw
        self.empty = True
        self.blank = True
        self._want_lines = True
        self._iterator = self._lines(byte_pieces(path, piece_bytes or PIECE_BYTES, first_piece_bytes))

    def __iter__(self):
        return self._iterator

    def _lines(self, pieces: Iterator[bytes]):
        pending: tuple[int, InputError] | None = None
        lineno = 1
        first = True
        for piece in pieces:
            self.empty = False
            if self.blank and piece.strip():
                self.blank = False
            if pending is None or pending[0] > self.NUL:
                nul = piece.find(b"\x00")
                if nul >= 0:
                    pending = (self.NUL, InputError("binary data (NUL byte), not a text trace", path=self.path,
                                                    line=lineno + piece.count(b"\n", 0, nul)))
            if first and pending is None and b"\n" not in piece and piece.count(b"\r") >= 2:
                # lines ended by CR alone (classic Mac OS): read as one line, every reader said
                # "no job records found", or took the first record and dropped the rest unsaid
                pending = (self.CR_ONLY, InputError(
                    "its lines end in a carriage return alone (CR, classic Mac OS line ends), not LF or CR LF: "
                    f"convert them first, e.g. tr '\\r' '\\n' < {shlex.quote(self.path)} > converted", path=self.path,
                    line=1))
            if pending is None and self.raw and piece.isascii():
                if self._want_lines:         # ASCII is UTF-8 already (and holds no byte-order mark)
                    yield lineno, piece
            elif pending is None:
                try:
                    text = decode_text(piece, self.path) if first else piece.decode("utf-8")
                except InputError as exc:          # the first piece: decode_text said where
                    pending = (self.NOT_UTF8, exc)
                except UnicodeDecodeError as exc:
                    column = exc.start - (piece.rfind(b"\n", 0, exc.start) + 1) + 1
                    pending = (self.NOT_UTF8, InputError(
                        f"not UTF-8 text (byte 0x{piece[exc.start]:02x} at column {column})", path=self.path,
                        line=lineno + piece.count(b"\n", 0, exc.start)))
                else:
                    if self._want_lines:
                        yield lineno, text if self.raw else split_lines(text)
            first = False
            lineno += piece.count(b"\n")
        if pending is not None:
            raise pending[1]

    def fail(self, error: InputError) -> None:
        """Raise what the rest of the file holds of read_text's errors, else ``error`` (the reader's
        own, about a line)."""
        self._want_lines = False
        for _ in self._iterator:
            pass
        raise error

    def check_end(self) -> None:
        """After the last piece: InputError for an empty file or one of white space only."""
        if self.empty:
            raise InputError("empty file", path=self.path)
        if self.blank:
            raise InputError("file holds only white space", path=self.path)


def feed_lines(path: str, read_lines: Callable[[list[str], int], bool], finish: Callable[[], object] | None = None,
               limit: int | None = None) -> None:
    """Give a text file's lines to ``read_lines(lines, first line number)`` a piece at a time, with
    :class:`LineStream`'s checks, until it answers True (its reader has what it keeps: the rest of
    the file is not read) or the file ends (then ``finish()``).  ``limit``: the reader may stop
    early, so the pieces start small (``FIRST_PIECE_BYTES``)."""
    stream = LineStream(path, first_piece_bytes=FIRST_PIECE_BYTES if limit is not None else None)
    pieces = iter(stream)
    try:
        for first, lines in pieces:
            if read_lines(lines, first):
                pieces.close()
                return
        stream.check_end()
        if finish is not None:
            finish()
    except InputError as error:             # about a line: the file's own errors come first
        stream.fail(error)

