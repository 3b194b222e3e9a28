"""One error type for bad input, carrying where it came from (file, line, field)."""

from __future__ import annotations


class InputError(ValueError):
    r"""Bad user input: a trace record, a cluster file, a command-line value.

    The message always names the file, and when known the 1-based line and the field, so that a
    user can open the file and fix the record:

    >>> str(InputError("bad number 'x'", path="a.swf", line=3, field="run_time"))
    "a.swf:3: field run_time: bad number 'x'"
    >>> str(InputError("empty file", path="a.swf"))
    'a.swf: empty file'

    The message is one line a terminal can show (see :func:`one_line`):

    >>> print(InputError("no such file", path="raw" + chr(0xdcff) + "name.swf"))
    raw\xffname.swf: no such file
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.reason = message
        self.path = path
        self.line = line
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.path or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        text = f"{where}: field {self.field}: {self.reason}" if self.field else f"{where}: {self.reason}"
        return one_line(text)


def missing_path(path: str) -> InputError:
    """The error for a path that names no file: plain missing, a symbolic link that loops, or one to
    nothing (``os.path.exists`` is False for all three; the user fixes each differently).

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> loop, dangling = os.path.join(folder, "loop"), os.path.join(folder, "dangling")
    >>> os.symlink(loop, loop); os.symlink(os.path.join(folder, "gone"), dangling)
    >>> missing_path(loop).reason, missing_path(os.path.join(folder, "nothing")).reason
    ('a symbolic link that loops (it leads back to itself)', 'no such file')
    >>> missing_path(dangling).reason.startswith("a symbolic link to ") and missing_path(dangling).reason.endswith("gone, which does not exist")
    True
    """
    import errno
    import os
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return InputError("a symbolic link that loops (it leads back to itself)", path=path)
        if os.path.islink(path):
            return InputError(f"a symbolic link to {os.readlink(path)}, which does not exist", path=path)
    return InputError("no such file", path=path)


def one_line(text: str) -> str:
    r"""``text`` as one printable line: the bytes of a file name that are not UTF-8 (Python keeps them
    as lone surrogates) as ``\xNN``, a line break or another control character escaped.

    >>> print(one_line("user 'a\nb' in raw" + chr(0xdcfe)))
    user 'a\nb' in raw\xfe
    >>> one_line("plain")
    'plain'
    """
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
