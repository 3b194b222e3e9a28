"""One error type for bad input, carrying where it came from (file, line, field)."""

from __future__ import annotations

import re


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


# Python refuses to convert an integer of more digits than this from text (sys.get_int_max_str_digits:
# the conversion takes time quadratic in the digits); the JSON and TOML readers raise a bare ValueError
INT_MAX_STR_DIGITS = 4300
_LONG_NUMBER = re.compile(r"0[xX][0-9a-fA-F_]{%d,}|[0-9][0-9_]{%d,}" % (INT_MAX_STR_DIGITS, INT_MAX_STR_DIGITS))


def toml_error(exc: ValueError | RecursionError, text: str, path: str) -> InputError:
    """The error for TOML ``text`` that tomllib refused with ``exc``: its own TOMLDecodeError, a
    bare ValueError for an integer too long to convert (:func:`number_too_long`), or RecursionError
    for arrays or tables nested deeper than Python's stack (tomllib recurses).

    >>> import tomllib
    >>> try:
    ...     tomllib.loads("a = = 1")
    ... except ValueError as exc:
    ...     print(toml_error(exc, "a = = 1", "x.toml"))
    x.toml: not valid TOML: Invalid value (at line 1, column 5)
    """
    import tomllib
    if isinstance(exc, RecursionError):
        return InputError("not usable TOML: nested too deeply", path=path)
    if isinstance(exc, tomllib.TOMLDecodeError):
        return InputError(f"not valid TOML: {exc}", path=path)
    return number_too_long(text, path)


def number_too_long(text: str, path: str) -> InputError:
    """The error for a JSON or TOML ``text`` whose reader raised ValueError on an integer too long to
    convert: names the line of the first run of more than 4,300 digits (underscores, which TOML
    allows between digits, not counted).

    >>> str(number_too_long('{"a": 1,\\n "b": ' + "9" * 5000 + "}", "x.json"))
    'x.json:2: a number of 5,000 digits: more than the 4,300 a number can have here'
    """
    found = _LONG_NUMBER.search(text)
    if found is None:
        return InputError(f"a number of more than {INT_MAX_STR_DIGITS:,} digits", path=path)
    digits = len(found.group().replace("_", ""))
    return InputError(f"a number of {digits:,} digits: more than the {INT_MAX_STR_DIGITS:,} a number can have here",
                      path=path, line=text.count("\n", 0, found.start()) + 1)
