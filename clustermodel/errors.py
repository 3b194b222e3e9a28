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
